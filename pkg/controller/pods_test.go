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

// A selector pinning any label goes through the smallest of its label
// buckets and finds exactly what a namespace scan finds; one pinning no
// label, or an indexer without the index, scans the namespace.
func TestListPodsByLabelsUsesSmallestBucket(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := AddPodLabelsIndexer(inf); err != nil {
		t.Fatal(err)
	}
	if err := AddPodLabelsIndexer(inf); err != nil {
		t.Fatalf("adding the index twice: %v", err)
	}
	store := inf.GetIndexer()
	pod := func(ns, name string, lbls map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}
	}
	for _, p := range []*v1.Pod{
		pod("a", "web-1", map[string]string{"app": "web", "tier": "front"}),
		pod("a", "web-2", map[string]string{"app": "web", "tier": "front", "canary": "yes"}),
		pod("a", "api-1", map[string]string{"app": "api", "tier": "front"}),
		pod("a", "api-2", map[string]string{"app": "api", "tier": "back"}),
		pod("a", "bare", nil),
		pod("b", "web-other-ns", map[string]string{"app": "web", "tier": "front"}),
	} {
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	// A relabeled pod moves buckets.
	if err := store.Update(pod("a", "api-2", map[string]string{"app": "web", "tier": "back"})); err != nil {
		t.Fatal(err)
	}
	plain := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range store.List() {
		if err := plain.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		selector string
		want     []string
		// candidates is how many pods the chosen bucket holds, -1 for a
		// namespace scan.
		candidates int
	}{
		{"app=web", []string{"api-2", "web-1", "web-2"}, 3},
		{"app in (web)", []string{"api-2", "web-1", "web-2"}, 3},
		{"app=web,canary=yes", []string{"web-2"}, 1},
		{"canary=yes,tier=front", []string{"web-2"}, 1},
		{"app=web,tier=back", []string{"api-2"}, 1},
		{"app=web,canary!=yes", []string{"api-2", "web-1"}, 3},
		{"app=web,tier=nothing", nil, 0},
		{"app in (web,api)", []string{"api-1", "api-2", "web-1", "web-2"}, -1},
		{"app", []string{"api-1", "api-2", "web-1", "web-2"}, -1},
		{"app!=web", []string{"api-1", "bare"}, -1},
		{"", []string{"api-1", "api-2", "bare", "web-1", "web-2"}, -1},
	} {
		sel, err := labels.Parse(tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		spy := &indexSpy{Indexer: store}
		got := podNames(t, func() ([]*v1.Pod, error) { return ListPodsByLabels(spy, "a", sel) })
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %v, want %v", tc.selector, got, tc.want)
		}
		if scanned := podNames(t, func() ([]*v1.Pod, error) { return ListPodsByLabels(plain, "a", sel) }); !slices.Equal(scanned, tc.want) {
			t.Errorf("%q without the index: got %v, want %v", tc.selector, scanned, tc.want)
		}
		scannedNamespace := slices.Contains(spy.used, cache.NamespaceIndex)
		if scannedNamespace != (tc.candidates < 0) {
			t.Errorf("%q: looked up through %v, want a namespace scan: %v", tc.selector, spy.used, tc.candidates < 0)
		}
		bucket, narrowed, err := smallestLabelBucket(store, "a", sel)
		if err != nil {
			t.Fatal(err)
		}
		if narrowed != (tc.candidates >= 0) || (narrowed && len(bucket) != tc.candidates) {
			t.Errorf("%q: bucket of %d pods (narrowed %v), want %d", tc.selector, len(bucket), narrowed, tc.candidates)
		}
	}
}

func podNames(t *testing.T, list func() ([]*v1.Pod, error)) []string {
	t.Helper()
	pods, err := list()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// LabelIndexedPodLister adds the labels index and lists through it, and
// its other methods are the plain lister's.
func TestLabelIndexedPodLister(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	lister := LabelIndexedPodLister(inf)
	if _, ok := inf.GetIndexer().GetIndexers()[PodLabelsIndex]; !ok {
		t.Fatalf("no %s index added", PodLabelsIndex)
	}
	for _, p := range []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web", Labels: map[string]string{"app": "web"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "api", Labels: map[string]string{"app": "api"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "web-b", Labels: map[string]string{"app": "web"}}},
	} {
		if err := inf.GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	if got := podNames(t, func() ([]*v1.Pod, error) { return lister.Pods("a").List(sel) }); !slices.Equal(got, []string{"web"}) {
		t.Errorf("List(app=web) in a = %v", got)
	}
	if got := podNames(t, func() ([]*v1.Pod, error) { return lister.List(sel) }); !slices.Equal(got, []string{"web", "web-b"}) {
		t.Errorf("List(app=web) in all namespaces = %v", got)
	}
	if got := podNames(t, func() ([]*v1.Pod, error) { return lister.Pods(metav1.NamespaceAll).List(sel) }); !slices.Equal(got, []string{"web", "web-b"}) {
		t.Errorf("Pods(all namespaces).List(app=web) = %v", got)
	}
	if p, err := lister.Pods("b").Get("web-b"); err != nil || p.Name != "web-b" {
		t.Errorf("Get = %v, %v", p, err)
	}
}

// The namespaced List reads the labels index: with an index that leaves a
// pod out, the pod is not listed (a namespace scan would list it).
func TestLabelIndexedPodListerReadsTheIndex(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	err := inf.AddIndexers(cache.Indexers{PodLabelsIndex: func(obj interface{}) ([]string, error) {
		if pod := obj.(*v1.Pod); pod.Name != "unindexed" {
			return []string{podLabelsIndexValue(pod.Namespace, "app", pod.Labels["app"])}, nil
		}
		return nil, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	lister := LabelIndexedPodLister(inf)
	for _, name := range []string{"indexed", "unindexed"} {
		if err := inf.GetIndexer().Add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, Labels: map[string]string{"app": "web"}}}); err != nil {
			t.Fatal(err)
		}
	}
	got := podNames(t, func() ([]*v1.Pod, error) {
		return lister.Pods("a").List(labels.SelectorFromSet(labels.Set{"app": "web"}))
	})
	if !slices.Equal(got, []string{"indexed"}) {
		t.Errorf("List = %v, want only the indexed pod", got)
	}
}
