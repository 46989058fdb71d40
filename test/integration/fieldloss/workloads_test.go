package fieldloss

import (
	"context"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/cronjob"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/daemon"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/job"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/statefulset"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// userObjectMeta is the metadata every object the tests create carries.
func userObjectMeta(name, ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"team": "a"},
		Annotations: map[string]string{lastApplied: big, "example.com/note": "keep me"}}
}

func podTemplate(lbl map[string]string, image string) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: lbl},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}},
	}
}

// fullPodSpec has, besides what controllers read, the fields the
// controller manager's caches trim from pods (commands, probes, plain
// environment, mounts, ConfigMap and emptyDir volumes).
func fullPodSpec(image string) v1.PodSpec {
	return v1.PodSpec{
		Containers: []v1.Container{{
			Name: "c", Image: image, Command: []string{"/serve"}, Args: []string{"--port=8080"}, WorkingDir: "/srv",
			Env:            []v1.EnvVar{{Name: "MODE", Value: "fieldloss"}},
			ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)}}},
			Lifecycle:      &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/stop"}}}},
			VolumeMounts:   []v1.VolumeMount{{Name: "config", MountPath: "/etc/serve"}, {Name: "tmp", MountPath: "/tmp"}},
		}},
		Volumes: []v1.Volume{
			{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "serve"}}}},
			{Name: "tmp", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		},
	}
}

// samePodSpec reports a pod whose spec changed.
func samePodSpec(t *testing.T, what string, before, after *v1.Pod) {
	t.Helper()
	if !reflect.DeepEqual(before.Spec, after.Spec) {
		t.Errorf("%s: spec changed:\nbefore %+v\nafter  %+v", what, before.Spec, after.Spec)
	}
}

// revision is the ControllerRevision named name.
func revision(t *testing.T, c clientset.Interface, ns, name string) *appsv1.ControllerRevision {
	t.Helper()
	r, err := c.AppsV1().ControllerRevisions(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A StatefulSet with a claim template is rolled out to a new template and
// back, then its retention policy changes: the controller writes the set's
// status, updates the first ControllerRevision (its revision number) when
// the template comes back to it, and updates the claims' ownerReferences.
func TestStatefulSetKeepsEveryField(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "fieldloss-sts")
	ctx := testContext(t)
	runStatefulSetController(ctx, t, c, ns)

	lbl := map[string]string{"app": "db"}
	retain := appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	ss := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: userObjectMeta("db", ns),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](2),
			Selector:            &metav1.LabelSelector{MatchLabels: lbl},
			ServiceName:         "db",
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template:            podTemplate(lbl, "img"),
			VolumeClaimTemplates: []v1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: v1.PersistentVolumeClaimSpec{
					AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
					Resources:   v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: retain, WhenScaled: retain},
		},
	}
	path := "apis/apps/v1/namespaces/" + ns + "/statefulsets/db"
	applyAt(t, c, path, ss, nil)
	first := waitStatefulSet(t, c, ns)
	rev1 := first.Status.CurrentRevision

	claims := []string{"data-db-0", "data-db-1"}
	for _, name := range claims {
		annotateAt(t, c, "api/v1/namespaces/"+ns+"/persistentvolumeclaims/"+name, "v1", "PersistentVolumeClaim", ns, name)
	}
	annotateAt(t, c, "apis/apps/v1/namespaces/"+ns+"/controllerrevisions/"+rev1, "apps/v1", "ControllerRevision", ns, rev1)
	before, err := c.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claimsBefore := map[string]*v1.PersistentVolumeClaim{}
	for _, name := range claims {
		pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claimsBefore[name] = pvc
	}
	revBefore := revision(t, c, ns, rev1)

	// A new template, then the old one again: the first revision is
	// reused with a higher revision number.
	rolled := ss.DeepCopy()
	rolled.Spec.Template = podTemplate(lbl, "img:2")
	applyAt(t, c, path, rolled, nil)
	if s := waitStatefulSet(t, c, ns); s.Status.CurrentRevision == rev1 {
		t.Fatal("the new template made no new revision")
	}
	applyAt(t, c, path, ss, nil)
	if s := waitStatefulSet(t, c, ns); s.Status.CurrentRevision != rev1 {
		t.Fatalf("back to the first template: revision %s, want %s", s.Status.CurrentRevision, rev1)
	}
	revAfter := revision(t, c, ns, rev1)
	if revAfter.Revision <= revBefore.Revision {
		t.Fatalf("revision %s was not updated: number %d -> %d", rev1, revBefore.Revision, revAfter.Revision)
	}
	sameMeta(t, "ControllerRevision "+rev1, revBefore.ObjectMeta, revAfter.ObjectMeta)
	if !reflect.DeepEqual(revBefore.Data, revAfter.Data) {
		t.Errorf("ControllerRevision %s: data changed", rev1)
	}

	// Claims deleted with the set: the controller gives them an owner.
	deleted := ss.DeepCopy()
	deleted.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	applyAt(t, c, path, deleted, nil)
	framework.Eventually(t, time.Minute, "claims owned by the StatefulSet", func(ctx context.Context) (bool, error) {
		for _, name := range claims {
			pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || len(pvc.OwnerReferences) == 0 {
				return false, err
			}
		}
		return true, nil
	})
	for _, name := range claims {
		pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b := claimsBefore[name]
		sameMeta(t, "PersistentVolumeClaim "+name, b.ObjectMeta, pvc.ObjectMeta, owned{ownerReferences: true})
		if !reflect.DeepEqual(b.Spec, pvc.Spec) {
			t.Errorf("PersistentVolumeClaim %s: spec changed", name)
		}
	}
	after, err := c.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameMeta(t, "StatefulSet", before.ObjectMeta, after.ObjectMeta)
	want := before.Spec.DeepCopy()
	want.PersistentVolumeClaimRetentionPolicy = after.Spec.PersistentVolumeClaimRetentionPolicy
	if !reflect.DeepEqual(*want, after.Spec) {
		t.Errorf("StatefulSet: spec changed beyond the applied retention policy")
	}
}

