package deployment

import (
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

// Recreate: old ReplicaSets go to zero first, the new one is created only
// once no old pod runs.
func TestRecreateOrder(t *testing.T) {
	d := newDeployment(3)
	d.Spec.Strategy = apps.DeploymentStrategy{Type: apps.RecreateDeploymentStrategyType}
	d.Annotations = map[string]string{util.RevisionAnnotation: "1"}
	old := ownedRS(d, webTemplate("nginx:old"), 3, 1, t0.Add(-time.Hour))
	var pods []*v1.Pod
	for _, name := range []string{"a", "b", "c"} {
		pods = append(pods, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: old.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(old, apps.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Status: v1.PodStatus{Phase: v1.PodRunning},
		})
	}
	f := newFixture(t, d, old, pods[0], pods[1], pods[2])

	// Pass 1: scale old down, create nothing.
	acts := f.mustSync(d)
	if len(rsCreates(acts)) != 0 {
		t.Fatalf("created before old pods were gone: %s", describe(acts))
	}
	if up := rsUpdates(acts)[old.Name]; up == nil || *up.Spec.Replicas != 0 {
		t.Fatalf("old not scaled to zero: %s", describe(acts))
	}

	// Pass 2: the ReplicaSet reports 0 but pods still run: wait.
	d = f.settle(func(*apps.ReplicaSet) int32 { return 0 })
	acts = f.mustSync(d)
	if len(rsCreates(acts)) != 0 {
		t.Fatalf("created while old pods run: %s", describe(acts))
	}

	// Pass 3: one pod finished, others deleted: create at full size.
	pods[0].Status.Phase = v1.PodSucceeded
	f.addToCache(pods[0])
	for _, p := range pods[1:] {
		if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Delete(p); err != nil {
			t.Fatal(err)
		}
	}
	acts = f.mustSync(d)
	created := rsCreates(acts)
	if len(created) != 1 || *created[0].Spec.Replicas != 3 || created[0].Annotations[util.RevisionAnnotation] != "2" {
		t.Fatalf("pass 3: %s", describe(acts))
	}
	if created[0].Annotations[util.MaxReplicasAnnotation] != "3" {
		t.Errorf("recreate has no surge: %v", created[0].Annotations)
	}
	ev := f.events()
	want := []string{
		"Normal ScalingReplicaSet Scaled down replica set " + old.Name + " from 3 to 0",
		"Normal ScalingReplicaSet Scaled up replica set " + created[0].Name + " from 0 to 3",
	}
	if len(ev) != 2 || ev[0] != want[0] || ev[1] != want[1] {
		t.Errorf("events %q", ev)
	}
}

func TestOldPodsRunning(t *testing.T) {
	newRS := &apps.ReplicaSet{ObjectMeta: metav1.ObjectMeta{UID: "new"}}
	oldRS := &apps.ReplicaSet{ObjectMeta: metav1.ObjectMeta{UID: "old"}}
	pod := func(phase v1.PodPhase) *v1.Pod { return &v1.Pod{Status: v1.PodStatus{Phase: phase}} }
	tests := []struct {
		name   string
		oldRS  int32
		podMap map[string][]v1.PodPhase
		want   bool
	}{
		{"nothing", 0, nil, false},
		{"old rs reports replicas", 1, nil, true},
		{"new pods ignored", 0, map[string][]v1.PodPhase{"new": {v1.PodRunning}}, false},
		{"terminal old pods ignored", 0, map[string][]v1.PodPhase{"old": {v1.PodFailed, v1.PodSucceeded}}, false},
		{"unknown counts", 0, map[string][]v1.PodPhase{"old": {v1.PodUnknown}}, true},
		{"pending counts", 0, map[string][]v1.PodPhase{"old": {v1.PodPending}}, true},
	}
	for _, tc := range tests {
		oldRS.Status.Replicas = tc.oldRS
		podMap := map[types.UID][]*v1.Pod{}
		for uid, phases := range tc.podMap {
			for _, ph := range phases {
				podMap[types.UID(uid)] = append(podMap[types.UID(uid)], pod(ph))
			}
		}
		if got := oldPodsRunning(newRS, []*apps.ReplicaSet{oldRS}, podMap); got != tc.want {
			t.Errorf("%s: got %v", tc.name, got)
		}
	}
}
