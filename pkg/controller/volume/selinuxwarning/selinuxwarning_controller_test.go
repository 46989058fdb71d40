package selinuxwarning

import (
	"context"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

type fixture struct {
	t        *testing.T
	ctx      context.Context
	c        *Controller
	recorder *record.FakeRecorder
	factory  informers.SharedInformerFactory
}

func newFixture(t *testing.T) *fixture {
	_, ctx := ktesting.NewTestContext(t)
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	c, err := NewController(ctx, fake.NewClientset(),
		factory.Core().V1().Pods(), factory.Core().V1().PersistentVolumeClaims(),
		factory.Core().V1().PersistentVolumes(), factory.Storage().V1().CSIDrivers())
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(100)
	c.recorder = rec
	return &fixture{t: t, ctx: ctx, c: c, recorder: rec, factory: factory}
}

func (f *fixture) add(objs ...interface{}) {
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *v1.Pod:
			err = f.factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
		case *v1.PersistentVolumeClaim:
			err = f.factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Add(o)
		case *v1.PersistentVolume:
			err = f.factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Add(o)
		case *storagev1.CSIDriver:
			err = f.factory.Storage().V1().CSIDrivers().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) sync(ns, name string) error {
	return f.c.sync(f.ctx, objName(ns, name))
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			slices.Sort(out)
			return out
		}
	}
}

const driver = "csi.example.com"

func csiDriver(seLinuxMount *bool) *storagev1.CSIDriver {
	return &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driver}, Spec: storagev1.CSIDriverSpec{SELinuxMount: seLinuxMount}}
}

// boundClaim is a claim in ns bound to a CSI PV of handle "vol-1".
func boundClaim(ns, name, pvName string) (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name)},
		Spec:       v1.PersistentVolumeClaimSpec{VolumeName: pvName},
		Status:     v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound},
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-1"}},
			ClaimRef:               &v1.ObjectReference{Namespace: ns, Name: name, UID: pvc.UID},
		},
	}
	return pvc, pv
}

func claimVolume(claim string) v1.Volume {
	return v1.Volume{Name: "vol", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func iscsiVolume() v1.Volume {
	return v1.Volume{Name: "vol", VolumeSource: v1.VolumeSource{ISCSI: &v1.ISCSIVolumeSource{TargetPortal: "portal", IQN: "iqn", Lun: 1}}}
}

// pod mounts vol in one container with level (none when "") and policy
// (unset when "").
func pod(ns, name string, vol v1.Volume, level string, policy v1.PodSELinuxChangePolicy) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name)},
		Spec: v1.PodSpec{
			Volumes:         []v1.Volume{vol},
			Containers:      []v1.Container{{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: vol.Name, MountPath: "/mnt"}}}},
			SecurityContext: &v1.PodSecurityContext{},
		},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	if level != "" {
		p.Spec.SecurityContext.SELinuxOptions = &v1.SELinuxOptions{Level: level}
	}
	if policy != "" {
		p.Spec.SecurityContext.SELinuxChangePolicy = &policy
	}
	return p
}

const (
	level1 = "s0:c1,c2"
	level2 = "s0:c98,c99"
)

