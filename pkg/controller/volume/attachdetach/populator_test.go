package attachdetach

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"
)

func TestPopulator(t *testing.T) {
	pvcA, pvA := boundCSI("ns", "a", "a")
	pvcB, pvB := boundCSI("ns", "b", "b")
	pvcC, pvC := boundCSI("ns", "c", "c")
	pvcD, pvD := boundCSI("ns", "d", "d")
	pvD.Spec.CSI.Driver = "switching"
	kept := claimPod("ns", "kept", "n", "a")
	deleted := claimPod("ns", "deleted", "n", "b")
	replaced := claimPod("ns", "replaced", "n", "c")
	missed := claimPod("ns", "missed", "n", "d")
	f := newFixture(t, false, pvcA, pvA, pvcB, pvB, pvcC, pvC, pvcD, pvD, kept, missed)
	f.adc.nodeAdd(f.logger, node("n", true))
	for _, p := range []*v1.Pod{kept, deleted, replaced} {
		f.adc.podAdd(f.logger, p)
	}
	newer := replaced.DeepCopy()
	newer.UID = types.UID("new-uid")
	newer.Spec.NodeName = "elsewhere"
	f.cache(newer)

	f.adc.populator.loop(f.ctx)
	dsw := f.adc.dsw
	if !dsw.VolumeExists(csiName("a"), "n") {
		t.Error("running pod's volume removed")
	}
	if dsw.VolumeExists(csiName("b"), "n") || dsw.VolumeExists(csiName("c"), "n") {
		t.Error("volumes of deleted or replaced pods kept")
	}
	// missed came in through the periodic full list.
	if !dsw.VolumeExists(volumeName("switching", "d"), "n") {
		t.Error("missed pod not added")
	}

	// Its driver stops requiring attachment: the volume leaves.
	f.cache(&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "switching"}, Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}})
	f.adc.populator.loop(f.ctx)
	if dsw.VolumeExists(volumeName("switching", "d"), "n") {
		t.Error("volume no longer attachable still wanted")
	}
	if !dsw.VolumeExists(csiName("a"), "n") {
		t.Error("attachable volume removed")
	}
}

func volumeName(driver, handle string) v1.UniqueVolumeName {
	return v1.UniqueVolumeName("kubernetes.io/csi/" + driver + "^" + handle)
}

func TestStateMetrics(t *testing.T) {
	pvcA, pvA := boundCSI("ns", "a", "a")
	pvcB, pvB := boundCSI("ns", "b", "b")
	n := node("n", true)
	n.Status.VolumesAttached = []v1.AttachedVolume{{Name: csiName("orphan")}}
	p := claimPod("ns", "p", "n", "a", "b")
	p.Spec.Volumes = append(p.Spec.Volumes,
		v1.Volume{Name: "eph", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "inline"}}},
		v1.Volume{Name: "tmp", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	)
	f := newFixture(t, false, n, pvcA, pvA, pvcB, pvB, p, claimPod("ns", "unscheduled", "", "a"))
	if err := f.adc.populateActualStateOfWorld(f.logger); err != nil {
		t.Fatal(err)
	}
	if err := f.adc.populateDesiredStateOfWorld(f.logger); err != nil {
		t.Fatal(err)
	}
	if err := f.adc.asw.MarkVolumeAsAttached(f.logger, "", f.adc.dsw.GetVolumesToAttach()[0].Spec, "n", ""); err != nil {
		t.Fatal(err)
	}
	collector := newStateCollector(f.adc.podLister, f.adc.specs, f.adc.plugins, f.adc.asw, f.adc.dsw)
	// The orphan from node status has no spec and is not counted.
	want := `
# HELP attachdetach_controller_total_volumes [ALPHA] Number of volumes in A/D Controller
# TYPE attachdetach_controller_total_volumes gauge
attachdetach_controller_total_volumes{plugin_name="kubernetes.io/csi:d",state="actual_state_of_world"} 1
attachdetach_controller_total_volumes{plugin_name="kubernetes.io/csi:d",state="desired_state_of_world"} 2
# HELP storage_count_attachable_volumes_in_use [ALPHA] Measure number of volumes in use
# TYPE storage_count_attachable_volumes_in_use gauge
storage_count_attachable_volumes_in_use{node="n",volume_plugin="kubernetes.io/csi:d"} 2
storage_count_attachable_volumes_in_use{node="n",volume_plugin="kubernetes.io/csi:inline"} 1
`
	if err := testutil.CustomCollectAndCompare(collector, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// nodeLocalVolumes are the volumes nearly every pod has: none needs a
// plugin, so none should cost a spec, a plugin lookup or an error.
func nodeLocalVolumes() []v1.Volume {
	return []v1.Volume{
		{Name: "token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}},
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}
}

func TestNodeLocalVolumesAreSkippedWithoutWork(t *testing.T) {
	const pods = 50
	n := node("n", true)
	objects := []runtime.Object{n}
	for i := range pods {
		p := claimPod("ns", fmt.Sprintf("p%d", i), "n")
		p.Spec.Volumes = nodeLocalVolumes()
		objects = append(objects, p)
	}
	// Positive control: an inline CSI volume beside them is still counted.
	inline := claimPod("ns", "inline", "n")
	inline.Spec.Volumes = append(nodeLocalVolumes(),
		v1.Volume{Name: "eph", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "inline"}}})
	objects = append(objects, inline)
	f := newFixture(t, false, objects...)
	collector := newStateCollector(f.adc.podLister, f.adc.specs, f.adc.plugins, f.adc.asw, f.adc.dsw)

	got := collector.volumesInUse()
	if got["n"]["kubernetes.io/csi:inline"] != 1 || len(got["n"]) != 1 {
		t.Errorf("volumes in use %v, want the inline CSI volume alone", got)
	}
	// The list and the counts cost a few allocations; each node-local
	// volume resolved would cost at least one more (its spec).
	if allocs := testing.AllocsPerRun(5, func() { collector.volumesInUse() }); allocs >= pods {
		t.Errorf("a metrics scrape over %d pods with node-local volumes made %.0f allocations, want fewer than one per pod", pods, allocs)
	}
	f.adc.nodeAdd(f.logger, n)
	if !f.adc.dsw.NodeExists("n") {
		t.Fatal("node n is not managed")
	}
	pod := objects[1].(*v1.Pod)
	if allocs := testing.AllocsPerRun(5, func() { f.adc.processPodVolumes(f.logger, pod, true) }); allocs != 0 {
		t.Errorf("a pod event with node-local volumes made %.0f allocations, want none", allocs)
	}
}
