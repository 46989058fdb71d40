package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// upstreamBinary is upstream's kube-controller-manager v1.37.2, built by
// hack/install-test-binaries.sh kube-controller-manager-upstream.
func upstreamBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(framework.BinDir(), "kube-controller-manager-upstream")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%v: run hack/install-test-binaries.sh kube-controller-manager-upstream (make test-e2e does)", err)
	}
	return p
}

// snapshot is what a swap must not change.
type snapshot struct {
	replicaSets map[string]types.UID
	revisions   map[string]types.UID
	pods        []string
	generation  int64
	setStatus   appsv1.StatefulSetStatus
}

func takeSnapshot(t *testing.T, c clientset.Interface, ns string) snapshot {
	t.Helper()
	ctx := context.Background()
	s := snapshot{replicaSets: map[string]types.UID{}, revisions: map[string]types.UID{}}
	rss, err := c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range rss.Items {
		s.replicaSets[rs.Name] = rs.UID
	}
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		s.pods = append(s.pods, string(p.UID))
	}
	sort.Strings(s.pods)
	d, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.generation = d.Generation
	revs, err := c.AppsV1().ControllerRevisions(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range revs.Items {
		s.revisions[r.Name] = r.UID
	}
	set, err := c.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.setStatus = set.Status
	return s
}

func sameSnapshot(t *testing.T, who string, before, after snapshot) {
	t.Helper()
	if len(before.replicaSets) != len(after.replicaSets) {
		t.Errorf("%s: ReplicaSets %v became %v", who, before.replicaSets, after.replicaSets)
	}
	for name, uid := range before.replicaSets {
		if after.replicaSets[name] != uid {
			t.Errorf("%s: ReplicaSet %s was replaced or removed", who, name)
		}
	}
	if len(before.revisions) != len(after.revisions) {
		t.Errorf("%s: ControllerRevisions %v became %v", who, before.revisions, after.revisions)
	}
	for name, uid := range before.revisions {
		if after.revisions[name] != uid {
			t.Errorf("%s: ControllerRevision %s was replaced or removed", who, name)
		}
	}
	if b, a := before.setStatus, after.setStatus; b.CurrentRevision != a.CurrentRevision || b.UpdateRevision != a.UpdateRevision {
		t.Errorf("%s: StatefulSet revisions %s/%s became %s/%s", who, b.CurrentRevision, b.UpdateRevision, a.CurrentRevision, a.UpdateRevision)
	}
	if len(before.pods) != len(after.pods) {
		t.Errorf("%s: %d pods became %d", who, len(before.pods), len(after.pods))
	}
	for i := range before.pods {
		if i < len(after.pods) && before.pods[i] != after.pods[i] {
			t.Errorf("%s: pods churned: %v became %v", who, before.pods, after.pods)
			break
		}
	}
}

func waitRolledOut(t *testing.T, c clientset.Interface, ns string, replicas int32) {
	t.Helper()
	waitSetRolledOut(t, c, ns)
	framework.Eventually(t, 90*time.Second, "rollout", func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := d.Status
		return s.ObservedGeneration == d.Generation && s.UpdatedReplicas == replicas && s.Replicas == replicas && s.AvailableReplicas == replicas, nil
	})
}

// waitSetRolledOut waits until the StatefulSet runs its update revision on
// every ready pod.
func waitSetRolledOut(t *testing.T, c clientset.Interface, ns string) {
	t.Helper()
	framework.Eventually(t, 90*time.Second, "statefulset rollout", func(ctx context.Context) (bool, error) {
		set, err := c.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := set.Status
		return s.ObservedGeneration == set.Generation && s.UpdatedReplicas == *set.Spec.Replicas &&
			s.ReadyReplicas == *set.Spec.Replicas && s.CurrentRevision == s.UpdateRevision, nil
	})
}

