// Package daemonset tests the DaemonSet controller against a real
// apiserver, with a fake scheduler and kubelets (see env.node).
package daemonset

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// Pods land on exactly the matching nodes, pinned by node affinity, with
// the daemon tolerations and the revision labels; the revision exists and
// the status counts them all.
func TestPodsOnAllMatchingNodes(t *testing.T) {
	e := start(t, "ds-basic")
	e.addNode("a", map[string]string{"role": "agent"})
	e.addNode("b", map[string]string{"role": "agent"})
	e.addNode("c", map[string]string{"role": "other"})

	ds := e.newDS("agent")
	ds.Spec.Template.Spec.NodeSelector["role"] = "agent"
	ds = e.createDS(ds)
	cur := e.waitPodsOn("agent", "a", "b")

	revs, err := e.c.AppsV1().ControllerRevisions(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(revs.Items) != 1 {
		t.Fatalf("%d ControllerRevisions, want 1", len(revs.Items))
	}
	rev := revs.Items[0]
	hash := rev.Labels[apps.DefaultDaemonSetUniqueLabelKey]
	if rev.Name != "agent-"+hash || rev.Revision != 1 || !strings.HasPrefix(string(rev.Data.Raw), `{"spec":{"template":{"$patch":"replace",`) {
		t.Errorf("revision %s (revision %d, data %s)", rev.Name, rev.Revision, rev.Data.Raw)
	}
	if ref := metav1.GetControllerOf(&rev); ref == nil || ref.UID != ds.UID {
		t.Errorf("revision owner = %+v", ref)
	}
	if cur.Status.CollisionCount != nil {
		t.Errorf("collisionCount = %d, want unset", *cur.Status.CollisionCount)
	}

	for _, p := range e.pods("app=agent") {
		if p.GenerateName != "agent-" {
			t.Errorf("pod %s generateName %q", p.Name, p.GenerateName)
		}
		if p.Labels[apps.DefaultDaemonSetUniqueLabelKey] != hash || p.Labels["pod-template-generation"] != "1" {
			t.Errorf("pod %s labels %v, want hash %s and generation 1", p.Name, p.Labels, hash)
		}
		terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if len(terms) != 1 || len(terms[0].MatchFields) != 1 || terms[0].MatchFields[0].Key != "metadata.name" || terms[0].MatchFields[0].Values[0] != p.Spec.NodeName {
			t.Errorf("pod %s on %s: affinity %+v", p.Name, p.Spec.NodeName, terms)
		}
		tolerated := map[string]bool{}
		for _, tol := range p.Spec.Tolerations {
			if tol.TolerationSeconds == nil {
				tolerated[tol.Key+":"+string(tol.Effect)] = true
			}
		}
		for _, k := range []string{"node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/unreachable:NoExecute",
			"node.kubernetes.io/disk-pressure:NoSchedule", "node.kubernetes.io/memory-pressure:NoSchedule",
			"node.kubernetes.io/pid-pressure:NoSchedule", "node.kubernetes.io/unschedulable:NoSchedule"} {
			if !tolerated[k] {
				t.Errorf("pod %s lacks the default toleration %s: %+v", p.Name, k, p.Spec.Tolerations)
			}
		}
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != ds.UID || ref.Kind != "DaemonSet" {
			t.Errorf("pod %s controller = %+v", p.Name, ref)
		}
	}

	// Events are written asynchronously.
	framework.Eventually(t, 10*time.Second, "SuccessfulCreate events", func(ctx context.Context) (bool, error) {
		return e.countEvents("agent", "SuccessfulCreate") == 2, nil
	})
}

func (e *env) countEvents(name, reason string) int {
	l, err := e.c.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return 0
	}
	n := 0
	for _, ev := range l.Items {
		if ev.Reason == reason {
			n++
		}
	}
	return n
}

