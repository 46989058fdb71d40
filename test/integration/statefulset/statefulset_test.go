// Package statefulset tests the StatefulSet controller against a real
// apiserver: ordered scale-up gated on readiness, claims, rolling updates
// in reverse ordinal order, partitions, scale-down, PVC retention and
// revision names that survive a controller restart.
package statefulset

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/statefulset"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const waitTimeout = 60 * time.Second

// runController runs the StatefulSet controller in-process; the returned
// func stops it and waits until it has stopped (the test's end does too).
func runController(t *testing.T, c clientset.Interface) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	factory := informers.NewSharedInformerFactory(c, 0)
	ssc := statefulset.NewController(ctx, factory.Core().V1().Pods(), factory.Apps().V1().StatefulSets(),
		factory.Core().V1().PersistentVolumeClaims(), factory.Apps().V1().ControllerRevisions(), c,
		statefulset.Features{MaxUnavailableStatefulSet: true, StatefulSetSemanticRevisionComparison: true, StaleControllerConsistency: true})
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { ssc.Run(ctx, 5) })
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			factory.Shutdown()
		})
	}
	t.Cleanup(stop)
	return stop
}

// startTest gives a test a namespace with the controller running and, with
// kubelet, every new pod marked Running and Ready.
func startTest(t *testing.T, prefix string, kubelet bool) (clientset.Interface, string, context.Context) {
	t.Helper()
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, prefix)
	runController(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if kubelet {
		framework.Kubelet{Client: c}.Run(ctx, ns)
	}
	return c, ns, ctx
}

