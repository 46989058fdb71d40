package endpointslice

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// createDualStackService creates a dual-stack Service with the given
// family order. It asks for a RequireDualStack ClusterIP Service first; the
// framework's apiserver has a single-stack --service-cluster-ip-range
// (10.0.0.0/16), which refuses that, so it falls back to the one
// dual-stack Service such a cluster accepts: a headless one. The apiserver
// gives a selectorless headless PreferDualStack Service both families
// whatever the cluster's ranges are, and keeps them (PreferDualStack
// fields are not re-evaluated while unchanged) when the selector is added.
func createDualStackService(t *testing.T, c clientset.Interface, ns, name string, families []v1.IPFamily) *v1.Service {
	t.Helper()
	ctx := context.Background()
	svc := newService(ns, name)
	svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
	svc.Spec.IPFamilies = families
	created, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	switch {
	case err == nil:
		t.Logf("Service %s: dual-stack ClusterIPs %v", name, created.Spec.ClusterIPs)
	case apierrors.IsInvalid(err) && (strings.Contains(err.Error(), "not configured for dual-stack") || strings.Contains(err.Error(), "not configured on this cluster")):
		t.Logf("single-stack apiserver (%v); using a headless PreferDualStack Service", err)
		svc = newService(ns, name)
		svc.Spec.Selector = nil
		svc.Spec.ClusterIP = v1.ClusterIPNone
		svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyPreferDualStack)
		svc.Spec.IPFamilies = families[:1]
		created, err = c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Spec.Selector = map[string]string{"app": "web"}
		created, err = c.CoreV1().Services(ns).Update(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal(err)
	}
	if fmt.Sprint(created.Spec.IPFamilies) != fmt.Sprint(families) || created.Spec.Selector["app"] != "web" {
		t.Fatalf("Service %s: ipFamilies %v selector %v, want %v and app=web", name, created.Spec.IPFamilies, created.Spec.Selector, families)
	}
	return created
}

// A dual-stack Service over pods with an IPv4 and an IPv6 address gets
// one IPv4 and one IPv6 slice, each listing every pod by the address of
// its family, while the Endpoints object (single-stack by design) lists
// only the addresses of the Service's primary family.
func TestDualStackServiceGetsSlicePerFamily(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "eps-dualstack")
	ensureNode(t, c, "eps-node-1", "zone-a")
	startControllers(t, c)

	createDualStackService(t, c, ns, "v4first", []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol})
	createDualStackService(t, c, ns, "v6first", []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol})
	createPod(t, c, ns, podSpec{name: "a", node: "eps-node-1", ips: []string{"10.244.5.1", "fd00:10:244::5:1"}, ready: true})
	createPod(t, c, ns, podSpec{name: "b", node: "eps-node-1", ips: []string{"10.244.5.2", "fd00:10:244::5:2"}, ready: true})

	wantSlices := []string{
		"IPv4: a=10.244.5.1,b=10.244.5.2",
		"IPv6: a=fd00:10:244::5:1,b=fd00:10:244::5:2",
	}
	for _, svc := range []string{"v4first", "v6first"} {
		eventually(t, svc+" slices per family", func(ctx context.Context) (bool, string, error) {
			slices, err := slicesOf(ctx, c, ns, svc)
			if err != nil {
				return false, "", err
			}
			got := familyLayout(slices)
			return strings.Join(got, "; ") == strings.Join(wantSlices, "; "), fmt.Sprint(got), nil
		})
	}
	waitEndpoints(t, c, ns, "v4first", []string{"a@10.244.5.1[http=8080] ready", "b@10.244.5.2[http=8080] ready"})
	waitEndpoints(t, c, ns, "v6first", []string{"a@fd00:10:244::5:1[http=8080] ready", "b@fd00:10:244::5:2[http=8080] ready"})
}

// familyLayout renders slices as sorted "<addressType>: pod=address,..."
// lines; an endpoint with other than one address shows them all.
func familyLayout(slices []discovery.EndpointSlice) []string {
	var out []string
	for _, s := range slices {
		var eps []string
		for _, ep := range s.Endpoints {
			eps = append(eps, targetName(ep.TargetRef)+"="+strings.Join(ep.Addresses, "|"))
		}
		sort.Strings(eps)
		out = append(out, fmt.Sprintf("%s: %s", s.AddressType, strings.Join(eps, ",")))
	}
	sort.Strings(out)
	return out
}