// A StatefulSet pod whose identity label a user removed: the controller
// puts it back with an update of the pod. The cache's copy lacks the spec
// fields trimmed from cached pods; the pod must keep them, and its
// metadata.
func TestStatefulSetPodIdentityFixKeepsEveryField(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "fieldloss-sts-pod")
	ctx := testContext(t)
	runStatefulSetController(ctx, t, c, ns)
	lbl := map[string]string{"app": "web"}
	ss := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: userObjectMeta("web", ns),
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: lbl}, ServiceName: "web",
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: fullPodSpec("img")}},
	}
	applyAt(t, c, "apis/apps/v1/namespaces/"+ns+"/statefulsets/web", ss, nil)
	framework.Eventually(t, time.Minute, "pod web-0", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
		return err == nil, nil
	})
	annotateAt(t, c, "api/v1/namespaces/"+ns+"/pods/web-0", "v1", "Pod", ns, "web-0")
	before, err := c.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	remove := []byte(`[{"op":"remove","path":"/metadata/labels/statefulset.kubernetes.io~1pod-name"}]`)
	if _, err := c.CoreV1().Pods(ns).Patch(ctx, "web-0", types.JSONPatchType, remove, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var after *v1.Pod
	framework.Eventually(t, time.Minute, "the identity label back on web-0", func(ctx context.Context) (bool, error) {
		after, err = c.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
		return err == nil && after.Labels[appsv1.StatefulSetPodNameLabel] == "web-0", err
	})
	sameMeta(t, "Pod web-0", before.ObjectMeta, after.ObjectMeta)
	samePodSpec(t, "Pod web-0", before, after)
}

// runStatefulSetController runs the StatefulSet controller over trimmed
// caches, and a kubelet for ns, until ctx ends.
func runStatefulSetController(ctx context.Context, t *testing.T, c clientset.Interface, ns string) {
	t.Helper()
	f := newFactory(c)
	ssc := statefulset.NewController(ctx, f.Core().V1().Pods(), f.Apps().V1().StatefulSets(),
		f.Core().V1().PersistentVolumeClaims(), f.Apps().V1().ControllerRevisions(), c,
		statefulset.Features{MaxUnavailableStatefulSet: true, StatefulSetSemanticRevisionComparison: true, StaleControllerConsistency: true})
	f.Start(ctx.Done())
	go ssc.Run(ctx, 2)
	framework.Kubelet{Client: c}.Run(ctx, ns)
}

// waitStatefulSet waits for the set db to be rolled out with 2 ready pods.
func waitStatefulSet(t *testing.T, c clientset.Interface, ns string) *appsv1.StatefulSet {
	t.Helper()
	var out *appsv1.StatefulSet
	framework.Eventually(t, 2*time.Minute, "the StatefulSet rolled out", func(ctx context.Context) (bool, error) {
		s, err := c.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := s.Status
		out = s
		return st.ObservedGeneration == s.Generation && st.ReadyReplicas == 2 && st.UpdatedReplicas == 2 &&
			st.CurrentReplicas == 2 && st.CurrentRevision == st.UpdateRevision, nil
	})
	return out
}

