package controller

import (
	"math/rand"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

type podOpt func(*v1.Pod)

func rankPod(name string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func onNode(n string) podOpt        { return func(p *v1.Pod) { p.Spec.NodeName = n } }
func inPhase(ph v1.PodPhase) podOpt { return func(p *v1.Pod) { p.Status.Phase = ph } }
func created(t time.Time) podOpt    { return func(p *v1.Pod) { p.CreationTimestamp = metav1.NewTime(t) } }
func restarts(n int32) podOpt {
	return func(p *v1.Pod) { p.Status.ContainerStatuses = []v1.ContainerStatus{{RestartCount: n}} }
}
func deletionCost(c string) podOpt {
	return func(p *v1.Pod) { p.Annotations = map[string]string{PodDeletionCostAnnotation: c} }
}
func readyAt(t time.Time) podOpt {
	return func(p *v1.Pod) {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t)}}
	}
}

func TestActivePodsWithRanksOrder(t *testing.T) {
	now := time.Now()
	running := []podOpt{onNode("n"), inPhase(v1.PodRunning)}
	with := func(extra ...podOpt) []podOpt { return append(append([]podOpt{}, running...), extra...) }
	// Expected deletion order, each pod preferred over every later one.
	pods := []*v1.Pod{
		rankPod("unassigned", inPhase(v1.PodPending)),
		rankPod("pending", onNode("n"), inPhase(v1.PodPending)),
		rankPod("unknown", onNode("n"), inPhase(v1.PodUnknown)),
		rankPod("running-not-ready", running...),
		rankPod("low-cost", with(readyAt(now.Add(-time.Hour)), deletionCost("-10"))...),
		rankPod("doubled-up", with(readyAt(now.Add(-time.Hour)))...),
		rankPod("ready-recently", with(readyAt(now.Add(-time.Minute)))...),
		rankPod("ready-long-restarts", with(readyAt(now.Add(-time.Hour)), restarts(5))...),
		rankPod("ready-long-new", with(readyAt(now.Add(-time.Hour)), created(now.Add(-2*time.Hour)))...),
		rankPod("ready-long-old", with(readyAt(now.Add(-time.Hour)), created(now.Add(-100*time.Hour)))...),
	}
	ranks := map[string]int{"doubled-up": 3}
	for seed := int64(0); seed < 20; seed++ {
		shuffled := append([]*v1.Pod{}, pods...)
		rand.New(rand.NewSource(seed)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		r := make([]int, len(shuffled))
		for i, p := range shuffled {
			r[i] = ranks[p.Name]
		}
		sort.Sort(ActivePodsWithRanks{Pods: shuffled, Rank: r, Now: metav1.NewTime(now), DeletionCost: true})
		for i := range pods {
			if shuffled[i].Name != pods[i].Name {
				t.Fatalf("seed %d: position %d is %s, want %s", seed, i, shuffled[i].Name, pods[i].Name)
			}
		}
	}
}

func TestActivePodsWithRanksLogarithmicBuckets(t *testing.T) {
	now := time.Now()
	// Created 100m and 110m ago: same power-of-two bucket, so UID decides.
	a := rankPod("b-uid", onNode("n"), inPhase(v1.PodRunning), created(now.Add(-100*time.Minute)))
	b := rankPod("a-uid", onNode("n"), inPhase(v1.PodRunning), created(now.Add(-110*time.Minute)))
	s := ActivePodsWithRanks{Pods: []*v1.Pod{a, b}, Rank: []int{0, 0}, Now: metav1.NewTime(now)}
	if s.Less(0, 1) || !s.Less(1, 0) {
		t.Fatal("same bucket must order by UID")
	}
	// Without Now, plain timestamps: the newer one goes first.
	s.Now = metav1.Time{}
	if !s.Less(0, 1) {
		t.Fatal("newer pod must go first without log scale")
	}
	// Ready 1m ago vs 1h ago fall in different buckets.
	c := rankPod("c", onNode("n"), inPhase(v1.PodRunning), readyAt(now.Add(-time.Minute)))
	d := rankPod("d", onNode("n"), inPhase(v1.PodRunning), readyAt(now.Add(-time.Hour)))
	s = ActivePodsWithRanks{Pods: []*v1.Pod{d, c}, Rank: []int{0, 0}, Now: metav1.NewTime(now)}
	if !s.Less(1, 0) || s.Less(0, 1) {
		t.Fatal("recently ready pod must go first")
	}
}

func TestActivePodsOrder(t *testing.T) {
	now := time.Now()
	pods := []*v1.Pod{
		rankPod("unassigned"),
		rankPod("pending", onNode("n"), inPhase(v1.PodPending)),
		rankPod("running", onNode("n"), inPhase(v1.PodRunning)),
		rankPod("ready-new", onNode("n"), inPhase(v1.PodRunning), readyAt(now)),
		rankPod("ready-old", onNode("n"), inPhase(v1.PodRunning), readyAt(now.Add(-time.Hour))),
	}
	shuffled := []*v1.Pod{pods[4], pods[2], pods[0], pods[3], pods[1]}
	sort.Sort(ActivePods(shuffled))
	for i := range pods {
		if shuffled[i] != pods[i] {
			t.Fatalf("position %d is %s", i, shuffled[i].Name)
		}
	}
}

func TestDeletionCostParsing(t *testing.T) {
	for in, want := range map[string]int32{"": 0, "0": 0, "10": 10, "-5": -5, "+1": 0, "007": 0, "x": 0, "99999999999": 0} {
		got, _ := GetDeletionCostFromPodAnnotations(map[string]string{PodDeletionCostAnnotation: in})
		if got != want {
			t.Errorf("%q: got %d want %d", in, got, want)
		}
	}
	if got, err := GetDeletionCostFromPodAnnotations(nil); got != 0 || err != nil {
		t.Fatal("missing annotation is 0")
	}
}

// Without DeletionCost the annotation is ignored and Rank decides.
func TestActivePodsWithRanksDeletionCostOff(t *testing.T) {
	now := time.Now()
	cheap := rankPod("cheap", onNode("n"), inPhase(v1.PodRunning), readyAt(now.Add(-time.Hour)), deletionCost("-10"))
	crowded := rankPod("crowded", onNode("n"), inPhase(v1.PodRunning), readyAt(now.Add(-time.Hour)))
	s := ActivePodsWithRanks{Pods: []*v1.Pod{cheap, crowded}, Rank: []int{0, 3}, Now: metav1.NewTime(now), DeletionCost: true}
	if !s.Less(0, 1) {
		t.Fatal("with DeletionCost the cheaper pod must go first")
	}
	s.DeletionCost = false
	if !s.Less(1, 0) || s.Less(0, 1) {
		t.Fatal("without DeletionCost the higher-ranked pod must go first")
	}
}
