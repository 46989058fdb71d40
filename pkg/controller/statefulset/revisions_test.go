package statefulset

import (
	"fmt"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/history"
)

// upstreamSet is the StatefulSet of upstream's compatibility test data
// (pkg/controller/statefulset/testdata, v1.34), as the API server stores it.
func upstreamSet() *apps.StatefulSet {
	return &apps.StatefulSet{
		TypeMeta: metav1.TypeMeta{Kind: "StatefulSet", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "test", Namespace: "default", UID: "ec335e25-1045-4216-8634-50cfbe05f3d6", Generation: 1,
			Labels: map[string]string{"sslabel": "value"},
		},
		Spec: apps.StatefulSetSpec{
			Replicas:             ptr.To[int32](1),
			RevisionHistoryLimit: ptr.To[int32](10),
			PodManagementPolicy:  apps.OrderedReadyPodManagement,
			Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{"app": "foo"}},
			UpdateStrategy: apps.StatefulSetUpdateStrategy{
				Type:          apps.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &apps.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)},
			},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Annotations: map[string]string{"test": "value"},
					Labels:      map[string]string{"app": "foo"},
				},
				Spec: v1.PodSpec{
					Containers: []v1.Container{{
						Name: "test", Image: "test", ImagePullPolicy: v1.PullAlways,
						TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile,
					}},
					DNSPolicy:                     v1.DNSClusterFirst,
					RestartPolicy:                 v1.RestartPolicyAlways,
					SchedulerName:                 "default-scheduler",
					SecurityContext:               &v1.PodSecurityContext{},
					TerminationGracePeriodSeconds: ptr.To[int64](30),
				},
			},
		},
	}
}

// Revision data upstream v1.34+ and v1.33 controllers stored for
// upstreamSet, and the names they gave them.
const (
	upstream134Data = `{"spec":{"template":{"$patch":"replace","metadata":{"annotations":{"test":"value"},"labels":{"app":"foo"}},"spec":{"containers":[{"image":"test","imagePullPolicy":"Always","name":"test","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"terminationGracePeriodSeconds":30}}}}`
	upstream134Name = "test-776999688b"
	upstream133Data = `{"spec":{"template":{"$patch":"replace","metadata":{"annotations":{"test":"value"},"creationTimestamp":null,"labels":{"app":"foo"}},"spec":{"containers":[{"image":"test","imagePullPolicy":"Always","name":"test","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"terminationGracePeriodSeconds":30}}}}`
	upstream133Name = "test-c77f6d978"
)

func TestRevisionMatchesUpstream(t *testing.T) {
	set := upstreamSet()
	patch, err := revisionPatch(set)
	if err != nil {
		t.Fatal(err)
	}
	if string(patch) != upstream134Data {
		t.Fatalf("revision data differs from upstream's:\n got %s\nwant %s", patch, upstream134Data)
	}
	rev, err := newRevision(set, 1, ptr.To[int32](0))
	if err != nil {
		t.Fatal(err)
	}
	if rev.Name != upstream134Name {
		t.Errorf("revision name %s, want upstream's %s", rev.Name, upstream134Name)
	}
	if rev.Labels["app"] != "foo" || rev.Labels[history.ControllerRevisionHashLabel] != "776999688b" {
		t.Errorf("labels %v", rev.Labels)
	}
	if ref := metav1.GetControllerOf(rev); ref == nil || ref.UID != set.UID || ref.Kind != "StatefulSet" {
		t.Errorf("controller ref %+v", ref)
	}
}

func TestNewRevisionCopiesSetAnnotations(t *testing.T) {
	set := upstreamSet()
	set.Annotations = map[string]string{"team": "db"}
	rev, err := newRevision(set, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rev.Annotations["team"] != "db" || rev.Revision != 3 {
		t.Errorf("annotations %v revision %d", rev.Annotations, rev.Revision)
	}
	rev.Annotations["x"] = "y"
	if set.Annotations["x"] != "" {
		t.Error("annotations shared with the set")
	}
}

func upstreamRevision(name, data string, revision int64) *apps.ControllerRevision {
	set := upstreamSet()
	return &apps.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", ResourceVersion: "100",
			Labels:          map[string]string{"app": "foo", history.ControllerRevisionHashLabel: name[len("test-"):]},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, controllerKind)},
		},
		Data:     runtime.RawExtension{Raw: []byte(data)},
		Revision: revision,
	}
}

