// Package resourcequota tests the resourcequota-controller against a real
// apiserver, whose ResourceQuota admission plugin (on by default) charges
// creations and refuses those beyond a quota: quotas get their status,
// usage rises with pods and falls as they finish or go, object counts of
// built-in and custom resources, node ports, and the BestEffort scopes.
package resourcequota

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcequota"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcequota/evaluator"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const (
	waitTimeout = 60 * time.Second
	// Rediscovery every 2s instead of 30s so the CRD test is quick.
	discoveryPeriod = 2 * time.Second
)

var (
	startOnce sync.Once
	started   bool
)

// runController starts one controller for the package, wired as the
// controller manager wires it, with the default 5m full resync: usage
// must fall through replenishment alone within the tests' timeouts.
func runController(t *testing.T) clientset.Interface {
	t.Helper()
	cp := framework.Shared(t)
	startOnce.Do(func() {
		cfg := rest.CopyConfig(cp.Config)
		cfg.UserAgent = "resourcequota-controller"
		c, err := clientset.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		md, err := metadata.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx := klog.NewContext(context.Background(), klog.Background())
		typed := informers.NewSharedInformerFactory(c, 0)
		mdf := metadatainformer.NewSharedInformerFactory(md, 0)
		informersStarted := make(chan struct{})
		opts, err := resourcequota.DefaultOptions(c.CoreV1(), typed, mdf, dc.ServerPreferredNamespacedResources, 5*time.Minute, nil, informersStarted,
			evaluator.Features{PodLevelResources: true, PodLevelResourcesFixKubeletQOSClass: true})
		if err != nil {
			t.Fatal(err)
		}
		rq, err := resourcequota.NewController(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		typed.Start(ctx.Done())
		mdf.Start(ctx.Done())
		close(informersStarted)
		go rq.Run(ctx, 5)
		go rq.Sync(ctx, dc.ServerPreferredNamespacedResources, discoveryPeriod)
		started = true
	})
	if !started {
		t.Fatal("resource quota controller failed to start")
	}
	return cp.Client(t)
}

func rl(pairs ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[v1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func show(l v1.ResourceList) string {
	parts := make([]string, 0, len(l))
	for name, q := range l {
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, " ") + "}"
}

func equal(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if other, ok := b[name]; !ok || q.Cmp(other) != 0 {
			return false
		}
	}
	return true
}

func createQuota(t *testing.T, c clientset.Interface, ns, name string, hard v1.ResourceList, mutate ...func(*v1.ResourceQuota)) {
	t.Helper()
	q := &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.ResourceQuotaSpec{Hard: hard}}
	for _, m := range mutate {
		m(q)
	}
	if _, err := c.CoreV1().ResourceQuotas(ns).Create(context.Background(), q, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating quota %s: %v", name, err)
	}
}

// waitUsed waits until the quota's status.hard is its spec and its
// status.used is exactly used.
func waitUsed(t *testing.T, c clientset.Interface, ns, name string, used v1.ResourceList) {
	t.Helper()
	var last *v1.ResourceQuota
	err := pollUntil(func(ctx context.Context) (bool, error) {
		q, err := c.CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = q
		return equal(q.Status.Hard, q.Spec.Hard) && equal(q.Status.Used, used), nil
	})
	if err != nil {
		got := "<none>"
		if last != nil {
			got = fmt.Sprintf("hard %s used %s", show(last.Status.Hard), show(last.Status.Used))
		}
		t.Fatalf("quota %s/%s: want used %s, have %s: %v", ns, name, show(used), got, err)
	}
}

func pollUntil(cond func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return err
			}
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func newPod(name string, requests v1.ResourceList) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "c", Image: "registry.k8s.io/pause:3.10",
			Resources: v1.ResourceRequirements{Requests: requests},
		}}},
	}
}

func createPod(t *testing.T, c clientset.Interface, ns string, p *v1.Pod) *v1.Pod {
	t.Helper()
	out, err := c.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s: %v", p.Name, err)
	}
	return out
}

// expectExceeded asserts that err is the admission plugin refusing over quota.
func expectExceeded(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s was admitted beyond the quota", what)
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("%s: want an exceeded-quota refusal, got %v", what, err)
	}
}