// newSTS is a typical StatefulSet: headless service "nginx", one claim
// template "www".
func newSTS(name string, replicas int32) *appsv1.StatefulSet {
	lbl := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: "nginx",
			Selector:    &metav1.LabelSelector{MatchLabels: lbl},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: v1.PodSpec{Containers: []v1.Container{{
					Name: "nginx", Image: "registry.k8s.io/nginx-slim:0.8",
					VolumeMounts: []v1.VolumeMount{{Name: "www", MountPath: "/usr/share/nginx/html"}},
				}}},
			},
			VolumeClaimTemplates: []v1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "www"},
				Spec: v1.PersistentVolumeClaimSpec{
					AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
					Resources:   v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

func create(t *testing.T, ctx context.Context, c clientset.Interface, ns string, sts *appsv1.StatefulSet) *appsv1.StatefulSet {
	t.Helper()
	got, err := c.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func getSTS(t *testing.T, ctx context.Context, c clientset.Interface, ns, name string) *appsv1.StatefulSet {
	t.Helper()
	got, err := c.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// updateSTS applies edit to the latest version of the set, retrying on conflicts.
func updateSTS(t *testing.T, ctx context.Context, c clientset.Interface, ns, name string, edit func(*appsv1.StatefulSet)) {
	t.Helper()
	for i := 0; ; i++ {
		sts := getSTS(t, ctx, c, ns, name)
		edit(sts)
		_, err := c.AppsV1().StatefulSets(ns).Update(ctx, sts, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || i > 10 {
			t.Fatal(err)
		}
	}
}

func listPods(t *testing.T, ctx context.Context, c clientset.Interface, ns string) []v1.Pod {
	t.Helper()
	l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

func podNames(pods []v1.Pod) string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return strings.Join(names, ",")
}

// waitStatus waits until the set's status, for the current generation,
// satisfies cond.
func waitStatus(t *testing.T, c clientset.Interface, ns, name, what string, cond func(*appsv1.StatefulSet) bool) *appsv1.StatefulSet {
	t.Helper()
	var sts *appsv1.StatefulSet
	framework.Eventually(t, waitTimeout, what, func(ctx context.Context) (bool, error) {
		var err error
		sts, err = c.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return sts.Status.ObservedGeneration == sts.Generation && cond(sts), nil
	})
	return sts
}

func markReady(t *testing.T, ctx context.Context, c clientset.Interface, ns, name string) {
	t.Helper()
	pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (framework.Kubelet{Client: c}).MarkRunningReady(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// watchPodDeletions records, in the order the apiserver reports them, the
// names of pods deleted in ns until the returned func is called.
func watchPodDeletions(t *testing.T, c clientset.Interface, ns string) (stop func() []string) {
	t.Helper()
	w, err := c.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var deleted []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type != watch.Deleted {
				continue
			}
			if pod, ok := ev.Object.(*v1.Pod); ok {
				mu.Lock()
				deleted = append(deleted, pod.Name)
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return deleted
	}
}

// Ordered scale-up: a pod is created only once its predecessor is Running
// and Ready; each pod gets its claim, identity labels, hostname,
// subdomain and controller reference.
func TestOrderedScaleUpWaitsForReadiness(t *testing.T) {
	c, ns, ctx := startTest(t, "sts-ordered", false)
	sts := create(t, ctx, c, ns, newSTS("web", 3))

	for i := 0; i < 3; i++ {
		// The controller has counted pod i (pending) in the status: it
		// synced with it not ready, so it must not have gone further.
		waitStatus(t, c, ns, "web", fmt.Sprintf("web-%d to be counted", i), func(s *appsv1.StatefulSet) bool {
			return s.Status.Replicas == int32(i+1) && s.Status.ReadyReplicas == int32(i)
		})
		want := make([]string, i+1)
		for j := range want {
			want[j] = fmt.Sprintf("web-%d", j)
		}
		if got := podNames(listPods(t, ctx, c, ns)); got != strings.Join(want, ",") {
			t.Fatalf("with web-%d pending, pods are %q", i, got)
		}
		markReady(t, ctx, c, ns, fmt.Sprintf("web-%d", i))
	}
	final := waitStatus(t, c, ns, "web", "3 ready replicas", func(s *appsv1.StatefulSet) bool {
		return s.Status.ReadyReplicas == 3 && s.Status.AvailableReplicas == 3 && s.Status.CurrentReplicas == 3
	})
	if final.Status.CurrentRevision == "" || final.Status.CurrentRevision != final.Status.UpdateRevision {
		t.Errorf("revisions %q/%q", final.Status.CurrentRevision, final.Status.UpdateRevision)
	}

	for _, p := range listPods(t, ctx, c, ns) {
		ord := strings.TrimPrefix(p.Name, "web-")
		if p.Labels[appsv1.StatefulSetPodNameLabel] != p.Name || p.Labels[appsv1.PodIndexLabel] != ord ||
			p.Labels[appsv1.ControllerRevisionHashLabelKey] != final.Status.UpdateRevision {
			t.Errorf("%s labels %v", p.Name, p.Labels)
		}
		if p.Spec.Hostname != p.Name || p.Spec.Subdomain != "nginx" {
			t.Errorf("%s hostname %q subdomain %q", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
		}
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != sts.UID || ref.Kind != "StatefulSet" {
			t.Errorf("%s controller %+v", p.Name, ref)
		}
		claimName := "www-" + p.Name
		if len(p.Spec.Volumes) == 0 || p.Spec.Volumes[0].PersistentVolumeClaim == nil || p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != claimName {
			t.Errorf("%s volumes %+v", p.Name, p.Spec.Volumes)
		}
		claim, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("claim %s: %v", claimName, err)
		}
		if claim.Labels["app"] != "web" || len(claim.OwnerReferences) != 0 {
			t.Errorf("claim %s labels %v owners %v", claimName, claim.Labels, claim.OwnerReferences)
		}
	}

	// The controller reports what it did with upstream's reasons and messages.
	framework.Eventually(t, waitTimeout, "creation events", func(ctx context.Context) (bool, error) {
		evs, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var msgs []string
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "web" && e.Source.Component == "statefulset-controller" {
				msgs = append(msgs, e.Type+" "+e.Reason+": "+e.Message)
			}
		}
		return slices.Contains(msgs, "Normal SuccessfulCreate: Create Pod web-2 in StatefulSet web successful") &&
			slices.Contains(msgs, "Normal SuccessfulCreate: Create Claim www-web-2 Pod web-2 in StatefulSet web success"), nil
	})
}

func TestParallelCreatesAllAtOnce(t *testing.T) {
	c, ns, ctx := startTest(t, "sts-parallel", false)
	sts := newSTS("web", 3)
	sts.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	create(t, ctx, c, ns, sts)
	waitStatus(t, c, ns, "web", "3 pending replicas", func(s *appsv1.StatefulSet) bool { return s.Status.Replicas == 3 })
	for _, p := range listPods(t, ctx, c, ns) {
		if p.Status.Phase != v1.PodPending {
			t.Errorf("%s is %s", p.Name, p.Status.Phase)
		}
	}
}

// A rolling update replaces pods from the highest ordinal down, and the
// set ends with every pod on the new revision.
func TestRollingUpdateInReverseOrdinalOrder(t *testing.T) {
	c, ns, ctx := startTest(t, "sts-rolling", true)
	create(t, ctx, c, ns, newSTS("web", 3))
	before := waitStatus(t, c, ns, "web", "3 ready", func(s *appsv1.StatefulSet) bool { return s.Status.ReadyReplicas == 3 })

	deletions := watchPodDeletions(t, c, ns)
	updateSTS(t, ctx, c, ns, "web", func(s *appsv1.StatefulSet) {
		s.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/nginx-slim:0.9"
	})
	after := waitStatus(t, c, ns, "web", "rollout", func(s *appsv1.StatefulSet) bool {
		return s.Status.UpdatedReplicas == 3 && s.Status.ReadyReplicas == 3 && s.Status.CurrentRevision == s.Status.UpdateRevision
	})
	if got := deletions(); !slices.Equal(got, []string{"web-2", "web-1", "web-0"}) {
		t.Errorf("pods replaced in order %v, want web-2, web-1, web-0", got)
	}
	if after.Status.UpdateRevision == before.Status.UpdateRevision {
		t.Error("no new revision")
	}
	for _, p := range listPods(t, ctx, c, ns) {
		if p.Spec.Containers[0].Image != "registry.k8s.io/nginx-slim:0.9" || p.Labels[appsv1.ControllerRevisionHashLabelKey] != after.Status.UpdateRevision {
			t.Errorf("%s not updated", p.Name)
		}
	}
	revs, err := c.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var revNames []string
	for _, r := range revs.Items {
		revNames = append(revNames, fmt.Sprintf("%s=%d", r.Name, r.Revision))
	}
	sort.Strings(revNames)
	want := []string{before.Status.UpdateRevision + "=1", after.Status.UpdateRevision + "=2"}
	sort.Strings(want)
	if !slices.Equal(revNames, want) {
		t.Errorf("revisions %v, want %v", revNames, want)
	}
}

// With a partition only the ordinals at or above it move to the new
// revision; lowering it to 0 completes the rollout.
func TestPartitionedRollingUpdate(t *testing.T) {
	c, ns, ctx := startTest(t, "sts-partition", true)
	create(t, ctx, c, ns, newSTS("web", 4))
	before := waitStatus(t, c, ns, "web", "4 ready", func(s *appsv1.StatefulSet) bool { return s.Status.ReadyReplicas == 4 })

	updateSTS(t, ctx, c, ns, "web", func(s *appsv1.StatefulSet) {
		s.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/nginx-slim:0.9"
		s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}
	})
	mid := waitStatus(t, c, ns, "web", "partitioned rollout", func(s *appsv1.StatefulSet) bool {
		return s.Status.UpdatedReplicas == 2 && s.Status.ReadyReplicas == 4
	})
	if mid.Status.CurrentRevision != before.Status.CurrentRevision || mid.Status.CurrentReplicas != 2 {
		t.Errorf("status mid-partition %+v", mid.Status)
	}
	for _, p := range listPods(t, ctx, c, ns) {
		updated := p.Labels[appsv1.ControllerRevisionHashLabelKey] == mid.Status.UpdateRevision
		if want := p.Name == "web-2" || p.Name == "web-3"; updated != want {
			t.Errorf("%s updated=%v", p.Name, updated)
		}
	}

	updateSTS(t, ctx, c, ns, "web", func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](0)
	})
	waitStatus(t, c, ns, "web", "full rollout", func(s *appsv1.StatefulSet) bool {
		return s.Status.UpdatedReplicas == 4 && s.Status.ReadyReplicas == 4 && s.Status.CurrentRevision == mid.Status.UpdateRevision
	})
}

// Scale-down removes the highest ordinals first and keeps their claims.
func TestScaleDown(t *testing.T) {
	c, ns, ctx := startTest(t, "sts-scaledown", true)
	create(t, ctx, c, ns, newSTS("web", 3))
	waitStatus(t, c, ns, "web", "3 ready", func(s *appsv1.StatefulSet) bool { return s.Status.ReadyReplicas == 3 })

	deletions := watchPodDeletions(t, c, ns)
	updateSTS(t, ctx, c, ns, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	waitStatus(t, c, ns, "web", "1 replica", func(s *appsv1.StatefulSet) bool {
		return s.Status.Replicas == 1 && s.Status.ReadyReplicas == 1
	})
	if got := deletions(); !slices.Equal(got, []string{"web-2", "web-1"}) {
		t.Errorf("deleted %v, want web-2 then web-1", got)
	}
	if got := podNames(listPods(t, ctx, c, ns)); got != "web-0" {
		t.Errorf("pods %q", got)
	}
	claims, err := c.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 3 {
		t.Errorf("%d claims left, want all 3 (Retain)", len(claims.Items))
	}
}

// A failed pod is deleted and created again under the same name.
func TestFailedPodIsRecreated(t *testing.T) {
	c, ns, ctx := startTest(t, "sts-failed", false)
	create(t, ctx, c, ns, newSTS("web", 1))
	waitStatus(t, c, ns, "web", "web-0", func(s *appsv1.StatefulSet) bool { return s.Status.Replicas == 1 })
	pod, err := c.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (framework.Kubelet{Client: c}).MarkFailed(ctx, pod, 1); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "web-0 to be recreated", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && p.UID != pod.UID && p.Status.Phase == v1.PodPending, err
	})
}

// whenDeleted=Delete and whenScaled=Delete are carried out through owner
// references on the claims: the set owns the claims of its wanted pods, a
// condemned pod owns its own.
func TestRetentionPolicyOwnerRefs(t *testing.T) {
	c, ns, ctx := startTest(t, "sts-retention", true)
	sts := newSTS("web", 3)
	sts.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
		WhenScaled:  appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
	}
	sts = create(t, ctx, c, ns, sts)
	waitStatus(t, c, ns, "web", "3 ready", func(s *appsv1.StatefulSet) bool { return s.Status.ReadyReplicas == 3 })
	for i := 0; i < 3; i++ {
		claim, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, fmt.Sprintf("www-web-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		assertOwners(t, claim, sts.UID)
	}

	// Scale-down hands the condemned pod's claim to the pod before deleting
	// it (the garbage collector, not running here, would then remove it).
	oldPod, err := c.CoreV1().Pods(ns).Get(ctx, "web-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	updateSTS(t, ctx, c, ns, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](2) })
	waitStatus(t, c, ns, "web", "2 replicas", func(s *appsv1.StatefulSet) bool { return s.Status.Replicas == 2 })
	condemned, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "www-web-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if refs := condemned.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Pod" || refs[0].UID != oldPod.UID || !ptr.Deref(refs[0].Controller, false) {
		t.Errorf("condemned claim owners %+v, want only pod web-2 (%s)", refs, oldPod.UID)
	}
	for _, name := range []string{"www-web-0", "www-web-1"} {
		claim, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		assertOwners(t, claim, sts.UID)
	}
}

func assertOwners(t *testing.T, claim *v1.PersistentVolumeClaim, setUID types.UID) {
	t.Helper()
	if len(claim.OwnerReferences) != 1 {
		t.Fatalf("%s owners %+v", claim.Name, claim.OwnerReferences)
	}
	ref := claim.OwnerReferences[0]
	if ref.UID != setUID || ref.Kind != "StatefulSet" || ref.APIVersion != "apps/v1" || !ptr.Deref(ref.Controller, false) || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("%s owner %+v", claim.Name, ref)
	}
}

// Revision names depend only on the template: a restarted controller (or
// upstream's, which computes the same names) finds its revisions and
// restarts no pod.
func TestRevisionNamesStableAcrossRestart(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "sts-restart")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	framework.Kubelet{Client: c}.Run(ctx, ns)

	stop := runController(t, c)
	create(t, ctx, c, ns, upstreamTestSet())
	first := waitStatus(t, c, ns, "test", "ready", func(s *appsv1.StatefulSet) bool { return s.Status.ReadyReplicas == 1 })
	// The name upstream's controller gave this template (its
	// compatibility test data, recorded against a v1.34 apiserver).
	if first.Status.CurrentRevision != "test-776999688b" {
		t.Errorf("revision %s, want upstream's test-776999688b", first.Status.CurrentRevision)
	}
	podBefore := listPods(t, ctx, c, ns)
	stop()

	runController(t, c)
	// A spec change the controller must observe, that does not touch the template.
	updateSTS(t, ctx, c, ns, "test", func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = 1 })
	second := waitStatus(t, c, ns, "test", "resync after restart", func(s *appsv1.StatefulSet) bool { return s.Status.AvailableReplicas == 1 })
	if second.Status.CurrentRevision != first.Status.CurrentRevision || second.Status.UpdateRevision != first.Status.UpdateRevision {
		t.Errorf("revisions changed across restart: %s/%s -> %s/%s", first.Status.CurrentRevision, first.Status.UpdateRevision,
			second.Status.CurrentRevision, second.Status.UpdateRevision)
	}
	revs, err := c.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(revs.Items) != 1 {
		t.Errorf("%d revisions after restart, want 1", len(revs.Items))
	}
	podAfter := listPods(t, ctx, c, ns)
	if len(podAfter) != 1 || podAfter[0].UID != podBefore[0].UID {
		t.Error("the pod was replaced")
	}
}

// upstreamTestSet is the set of upstream's StatefulSet compatibility test
// data, as a user would submit it.
func upstreamTestSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "test", Labels: map[string]string{"sslabel": "value"}},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "foo"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Annotations: map[string]string{"test": "value"},
					Labels:      map[string]string{"app": "foo"},
				},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "test", Image: "test"}}},
			},
		},
	}
}
