package expand

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

func hasCondition(pvc *v1.PersistentVolumeClaim, typ v1.PersistentVolumeClaimConditionType) bool {
	for _, c := range pvc.Status.Conditions {
		if c.Type == typ && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

func TestFlexExpandsForKubelet(t *testing.T) {
	f := newFixture(t, newPVC("2Gi", "1Gi"), newPV("1Gi", flexSource))
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, f.events())
	pvc, pv := f.pvc(), f.pv()
	if got := pvc.Annotations[VolumeResizerKey]; got != "example.com/flex" {
		t.Errorf("resizer = %q, want the flex driver", got)
	}
	if got := pvc.Status.AllocatedResources[v1.ResourceStorage]; got.Cmp(q("2Gi")) != 0 {
		t.Errorf("allocated = %s, want 2Gi", got.String())
	}
	if got := pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage]; got != v1.PersistentVolumeClaimNodeResizePending {
		t.Errorf("resize status = %q, want NodeResizePending", got)
	}
	if !hasCondition(pvc, v1.PersistentVolumeClaimFileSystemResizePending) || !hasCondition(pvc, v1.PersistentVolumeClaimResizing) {
		t.Errorf("conditions = %+v, want Resizing and FileSystemResizePending", pvc.Status.Conditions)
	}
	if got := pvc.Status.Capacity[v1.ResourceStorage]; got.Cmp(q("1Gi")) != 0 {
		t.Errorf("capacity changed to %s before node expansion", got.String())
	}
	if got := pv.Spec.Capacity[v1.ResourceStorage]; got.Cmp(q("2Gi")) != 0 {
		t.Errorf("PV capacity = %s, want 2Gi", got.String())
	}
	if got := pv.Annotations[AnnPreResizeCapacity]; got != "1Gi" {
		t.Errorf("pre-resize annotation = %q, want 1Gi", got)
	}
}

func TestFlexBlockFinishes(t *testing.T) {
	pv := newPV("1Gi", flexSource)
	block := v1.PersistentVolumeBlock
	pv.Spec.VolumeMode = &block
	pvc := newPVC("2Gi", "1Gi")
	pvc.Status.Conditions = []v1.PersistentVolumeClaimCondition{{Type: "Other", Status: v1.ConditionTrue}}
	f := newFixture(t, pvc, pv)
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, f.events(), "Normal VolumeResizeSuccessful ExpandVolume succeeded for volume ns/claim")
	got := f.pvc()
	if c := got.Status.Capacity[v1.ResourceStorage]; c.Cmp(q("2Gi")) != 0 {
		t.Errorf("capacity = %s, want 2Gi", c.String())
	}
	if len(got.Status.AllocatedResourceStatuses) != 0 {
		t.Errorf("resize status not cleared: %v", got.Status.AllocatedResourceStatuses)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != "Other" {
		t.Errorf("conditions = %+v, want only the non-resize one", got.Status.Conditions)
	}
	if _, ok := f.pv().Annotations[AnnPreResizeCapacity]; ok {
		t.Error("block volume got a pre-resize annotation")
	}
}

func TestFlexResumesAtAllocatedSize(t *testing.T) {
	// The user raised the request again while a resize to 2Gi was in
	// flight: the controller first finishes the recorded 2Gi.
	pvc := newPVC("3Gi", "1Gi")
	pvc.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: q("2Gi")}
	pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimControllerResizeInProgress}
	f := newFixture(t, pvc, newPV("1Gi", flexSource))
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.pv().Spec.Capacity[v1.ResourceStorage]; got.Cmp(q("2Gi")) != 0 {
		t.Errorf("PV capacity = %s, want the allocated 2Gi", got.String())
	}
}

func TestFlexShrunkAfterExpansion(t *testing.T) {
	// PV already 3Gi, request lowered to 2Gi while the controller had
	// recorded 3Gi: it keeps 3Gi.
	pvc := newPVC("2Gi", "1Gi")
	pvc.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: q("3Gi")}
	pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimControllerResizeInfeasible}
	f := newFixture(t, pvc, newPV("3Gi", flexSource))
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.pv().Spec.Capacity[v1.ResourceStorage]; got.Cmp(q("3Gi")) != 0 {
		t.Errorf("PV capacity = %s, want 3Gi", got.String())
	}
	if got := f.pvc().Status.AllocatedResourceStatuses[v1.ResourceStorage]; got != v1.PersistentVolumeClaimNodeResizePending {
		t.Errorf("resize status = %q", got)
	}
}

func TestFlexNodeResizePendingIsLeftToKubelet(t *testing.T) {
	for _, st := range []v1.ClaimResourceStatus{v1.PersistentVolumeClaimNodeResizePending, v1.PersistentVolumeClaimNodeResizeInProgress} {
		t.Run(string(st), func(t *testing.T) {
			pvc := newPVC("2Gi", "1Gi")
			pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: st}
			f := newFixture(t, pvc, newPV("2Gi", flexSource))
			if err := f.sync(); err != nil {
				t.Fatal(err)
			}
			if w := f.writes(); len(w) != 0 {
				t.Errorf("writes = %v", w)
			}
		})
	}
}