func TestSyncConflicts(t *testing.T) {
	labelEvents := []string{
		`Normal SELinuxLabelConflict SELinuxLabel ":::s0:c1,c2" conflicts with pod pod2 that uses the same volume as this pod with SELinuxLabel ":::s0:c98,c99". If both pods land on the same node, only one of them may access the volume.`,
		`Normal SELinuxLabelConflict SELinuxLabel ":::s0:c98,c99" conflicts with pod pod1 that uses the same volume as this pod with SELinuxLabel ":::s0:c1,c2". If both pods land on the same node, only one of them may access the volume.`,
	}
	for _, tc := range []struct {
		name           string
		seLinuxMount   *bool // nil: no CSIDriver object
		noDriver       bool
		level2         string
		policy1        v1.PodSELinuxChangePolicy
		policy2        v1.PodSELinuxChangePolicy
		want           []string
		wantConflicts  int
		wantCachedPods int
	}{
		{name: "different labels", seLinuxMount: ptr.To(true), level2: level2, want: labelEvents, wantConflicts: 2},
		{name: "same label", seLinuxMount: ptr.To(true), level2: level1},
		{name: "explicit MountOption policy, different labels", seLinuxMount: ptr.To(true), level2: level2,
			policy1: mountOption, policy2: mountOption, want: labelEvents, wantConflicts: 2},
		{name: "both Recursive: labels are not used for mounting", seLinuxMount: ptr.To(true), level2: level2, policy1: recursive, policy2: recursive},
		{name: "CSIDriver SELinuxMount false is ignored", seLinuxMount: ptr.To(false), level2: level2},
		{name: "CSIDriver SELinuxMount unset is ignored", seLinuxMount: nil, level2: level2},
		{name: "no CSIDriver is ignored", noDriver: true, level2: level2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if !tc.noDriver {
				f.add(csiDriver(tc.seLinuxMount))
			}
			pvc, pv := boundClaim("ns", "claim", "pv")
			f.add(pvc, pv, pod("ns", "pod1", claimVolume("claim"), level1, tc.policy1), pod("ns", "pod2", claimVolume("claim"), tc.level2, tc.policy2))
			for _, name := range []string{"pod1", "pod2"} {
				if err := f.sync("ns", name); err != nil {
					t.Fatal(err)
				}
			}
			if got := f.events(); !slices.Equal(got, tc.want) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if got := len(f.c.cache.getConflicts()); got != tc.wantConflicts {
				t.Errorf("conflicts %d, want %d", got, tc.wantConflicts)
			}
			// A resync reports nothing again.
			if err := f.sync("ns", "pod2"); err != nil {
				t.Fatal(err)
			}
			if got := f.events(); len(got) != 0 {
				t.Errorf("resync events %v", got)
			}
		})
	}
}