func TestNewQuotaGetsStatus(t *testing.T) {
	c := runController(t)
	ns := framework.CreateNamespace(t, c, "rq-status")
	if _, err := c.CoreV1().Secrets(ns).Create(context.Background(),
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createQuota(t, c, ns, "q", rl("pods", "10", "requests.cpu", "4", "limits.memory", "8Gi", "secrets", "5",
		"count/secrets", "5", "resourcequotas", "2", "services", "3", "persistentvolumeclaims", "2", "requests.storage", "10Gi"))
	// Only the hard resources, each with its current usage (the secret was
	// there first; the quota counts itself).
	waitUsed(t, c, ns, "q", rl("pods", "0", "requests.cpu", "0", "limits.memory", "0", "secrets", "1",
		"count/secrets", "1", "resourcequotas", "1", "services", "0", "persistentvolumeclaims", "0", "requests.storage", "0"))

	// A spec edit is reflected in status.hard and used.
	q, err := c.CoreV1().ResourceQuotas(ns).Get(context.Background(), "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Hard = rl("pods", "3", "configmaps", "1")
	if _, err := c.CoreV1().ResourceQuotas(ns).Update(context.Background(), q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, c, ns, "q", rl("pods", "0", "configmaps", "0"))
}

func TestPodsRaiseAndReleaseUsage(t *testing.T) {
	c := runController(t)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, c, "rq-pods")
	createQuota(t, c, ns, "compute", rl("pods", "2", "requests.cpu", "1", "count/pods", "5"))
	waitUsed(t, c, ns, "compute", rl("pods", "0", "requests.cpu", "0", "count/pods", "0"))

	a := createPod(t, c, ns, newPod("a", rl("cpu", "500m")))
	b := createPod(t, c, ns, newPod("b", rl("cpu", "250m")))
	waitUsed(t, c, ns, "compute", rl("pods", "2", "requests.cpu", "750m", "count/pods", "2"))

	_, err := c.CoreV1().Pods(ns).Create(ctx, newPod("c", rl("cpu", "100m")), metav1.CreateOptions{})
	expectExceeded(t, "a third pod", err)

	// A finished pod keeps its object but releases compute quota.
	if _, err := (framework.Kubelet{Client: c}).MarkSucceeded(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, c, ns, "compute", rl("pods", "1", "requests.cpu", "500m", "count/pods", "2"))

	if err := c.CoreV1().Pods(ns).Delete(ctx, a.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, c, ns, "compute", rl("pods", "0", "requests.cpu", "0", "count/pods", "1"))

	// The released quota admits new pods again.
	createPod(t, c, ns, newPod("c", rl("cpu", "1")))
	waitUsed(t, c, ns, "compute", rl("pods", "1", "requests.cpu", "1", "count/pods", "2"))
}

func TestObjectCountsOfBuiltinAndCustomResources(t *testing.T) {
	c := runController(t)
	ctx := context.Background()
	cp := framework.Shared(t)
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	crd := framework.CreateCRD(t, dyn, "Gadget")
	countCR := v1.ResourceName("count/" + crd.GVR.Resource + "." + crd.GVR.Group)
	ns := framework.CreateNamespace(t, c, "rq-counts")

	createQuota(t, c, ns, "counts", v1.ResourceList{"count/deployments.apps": resource.MustParse("1"), countCR: resource.MustParse("1")})
	// Until rediscovery finds the new type, its count is unknown; as the
	// upstream e2e test does, edit the quota until the usage shows up.
	err = pollUntil(func(ctx context.Context) (bool, error) {
		q, err := c.CoreV1().ResourceQuotas(ns).Get(ctx, "counts", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if _, ok := q.Status.Used[countCR]; ok {
			return true, nil
		}
		// Touch spec.hard so the controller recalculates at once.
		hard := q.Spec.Hard.DeepCopy()
		n := hard[countCR]
		if n.Cmp(resource.MustParse("1")) == 0 {
			hard[countCR] = resource.MustParse("2")
		} else {
			hard[countCR] = resource.MustParse("1")
		}
		q.Spec.Hard = hard
		_, err = c.CoreV1().ResourceQuotas(ns).Update(ctx, q, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			err = nil
		}
		time.Sleep(time.Second)
		return false, err
	})
	if err != nil {
		t.Fatalf("usage of %s never appeared: %v", countCR, err)
	}
	q, err := c.CoreV1().ResourceQuotas(ns).Get(ctx, "counts", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Hard = v1.ResourceList{"count/deployments.apps": resource.MustParse("1"), countCR: resource.MustParse("1")}
	if _, err := c.CoreV1().ResourceQuotas(ns).Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, c, ns, "counts", v1.ResourceList{"count/deployments.apps": resource.MustParse("0"), countCR: resource.MustParse("0")})

	if _, err := c.AppsV1().Deployments(ns).Create(ctx, deployment("d1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(crd.GVR).Namespace(ns).Create(ctx, crd.NewObject("g1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, c, ns, "counts", v1.ResourceList{"count/deployments.apps": resource.MustParse("1"), countCR: resource.MustParse("1")})

	_, err = c.AppsV1().Deployments(ns).Create(ctx, deployment("d2"), metav1.CreateOptions{})
	expectExceeded(t, "a second deployment", err)
	_, err = dyn.Resource(crd.GVR).Namespace(ns).Create(ctx, crd.NewObject("g2"), metav1.CreateOptions{})
	expectExceeded(t, "a second "+crd.Kind, err)

	if err := dyn.Resource(crd.GVR).Namespace(ns).Delete(ctx, "g1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.AppsV1().Deployments(ns).Delete(ctx, "d1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, c, ns, "counts", v1.ResourceList{"count/deployments.apps": resource.MustParse("0"), countCR: resource.MustParse("0")})
}

func deployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
}

func service(name string, typ v1.ServiceType, ports int) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name}}}
	for i := 0; i < ports; i++ {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(80 + i)})
	}
	return s
}

