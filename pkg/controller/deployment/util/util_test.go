package util

import (
	"context"
	"sort"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

func rollingDeployment(replicas int32, surge, unavailable intstr.IntOrString) *apps.Deployment {
	return &apps.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns"},
		Spec: apps.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Strategy: apps.DeploymentStrategy{
				Type:          apps.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &apps.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable},
			},
			Template: *webTemplate(),
		},
	}
}

func rs(name string, replicas int32, created time.Time, annotations map[string]string) *apps.ReplicaSet {
	return &apps.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID(name),
			CreationTimestamp: metav1.NewTime(created),
			Annotations:       annotations,
		},
		Spec: apps.ReplicaSetSpec{Replicas: ptr.To(replicas)},
	}
}

func TestResolveFenceposts(t *testing.T) {
	pct := intstr.FromString
	num := intstr.FromInt32
	tests := []struct {
		surge, unavailable intstr.IntOrString
		desired            int32
		wantS, wantU       int32
	}{
		{pct("25%"), pct("25%"), 10, 3, 2}, // surge rounds up, unavailable down
		{pct("25%"), pct("25%"), 3, 1, 0},
		{pct("25%"), pct("25%"), 1, 1, 0},
		{pct("0%"), pct("1%"), 2, 0, 1}, // both zero -> unavailable 1
		{num(0), num(0), 5, 0, 1},
		{pct("1%"), pct("0%"), 2, 1, 0},
		{num(2), num(3), 10, 2, 3},
		{pct("50%"), pct("50%"), 5, 3, 2},
		{pct("100%"), pct("0%"), 7, 7, 0},
		{pct("25%"), pct("25%"), 0, 0, 1},
	}
	for _, tc := range tests {
		s, u, err := ResolveFenceposts(&tc.surge, &tc.unavailable, tc.desired)
		if err != nil {
			t.Fatal(err)
		}
		if s != tc.wantS || u != tc.wantU {
			t.Errorf("ResolveFenceposts(%s, %s, %d) = %d, %d; want %d, %d", tc.surge.String(), tc.unavailable.String(), tc.desired, s, u, tc.wantS, tc.wantU)
		}
	}
	if _, _, err := ResolveFenceposts(ptr.To(pct("abc")), nil, 3); err == nil {
		t.Error("invalid percent accepted")
	}
}

func TestMaxSurgeMaxUnavailable(t *testing.T) {
	d := rollingDeployment(10, intstr.FromString("25%"), intstr.FromString("25%"))
	if MaxSurge(*d) != 3 || MaxUnavailable(*d) != 2 || MinAvailable(d) != 8 {
		t.Errorf("got surge %d unavailable %d min %d", MaxSurge(*d), MaxUnavailable(*d), MinAvailable(d))
	}
	d = rollingDeployment(2, intstr.FromInt32(0), intstr.FromInt32(5))
	if MaxUnavailable(*d) != 2 {
		t.Errorf("unavailable not capped at replicas: %d", MaxUnavailable(*d))
	}
	d = rollingDeployment(0, intstr.FromInt32(1), intstr.FromInt32(1))
	if MaxUnavailable(*d) != 0 {
		t.Errorf("zero replicas: unavailable %d", MaxUnavailable(*d))
	}
	d.Spec.Strategy = apps.DeploymentStrategy{Type: apps.RecreateDeploymentStrategyType}
	d.Spec.Replicas = ptr.To[int32](4)
	if MaxSurge(*d) != 0 || MaxUnavailable(*d) != 0 || MinAvailable(d) != 0 {
		t.Error("recreate must have no surge/unavailable")
	}
}

func TestNewRSNewReplicas(t *testing.T) {
	now := time.Now()
	d := rollingDeployment(10, intstr.FromString("25%"), intstr.FromString("25%"))
	newRS := rs("new", 0, now, nil)
	oldRS := rs("old", 10, now.Add(-time.Hour), nil)
	tests := []struct {
		newSize, oldSize int32
		want             int32
	}{
		{0, 10, 3}, // surge budget
		{3, 10, 3}, // at max total
		{3, 8, 5},  // room after scale-down
		{8, 0, 10}, // never beyond desired
		{0, 0, 10}, // first rollout
		{2, 12, 2}, // over max total
	}
	for _, tc := range tests {
		newRS.Spec.Replicas = ptr.To(tc.newSize)
		oldRS.Spec.Replicas = ptr.To(tc.oldSize)
		got, err := NewRSNewReplicas(d, []*apps.ReplicaSet{oldRS, newRS}, newRS)
		if err != nil || got != tc.want {
			t.Errorf("new=%d old=%d: got %d (%v), want %d", tc.newSize, tc.oldSize, got, err, tc.want)
		}
	}
	d.Spec.Strategy = apps.DeploymentStrategy{Type: apps.RecreateDeploymentStrategyType}
	if got, _ := NewRSNewReplicas(d, nil, newRS); got != 10 {
		t.Errorf("recreate: %d", got)
	}
	d.Spec.Strategy.Type = "Bogus"
	if _, err := NewRSNewReplicas(d, nil, newRS); err == nil {
		t.Error("unknown strategy accepted")
	}
}

