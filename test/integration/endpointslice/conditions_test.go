package endpointslice

import (
	"testing"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// Pods becoming ready, turning unready, ready again and then terminating
// (deleted while ready, and deleted while not ready) move through the
// slices' ready/serving/terminating conditions and the Endpoints'
// addresses as upstream's: a terminating endpoint is never ready (unless
// the Service publishes not-ready addresses) but keeps serving while its
// pod is Ready, and the Endpoints object drops terminating pods
// altogether unless publishNotReadyAddresses is set, in which case every
// pod, whatever its state, is a ready address.
func TestEndpointsFollowPodReadinessAndTermination(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "eps-conditions")
	ensureNode(t, c, "eps-node-1", "zone-a")
	startControllers(t, c)

	mustCreateService(t, c, newService(ns, "web"))
	pna := newService(ns, "web-pna")
	pna.Spec.PublishNotReadyAddresses = true
	mustCreateService(t, c, pna)

	var (
		readyServing       = conds{ready: true, serving: true}
		notReady           = conds{}
		terminatingServing = conds{serving: true, terminating: true}
		terminatingNot     = conds{terminating: true}
		// With publishNotReadyAddresses ready is forced; serving and
		// terminating still tell the truth.
		pnaNotReady           = conds{ready: true}
		pnaTerminatingServing = conds{ready: true, serving: true, terminating: true}
		pnaTerminatingNot     = conds{ready: true, terminating: true}
	)
	const (
		aReady    = "a@10.244.3.1[http=8080] ready"
		bReady    = "b@10.244.3.2[http=8080] ready"
		bNotReady = "b@10.244.3.2[http=8080] notReady"
		cReady    = "c@10.244.3.3[http=8080] ready"
		cNotReady = "c@10.244.3.3[http=8080] notReady"
	)

	t.Log("a and b start ready, c starts unready")
	createPod(t, c, ns, podSpec{name: "a", node: "eps-node-1", ips: []string{"10.244.3.1"}, ready: true})
	createPod(t, c, ns, podSpec{name: "b", node: "eps-node-1", ips: []string{"10.244.3.2"}, ready: true})
	createPod(t, c, ns, podSpec{name: "c", node: "eps-node-1", ips: []string{"10.244.3.3"}, ready: false})
	waitSliceConditions(t, c, ns, "web", map[string]conds{"a": readyServing, "b": readyServing, "c": notReady})
	waitSliceConditions(t, c, ns, "web-pna", map[string]conds{"a": readyServing, "b": readyServing, "c": pnaNotReady})
	waitEndpoints(t, c, ns, "web", []string{aReady, bReady, cNotReady})
	waitEndpoints(t, c, ns, "web-pna", []string{aReady, bReady, cReady})

	t.Log("c becomes ready")
	setPodReady(t, c, ns, "c", true)
	waitSliceConditions(t, c, ns, "web", map[string]conds{"a": readyServing, "b": readyServing, "c": readyServing})
	waitSliceConditions(t, c, ns, "web-pna", map[string]conds{"a": readyServing, "b": readyServing, "c": readyServing})
	waitEndpoints(t, c, ns, "web", []string{aReady, bReady, cReady})

	t.Log("b turns unready")
	setPodReady(t, c, ns, "b", false)
	waitSliceConditions(t, c, ns, "web", map[string]conds{"a": readyServing, "b": notReady, "c": readyServing})
	waitSliceConditions(t, c, ns, "web-pna", map[string]conds{"a": readyServing, "b": pnaNotReady, "c": readyServing})
	waitEndpoints(t, c, ns, "web", []string{aReady, bNotReady, cReady})
	waitEndpoints(t, c, ns, "web-pna", []string{aReady, bReady, cReady})

	t.Log("b ready again")
	setPodReady(t, c, ns, "b", true)
	waitSliceConditions(t, c, ns, "web", map[string]conds{"a": readyServing, "b": readyServing, "c": readyServing})
	waitEndpoints(t, c, ns, "web", []string{aReady, bReady, cReady})

	t.Log("a deleted while ready: terminating but still serving")
	deletePodGracefully(t, c, ns, "a")
	waitSliceConditions(t, c, ns, "web", map[string]conds{"a": terminatingServing, "b": readyServing, "c": readyServing})
	waitSliceConditions(t, c, ns, "web-pna", map[string]conds{"a": pnaTerminatingServing, "b": readyServing, "c": readyServing})
	waitEndpoints(t, c, ns, "web", []string{bReady, cReady})
	waitEndpoints(t, c, ns, "web-pna", []string{aReady, bReady, cReady})

	t.Log("b unready, then deleted: terminating and not serving")
	setPodReady(t, c, ns, "b", false)
	waitEndpoints(t, c, ns, "web", []string{bNotReady, cReady})
	deletePodGracefully(t, c, ns, "b")
	waitSliceConditions(t, c, ns, "web", map[string]conds{"a": terminatingServing, "b": terminatingNot, "c": readyServing})
	waitSliceConditions(t, c, ns, "web-pna", map[string]conds{"a": pnaTerminatingServing, "b": pnaTerminatingNot, "c": readyServing})
	waitEndpoints(t, c, ns, "web", []string{cReady})
	waitEndpoints(t, c, ns, "web-pna", []string{aReady, bReady, cReady})
}