func TestServiceNodePorts(t *testing.T) {
	c := runController(t)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, c, "rq-services")
	createQuota(t, c, ns, "svc", rl("services", "5", "services.nodeports", "2", "services.loadbalancers", "1"))
	waitUsed(t, c, ns, "svc", rl("services", "0", "services.nodeports", "0", "services.loadbalancers", "0"))

	np, err := c.CoreV1().Services(ns).Create(ctx, service("np", v1.ServiceTypeNodePort, 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Services(ns).Create(ctx, service("plain", v1.ServiceTypeClusterIP, 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, c, ns, "svc", rl("services", "2", "services.nodeports", "2", "services.loadbalancers", "0"))

	_, err = c.CoreV1().Services(ns).Create(ctx, service("np2", v1.ServiceTypeNodePort, 1), metav1.CreateOptions{})
	expectExceeded(t, "a third node port", err)

	// Turning the service into a ClusterIP one releases its node ports.
	np.Spec.Type = v1.ServiceTypeClusterIP
	for i := range np.Spec.Ports {
		np.Spec.Ports[i].NodePort = 0
	}
	if _, err := c.CoreV1().Services(ns).Update(ctx, np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, c, ns, "svc", rl("services", "2", "services.nodeports", "0", "services.loadbalancers", "0"))

	if _, err := c.CoreV1().Services(ns).Create(ctx, service("np2", v1.ServiceTypeNodePort, 1), metav1.CreateOptions{}); err != nil {
		t.Fatalf("node port refused after release: %v", err)
	}
	if err := c.CoreV1().Services(ns).Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, c, ns, "svc", rl("services", "2", "services.nodeports", "1", "services.loadbalancers", "0"))
}

func TestBestEffortScopes(t *testing.T) {
	c := runController(t)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, c, "rq-scopes")
	createQuota(t, c, ns, "best-effort", rl("pods", "1"), func(q *v1.ResourceQuota) {
		q.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeBestEffort}
	})
	createQuota(t, c, ns, "not-best-effort", rl("pods", "2", "requests.cpu", "1"), func(q *v1.ResourceQuota) {
		q.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeNotBestEffort}
	})
	waitUsed(t, c, ns, "best-effort", rl("pods", "0"))
	waitUsed(t, c, ns, "not-best-effort", rl("pods", "0", "requests.cpu", "0"))

	createPod(t, c, ns, newPod("be", nil))
	createPod(t, c, ns, newPod("burst", rl("cpu", "200m")))
	waitUsed(t, c, ns, "best-effort", rl("pods", "1"))
	waitUsed(t, c, ns, "not-best-effort", rl("pods", "1", "requests.cpu", "200m"))

	// The BestEffort quota is full; the other scope still has room.
	_, err := c.CoreV1().Pods(ns).Create(ctx, newPod("be2", nil), metav1.CreateOptions{})
	expectExceeded(t, "a second best-effort pod", err)
	createPod(t, c, ns, newPod("burst2", rl("cpu", "300m")))
	waitUsed(t, c, ns, "not-best-effort", rl("pods", "2", "requests.cpu", "500m"))

	if err := c.CoreV1().Pods(ns).Delete(ctx, "be", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, c, ns, "best-effort", rl("pods", "0"))
	waitUsed(t, c, ns, "not-best-effort", rl("pods", "2", "requests.cpu", "500m"))
}