// A DaemonSet on one node is rolled out to a new template and back: the
// controller writes its status, labels its pods and updates the first
// ControllerRevision when the template comes back to it.
func TestDaemonSetKeepsEveryField(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "fieldloss-ds")
	ctx := testContext(t)
	node := createNode(t, c, ns+"-ds", map[string]string{"fieldloss": ns})
	f := newFactory(c)
	dsc, err := daemon.NewController(ctx, f.Apps().V1().DaemonSets(), f.Apps().V1().ControllerRevisions(),
		f.Core().V1().Pods(), f.Core().V1().Nodes(), c, flowcontrol.NewBackOff(time.Second, 15*time.Minute),
		daemon.Features{StaleControllerConsistency: true})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	go dsc.Run(ctx, 2)
	framework.Kubelet{Client: c}.Run(ctx, ns)

	lbl := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: userObjectMeta("agent", ns),
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: podTemplate(lbl, "img"),
		},
	}
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"fieldloss": ns}
	path := "apis/apps/v1/namespaces/" + ns + "/daemonsets/agent"
	applyAt(t, c, path, ds, nil)
	waitDaemonSet(t, c, ns)
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Spec.Affinity == nil {
		t.Fatalf("want one pod placed on node %s: %v %v", node, pods, err)
	}
	revs, err := c.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(revs.Items) != 1 {
		t.Fatalf("want one ControllerRevision: %v", err)
	}
	rev1 := revs.Items[0].Name
	annotateAt(t, c, "apis/apps/v1/namespaces/"+ns+"/controllerrevisions/"+rev1, "apps/v1", "ControllerRevision", ns, rev1)
	revBefore := revision(t, c, ns, rev1)
	before, err := c.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	rolled := ds.DeepCopy()
	rolled.Spec.Template.Spec.Containers[0].Image = "img:2"
	applyAt(t, c, path, rolled, nil)
	waitDaemonSet(t, c, ns)
	applyAt(t, c, path, ds, nil)
	waitDaemonSet(t, c, ns)

	revAfter := revision(t, c, ns, rev1)
	if revAfter.Revision <= revBefore.Revision {
		t.Fatalf("revision %s was not updated: number %d -> %d", rev1, revBefore.Revision, revAfter.Revision)
	}
	sameMeta(t, "ControllerRevision "+rev1, revBefore.ObjectMeta, revAfter.ObjectMeta)
	after, err := c.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The apiserver bumps deprecated.daemonset.template.generation with the template.
	sameMeta(t, "DaemonSet", before.ObjectMeta, after.ObjectMeta, owned{annotations: []string{"deprecated.daemonset.template.generation"}})
	if !reflect.DeepEqual(before.Spec, after.Spec) {
		t.Errorf("DaemonSet: spec changed")
	}
}

// waitDaemonSet waits for agent to run its current template on its node.
func waitDaemonSet(t *testing.T, c clientset.Interface, ns string) {
	t.Helper()
	var last *appsv1.DaemonSet
	defer func() {
		if t.Failed() && last != nil {
			pods, _ := c.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
			t.Logf("DaemonSet generation %d, status %+v; %d pods", last.Generation, last.Status, len(pods.Items))
			for _, p := range pods.Items {
				t.Logf("pod %s: %s %v %v", p.Name, p.Status.Phase, p.Labels, p.DeletionTimestamp)
			}
		}
	}()
	framework.Eventually(t, time.Minute, "the DaemonSet rolled out", func(ctx context.Context) (bool, error) {
		ds, err := c.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = ds
		s := ds.Status
		return s.ObservedGeneration == ds.Generation && s.DesiredNumberScheduled == 1 && s.UpdatedNumberScheduled == 1 &&
			s.NumberReady == 1 && s.NumberAvailable == 1 && s.CurrentNumberScheduled == 1, nil
	})
}

