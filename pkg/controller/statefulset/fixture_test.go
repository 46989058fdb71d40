package statefulset

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/history"
)

const testNS = "default"

// newSet is what the API server would store for a simple set "name" with
// one claim template "datadir" (defaults applied).
func newSet(name string, replicas int32) *apps.StatefulSet {
	lbl := map[string]string{"app": "foo"}
	return &apps.StatefulSet{
		TypeMeta: metav1.TypeMeta{Kind: "StatefulSet", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNS, UID: types.UID("uid-" + name), Generation: 1,
			CreationTimestamp: metav1.NewTime(time.Unix(1000, 0)),
		},
		Spec: apps.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			Selector:            &metav1.LabelSelector{MatchLabels: lbl},
			ServiceName:         "governing",
			PodManagementPolicy: apps.OrderedReadyPodManagement,
			UpdateStrategy: apps.StatefulSetUpdateStrategy{
				Type:          apps.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &apps.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)},
			},
			RevisionHistoryLimit: ptr.To[int32](10),
			PersistentVolumeClaimRetentionPolicy: &apps.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: apps.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  apps.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: v1.PodSpec{
					Containers: []v1.Container{{
						Name: "nginx", Image: "nginx",
						VolumeMounts: []v1.VolumeMount{{Name: "datadir", MountPath: "/data"}, {Name: "home", MountPath: "/home"}},
					}},
					Volumes: []v1.Volume{{Name: "home", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp/home"}}}},
				},
			},
			VolumeClaimTemplates: []v1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "datadir", Labels: map[string]string{"tier": "db"}},
				Spec: v1.PersistentVolumeClaimSpec{
					AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
					Resources: v1.VolumeResourceRequirements{
						Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
					},
				},
			}},
		},
	}
}

// storeOp is one write the fake store saw, e.g. "create pod web-0".
type storeOp string

// fakeStore is an objectStore that writes straight into the informer
// indexers, so the next sync sees every write. It plays the API server's
// part: UIDs, phase Pending on create, AlreadyExists and NotFound.
type fakeStore struct {
	pods   cache.Indexer
	claims cache.Indexer

	mu  sync.Mutex
	ops []storeOp
	uid int
	// Errors injected per operation ("create pod", "delete pod", ...);
	// failOnce errors are returned once.
	fail     map[string]error
	failOnce map[string]error
	// gracefulDelete marks pods terminating instead of removing them.
	gracefulDelete bool
	// claimLag hides claims created during a sync until the next one, as
	// an informer that has not caught up yet would.
	claimLag bool
	unseen   map[string]bool
}

// catchUp makes every claim created so far visible.
func (s *fakeStore) catchUp() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unseen = nil
}

func (s *fakeStore) record(op string, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail[op]; err != nil {
		return err
	}
	if err := s.failOnce[op]; err != nil {
		delete(s.failOnce, op)
		return err
	}
	s.ops = append(s.ops, storeOp(op+" "+name))
	return nil
}

func (s *fakeStore) newUID() types.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uid++
	return types.UID(fmt.Sprintf("uid-%d", s.uid))
}

func (s *fakeStore) opsSnapshot() []storeOp {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]storeOp(nil), s.ops...)
}

func (s *fakeStore) CreatePod(_ context.Context, pod *v1.Pod, _ *apps.StatefulSet) error {
	if _, found, _ := s.pods.GetByKey(pod.Namespace + "/" + pod.Name); found {
		return apierrors.NewAlreadyExists(podsResource, pod.Name)
	}
	if err := s.record("create pod", pod.Name); err != nil {
		return err
	}
	p := pod.DeepCopy()
	p.UID = s.newUID()
	p.Status.Phase = v1.PodPending
	p.ResourceVersion = "1"
	return s.pods.Add(p)
}

func (s *fakeStore) GetPod(namespace, name string) (*v1.Pod, error) {
	obj, found, err := s.pods.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, apierrors.NewNotFound(podsResource, name)
	}
	return obj.(*v1.Pod), nil
}

func (s *fakeStore) UpdatePod(_ context.Context, pod *v1.Pod, _ *apps.StatefulSet) error {
	if err := s.record("update pod", pod.Name); err != nil {
		return err
	}
	return s.pods.Update(pod.DeepCopy())
}

func (s *fakeStore) DeletePod(_ context.Context, pod *v1.Pod) error {
	cur, err := s.GetPod(pod.Namespace, pod.Name)
	if err != nil {
		return err
	}
	if err := s.record("delete pod", pod.Name); err != nil {
		return err
	}
	if s.gracefulDelete {
		p := cur.DeepCopy()
		p.DeletionTimestamp = ptr.To(metav1.Now())
		return s.pods.Update(p)
	}
	return s.pods.Delete(cur)
}