// Revisions written by upstream are taken as they are: the same data, or
// (1.33) data that only encodes the same template differently, starts no
// rollout.
func TestUpstreamRevisionsAreReused(t *testing.T) {
	for name, revs := range map[string][]*apps.ControllerRevision{
		"1.34":      {upstreamRevision(upstream134Name, upstream134Data, 2)},
		"1.33":      {upstreamRevision(upstream133Name, upstream133Data, 1)},
		"1.33+1.34": {upstreamRevision(upstream133Name, upstream133Data, 1), upstreamRevision(upstream134Name, upstream134Data, 2)},
	} {
		t.Run(name, func(t *testing.T) {
			set := upstreamSet()
			latest := revs[len(revs)-1]
			set.Status.CurrentRevision = latest.Name
			set.Status.UpdateRevision = latest.Name
			f := newFixture(t, set)
			for _, r := range revs {
				if err := f.revIdx.Add(r); err != nil {
					t.Fatal(err)
				}
			}
			current, update, cc, err := f.ssc.control.revisionsFor(f.ctx, set, revs)
			if err != nil {
				t.Fatal(err)
			}
			if current != latest || update != latest || cc != 0 {
				t.Errorf("current %s update %s cc %d; want %s for both", current.Name, update.Name, cc, latest.Name)
			}
			if n := len(f.revIdx.List()); n != len(revs) {
				t.Errorf("%d revisions stored, want %d (none created)", n, len(revs))
			}
		})
	}
}