// A pod with Recursive policy conflicts in policy with one that mounts
// with -o context; labels without a level do not conflict.
func TestSyncPolicyConflict(t *testing.T) {
	f := newFixture(t)
	pvc, pv := boundClaim("ns", "claim", "pv")
	p1 := pod("ns", "pod1", claimVolume("claim"), "", recursive)
	p1.Spec.SecurityContext.SELinuxOptions = &v1.SELinuxOptions{Type: "container_t"}
	p2 := pod("ns", "pod2", claimVolume("claim"), "", mountOption)
	p2.Spec.SecurityContext.SELinuxOptions = &v1.SELinuxOptions{Type: "container_t"}
	f.add(csiDriver(ptr.To(true)), pvc, pv, p1, p2)
	for _, name := range []string{"pod1", "pod2"} {
		if err := f.sync("ns", name); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		`Normal SELinuxChangePolicyConflict SELinuxChangePolicy "MountOption" conflicts with pod pod1 that uses the same volume as this pod with SELinuxChangePolicy "Recursive". If both pods land on the same node, only one of them may access the volume.`,
		`Normal SELinuxChangePolicyConflict SELinuxChangePolicy "Recursive" conflicts with pod pod2 that uses the same volume as this pod with SELinuxChangePolicy "MountOption". If both pods land on the same node, only one of them may access the volume.`,
	}
	if got := f.events(); !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Pods in different namespaces share an in-line iSCSI volume: the message
// does not name the other pod.
func TestSyncConflictAcrossNamespaces(t *testing.T) {
	f := newFixture(t)
	f.add(pod("ns1", "pod1", iscsiVolume(), level1, ""), pod("ns2", "pod2", iscsiVolume(), level2, ""))
	if err := f.sync("ns1", "pod1"); err != nil {
		t.Fatal(err)
	}
	if err := f.sync("ns2", "pod2"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`Normal SELinuxLabelConflict SELinuxLabel":::s0:c1,c2" conflicts with another pod that uses the same volume as this pod with a different SELinuxLabel. If both pods land on the same node, only one of them may access the volume.`,
		`Normal SELinuxLabelConflict SELinuxLabel":::s0:c98,c99" conflicts with another pod that uses the same volume as this pod with a different SELinuxLabel. If both pods land on the same node, only one of them may access the volume.`,
	}
	if got := f.events(); !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Volumes private to a pod are not compared.
func TestSyncIgnoresPodPrivateVolumes(t *testing.T) {
	f := newFixture(t)
	vol := v1.Volume{Name: "vol", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
	f.add(pod("ns", "pod1", vol, level1, ""), pod("ns", "pod2", vol, level2, ""))
	for _, name := range []string{"pod1", "pod2"} {
		if err := f.sync("ns", name); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.c.cache.volumes) != 0 || len(f.events()) != 0 {
		t.Errorf("emptyDir cached: %v", f.c.cache.volumes)
	}
}

func TestSyncMultipleLabelsInOnePod(t *testing.T) {
	f := newFixture(t)
	p := pod("ns", "pod1", iscsiVolume(), level1, "")
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{
		Name:            "c2",
		VolumeMounts:    []v1.VolumeMount{{Name: "vol", MountPath: "/mnt"}},
		SecurityContext: &v1.SecurityContext{SELinuxOptions: &v1.SELinuxOptions{Level: level2}},
	})
	f.add(p)
	if err := f.sync("ns", "pod1"); err == nil {
		t.Error("want an error so that the pod is retried")
	}
	want := []string{`Warning MultipleSELinuxLabels Volume "vol" is mounted twice with different SELinux labels inside this pod`}
	if got := f.events(); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

func TestSyncUnboundClaimIsRetried(t *testing.T) {
	f := newFixture(t)
	pvc, _ := boundClaim("ns", "claim", "pv")
	pvc.Status.Phase = v1.ClaimPending
	f.add(pvc, pod("ns", "pod1", claimVolume("claim"), level1, ""))
	if err := f.sync("ns", "pod1"); err == nil {
		t.Error("want an error for the unbound claim")
	}
	if len(f.c.cache.volumes) != 0 {
		t.Errorf("cached %v", f.c.cache.volumes)
	}
}

// setupConflict leaves pod1 and pod2 conflicting on one CSI volume.
func setupConflict(t *testing.T) (*fixture, *v1.Pod) {
	f := newFixture(t)
	pvc, pv := boundClaim("ns", "claim", "pv")
	p2 := pod("ns", "pod2", claimVolume("claim"), level2, "")
	f.add(csiDriver(ptr.To(true)), pvc, pv, pod("ns", "pod1", claimVolume("claim"), level1, ""), p2)
	for _, name := range []string{"pod1", "pod2"} {
		if err := f.sync("ns", name); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.c.cache.getConflicts()) != 2 {
		t.Fatalf("no conflict to start with")
	}
	f.events()
	return f, p2
}

func TestDeletedPodClearsConflict(t *testing.T) {
	f, p2 := setupConflict(t)
	if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Delete(p2); err != nil {
		t.Fatal(err)
	}
	if err := f.sync("ns", "pod2"); err != nil {
		t.Fatal(err)
	}
	if got := f.c.cache.getConflicts(); len(got) != 0 {
		t.Errorf("conflicts remain: %v", got)
	}
}

func TestFinishedPodClearsConflict(t *testing.T) {
	for _, phase := range []v1.PodPhase{v1.PodSucceeded, v1.PodFailed} {
		f, p2 := setupConflict(t)
		done := p2.DeepCopy()
		done.Status.Phase = phase
		f.add(done)
		// The update handler queues the pod only on reaching a final phase.
		f.c.updatePod(p2, done)
		if f.c.queue.Len() != 1 {
			t.Fatalf("%s: pod not queued", phase)
		}
		if err := f.sync("ns", "pod2"); err != nil {
			t.Fatal(err)
		}
		if got := f.c.cache.getConflicts(); len(got) != 0 {
			t.Errorf("%s: conflicts remain: %v", phase, got)
		}
	}
}

func TestUpdatePodIgnoresOtherChanges(t *testing.T) {
	f := newFixture(t)
	old := pod("ns", "pod1", iscsiVolume(), level1, "")
	running := old.DeepCopy()
	running.Status.Phase = v1.PodRunning
	f.c.updatePod(old, running)
	if f.c.queue.Len() != 0 {
		t.Error("queued a pod that started running")
	}
	done := running.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	f.c.updatePod(running, done)
	if f.c.queue.Len() != 1 {
		t.Error("did not queue a finished pod")
	}
}

// Turning SELinuxMount off requeues the driver's pods, whose volumes are
// then relabeled recursively: the label conflict goes away.
func TestCSIDriverChangeRequeuesPods(t *testing.T) {
	f, _ := setupConflict(t)
	off := csiDriver(ptr.To(false))
	f.add(off)
	f.c.updateCSIDriver(csiDriver(ptr.To(true)), off)
	var keys []cache.ObjectName
	for f.c.queue.Len() > 0 {
		k, _ := f.c.queue.Get()
		f.c.queue.Done(k)
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b cache.ObjectName) int { return strings.Compare(a.Name, b.Name) })
	if want := []cache.ObjectName{objName("ns", "pod1"), objName("ns", "pod2")}; !slices.Equal(keys, want) {
		t.Fatalf("queued %v, want %v", keys, want)
	}
	for _, k := range keys {
		if err := f.c.sync(f.ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.c.cache.getConflicts(); len(got) != 0 {
		t.Errorf("conflicts remain: %v", got)
	}
	// An update not touching SELinuxMount queues nothing.
	f.c.updateCSIDriver(off, off.DeepCopy())
	if f.c.queue.Len() != 0 {
		t.Error("queued on an unrelated update")
	}
}

func TestClaimBindingRequeuesPods(t *testing.T) {
	f := newFixture(t)
	pvc, pv := boundClaim("ns", "claim", "pv")
	f.add(pod("ns", "pod1", claimVolume("claim"), level1, ""))
	unbound := pvc.DeepCopy()
	unbound.Spec.VolumeName = ""
	f.c.pvcChanged(klog.FromContext(f.ctx), nil, unbound)
	if f.c.queue.Len() != 0 {
		t.Fatal("queued for an unbound claim")
	}
	f.c.pvcChanged(klog.FromContext(f.ctx), unbound, pvc)
	if f.c.queue.Len() != 1 {
		t.Fatal("pod not queued when its claim got bound")
	}
	k, _ := f.c.queue.Get()
	f.c.queue.Done(k)
	f.c.queue.Forget(k)
	f.c.pvChanged(klog.FromContext(f.ctx), nil, pv)
	if f.c.queue.Len() != 1 {
		t.Fatal("pod not queued when the PV got bound")
	}
}

func TestConflictMetric(t *testing.T) {
	f, _ := setupConflict(t)
	want := `
# HELP selinux_warning_controller_selinux_volume_conflict [ALPHA] Conflict between two Pods using the same volume
# TYPE selinux_warning_controller_selinux_volume_conflict gauge
selinux_warning_controller_selinux_volume_conflict{pod1_name="pod1",pod1_namespace="ns",pod1_value=":::s0:c1,c2",pod2_name="pod2",pod2_namespace="ns",pod2_value=":::s0:c98,c99",property="SELinuxLabel"} 1
selinux_warning_controller_selinux_volume_conflict{pod1_name="pod2",pod1_namespace="ns",pod1_value=":::s0:c98,c99",pod2_name="pod1",pod2_namespace="ns",pod2_value=":::s0:c1,c2",property="SELinuxLabel"} 1
`
	if err := testutil.CustomCollectAndCompare(newCollector(f.c.cache), strings.NewReader(want), "selinux_warning_controller_selinux_volume_conflict"); err != nil {
		t.Fatal(err)
	}
	if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Delete(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod1"}}); err != nil {
		t.Fatal(err)
	}
	if err := f.sync("ns", "pod1"); err != nil {
		t.Fatal(err)
	}
	if err := testutil.CustomCollectAndCompare(newCollector(f.c.cache), strings.NewReader(""), "selinux_warning_controller_selinux_volume_conflict"); err != nil {
		t.Fatal(err)
	}
}