func (s *fakeStore) CreateClaim(_ context.Context, claim *v1.PersistentVolumeClaim, _ *apps.StatefulSet) error {
	if _, found, _ := s.claims.GetByKey(claim.Namespace + "/" + claim.Name); found {
		return apierrors.NewAlreadyExists(claimsResource, claim.Name)
	}
	if err := s.record("create claim", claim.Name); err != nil {
		return err
	}
	c := claim.DeepCopy()
	c.UID = s.newUID()
	if s.claimLag {
		s.mu.Lock()
		if s.unseen == nil {
			s.unseen = map[string]bool{}
		}
		s.unseen[claim.Namespace+"/"+claim.Name] = true
		s.mu.Unlock()
	}
	return s.claims.Add(c)
}

func (s *fakeStore) GetClaim(namespace, name string) (*v1.PersistentVolumeClaim, error) {
	obj, found, err := s.claims.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.unseen[namespace+"/"+name] {
		found = false
	}
	s.mu.Unlock()
	if !found {
		return nil, apierrors.NewNotFound(claimsResource, name)
	}
	return obj.(*v1.PersistentVolumeClaim), nil
}

func (s *fakeStore) UpdateClaim(_ context.Context, claim *v1.PersistentVolumeClaim, _ *apps.StatefulSet) error {
	if err := s.record("update claim", claim.Name); err != nil {
		return err
	}
	return s.claims.Update(claim.DeepCopy())
}

// fakeStatusWriter stores statuses in the set informer's indexer.
type fakeStatusWriter struct {
	sets   cache.Indexer
	mu     sync.Mutex
	writes int
	err    error
}

func (w *fakeStatusWriter) UpdateStatus(_ context.Context, set *apps.StatefulSet, status *apps.StatefulSetStatus) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.writes++
	set.Status = *status
	return w.sets.Update(set)
}

func (w *fakeStatusWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes
}

type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	ssc      *Controller
	store    *fakeStore
	status   *fakeStatusWriter
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
	setIdx   cache.Indexer
	revIdx   cache.Indexer
	events   []string
}