// createNode creates a node with labels, without the not-ready taint the
// apiserver's admission gives new nodes (no kubelet will clear it), and
// deletes it when the test ends.
func createNode(t *testing.T, c clientset.Interface, name string, labels map[string]string) string {
	t.Helper()
	ctx := context.Background()
	_, err := c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	if _, err := c.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// A Job's pods succeed: the controller writes the Job's status and removes
// its tracking finalizer from the pods, which carry user metadata too.
func TestJobKeepsEveryField(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "fieldloss-job")
	ctx := testContext(t)
	f := newFactory(c)
	jc, err := job.NewController(ctx, f.Core().V1().Pods(), f.Batch().V1().Jobs(), c,
		job.Features{StaleControllerConsistency: true, MutableSchedulingDirectivesForSuspendedJobs: true})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	go jc.Run(ctx, 2)

	j := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: userObjectMeta("work", ns),
		Spec: batchv1.JobSpec{
			Completions: ptr.To[int32](2),
			Parallelism: ptr.To[int32](2),
			Template:    podTemplate(nil, "img"),
		},
	}
	j.Spec.Template.Spec.RestartPolicy = v1.RestartPolicyNever
	var before batchv1.Job
	applyAt(t, c, "apis/batch/v1/namespaces/"+ns+"/jobs/work", j, &before)

	var pods []v1.Pod
	framework.Eventually(t, time.Minute, "the Job's pods with their tracking finalizer", func(ctx context.Context) (bool, error) {
		l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods = l.Items
		for _, p := range pods {
			if len(p.Finalizers) == 0 {
				return false, nil
			}
		}
		return len(pods) == 2, nil
	})
	podsBefore := map[string]*v1.Pod{}
	for _, p := range pods {
		annotateAt(t, c, "api/v1/namespaces/"+ns+"/pods/"+p.Name, "v1", "Pod", ns, p.Name)
		cur, err := c.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		podsBefore[p.Name] = cur
		if _, err := (framework.Kubelet{Client: c}).MarkSucceeded(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, time.Minute, "the Job complete and its pods released", func(ctx context.Context) (bool, error) {
		cur, err := c.BatchV1().Jobs(ns).Get(ctx, "work", metav1.GetOptions{})
		if err != nil || !jobCondition(cur, batchv1.JobComplete) {
			return false, err
		}
		l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range l.Items {
			if len(p.Finalizers) != 0 {
				return false, nil
			}
		}
		return true, nil
	})
	after, err := c.BatchV1().Jobs(ns).Get(ctx, "work", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameMeta(t, "Job", before.ObjectMeta, after.ObjectMeta)
	if !reflect.DeepEqual(before.Spec, after.Spec) {
		t.Errorf("Job: spec changed")
	}
	for name, b := range podsBefore {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameMeta(t, "Pod "+name, b.ObjectMeta, p.ObjectMeta, owned{finalizers: true})
		if !reflect.DeepEqual(b.Spec, p.Spec) {
			t.Errorf("Pod %s: spec changed", name)
		}
	}
}

func jobCondition(j *batchv1.Job, ct batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == ct && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

// A CronJob whose schedule is due (its controller's clock runs two minutes
// ahead) starts a Job, and forgets it once it is deleted: both times the
// controller writes the CronJob's status.
func TestCronJobKeepsEveryField(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "fieldloss-cronjob")
	ctx := testContext(t)
	f := newFactory(c)
	cjc, err := cronjob.NewControllerWithClock(ctx, f.Batch().V1().Jobs(), f.Batch().V1().CronJobs(), c,
		testingclock.NewFakePassiveClock(time.Now().Add(2*time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	go cjc.Run(ctx, 2)

	cj := &batchv1.CronJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: userObjectMeta("tick", ns),
		Spec: batchv1.CronJobSpec{
			Schedule: "* * * * *",
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"from": "tick"}},
				Spec:       batchv1.JobSpec{Template: podTemplate(nil, "img")},
			},
		},
	}
	cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = v1.RestartPolicyNever
	var before batchv1.CronJob
	applyAt(t, c, "apis/batch/v1/namespaces/"+ns+"/cronjobs/tick", cj, &before)

	var active string
	framework.Eventually(t, time.Minute, "a Job started and recorded", func(ctx context.Context) (bool, error) {
		cur, err := c.BatchV1().CronJobs(ns).Get(ctx, "tick", metav1.GetOptions{})
		if err != nil || len(cur.Status.Active) != 1 || cur.Status.LastScheduleTime == nil {
			return false, err
		}
		active = cur.Status.Active[0].Name
		return true, nil
	})
	check := func(when string) {
		t.Helper()
		after, err := c.BatchV1().CronJobs(ns).Get(ctx, "tick", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameMeta(t, "CronJob "+when, before.ObjectMeta, after.ObjectMeta)
		if !reflect.DeepEqual(before.Spec, after.Spec) {
			t.Errorf("CronJob %s: spec changed", when)
		}
	}
	check("after starting a Job")
	if j, err := c.BatchV1().Jobs(ns).Get(ctx, active, metav1.GetOptions{}); err != nil || j.Labels["from"] != "tick" {
		t.Fatalf("Job %s from the template: %v", active, err)
	}

	// In the background: Jobs orphan their pods by default, which would
	// wait for a garbage collector this test does not run.
	bg := metav1.DeletePropagationBackground
	if err := c.BatchV1().Jobs(ns).Delete(ctx, active, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the deleted Job forgotten", func(ctx context.Context) (bool, error) {
		cur, err := c.BatchV1().CronJobs(ns).Get(ctx, "tick", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, r := range cur.Status.Active {
			if r.Name == active {
				return false, nil
			}
		}
		return true, nil
	})
	check("after forgetting the Job")
}