func TestApplyRevisionRestoresTemplate(t *testing.T) {
	set := newSet("web", 3)
	old, err := newRevision(set, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	changed := set.DeepCopy()
	changed.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	changed.Spec.Replicas = ptr.To[int32](7)
	restored, err := applyRevision(changed, old)
	if err != nil {
		t.Fatal(err)
	}
	if img := restored.Spec.Template.Spec.Containers[0].Image; img != "nginx" {
		t.Errorf("image %s, want the revision's nginx", img)
	}
	if *restored.Spec.Replicas != 7 {
		t.Error("only the template may be restored")
	}
	if changed.Spec.Template.Spec.Containers[0].Image != "nginx:2" {
		t.Error("input modified")
	}
}

func TestRevisionsForLifecycle(t *testing.T) {
	set := newSet("web", 1)
	f := newFixture(t, set)
	ctl := f.ssc.control
	sync := func(set *apps.StatefulSet) (*apps.ControllerRevision, *apps.ControllerRevision) {
		t.Helper()
		revs := f.revisions("web")
		cur, upd, _, err := ctl.revisionsFor(f.ctx, set, revs)
		if err != nil {
			t.Fatal(err)
		}
		return cur, upd
	}

	cur1, upd1 := sync(set)
	if cur1.Name != upd1.Name || upd1.Revision != 1 || len(f.revisions("web")) != 1 {
		t.Fatalf("first revision: %s/%s rev %d", cur1.Name, upd1.Name, upd1.Revision)
	}
	// Unchanged template: nothing new.
	if _, upd := sync(set); upd.Name != upd1.Name || len(f.revisions("web")) != 1 {
		t.Fatal("unchanged template created a revision")
	}

	v2 := set.DeepCopy()
	v2.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	v2.Status.CurrentRevision = upd1.Name
	cur2, upd2 := sync(v2)
	if cur2.Name != upd1.Name || upd2.Name == upd1.Name || upd2.Revision != 2 {
		t.Fatalf("update: current %s update %s rev %d", cur2.Name, upd2.Name, upd2.Revision)
	}

	// Back to v1: the old revision is renumbered, not duplicated.
	v1set := set.DeepCopy()
	v1set.Status.CurrentRevision = upd2.Name
	_, upd3 := sync(v1set)
	if upd3.Name != upd1.Name || upd3.Revision != 3 || len(f.revisions("web")) != 2 {
		t.Errorf("rollback: update %s rev %d, %d revisions", upd3.Name, upd3.Revision, len(f.revisions("web")))
	}
}

func TestRevisionNameCollision(t *testing.T) {
	set := newSet("web", 1)
	f := newFixture(t, set)
	want, err := newRevision(set, 1, ptr.To[int32](0))
	if err != nil {
		t.Fatal(err)
	}
	squatter := want.DeepCopy()
	squatter.Namespace = testNS
	squatter.OwnerReferences = nil
	squatter.Labels = map[string]string{"other": "app"} // not selected: not ours
	squatter.Data.Raw = []byte(`{"something":"else"}`)
	if err := f.revIdx.Add(squatter); err != nil {
		t.Fatal(err)
	}
	f.mustSync("web")
	got := f.getSet("web")
	if got.Status.CollisionCount == nil || *got.Status.CollisionCount != 1 {
		t.Fatalf("collisionCount %v, want 1", got.Status.CollisionCount)
	}
	if got.Status.UpdateRevision == want.Name || got.Status.UpdateRevision != ControllerRevisionNameFor(set, 1) {
		t.Errorf("update revision %s", got.Status.UpdateRevision)
	}
	// The pod is labelled with the renamed revision.
	if rev := getPodRevision(f.pod("web-0")); rev != got.Status.UpdateRevision {
		t.Errorf("pod revision %s", rev)
	}
}

// ControllerRevisionNameFor is the revision name of set's template at a
// collision count.
func ControllerRevisionNameFor(set *apps.StatefulSet, collisionCount int32) string {
	rev, err := newRevision(set, 1, &collisionCount)
	if err != nil {
		panic(err)
	}
	return rev.Name
}

func TestTruncateHistory(t *testing.T) {
	set := newSet("web", 2)
	set.Spec.RevisionHistoryLimit = ptr.To[int32](2)
	f := newFixture(t, set)
	var revs []*apps.ControllerRevision
	for i := 1; i <= 7; i++ {
		s := set.DeepCopy()
		s.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("nginx:%d", i)
		r, err := newRevision(s, int64(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Namespace = testNS
		r.CreationTimestamp = metav1.NewTime(time.Unix(int64(i), 0))
		if err := f.revIdx.Add(r); err != nil {
			t.Fatal(err)
		}
		revs = append(revs, r)
	}
	// Live: 7 (update), 6 (current), 1 (a pod), 2 (status.currentRevision).
	set.Status.CurrentRevision = revs[1].Name
	pod := newStatefulSetPod(set, 0)
	setPodRevision(pod, revs[0].Name)
	if err := f.ssc.control.truncateHistory(f.ctx, set, []*v1.Pod{pod}, revs, revs[5], revs[6]); err != nil {
		t.Fatal(err)
	}
	var left []int64
	for _, r := range f.revisions("web") {
		left = append(left, r.Revision)
	}
	// Of the non-live 3, 4, 5 only the newest two stay.
	if fmt.Sprint(left) != "[1 2 4 5 6 7]" {
		t.Errorf("revisions left %v", left)
	}

	// A negative limit keeps everything.
	set.Spec.RevisionHistoryLimit = ptr.To[int32](-1)
	if err := f.ssc.control.truncateHistory(f.ctx, set, nil, f.revisions("web"), nil, nil); err != nil {
		t.Fatal(err)
	}
	if len(f.revisions("web")) != 6 {
		t.Error("negative limit deleted revisions")
	}
}

// History cleanup runs as part of a sync, after a rollout.
func TestSyncLimitsHistory(t *testing.T) {
	set := newSet("web", 2)
	set.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	f := newFixture(t, set)
	f.converge("web")
	for i := 2; i <= 5; i++ {
		f.setSpec("web", func(s *apps.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("nginx:%d", i)
		})
		f.converge("web")
	}
	revs := f.revisions("web")
	// The current revision plus one historic one.
	if len(revs) != 2 || revs[1].Name != f.getSet("web").Status.CurrentRevision {
		var names []string
		for _, r := range revs {
			names = append(names, fmt.Sprintf("%s(%d)", r.Name, r.Revision))
		}
		t.Errorf("revisions %v", names)
	}
}