// The swap test: a Deployment and a StatefulSet rolled out by upstream's
// controller manager are taken over by ours with no new ReplicaSet or
// ControllerRevision and no pod churn, and the reverse. A second
// StatefulSet's revision was written before today's API defaults (as an
// older release stored it); neither manager rolls its pod. Both then keep managing it (a scale-up adds a pod to the current
// ReplicaSet only).
func TestSwapWithUpstream(t *testing.T) {
	upstream := upstreamBinary(t)
	cp := framework.Shared(t)
	c := cp.Client(t)
	ns := framework.CreateNamespace(t, c, "swap")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	framework.Kubelet{Client: c}.Run(ctx, ns)
	args := []string{"--leader-elect=false", "--controllers=deployment-controller,replicaset-controller,statefulset-controller"}

	run := func(binary string) *kcmProcess {
		saved := kcmBinary
		kcmBinary = binary
		defer func() { kcmBinary = saved }()
		return startKCM(t, args...)
	}

	legacyRevision := createLegacySet(ctx, t, c, ns)
	// Sentinels live apart so the snapshots of ns do not see them.
	sentinelNS := framework.CreateNamespace(t, c, "swap-sentinel")

	// Upstream creates and rolls out the Deployment (two ReplicaSets).
	up := run(upstream)
	lbl := map[string]string{"app": "web"}
	_, err := c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: lbl},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Image: "nginx"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// And a StatefulSet, whose ControllerRevisions must keep their names.
	dbl := map[string]string{"app": "db"}
	_, err = c.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: dbl},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: dbl},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "db", Image: "postgres"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, c, ns, 3)
	patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.27"}]}}}}`)
	if _, err := c.AppsV1().Deployments(ns).Patch(ctx, "web", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	setPatch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"db","image":"postgres:17"}]}}}}`)
	if _, err := c.AppsV1().StatefulSets(ns).Patch(ctx, "db", types.StrategicMergePatchType, setPatch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, c, ns, 3)
	waitLegacySet(t, c, ns, legacyRevision)
	// Let upstream finish trailing writes before it stops: it has acted on
	// objects made after these.
	waitSentinel(t, c, sentinelNS, "after-upstream-rollout")
	before := takeSnapshot(t, c, ns)
	if len(before.replicaSets) != 2 || len(before.revisions) != 3 {
		t.Fatalf("upstream left %d ReplicaSets and %d ControllerRevisions, want 2 and 3", len(before.replicaSets), len(before.revisions))
	}
	up.stop(syscall.SIGTERM, 20*time.Second)

	// Ours takes over: nothing changes.
	ours := run(kcmBinary)
	// Positive control: ours is running and syncing (it acted on objects
	// made after it started), so a change it were to make would show.
	waitSentinel(t, c, sentinelNS, "ours-started")
	sameSnapshot(t, "upstream -> ours", before, takeSnapshot(t, c, ns))
	waitRolledOut(t, c, ns, 3)

	// Ours scales within the existing ReplicaSet.
	if _, err := c.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, c, ns, 4)
	waitSentinel(t, c, sentinelNS, "after-ours-scale")
	scaled := takeSnapshot(t, c, ns)
	if len(scaled.replicaSets) != 2 || len(scaled.pods) != 7 {
		t.Fatalf("after scale-up by ours: %d ReplicaSets, %d pods; want 2, 7 (4 of the Deployment, 2+1 of the StatefulSets)", len(scaled.replicaSets), len(scaled.pods))
	}
	waitLegacySet(t, c, ns, legacyRevision)
	ours.stop(syscall.SIGTERM, 20*time.Second)

	// And back to upstream: nothing changes either.
	run(upstream)
	waitSentinel(t, c, sentinelNS, "upstream-restarted")
	sameSnapshot(t, "ours -> upstream", scaled, takeSnapshot(t, c, ns))
}

// createLegacySet makes StatefulSet "legacy" and, as an older release
// would have stored it, its revision: the template without the fields the
// API server defaults today (pull policy, termination message, DNS and
// restart policy, scheduler, security context, grace period). It returns
// the revision's name.
func createLegacySet(ctx context.Context, t *testing.T, c clientset.Interface, ns string) string {
	t.Helper()
	lbl := map[string]string{"app": "legacy"}
	set, err := c.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "db", Image: "postgres"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const hash = "6b8c9d7f5"
	data := `{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"legacy"}},"spec":{"containers":[{"image":"postgres","name":"db","resources":{}}]}}}}`
	rev, err := c.AppsV1().ControllerRevisions(ns).Create(ctx, &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            "legacy-" + hash,
			Labels:          map[string]string{"app": "legacy", appsv1.ControllerRevisionHashLabelKey: hash},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))},
		},
		Data:     runtime.RawExtension{Raw: []byte(data)},
		Revision: 1,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rev.Name
}

// waitLegacySet waits until "legacy" runs one ready pod of revision.
func waitLegacySet(t *testing.T, c clientset.Interface, ns, revision string) {
	t.Helper()
	framework.Eventually(t, 90*time.Second, "StatefulSet legacy on its old revision", func(ctx context.Context) (bool, error) {
		set, err := c.AppsV1().StatefulSets(ns).Get(ctx, "legacy", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := set.Status
		if s.UpdateRevision != "" && s.UpdateRevision != revision {
			return false, fmt.Errorf("a new revision %s was made for the legacy set", s.UpdateRevision)
		}
		return s.ObservedGeneration == set.Generation && s.ReadyReplicas == 1 && s.CurrentRevision == revision && s.UpdateRevision == revision, nil
	})
}

// waitSentinel creates a Deployment and a StatefulSet named name in ns and
// waits until the running controller manager has made the Deployment's
// ReplicaSet, that ReplicaSet's pod and the StatefulSet's pod. It proves
// the deployment, replicaset and statefulset controllers are running and
// have worked through objects made after everything before this call, so a
// following "nothing changed" check would see a change they had made.
func waitSentinel(t *testing.T, c clientset.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	lbl := map[string]string{"sentinel": name}
	tmpl := v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: lbl},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: lbl}, Template: tmpl},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setLbl := map[string]string{"sentinel-set": name}
	setTmpl := *tmpl.DeepCopy()
	setTmpl.Labels = setLbl
	if _, err := c.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: setLbl}, Template: setTmpl},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 90*time.Second, "sentinel "+name+" acted on", func(ctx context.Context) (bool, error) {
		rss, err := c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "sentinel=" + name})
		if err != nil {
			return false, err
		}
		if len(rss.Items) != 1 || rss.Items[0].Status.Replicas != 1 {
			return false, nil
		}
		if _, err := c.CoreV1().Pods(ns).Get(ctx, name+"-0", metav1.GetOptions{}); err != nil {
			return false, nil
		}
		return true, nil
	})
}
