package endpointslice

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	discovery "k8s.io/api/discovery/v1"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// sliceLayout renders slices as sorted "ports: pods" lines, e.g.
// "http/TCP=8080: a,c".
func sliceLayout(slices []discovery.EndpointSlice) []string {
	var out []string
	for _, s := range slices {
		var ports, pods []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s/%s=%d", *p.Name, *p.Protocol, *p.Port))
		}
		sort.Strings(ports)
		for _, ep := range s.Endpoints {
			pods = append(pods, targetName(ep.TargetRef))
		}
		sort.Strings(pods)
		out = append(out, fmt.Sprintf("[%s]: %s", strings.Join(ports, ","), strings.Join(pods, ",")))
	}
	sort.Strings(out)
	return out
}

// A named targetPort is resolved in every pod on its own: pods exposing
// the port name with different numbers get separate slices (one per
// distinct port mapping) and separate Endpoints subsets, pods sharing a
// number share a slice, and a pod not exposing the name at all still gets
// an endpoint in a slice without ports while the Endpoints object leaves
// it out (it has no port to list it under).
func TestNamedTargetPortResolvedPerPod(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "eps-ports")
	ensureNode(t, c, "eps-node-1", "zone-a")
	startControllers(t, c)

	mustCreateService(t, c, newService(ns, "web"))
	createPod(t, c, ns, podSpec{name: "a", node: "eps-node-1", ips: []string{"10.244.4.1"}, ports: map[string]int32{"web": 8080}, ready: true})
	createPod(t, c, ns, podSpec{name: "b", node: "eps-node-1", ips: []string{"10.244.4.2"}, ports: map[string]int32{"web": 9090, "metrics": 8080}, ready: true})

	wantSlices := func(want ...string) {
		t.Helper()
		sort.Strings(want)
		eventually(t, fmt.Sprintf("slices %v", want), func(ctx context.Context) (bool, string, error) {
			slices, err := slicesOf(ctx, c, ns, "web")
			if err != nil {
				return false, "", err
			}
			got := sliceLayout(slices)
			return strings.Join(got, "; ") == strings.Join(want, "; "), fmt.Sprint(got), nil
		})
	}

	wantSlices("[http/TCP=8080]: a", "[http/TCP=9090]: b")
	waitEndpoints(t, c, ns, "web", []string{"a@10.244.4.1[http=8080] ready", "b@10.244.4.2[http=9090] ready"})
	// Two subsets, not one subset listing both ports for both pods.
	eventually(t, "two Endpoints subsets", func(ctx context.Context) (bool, string, error) {
		subsets, _, err := getEndpointSubsets(ctx, c, ns, "web")
		return len(subsets) == 2, fmt.Sprintf("%+v", subsets), err
	})

	// A pod with the same number joins the existing slice of that mapping.
	createPod(t, c, ns, podSpec{name: "c", node: "eps-node-1", ips: []string{"10.244.4.3"}, ports: map[string]int32{"web": 8080}, ready: true})
	// A pod without a port named "web".
	createPod(t, c, ns, podSpec{name: "d", node: "eps-node-1", ips: []string{"10.244.4.4"}, ports: map[string]int32{"other": 8080}, ready: true})
	wantSlices("[http/TCP=8080]: a,c", "[http/TCP=9090]: b", "[]: d")
	waitEndpoints(t, c, ns, "web", []string{
		"a@10.244.4.1[http=8080] ready", "b@10.244.4.2[http=9090] ready", "c@10.244.4.3[http=8080] ready",
	})
}
