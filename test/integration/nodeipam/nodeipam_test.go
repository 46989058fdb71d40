// Package nodeipam tests the node IPAM controller (RangeAllocator) against
// a real apiserver. Nodes are cluster-scoped, so every test deletes its
// nodes before the next one starts a controller with other cluster CIDRs.
package nodeipam

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/nodeipam"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// runController validates opts as the controller manager does and runs the
// controller until the test ends.
func runController(t *testing.T, c clientset.Interface, opts nodeipam.Options) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg, err := nodeipam.NewConfig(klog.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(c, 0)
	nc, err := nodeipam.NewController(ctx, factory.Core().V1().Nodes(), c, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
}

// createNode creates a node, with pod CIDRs if given, and deletes it when
// the test ends (before the controller stops, as cleanups run in reverse).
func createNode(t *testing.T, c clientset.Interface, name string, podCIDRs ...string) {
	t.Helper()
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if len(podCIDRs) > 0 {
		n.Spec.PodCIDR = podCIDRs[0]
		n.Spec.PodCIDRs = podCIDRs
	}
	if _, err := c.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteNode(t, c, name) })
}

func deleteNode(t *testing.T, c clientset.Interface, name string) {
	t.Helper()
	err := c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting node %s: %v", name, err)
	}
}

// waitForPodCIDRs waits until the node has as many pod CIDRs as wanted and
// returns them.
func waitForPodCIDRs(t *testing.T, c clientset.Interface, name string, count int) []string {
	t.Helper()
	var got []string
	framework.Eventually(t, 30*time.Second, "pod CIDRs on node "+name, func(ctx context.Context) (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(n.Spec.PodCIDRs) > 0 && n.Spec.PodCIDR != n.Spec.PodCIDRs[0] {
			return false, fmt.Errorf("podCIDR %s is not podCIDRs[0] of %v", n.Spec.PodCIDR, n.Spec.PodCIDRs)
		}
		got = n.Spec.PodCIDRs
		return len(got) == count, nil
	})
	return got
}

// checkInside fails unless every CIDR has the mask and lies in the
// cluster CIDR of the same index.
func checkInside(t *testing.T, cidrs []string, clusterCIDRs []string, masks []int) {
	t.Helper()
	for i, s := range cidrs {
		p := netip.MustParsePrefix(s)
		cluster := netip.MustParsePrefix(clusterCIDRs[i])
		if p.Bits() != masks[i] || !cluster.Contains(p.Addr()) || p.Masked() != p {
			t.Errorf("pod CIDR %s is not a /%d block of %s", s, masks[i], cluster)
		}
	}
}

