package garbagecollector

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
)

// teardownGC is a collector with a fake clock, the namespace "doomed"
// being deleted and "live" not, each holding a ConfigMap whose owner was
// deleted.
func teardownGC(t *testing.T) (*testGC, *testingclock.FakePassiveClock) {
	t.Helper()
	doomed := cm("doomed", "dep", "doomed-dep", ref("ConfigMap", "owner", "doomed-owner"))
	live := cm("live", "dep", "live-dep", ref("ConfigMap", "owner", "live-owner"))
	g := newTestGC(t, doomed, live)
	clk := tearDownDoomed(g)
	g.cache(configMapGVR, doomed, live)
	g.observe(addEvent, namespaceObj("live", false), nil)
	for _, o := range []*metav1.PartialObjectMetadata{doomed, live} {
		g.observe(addEvent, o, nil)
		g.absentOwnerCache.Add(objectReference{OwnerReference: o.OwnerReferences[0], Namespace: o.Namespace})
	}
	return g, clk
}

// tearDownDoomed gives g's teardown tracker a fake clock and shows it the
// namespace "doomed" being deleted.
func tearDownDoomed(g *testGC) *testingclock.FakePassiveClock {
	clk := testingclock.NewFakePassiveClock(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
	g.dependencyGraphBuilder.teardowns = newNamespaceTeardowns(clk)
	g.observe(addEvent, namespaceObj("doomed", false), nil)
	g.observe(updateEvent, namespaceObj("doomed", true), namespaceObj("doomed", false))
	return clk
}

func (g *testGC) deleted() map[string]bool {
	out := map[string]bool{}
	for _, d := range g.deleteActions() {
		out[d.Namespace+"/"+d.Name] = true
	}
	return out
}

// markedByOther is an update event of a pod in ns newly marked for
// deletion by another client (the namespace controller).
func (g *testGC) markedByOther(ns, name string, uid types.UID) {
	p := obj("v1", "Pod", ns, name, uid)
	marked := p.DeepCopy()
	now := metav1.Now()
	marked.DeletionTimestamp = &now
	g.observe(addEvent, p, nil)
	g.observe(updateEvent, marked, p)
}

// While a namespace is being deleted and its teardown goes on, the
// collector leaves the dependents there to the namespace controller; in
// another namespace it deletes them at once.
func TestDependentsLeftToAProgressingTeardown(t *testing.T) {
	g, clk := teardownGC(t)

	if action, _ := g.attemptToDeleteWorker(g.ctx, g.node("live-dep")); action != forgetItem || !g.deleted()["live/dep"] {
		t.Fatalf("live namespace: action %v, deletes %v; want the dependent deleted", action, g.deleted())
	}
	action, after := g.attemptToDeleteWorker(g.ctx, g.node("doomed-dep"))
	if action != requeueItemAfter || after != teardownStallWindow || g.deleted()["doomed/dep"] {
		t.Fatalf("doomed namespace: action %v after %v, deletes %v; want it left to the teardown for %v", action, after, g.deleted(), teardownStallWindow)
	}

	// Progress by another client renews the wait.
	clk.SetTime(clk.Now().Add(20 * time.Second))
	g.markedByOther("doomed", "p1", "p1-uid")
	if action, after = g.attemptToDeleteWorker(g.ctx, g.node("doomed-dep")); action != requeueItemAfter || after != teardownStallWindow {
		t.Fatalf("after progress: action %v after %v, want a renewed wait", action, after)
	}

	// A teardown that stalls gets no more waiting.
	clk.SetTime(clk.Now().Add(teardownStallWindow))
	if action, _ = g.attemptToDeleteWorker(g.ctx, g.node("doomed-dep")); action != forgetItem || !g.deleted()["doomed/dep"] {
		t.Fatalf("stalled teardown: action %v, deletes %v; want the dependent deleted", action, g.deleted())
	}
}

// The collector's own deletions are no progress of the teardown: counting
// them would keep it waiting on itself.
func TestOwnDeletionsAreNoTeardownProgress(t *testing.T) {
	g, clk := teardownGC(t)
	clk.SetTime(clk.Now().Add(20 * time.Second))
	g.recentDeletes.remember("p1-uid", "1")
	g.markedByOther("doomed", "p1", "p1-uid")
	if _, after := g.attemptToDeleteWorker(g.ctx, g.node("doomed-dep")); after != teardownStallWindow-20*time.Second {
		t.Fatalf("wait %v, want what was left of the first window (%v): our own deletion renewed it", after, teardownStallWindow-20*time.Second)
	}
	// Nor is the final delete of the pod we marked (the kubelet finishing it).
	clk.SetTime(clk.Now().Add(5 * time.Second))
	finished := obj("v1", "Pod", "doomed", "p1", "p1-uid")
	now := metav1.Now()
	finished.DeletionTimestamp = &now
	g.observe(deleteEvent, finished, nil)
	if _, after := g.attemptToDeleteWorker(g.ctx, g.node("doomed-dep")); after != teardownStallWindow-25*time.Second {
		t.Fatalf("wait %v, want %v: the final delete of our own deletion renewed it", after, teardownStallWindow-25*time.Second)
	}
	// Positive controls: the same marking by another client renews it, and
	// so does another client's delete of an object at once.
	g.markedByOther("doomed", "p2", "p2-uid")
	if _, after := g.attemptToDeleteWorker(g.ctx, g.node("doomed-dep")); after != teardownStallWindow {
		t.Fatalf("wait %v, want a renewed %v", after, teardownStallWindow)
	}
	clk.SetTime(clk.Now().Add(5 * time.Second))
	gone := obj("v1", "Pod", "doomed", "p3", "p3-uid")
	g.observe(addEvent, gone, nil)
	g.observe(deleteEvent, gone, nil)
	if _, after := g.attemptToDeleteWorker(g.ctx, g.node("doomed-dep")); after != teardownStallWindow {
		t.Fatalf("wait %v after a delete at once, want a renewed %v", after, teardownStallWindow)
	}
}

// However long a teardown keeps progressing, the collector defers to it
// for maxTeardownDeferral at most.
func TestTeardownDeferralIsBounded(t *testing.T) {
	g, clk := teardownGC(t)
	start := clk.Now()
	for i := 0; clk.Now().Sub(start) < maxTeardownDeferral-teardownStallWindow; i++ {
		clk.SetTime(clk.Now().Add(teardownStallWindow / 2))
		g.markedByOther("doomed", "p", types.UID("p-uid-"+string(rune('a'+i%26))))
		if action, _ := g.attemptToDeleteWorker(g.ctx, g.node("doomed-dep")); action != requeueItemAfter {
			t.Fatalf("at %v: action %v, want the dependent still left to the teardown", clk.Now().Sub(start), action)
		}
	}
	clk.SetTime(start.Add(maxTeardownDeferral - time.Second))
	g.markedByOther("doomed", "q", "q-uid")
	if _, after := g.attemptToDeleteWorker(g.ctx, g.node("doomed-dep")); after != time.Second {
		t.Fatalf("wait %v near the bound, want 1s", after)
	}
	clk.SetTime(start.Add(maxTeardownDeferral))
	g.markedByOther("doomed", "r", "r-uid")
	if action, _ := g.attemptToDeleteWorker(g.ctx, g.node("doomed-dep")); action != forgetItem || !g.deleted()["doomed/dep"] {
		t.Fatalf("past the bound: action %v, deletes %v; want the dependent deleted", action, g.deleted())
	}
}

// A namespace no longer being deleted (gone, or recreated) defers nothing.
func TestTeardownEndsWithItsNamespace(t *testing.T) {
	g, _ := teardownGC(t)
	g.observe(deleteEvent, namespaceObj("doomed", true), nil)
	if action, _ := g.attemptToDeleteWorker(g.ctx, g.node("doomed-dep")); action != forgetItem || !g.deleted()["doomed/dep"] {
		t.Fatalf("action %v, deletes %v; want the dependent deleted", action, g.deleted())
	}
}

// A cycle member in a namespace being torn down is left alone entirely:
// neither the unblocking patch nor the foreground delete goes out while
// the teardown progresses; both do once it stalls.
func TestCycleMemberInTeardownIsNotPatched(t *testing.T) {
	a := deletingWith(cm("doomed", "a", "a-uid", blocking(ref("ConfigMap", "c", "c-uid"))), metav1.FinalizerDeleteDependents)
	b := deletingWith(cm("doomed", "b", "b-uid", blocking(ref("ConfigMap", "a", "a-uid"))), metav1.FinalizerDeleteDependents)
	c := cm("doomed", "c", "c-uid", blocking(ref("ConfigMap", "b", "b-uid")))
	g := newTestGC(t, a, b, c)
	clk := tearDownDoomed(g)
	for _, o := range []*metav1.PartialObjectMetadata{a, b, c} {
		g.observe(addEvent, o, nil)
	}

	if action, _ := g.attemptToDeleteWorker(g.ctx, g.node("c-uid")); action != requeueItemAfter || len(g.patchActions()) != 0 || len(g.deleteActions()) != 0 {
		t.Fatalf("progressing teardown: action %v, actions %v; want nothing written", action, g.actions())
	}
	clk.SetTime(clk.Now().Add(teardownStallWindow))
	if action, _ := g.attemptToDeleteWorker(g.ctx, g.node("c-uid")); action != forgetItem || len(g.patchActions()) != 1 || len(g.deleteActions()) != 1 {
		t.Fatalf("stalled teardown: action %v, actions %v; want the unblocking patch and the delete", action, g.actions())
	}
}