// A new node gets a pod; a node whose labels stop matching loses it and
// gets one again when they match again.
func TestNodeAddedAndRelabelled(t *testing.T) {
	e := start(t, "ds-nodes")
	e.addNode("a", map[string]string{"role": "agent"})
	ds := e.newDS("agent")
	ds.Spec.Template.Spec.NodeSelector["role"] = "agent"
	e.createDS(ds)
	e.waitPodsOn("agent", "a")

	e.addNode("b", map[string]string{"role": "agent"})
	e.waitPodsOn("agent", "a", "b")

	e.patchNode("a", `{"metadata":{"labels":{"role":"other"}}}`)
	e.waitPodsOn("agent", "b")

	e.patchNode("a", `{"metadata":{"labels":{"role":"agent"}}}`)
	e.waitPodsOn("agent", "a", "b")

	// A deleted pod is replaced.
	for _, p := range e.pods("app=agent") {
		if strings.HasSuffix(p.Spec.NodeName, "-b") {
			if err := e.c.CoreV1().Pods(e.ns).Delete(e.ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			old := p.Name
			framework.Eventually(t, 60*time.Second, "replacement pod on b", func(ctx context.Context) (bool, error) {
				for _, q := range e.pods("app=agent") {
					if strings.HasSuffix(q.Spec.NodeName, "-b") && q.Name != old && q.Status.Phase == v1.PodRunning {
						return true, nil
					}
				}
				return false, nil
			})
		}
	}
	e.waitPodsOn("agent", "a", "b")
}

// Untolerated NoSchedule taints keep new pods away but leave existing ones;
// NoExecute ones evict; the node condition taints are tolerated.
func TestTaintedNodes(t *testing.T) {
	e := start(t, "ds-taints")
	e.addNode("a", nil)
	e.addNode("tainted", nil, v1.Taint{Key: "dedicated", Value: "db", Effect: v1.TaintEffectNoSchedule})
	e.addNode("notready", nil, v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute})
	e.addNode("cordoned", nil, v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
	e.createDS(e.newDS("agent"))
	e.waitPodsOn("agent", "a", "notready", "cordoned")

	// Taint removed: the node gets its pod.
	e.patchNode("tainted", `{"spec":{"taints":null}}`)
	e.waitPodsOn("agent", "a", "cordoned", "notready", "tainted")

	// NoSchedule added to a node with a pod: the pod stays. Like upstream,
	// such a node change does not by itself resync the DaemonSet (nothing
	// to do), so touch the DaemonSet until a sync has seen the taint.
	e.patchNode("a", `{"spec":{"taints":[{"key":"dedicated","value":"db","effect":"NoSchedule"}]}}`)
	touch := 0
	framework.Eventually(t, 30*time.Second, "status to count a as not desired", func(ctx context.Context) (bool, error) {
		cur, err := e.c.AppsV1().DaemonSets(e.ns).Get(ctx, "agent", metav1.GetOptions{})
		if err == nil && cur.Status.DesiredNumberScheduled == 3 && cur.Status.NumberMisscheduled == 1 {
			return true, nil
		}
		touch++
		e.patchDS("agent", fmt.Sprintf(`{"metadata":{"annotations":{"touch":"%d"}}}`, touch))
		return false, err
	})
	if got := fmt.Sprint(e.podNodes("agent")); got != "[a cordoned notready tainted]" {
		t.Errorf("pods on %s, want the pod on a kept", got)
	}

	// NoExecute added: the pod is removed.
	e.patchNode("a", `{"spec":{"taints":[{"key":"dedicated","value":"db","effect":"NoExecute"}]}}`)
	framework.Eventually(t, 60*time.Second, "pod evicted from a", func(ctx context.Context) (bool, error) {
		cur, err := e.c.AppsV1().DaemonSets(e.ns).Get(ctx, "agent", metav1.GetOptions{})
		return err == nil && fmt.Sprint(e.podNodes("agent")) == "[cordoned notready tainted]" &&
			cur.Status.NumberMisscheduled == 0 && cur.Status.DesiredNumberScheduled == 3, err
	})

	// A DaemonSet tolerating the taint runs there.
	tol := e.newDS("tolerant")
	tol.Spec.Template.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpExists}}
	e.createDS(tol)
	e.waitPodsOn("tolerant", "a", "cordoned", "notready", "tainted")
}