// usage reads the controller's cidrset usage gauge for a cluster CIDR from
// the registry the controller manager serves.
func usage(t *testing.T, clusterCIDR string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "node_ipam_controller_cidrset_usage_cidrs" {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabel(m, "clusterCIDR", clusterCIDR) {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// Nodes get distinct blocks of the cluster CIDR, the service range inside
// it is skipped, and the cidrset metrics are exposed.
func TestSingleStack(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runController(t, c, nodeipam.Options{
		CIDRAllocatorType: nodeipam.RangeAllocatorType,
		ClusterCIDR:       "10.244.0.0/16",
		ServiceCIDR:       "10.244.0.0/24",
		NodeCIDRMaskSize:  24,
	})
	seen := map[string]string{}
	for i := range 4 {
		name := fmt.Sprintf("single-%d", i)
		createNode(t, c, name)
		got := waitForPodCIDRs(t, c, name, 1)
		checkInside(t, got, []string{"10.244.0.0/16"}, []int{24})
		if got[0] == "10.244.0.0/24" {
			t.Errorf("node %s got the service range %s", name, got[0])
		}
		if other, dup := seen[got[0]]; dup {
			t.Errorf("nodes %s and %s share %s", other, name, got[0])
		}
		seen[got[0]] = name
	}
	// The service block and four nodes.
	if u := usage(t, "10.244.0.0/16"); u != 5.0/256 {
		t.Errorf("usage gauge %v, want %v", u, 5.0/256)
	}
}

func TestDualStack(t *testing.T) {
	c := framework.Shared(t).Client(t)
	clusterCIDRs := []string{"10.245.0.0/16", "fd00:10:245::/56"}
	runController(t, c, nodeipam.Options{
		CIDRAllocatorType:    nodeipam.RangeAllocatorType,
		ClusterCIDR:          strings.Join(clusterCIDRs, ","),
		NodeCIDRMaskSizeIPv4: 26,
		NodeCIDRMaskSizeIPv6: 64,
	})
	seen := map[string]bool{}
	for i := range 3 {
		name := fmt.Sprintf("dual-%d", i)
		createNode(t, c, name)
		got := waitForPodCIDRs(t, c, name, 2)
		checkInside(t, got, clusterCIDRs, []int{26, 64})
		for _, s := range got {
			if seen[s] {
				t.Errorf("%s handed out twice", s)
			}
			seen[s] = true
		}
	}
}

// CIDRs nodes already have, whether set before the controller starts or
// after, are kept and never handed to another node.
func TestPresetPodCIDRsAreKept(t *testing.T) {
	c := framework.Shared(t).Client(t)
	createNode(t, c, "preset-early", "10.247.0.0/24")
	runController(t, c, nodeipam.Options{
		CIDRAllocatorType: nodeipam.RangeAllocatorType,
		ClusterCIDR:       "10.247.0.0/21",
		NodeCIDRMaskSize:  24,
	})
	createNode(t, c, "preset-late", "10.247.1.0/24")
	// Wait until the controller has occupied the late node's block before
	// racing it with new nodes.
	framework.Eventually(t, 30*time.Second, "both preset blocks to be occupied", func(context.Context) (bool, error) {
		return usage(t, "10.247.0.0/21") == 2.0/8, nil
	})
	var got []string
	for i := range 6 {
		name := fmt.Sprintf("preset-new-%d", i)
		createNode(t, c, name)
		got = append(got, waitForPodCIDRs(t, c, name, 1)...)
	}
	slices.Sort(got)
	want := []string{"10.247.2.0/24", "10.247.3.0/24", "10.247.4.0/24", "10.247.5.0/24", "10.247.6.0/24", "10.247.7.0/24"}
	if !slices.Equal(got, want) {
		t.Errorf("new nodes got %v, want %v", got, want)
	}
	for name, want := range map[string]string{"preset-early": "10.247.0.0/24", "preset-late": "10.247.1.0/24"} {
		if got := waitForPodCIDRs(t, c, name, 1); got[0] != want {
			t.Errorf("%s has %v, want %s", name, got, want)
		}
	}
}

// A full cluster CIDR is reported with a CIDRNotAvailable event; deleting
// a node frees its block for the waiting node.
func TestDeletedNodeCIDRIsReused(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runController(t, c, nodeipam.Options{
		CIDRAllocatorType: nodeipam.RangeAllocatorType,
		ClusterCIDR:       "10.248.0.0/22",
		NodeCIDRMaskSize:  24,
	})
	owner := map[string]string{}
	for i := range 4 {
		name := fmt.Sprintf("reuse-%d", i)
		createNode(t, c, name)
		owner[name] = waitForPodCIDRs(t, c, name, 1)[0]
	}
	createNode(t, c, "reuse-waiting")
	framework.Eventually(t, 30*time.Second, "a CIDRNotAvailable event", func(ctx context.Context) (bool, error) {
		evs, err := c.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == "reuse-waiting" && e.Reason == "CIDRNotAvailable" {
				if e.Source.Component != "cidrAllocator" || e.Type != v1.EventTypeNormal || e.Message != "Node reuse-waiting status is now: CIDRNotAvailable" {
					return false, fmt.Errorf("unexpected event %+v", e)
				}
				return true, nil
			}
		}
		return false, nil
	})

	deleteNode(t, c, "reuse-2")
	// The waiting node is retried with growing backoff; a label change
	// brings it back at once.
	framework.Eventually(t, 30*time.Second, "the waiting node to get a CIDR", func(ctx context.Context) (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, "reuse-waiting", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(n.Spec.PodCIDRs) > 0 {
			if n.Spec.PodCIDRs[0] != owner["reuse-2"] {
				return false, fmt.Errorf("waiting node got %v, want reuse-2's %s", n.Spec.PodCIDRs, owner["reuse-2"])
			}
			return true, nil
		}
		n.Labels = map[string]string{"poke": fmt.Sprint(time.Now().UnixNano())}
		_, _ = c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return false, nil
	})
}

// Flag combinations upstream refuses are refused before anything runs.
func TestInvalidConfig(t *testing.T) {
	c := framework.Shared(t).Client(t)
	cfg, err := nodeipam.NewConfig(klog.Background(), nodeipam.Options{
		CIDRAllocatorType: nodeipam.RangeAllocatorType,
		ClusterCIDR:       "10.249.0.0/16",
		NodeCIDRMaskSize:  8,
	})
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(c, 0)
	_, err = nodeipam.NewController(context.Background(), factory.Core().V1().Nodes(), c, cfg)
	if err == nil || !strings.Contains(err.Error(), "mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size") {
		t.Fatalf("err %v", err)
	}
}