func TestGetReplicaSetProportion(t *testing.T) {
	logger := klog.Background()
	d := rollingDeployment(20, intstr.FromInt32(2), intstr.FromInt32(0)) // max 22
	r := rs("a", 5, time.Now(), map[string]string{MaxReplicasAnnotation: "11"})
	// 5 * 22 / 11 = 10 -> +5, capped by what is left.
	if got := GetReplicaSetProportion(logger, r, *d, 11, 0); got != 5 {
		t.Errorf("got %d, want 5", got)
	}
	if got := GetReplicaSetProportion(logger, r, *d, 11, 8); got != 3 {
		t.Errorf("capped: got %d, want 3", got)
	}
	// Scale down to 0 removes everything.
	d.Spec.Replicas = ptr.To[int32](0)
	if got := GetReplicaSetProportion(logger, r, *d, -11, 0); got != -5 {
		t.Errorf("to zero: got %d", got)
	}
	// Missing annotation falls back to status.replicas; zero status gives 0.
	d.Spec.Replicas = ptr.To[int32](20)
	r.Annotations = nil
	if got := GetReplicaSetProportion(logger, r, *d, 11, 0); got != 0 {
		t.Errorf("no base: got %d", got)
	}
	d.Status.Replicas = 11
	if got := GetReplicaSetProportion(logger, r, *d, 11, 0); got != 5 {
		t.Errorf("status base: got %d", got)
	}
	// Empty ReplicaSets never get a share.
	r.Spec.Replicas = ptr.To[int32](0)
	if got := GetReplicaSetProportion(logger, r, *d, 11, 0); got != 0 {
		t.Errorf("empty rs: got %d", got)
	}
}

func TestSetNewReplicaSetAnnotations(t *testing.T) {
	ctx := context.Background()
	d := rollingDeployment(3, intstr.FromString("25%"), intstr.FromString("25%"))
	d.Annotations = map[string]string{
		"user":                         "x",
		RevisionAnnotation:             "7",
		v1.LastAppliedConfigAnnotation: "{}",
		apps.DeprecatedRollbackTo:      "2",
	}
	r := rs("new", 0, time.Now(), nil)
	if !SetNewReplicaSetAnnotations(ctx, d, r, "1", false, MaxRevHistoryLengthInChars) {
		t.Fatal("expected change")
	}
	want := map[string]string{"user": "x", RevisionAnnotation: "1", DesiredReplicasAnnotation: "3", MaxReplicasAnnotation: "4"}
	if len(r.Annotations) != len(want) {
		t.Fatalf("annotations %v, want %v", r.Annotations, want)
	}
	for k, v := range want {
		if r.Annotations[k] != v {
			t.Fatalf("annotations %v, want %v", r.Annotations, want)
		}
	}
	if SetNewReplicaSetAnnotations(ctx, d, r, "1", true, MaxRevHistoryLengthInChars) {
		t.Error("second call changed annotations")
	}
	// Never lowered.
	if SetNewReplicaSetAnnotations(ctx, d, r, "0", true, MaxRevHistoryLengthInChars) || r.Annotations[RevisionAnnotation] != "1" {
		t.Error("revision lowered")
	}
	// Reused: history grows.
	SetNewReplicaSetAnnotations(ctx, d, r, "3", true, MaxRevHistoryLengthInChars)
	SetNewReplicaSetAnnotations(ctx, d, r, "5", true, MaxRevHistoryLengthInChars)
	if r.Annotations[RevisionAnnotation] != "5" || r.Annotations[RevisionHistoryAnnotation] != "1,3" {
		t.Errorf("history: %v", r.Annotations)
	}
	// History trimmed from the front to fit.
	SetNewReplicaSetAnnotations(ctx, d, r, "6", true, 4)
	if r.Annotations[RevisionHistoryAnnotation] != "3,5" {
		t.Errorf("trimmed history: %q", r.Annotations[RevisionHistoryAnnotation])
	}
	// Unparseable current revision: left alone.
	r.Annotations[RevisionAnnotation] = "x"
	if SetNewReplicaSetAnnotations(ctx, d, r, "9", true, MaxRevHistoryLengthInChars) {
		t.Error("bad revision overwritten")
	}
}

func TestRevisions(t *testing.T) {
	now := time.Now()
	rss := []*apps.ReplicaSet{
		rs("a", 0, now, map[string]string{RevisionAnnotation: "3"}),
		rs("b", 0, now, map[string]string{RevisionAnnotation: "9"}),
		rs("c", 0, now, map[string]string{RevisionAnnotation: "bad"}),
		rs("d", 0, now, map[string]string{RevisionAnnotation: "5"}),
	}
	if MaxRevision(klog.Background(), rss) != 9 || LastRevision(klog.Background(), rss) != 5 {
		t.Error("max/last revision")
	}
}

