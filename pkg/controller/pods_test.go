package controller

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
)

func TestPodStates(t *testing.T) {
	now := metav1.Now()
	active := rankPod("a", inPhase(v1.PodRunning))
	done := rankPod("b", inPhase(v1.PodSucceeded))
	failed := rankPod("c", inPhase(v1.PodFailed))
	terminating := rankPod("d", inPhase(v1.PodRunning))
	terminating.DeletionTimestamp = &now
	finishedDeleting := rankPod("e", inPhase(v1.PodFailed))
	finishedDeleting.DeletionTimestamp = &now
	all := []*v1.Pod{active, done, failed, terminating, finishedDeleting}

	if got := FilterActivePods(all); len(got) != 1 || got[0] != active {
		t.Fatalf("active = %v", got)
	}
	if got := FilterTerminatingPods(all); len(got) != 1 || got[0] != terminating {
		t.Fatalf("terminating = %v", got)
	}
	if CountTerminatingPods(all) != 1 {
		t.Fatal("count")
	}
	if PodKey(active) != "ns/a" {
		t.Fatal(PodKey(active))
	}
}

func TestIsPodAvailable(t *testing.T) {
	now := time.Now()
	p := rankPod("a", readyAt(now.Add(-10*time.Second)))
	if !IsPodAvailable(p, 0, metav1.NewTime(now)) || !IsPodAvailable(p, 10, metav1.NewTime(now)) || IsPodAvailable(p, 11, metav1.NewTime(now)) {
		t.Fatal("availability by minReadySeconds")
	}
	if IsPodAvailable(rankPod("b"), 0, metav1.NewTime(now)) {
		t.Fatal("unready pod is never available")
	}
}

func TestFindMinNextPodAvailabilityCheck(t *testing.T) {
	now := time.Now()
	clk := testingclock.NewFakePassiveClock(now)
	pods := []*v1.Pod{
		rankPod("a", readyAt(now.Add(-2*time.Second))),
		rankPod("b", readyAt(now.Add(-8*time.Second))),
		rankPod("c", readyAt(now.Add(-20*time.Second))), // already available
		rankPod("d"),
	}
	got := FindMinNextPodAvailabilityCheck(pods, 10, now, clk)
	if got == nil || *got != 2*time.Second {
		t.Fatalf("got %v, want 2s", got)
	}
	// The clock moved past the check since the status was computed: check now.
	clk.SetTime(now.Add(3 * time.Second))
	if got := FindMinNextPodAvailabilityCheck(pods, 10, now, clk); got == nil || *got != 0 {
		t.Fatalf("got %v, want 0", got)
	}
	if got := FindMinNextPodAvailabilityCheck(pods[2:], 10, now, clk); got != nil {
		t.Fatalf("got %v, want nil", got)
	}
}

type fakeInformer struct {
	cache.SharedIndexInformer
	indexer cache.Indexer
}

func (f fakeInformer) GetIndexer() cache.Indexer          { return f.indexer }
func (f fakeInformer) AddIndexers(i cache.Indexers) error { return f.indexer.AddIndexers(i) }

func TestFilterPodsByOwner(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	inf := fakeInformer{indexer: indexer}
	if err := AddPodControllerIndexer(inf); err != nil {
		t.Fatal(err)
	}
	if err := AddPodControllerIndexer(inf); err != nil {
		t.Fatal("second add must be a no-op", err)
	}
	rs := testRS("rs", "rs-uid")
	other := testRS("other", "other-uid")
	mine := testPod("mine", nil, metav1.NewControllerRef(rs, rsKind))
	orphan := testPod("orphan", nil, nil)
	theirs := testPod("theirs", nil, metav1.NewControllerRef(other, rsKind))
	elsewhere := testPod("elsewhere", nil, nil)
	elsewhere.Namespace = "other-ns"
	for _, p := range []*v1.Pod{mine, orphan, theirs, elsewhere} {
		_ = indexer.Add(p)
	}
	got, err := FilterPodsByOwner(indexer, rs, "ReplicaSet", true)
	if err != nil || len(got) != 2 {
		t.Fatalf("got %v err %v", got, err)
	}
	got, _ = FilterPodsByOwner(indexer, rs, "ReplicaSet", false)
	if len(got) != 1 || got[0] != mine {
		t.Fatalf("got %v", got)
	}
	if _, err := FilterPodsByOwner(indexer, rs, "", true); err == nil {
		t.Fatal("kind required")
	}
	if got := FilterClaimedPods(rs, labels.Everything(), []*v1.Pod{mine, orphan, theirs}); len(got) != 1 || got[0] != mine {
		t.Fatalf("claimed %v", got)
	}
}

type fakeRV string

func (f *fakeRV) LastStoreSyncResourceVersion() string { return string(*f) }