func TestFlexNodeResizeInfeasibleRetried(t *testing.T) {
	pvc := newPVC("2Gi", "1Gi")
	pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimNodeResizeInfeasible}
	pvc.Status.Conditions = []v1.PersistentVolumeClaimCondition{{Type: v1.PersistentVolumeClaimNodeResizeError, Status: v1.ConditionTrue}}
	f := newFixture(t, pvc, newPV("2Gi", flexSource))
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	got := f.pvc()
	if st := got.Status.AllocatedResourceStatuses[v1.ResourceStorage]; st != v1.PersistentVolumeClaimNodeResizePending {
		t.Errorf("resize status = %q, want NodeResizePending", st)
	}
	if !hasCondition(got, v1.PersistentVolumeClaimFileSystemResizePending) || !hasCondition(got, v1.PersistentVolumeClaimNodeResizeError) {
		t.Errorf("conditions = %+v, want old resize conditions kept", got.Status.Conditions)
	}
	if f.pv().Annotations[AnnPreResizeCapacity] != "1Gi" {
		t.Error("pre-resize annotation missing")
	}
}

func TestFlexNodeExpansionCompleteDropsAnnotation(t *testing.T) {
	pv := newPV("2Gi", flexSource)
	pv.Annotations = map[string]string{AnnPreResizeCapacity: "1Gi", "keep": "me"}
	f := newFixture(t, newPVC("2Gi", "2Gi"), pv)
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	got := f.pv().Annotations
	if _, ok := got[AnnPreResizeCapacity]; ok || got["keep"] != "me" {
		t.Errorf("annotations = %v", got)
	}
	if w := f.writes(); len(w) != 1 || w[0].GetResource().Resource != "persistentvolumes" {
		t.Errorf("writes = %v, want only the PV patch", w)
	}
}

func TestFlexFailureEmitsVolumeResizeFailed(t *testing.T) {
	f := newFixture(t, newPVC("2Gi", "1Gi"), newPV("1Gi", flexSource))
	f.client.PrependReactor("patch", "persistentvolumes", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("boom")
	})
	err := f.sync()
	want := `error updating pv for pvc ns/claim: error Patching PV "vol" with error : boom`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	wantEvents(t, f.events(), "Warning VolumeResizeFailed "+want)
	// The PVC keeps ControllerResizeInProgress for the retry.
	if st := f.pvc().Status.AllocatedResourceStatuses[v1.ResourceStorage]; st != v1.PersistentVolumeClaimControllerResizeInProgress {
		t.Errorf("resize status = %q", st)
	}
}

func TestMergeResizeConditions(t *testing.T) {
	old := metav1.NewTime(time.Unix(100, 0))
	pvc := &v1.PersistentVolumeClaim{Status: v1.PersistentVolumeClaimStatus{Conditions: []v1.PersistentVolumeClaimCondition{
		{Type: "Other", Status: v1.ConditionTrue},
		{Type: v1.PersistentVolumeClaimResizing, Status: v1.ConditionTrue, LastTransitionTime: old},
		{Type: v1.PersistentVolumeClaimNodeResizeError, Status: v1.ConditionTrue},
	}}}
	mergeResizeConditions(pvc, []v1.PersistentVolumeClaimCondition{{Type: v1.PersistentVolumeClaimResizing, Status: v1.ConditionTrue}}, false)
	c := pvc.Status.Conditions
	if len(c) != 2 || c[0].Type != "Other" || c[1].Type != v1.PersistentVolumeClaimResizing || !c[1].LastTransitionTime.Equal(&old) {
		t.Errorf("conditions = %+v: want Other kept, same-status Resizing unchanged, other resize conditions dropped", c)
	}
}

// TestRun drives the controller through informers and the event sink.
func TestRun(t *testing.T) {
	client := fake.NewClientset(newPVC("1Gi", "1Gi"), newPV("1Gi", gceSource))
	factory := informers.NewSharedInformerFactory(client, 0)
	expc, err := NewController(context.Background(), client, factory.Core().V1().PersistentVolumeClaims())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		expc.Run(ctx)
		close(done)
	}()

	grown := newPVC("2Gi", "1Gi")
	if _, err := client.CoreV1().PersistentVolumeClaims(ns).Update(ctx, grown, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "PVC never annotated with an event", func(ctx context.Context) (bool, error) {
		pvc, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvcName, metav1.GetOptions{})
		if err != nil || pvc.Annotations[VolumeResizerKey] != "pd.csi.storage.gke.io" {
			return false, err
		}
		events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == ExternalExpanding && e.Source.Component == "volume_expand" {
				return true, nil
			}
		}
		return false, nil
	})
	cancel()
	<-done
}