// newFixture builds a controller whose reads come from informer indexers
// (never started) and whose pod, claim, status and revision writes go
// back into them. Pod adoption patches go to the fake clientset.
func newFixture(t *testing.T, sets ...*apps.StatefulSet) *fixture {
	t.Helper()
	var objs []runtime.Object
	for _, s := range sets {
		objs = append(objs, s.DeepCopy())
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	podInf := factory.Core().V1().Pods()
	setInf := factory.Apps().V1().StatefulSets()
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	revInf := factory.Apps().V1().ControllerRevisions()
	ctx := klog.NewContext(context.Background(), klog.Background())
	ssc := NewController(ctx, podInf, setInf, pvcInf, revInf, client, v137Features)

	f := &fixture{
		t: t, ctx: ctx, client: client, ssc: ssc,
		store:    &fakeStore{pods: podInf.Informer().GetIndexer(), claims: pvcInf.Informer().GetIndexer(), fail: map[string]error{}, failOnce: map[string]error{}},
		status:   &fakeStatusWriter{sets: setInf.Informer().GetIndexer()},
		recorder: record.NewFakeRecorder(10000),
		clock:    clocktesting.NewFakeClock(time.Unix(100000, 0)),
		setIdx:   setInf.Informer().GetIndexer(),
		revIdx:   revInf.Informer().GetIndexer(),
	}
	ssc.clock = f.clock
	ssc.recorder = f.recorder
	ssc.control = newSetControl(&podControl{store: f.store, recorder: f.recorder}, f.status, history.NewFakeHistory(revInf), f.recorder, v137Features)
	for _, s := range sets {
		f.addSet(s)
	}
	return f
}

func (f *fixture) addSet(set *apps.StatefulSet) {
	f.t.Helper()
	if err := f.setIdx.Add(set.DeepCopy()); err != nil {
		f.t.Fatal(err)
	}
}

// setSpec replaces the stored set's spec (bumping its generation), as a
// user edit would.
func (f *fixture) setSpec(name string, edit func(*apps.StatefulSet)) {
	f.t.Helper()
	set := f.getSet(name).DeepCopy()
	edit(set)
	set.Generation++
	if err := f.setIdx.Update(set); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) getSet(name string) *apps.StatefulSet {
	f.t.Helper()
	obj, found, err := f.setIdx.GetByKey(testNS + "/" + name)
	if err != nil || !found {
		f.t.Fatalf("set %s: found=%v err=%v", name, found, err)
	}
	return obj.(*apps.StatefulSet)
}

// sync runs one sync of the set and collects the events it recorded.
func (f *fixture) sync(name string) error {
	f.store.catchUp()
	err := f.ssc.sync(f.ctx, testNS+"/"+name)
	f.drainEvents()
	return err
}

func (f *fixture) mustSync(name string) {
	f.t.Helper()
	if err := f.sync(name); err != nil {
		f.t.Fatalf("sync %s: %v", name, err)
	}
}

func (f *fixture) drainEvents() {
	for {
		select {
		case e := <-f.recorder.Events:
			f.events = append(f.events, e)
		default:
			return
		}
	}
}

// takeEvents returns and forgets the events recorded so far.
func (f *fixture) takeEvents() []string {
	f.drainEvents()
	out := f.events
	f.events = nil
	return out
}

// pods returns the live (indexer) pods named like members of set, by ordinal.
func (f *fixture) pods(name string) []*v1.Pod {
	var out []*v1.Pod
	for _, obj := range f.store.pods.List() {
		pod := obj.(*v1.Pod)
		if parent, _ := parentAndOrdinal(pod.Name); parent == name {
			out = append(out, pod)
		}
	}
	sort.Slice(out, func(i, j int) bool { return getOrdinal(out[i]) < getOrdinal(out[j]) })
	return out
}

func (f *fixture) podNames(name string) string {
	var names []string
	for _, p := range f.pods(name) {
		names = append(names, p.Name)
	}
	return strings.Join(names, ",")
}

func (f *fixture) pod(name string) *v1.Pod {
	f.t.Helper()
	p, err := f.store.GetPod(testNS, name)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) claim(name string) *v1.PersistentVolumeClaim {
	f.t.Helper()
	// Straight from the indexer: the test sees claims the cache may not.
	obj, found, err := f.store.claims.GetByKey(testNS + "/" + name)
	if err != nil || !found {
		f.t.Fatalf("claim %s: found %v, %v", name, found, err)
	}
	return obj.(*v1.PersistentVolumeClaim)
}

func (f *fixture) revisions(name string) []*apps.ControllerRevision {
	var out []*apps.ControllerRevision
	for _, obj := range f.revIdx.List() {
		r := obj.(*apps.ControllerRevision)
		if strings.HasPrefix(r.Name, name+"-") {
			out = append(out, r)
		}
	}
	history.SortControllerRevisions(out)
	return out
}

// updatePodStatus plays the kubelet.
func (f *fixture) updatePodStatus(name string, edit func(*v1.Pod)) {
	f.t.Helper()
	p := f.pod(name).DeepCopy()
	edit(p)
	if err := f.store.pods.Update(p); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) markRunningReady(name string) {
	f.markRunningReadyAt(name, f.clock.Now())
}

func (f *fixture) markRunningReadyAt(name string, at time.Time) {
	f.updatePodStatus(name, func(p *v1.Pod) {
		p.Status.Phase = v1.PodRunning
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
	})
}

func (f *fixture) markPhase(name string, phase v1.PodPhase) {
	f.updatePodStatus(name, func(p *v1.Pod) {
		p.Status.Phase = phase
		p.Status.Conditions = nil
	})
}

// converge syncs, marking every pending pod running and ready after each
// sync, until nothing changes any more.
func (f *fixture) converge(name string) {
	f.t.Helper()
	for i := 0; i < 100; i++ {
		before := len(f.store.opsSnapshot())
		writes := f.status.count()
		f.mustSync(name)
		changed := false
		for _, p := range f.pods(name) {
			if p.Status.Phase == v1.PodPending && p.DeletionTimestamp == nil {
				f.markRunningReady(p.Name)
				changed = true
			}
		}
		if !changed && before == len(f.store.opsSnapshot()) && writes == f.status.count() {
			return
		}
	}
	f.t.Fatalf("set %s did not converge", name)
}

func (f *fixture) opsMatching(prefix string) []string {
	var out []string
	for _, op := range f.store.opsSnapshot() {
		if strings.HasPrefix(string(op), prefix) {
			out = append(out, string(op))
		}
	}
	return out
}

// v137Features are the v1.37 defaults of the gates the controller reads.
var v137Features = Features{MaxUnavailableStatefulSet: true, StatefulSetSemanticRevisionComparison: true, StaleControllerConsistency: true}