func TestConsistencyStore(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	read := fakeRV("10")
	s := NewConsistencyStore(map[schema.GroupResource]LastSyncRVGetter{pods: &read})
	owner := types.NamespacedName{Namespace: "ns", Name: "rs"}

	if err := s.EnsureReady(owner); err != nil {
		t.Fatal("nothing written")
	}
	s.WroteAt(owner, "u1", pods, "12")
	s.WroteAt(owner, "u1", pods, "11") // older write doesn't lower the bar
	err := s.EnsureReady(owner)
	ce, ok := err.(*ConsistencyError)
	if !ok || ce.WroteRV != "12" || ce.ReadRV != "10" {
		t.Fatalf("err = %v", err)
	}
	read = "12"
	if err := s.EnsureReady(owner); err != nil {
		t.Fatal(err)
	}
	read = "5"
	if err := s.EnsureReady(owner); err != nil {
		t.Fatal("ready owners are forgotten")
	}
	s.WroteAt(owner, "u1", pods, "20")
	s.Clear(owner, "other-uid")
	if s.EnsureReady(owner) == nil {
		t.Fatal("clear with another uid must keep the record")
	}
	s.Clear(owner, "")
	if s.EnsureReady(owner) != nil {
		t.Fatal("cleared")
	}
	// Unparsable versions never block.
	s.WroteAt(owner, "u1", pods, "abc")
	if s.EnsureReady(owner) != nil {
		t.Fatal("bad rv blocked")
	}
}

// ListPodsBySelector finds through the pod-template-hash index exactly the
// pods a namespace scan with the selector finds, and scans when the
// selector doesn't pin the hash.
func TestListPodsBySelector(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := AddPodTemplateHashIndexer(inf); err != nil {
		t.Fatal(err)
	}
	idx := inf.GetIndexer()
	pod := func(ns, name string, l map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l}}
	}
	for _, p := range []*v1.Pod{
		pod("a", "match", map[string]string{"app": "web", "pod-template-hash": "h1"}),
		pod("a", "other-app", map[string]string{"app": "db", "pod-template-hash": "h1"}),
		pod("a", "other-hash", map[string]string{"app": "web", "pod-template-hash": "h2"}),
		pod("a", "no-hash", map[string]string{"app": "web"}),
		pod("b", "other-ns", map[string]string{"app": "web", "pod-template-hash": "h1"}),
	} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	names := func(pods []*v1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return out
	}
	for _, ls := range []*metav1.LabelSelector{
		{MatchLabels: map[string]string{"app": "web", "pod-template-hash": "h1"}},
		{MatchLabels: map[string]string{"pod-template-hash": "h2"}},
		{MatchLabels: map[string]string{"app": "web"}},
		{MatchLabels: map[string]string{"app": "web", "pod-template-hash": "h1"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}}}},
	} {
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ListPodsBySelector(idx, "a", sel)
		if err != nil {
			t.Fatal(err)
		}
		var want []*v1.Pod
		if err := cache.ListAllByNamespace(idx, "a", sel, func(o interface{}) { want = append(want, o.(*v1.Pod)) }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(names(got), names(want)) {
			t.Errorf("selector %v: got %v, want %v", sel, names(got), names(want))
		}
	}
	// The hash lookup really goes through the index: a pod the index
	// doesn't hold under its hash is not found.
	keys, err := idx.IndexKeys(PodTemplateHashIndex, "a/h1")
	if err != nil || !slices.Equal(keys, []string{"a/match", "a/other-app"}) && !slices.Equal(keys, []string{"a/other-app", "a/match"}) {
		t.Fatalf("index a/h1 holds %v (%v), want a/match and a/other-app", keys, err)
	}
}

// indexSpy records which indexes a lookup goes through.
type indexSpy struct {
	cache.Indexer
	used []string
}

func (s *indexSpy) ByIndex(name, value string) ([]interface{}, error) {
	s.used = append(s.used, name)
	return s.Indexer.ByIndex(name, value)
}

func (s *indexSpy) Index(name string, obj interface{}) ([]interface{}, error) {
	s.used = append(s.used, name)
	return s.Indexer.Index(name, obj)
}

// A selector pinning the indexed label goes through the label index and
// finds what a scan finds; one that does not scans the namespace.
func TestListPodsPinnedByUsesIndex(t *testing.T) {
	const key, index = "batch.kubernetes.io/controller-uid", "jobUID"
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := AddPodLabelIndexer(inf, index, key); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "mine", Labels: map[string]string{key: "u1", "job-name": "j"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "other-job", Labels: map[string]string{key: "u2", "job-name": "j"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "unlabeled", Labels: map[string]string{"job-name": "j"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "other-ns", Labels: map[string]string{key: "u1"}}},
	} {
		if err := inf.GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		selector  string
		want      []string
		wantIndex string
	}{
		{key + "=u1", []string{"mine"}, index},
		{key + " in (u1)", []string{"mine"}, index},
		{key + "=u1,job-name=j", []string{"mine"}, index},
		{key + " in (u1,u2)", []string{"mine", "other-job"}, cache.NamespaceIndex},
		{"job-name=j", []string{"mine", "other-job", "unlabeled"}, cache.NamespaceIndex},
	} {
		sel, err := labels.Parse(tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		spy := &indexSpy{Indexer: inf.GetIndexer()}
		pods, err := ListPodsPinnedBy(spy, index, key, "a", sel)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range pods {
			got = append(got, p.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %v, want %v", tc.selector, got, tc.want)
		}
		if !slices.Contains(spy.used, tc.wantIndex) {
			t.Errorf("%q: looked up through %v, want %s", tc.selector, spy.used, tc.wantIndex)
		}
	}
}