func TestConditions(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	var s apps.DeploymentStatus
	SetDeploymentCondition(&s, *NewDeploymentCondition(t0, apps.DeploymentProgressing, v1.ConditionTrue, NewReplicaSetReason, "a"))
	SetDeploymentCondition(&s, *NewDeploymentCondition(t0, apps.DeploymentAvailable, v1.ConditionFalse, MinimumReplicasUnavailable, "b"))
	// Same status and reason: untouched.
	SetDeploymentCondition(&s, *NewDeploymentCondition(t1, apps.DeploymentProgressing, v1.ConditionTrue, NewReplicaSetReason, "other"))
	if c := GetDeploymentCondition(s, apps.DeploymentProgressing); c.Message != "a" || !c.LastUpdateTime.Time.Equal(t0) {
		t.Errorf("condition overwritten: %+v", c)
	}
	// Same status, new reason: keeps transition time, moves to the end.
	SetDeploymentCondition(&s, *NewDeploymentCondition(t1, apps.DeploymentProgressing, v1.ConditionTrue, NewRSAvailableReason, "c"))
	c := s.Conditions[1]
	if c.Type != apps.DeploymentProgressing || !c.LastTransitionTime.Time.Equal(t0) || !c.LastUpdateTime.Time.Equal(t1) {
		t.Errorf("got %+v", s.Conditions)
	}
	RemoveDeploymentCondition(&s, apps.DeploymentAvailable)
	RemoveDeploymentCondition(&s, apps.DeploymentProgressing)
	if s.Conditions != nil {
		t.Errorf("expected nil conditions, got %v", s.Conditions)
	}
}

func TestDeploymentTimedOut(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	d := rollingDeployment(1, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](60)
	s := apps.DeploymentStatus{}
	if DeploymentTimedOut(ctx, d, &s, t0) {
		t.Error("no condition: not timed out")
	}
	SetDeploymentCondition(&s, *NewDeploymentCondition(t0, apps.DeploymentProgressing, v1.ConditionTrue, ReplicaSetUpdatedReason, ""))
	if DeploymentTimedOut(ctx, d, &s, t0.Add(60*time.Second)) {
		t.Error("at the deadline is not past it")
	}
	if !DeploymentTimedOut(ctx, d, &s, t0.Add(61*time.Second)) {
		t.Error("past the deadline")
	}
	s.Conditions[0].Reason = NewRSAvailableReason
	if DeploymentTimedOut(ctx, d, &s, t0.Add(time.Hour)) {
		t.Error("complete rollouts never time out")
	}
}

func TestFindNewAndOldReplicaSets(t *testing.T) {
	now := time.Now()
	d := rollingDeployment(3, intstr.FromInt32(1), intstr.FromInt32(0))
	match1 := rs("m1", 1, now, nil)
	match1.Spec.Template = *webTemplate()
	match1.Spec.Template.Labels[apps.DefaultDeploymentUniqueLabelKey] = "abc"
	match0 := rs("m0", 0, now.Add(-time.Minute), nil)
	match0.Spec.Template = *webTemplate()
	other := rs("o", 2, now.Add(-time.Hour), nil)
	other.Spec.Template = *webTemplate()
	other.Spec.Template.Spec.Containers[0].Image = "nginx:old"
	empty := rs("e", 0, now.Add(-2*time.Hour), nil)
	list := []*apps.ReplicaSet{match1, other, match0, empty}
	if got := FindNewReplicaSet(d, list); got != match0 {
		t.Fatalf("new RS = %v, want the oldest match", got.Name)
	}
	active, all := FindOldReplicaSets(d, list)
	if len(active) != 2 || len(all) != 3 {
		t.Errorf("active %d all %d", len(active), len(all))
	}
}

func TestTerminatingReplicaCount(t *testing.T) {
	a := rs("a", 1, time.Now(), nil)
	b := rs("b", 1, time.Now(), nil)
	a.Status.TerminatingReplicas = ptr.To[int32](2)
	if got := GetTerminatingReplicaCountForReplicaSets([]*apps.ReplicaSet{a, b, nil}); got == nil || *got != 2 {
		t.Errorf("unsynced RS must be skipped: %v", got)
	}
	b.Status.ObservedGeneration = 1
	if got := GetTerminatingReplicaCountForReplicaSets([]*apps.ReplicaSet{a, b}); got != nil {
		t.Errorf("synced RS without field must make the sum unknown: %v", *got)
	}
}

func TestSortBySize(t *testing.T) {
	now := time.Now()
	old := rs("old", 3, now.Add(-time.Hour), nil)
	mid := rs("mid", 3, now.Add(-time.Minute), nil)
	big := rs("big", 5, now, nil)
	l := []*apps.ReplicaSet{old, mid, big}
	sortBy(ReplicaSetsBySizeNewer(l))
	if l[0] != big || l[1] != mid || l[2] != old {
		t.Errorf("newer: %s %s %s", l[0].Name, l[1].Name, l[2].Name)
	}
	sortBy(ReplicaSetsBySizeOlder(l))
	if l[0] != big || l[1] != old || l[2] != mid {
		t.Errorf("older: %s %s %s", l[0].Name, l[1].Name, l[2].Name)
	}
}

func sortBy(s sort.Interface) { sort.Sort(s) }