// A template change replaces the pods at most maxUnavailable at a time,
// records a second revision and converges with every pod updated.
func TestRollingUpdate(t *testing.T) {
	e := start(t, "ds-rolling")
	for _, n := range []string{"a", "b", "c", "d"} {
		e.addNode(n, nil)
	}
	ds := e.newDS("agent")
	ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.RollingUpdateDaemonSetStrategyType}
	e.createDS(ds)
	first := e.waitPodsOn("agent", "a", "b", "c", "d")
	if ru := first.Spec.UpdateStrategy.RollingUpdate; ru == nil || ru.MaxUnavailable.IntValue() != 1 {
		t.Fatalf("server defaults: %+v", first.Spec.UpdateStrategy)
	}

	// With the kubelets stopped, the update stalls after replacing one pod.
	e.pauseKubelets(true, "a", "b", "c", "d")
	updated := e.patchDS("agent", `{"spec":{"template":{"spec":{"containers":[{"name":"agent","image":"agent:2"}]}}}}`)
	if updated.Generation != 2 || updated.Annotations[apps.DeprecatedTemplateGeneration] != "2" {
		t.Fatalf("generation %d, annotation %q", updated.Generation, updated.Annotations[apps.DeprecatedTemplateGeneration])
	}
	framework.Eventually(t, 60*time.Second, "one pod replaced", func(ctx context.Context) (bool, error) {
		old, pending := 0, 0
		for _, p := range e.pods("app=agent") {
			switch {
			case p.DeletionTimestamp != nil:
			case p.Spec.Containers[0].Image == "agent:1" && p.Status.Phase == v1.PodRunning:
				old++
			case p.Status.Phase == v1.PodPending:
				pending++
			}
		}
		if old < 3 {
			return false, fmt.Errorf("only %d old pods left running, maxUnavailable is 1", old)
		}
		cur, err := e.c.AppsV1().DaemonSets(e.ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := cur.Status
		return old == 3 && pending == 1 && s.ObservedGeneration == 2 && s.NumberUnavailable == 1 && s.UpdatedNumberScheduled == 1, nil
	})
	e.pauseKubelets(false, "a", "b", "c", "d")
	final := e.waitPodsOn("agent", "a", "b", "c", "d")
	for _, p := range e.pods("app=agent") {
		if p.Spec.Containers[0].Image != "agent:2" || p.Labels["pod-template-generation"] != "2" {
			t.Errorf("pod %s: image %s, generation label %s", p.Name, p.Spec.Containers[0].Image, p.Labels["pod-template-generation"])
		}
	}
	revs, err := e.c.AppsV1().ControllerRevisions(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	numbers := map[int64]bool{}
	for _, r := range revs.Items {
		numbers[r.Revision] = true
	}
	if len(revs.Items) != 2 || !numbers[1] || !numbers[2] {
		t.Errorf("revisions %v, want 1 and 2", numbers)
	}
	if final.Status.UpdatedNumberScheduled != 4 {
		t.Errorf("updatedNumberScheduled = %d", final.Status.UpdatedNumberScheduled)
	}
}

// With maxSurge the new pod starts next to the old one, which goes once
// the new one is available: every node keeps a ready pod throughout.
func TestRollingUpdateSurge(t *testing.T) {
	e := start(t, "ds-surge")
	for _, n := range []string{"a", "b", "c"} {
		e.addNode(n, nil)
	}
	ds := e.newDS("agent")
	e.createDS(ds)
	e.waitPodsOn("agent", "a", "b", "c")
	// With the kubelets stopped, the update stalls after one surge pod.
	e.pauseKubelets(true, "a", "b", "c")
	e.patchDS("agent", `{"spec":{"updateStrategy":{"rollingUpdate":{"maxSurge":1,"maxUnavailable":0}},"template":{"spec":{"containers":[{"name":"agent","image":"agent:2"}]}}}}`)
	framework.Eventually(t, 60*time.Second, "one surge pod", func(ctx context.Context) (bool, error) {
		old, pending := 0, 0
		for _, p := range e.pods("app=agent") {
			switch {
			case p.DeletionTimestamp != nil:
				return false, fmt.Errorf("pod %s deleted before its replacement is available", p.Name)
			case p.Spec.Containers[0].Image == "agent:1" && p.Status.Phase == v1.PodRunning:
				old++
			case p.Status.Phase == v1.PodPending:
				pending++
			}
		}
		if pending > 1 {
			return false, fmt.Errorf("%d surge pods, maxSurge is 1", pending)
		}
		return old == 3 && pending == 1, nil
	})
	e.pauseKubelets(false, "a", "b", "c")

	framework.Eventually(t, 90*time.Second, "surge rollout", func(ctx context.Context) (bool, error) {
		live, ready := map[string]int{}, map[string]int{}
		updated := 0
		for _, p := range e.pods("app=agent") {
			if p.DeletionTimestamp != nil {
				continue
			}
			live[p.Spec.NodeName]++
			if p.Status.Phase == v1.PodRunning {
				ready[p.Spec.NodeName]++
			}
			if p.Spec.Containers[0].Image == "agent:2" {
				updated++
			}
		}
		for _, n := range []string{"a", "b", "c"} {
			if ready[e.nodeName(n)] == 0 {
				e.dump("agent")
				return false, fmt.Errorf("node %s has no running pod during a surge update", n)
			}
		}
		cur, err := e.c.AppsV1().DaemonSets(e.ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := cur.Status
		return updated == 3 && len(live) == 3 && live[e.nodeName("a")]+live[e.nodeName("b")]+live[e.nodeName("c")] == 3 &&
			s.ObservedGeneration == cur.Generation && s.UpdatedNumberScheduled == 3 && s.NumberAvailable == 3, nil
	})
}

// OnDelete leaves old pods until they are deleted; the replacement runs
// the new template.
func TestOnDelete(t *testing.T) {
	e := start(t, "ds-ondelete")
	e.addNode("a", nil)
	e.addNode("b", nil)
	ds := e.newDS("agent")
	ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
	e.createDS(ds)
	e.waitPodsOn("agent", "a", "b")

	e.patchDS("agent", `{"spec":{"template":{"spec":{"containers":[{"name":"agent","image":"agent:2"}]}}}}`)
	framework.Eventually(t, 30*time.Second, "status of generation 2", func(ctx context.Context) (bool, error) {
		cur, err := e.c.AppsV1().DaemonSets(e.ns).Get(ctx, "agent", metav1.GetOptions{})
		return err == nil && cur.Status.ObservedGeneration == 2 && cur.Status.UpdatedNumberScheduled == 0 && cur.Status.CurrentNumberScheduled == 2, err
	})
	var victim string
	for _, p := range e.pods("app=agent") {
		if p.Spec.Containers[0].Image != "agent:1" {
			t.Fatalf("OnDelete replaced pod %s", p.Name)
		}
		if strings.HasSuffix(p.Spec.NodeName, "-a") {
			victim = p.Name
		}
	}
	if err := e.c.CoreV1().Pods(e.ns).Delete(e.ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "replacement on a with the new template", func(ctx context.Context) (bool, error) {
		cur, err := e.c.AppsV1().DaemonSets(e.ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil || cur.Status.UpdatedNumberScheduled != 1 || cur.Status.NumberAvailable != 2 {
			return false, err
		}
		for _, p := range e.pods("app=agent") {
			if strings.HasSuffix(p.Spec.NodeName, "-a") && p.DeletionTimestamp == nil {
				return p.Spec.Containers[0].Image == "agent:2", nil
			}
		}
		return false, nil
	})
}

// A failed pod is deleted and replaced, with a FailedDaemonPod event.
func TestFailedPodReplaced(t *testing.T) {
	e := start(t, "ds-failed")
	e.addNode("a", nil)
	e.createDS(e.newDS("agent"))
	e.waitPodsOn("agent", "a")
	pods := e.pods("app=agent")
	if _, err := (framework.Kubelet{Client: e.c}).MarkFailed(e.ctx, &pods[0], 1); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "failed pod replaced", func(ctx context.Context) (bool, error) {
		for _, p := range e.pods("app=agent") {
			if p.Name == pods[0].Name {
				return false, nil
			}
		}
		return true, nil
	})
	e.waitPodsOn("agent", "a")
	framework.Eventually(t, 10*time.Second, "FailedDaemonPod event", func(ctx context.Context) (bool, error) {
		return e.countEvents("agent", "FailedDaemonPod") > 0, nil
	})
}

// Status counts pods that are scheduled but not yet ready, and the ready
// ones once the kubelet starts them; minReadySeconds delays availability.
func TestStatusReadiness(t *testing.T) {
	e := start(t, "ds-status")
	e.addNode("a", map[string]string{pausedLabel: "true"})
	e.addNode("b", nil)
	ds := e.newDS("agent")
	ds.Spec.MinReadySeconds = 2
	e.createDS(ds)
	framework.Eventually(t, 60*time.Second, "status with one pod not started", func(ctx context.Context) (bool, error) {
		cur, err := e.c.AppsV1().DaemonSets(e.ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := cur.Status
		return s.DesiredNumberScheduled == 2 && s.CurrentNumberScheduled == 2 && s.UpdatedNumberScheduled == 2 &&
			s.NumberReady == 1 && s.NumberAvailable == 1 && s.NumberUnavailable == 1, nil
	})
	e.patchNode("a", `{"metadata":{"labels":{"`+pausedLabel+`":null}}}`)
	// Becomes available minReadySeconds after turning ready, with no other
	// event: the controller must come back by itself.
	e.waitPodsOn("agent", "a", "b")
}

// A matching orphan pod is adopted instead of getting a sibling.
func TestAdoptsOrphanPod(t *testing.T) {
	e := start(t, "ds-adopt")
	e.addNode("a", nil)
	e.addNode("b", nil)
	ds := e.newDS("agent")
	ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
	orphan := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: e.ns, Labels: map[string]string{"app": "agent"}},
		Spec:       *ds.Spec.Template.Spec.DeepCopy(),
	}
	orphan.Spec.NodeName = e.nodeName("a")
	if _, err := e.c.CoreV1().Pods(e.ns).Create(e.ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ds = e.createDS(ds)
	framework.Eventually(t, 60*time.Second, "orphan adopted and b served", func(ctx context.Context) (bool, error) {
		p, err := e.c.CoreV1().Pods(e.ns).Get(ctx, "orphan", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ref := metav1.GetControllerOf(p)
		cur, err := e.c.AppsV1().DaemonSets(e.ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := cur.Status
		return ref != nil && ref.UID == ds.UID && fmt.Sprint(e.podNodes("agent")) == "[a b]" &&
			s.CurrentNumberScheduled == 2 && s.NumberReady == 2 && s.UpdatedNumberScheduled == 1, nil
	})
}
