package deployment

import (
	"context"
	"fmt"
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
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// eventuallyState polls cond and, on timeout, reports the last state seen.
func eventuallyState(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, state, err := cond(ctx)
		last = state
		return ok, err
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s: %v; last state: %s", timeout, what, err, last)
	}
}

func rollingDeployment(name string, replicas int32, surge, unavailable int) *appsv1.Deployment {
	d := kubectlDeployment(name, replicas)
	d.Spec.Strategy = appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxSurge:       ptr.To(intstr.FromInt32(int32(surge))),
			MaxUnavailable: ptr.To(intstr.FromInt32(int32(unavailable))),
		},
	}
	return d
}

// A rolling update (10 replicas, maxSurge 3, maxUnavailable 2) driven by a
// slow kubelet never has more than 13 pods nor fewer than 8 ready ones.
func TestDeploymentRollingUpdateBoundsEveryStep(t *testing.T) {
	c, ns, ctx := startTest(t, "deploy-steps", false)
	stepKubelet(ctx, c, ns, 2, 200*time.Millisecond, nil)

	d, err := c.AppsV1().Deployments(ns).Create(ctx, rollingDeployment("steps", 10, 3, 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, c, ns, "steps", d.Generation, 10)

	var bad violations
	var mu sync.Mutex
	maxPods, minReady, events := 0, 1<<30, 0
	// rss: the ReplicaSets as their watch shows them, read by the pod watch.
	var rsMu sync.Mutex
	rss := map[string]*appsv1.ReplicaSet{}
	ownerBehindSpec := func(pods map[string]*v1.Pod) bool {
		type owner struct {
			name string
			uid  types.UID
		}
		active := map[owner]int32{}
		for _, p := range pods {
			if ref := metav1.GetControllerOf(p); ref != nil && podActive(p) {
				active[owner{ref.Name, ref.UID}]++
			}
		}
		rsMu.Lock()
		defer rsMu.Unlock()
		for o, n := range active {
			if rs, ok := rss[o.name]; !ok || rs.UID != o.uid || n > *rs.Spec.Replicas {
				return true
			}
		}
		return false
	}
	pods := map[string]*v1.Pod{}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watchAll(t, wctx, podListWatch(c, ns), func(et watch.EventType, o runtime.Object, initial bool) {
		p := o.(*v1.Pod)
		if et == watch.Deleted {
			delete(pods, p.Name)
		} else {
			pods[p.Name] = p
		}
		if initial {
			return
		}
		active, ready := 0, 0
		for _, p := range pods {
			if podActive(p) {
				active++
				if podReady(p) {
					ready++
				}
			}
		}
		// The ReplicaSets' specs never sum over 13 (checked below), but an
		// old ReplicaSet's deletions and the new one's creations race, as
		// upstream's do: more pods count only while every ReplicaSet has
		// caught up with its spec.
		if active > 13 && !ownerBehindSpec(pods) {
			bad.add("%s %s: %d non-terminating pods, want <= 13", et, p.Name, active)
		}
		if ready < 8 {
			bad.add("%s %s: %d ready pods, want >= 8", et, p.Name, ready)
		}
		mu.Lock()
		maxPods, minReady, events = max(maxPods, active), min(minReady, ready), events+1
		mu.Unlock()
	})
	watchAll(t, wctx, rsListWatch(c, ns), func(et watch.EventType, o runtime.Object, _ bool) {
		rs := o.(*appsv1.ReplicaSet)
		rsMu.Lock()
		defer rsMu.Unlock()
		if et == watch.Deleted {
			delete(rss, rs.Name)
		} else {
			rss[rs.Name] = rs
		}
		var sum int32
		for _, rs := range rss {
			sum += *rs.Spec.Replicas
		}
		if sum > 13 {
			bad.add("%s ReplicaSet %s: sum of spec.replicas %d, want <= 13", et, rs.Name, sum)
		}
	})

	d = setImage(t, c, ns, "steps", "nginx:1.27")
	d = waitRolledOut(t, c, ns, "steps", d.Generation, 10)
	wcancel()
	bad.report(t)

	byImg := rsByImage(t, c, ns, d)
	if rs := byImg["nginx:1.27"]; *rs.Spec.Replicas != 10 {
		t.Errorf("new ReplicaSet replicas = %d, want 10", *rs.Spec.Replicas)
	}
	if rs := byImg["nginx"]; *rs.Spec.Replicas != 0 {
		t.Errorf("old ReplicaSet replicas = %d, want 0", *rs.Spec.Replicas)
	}
	mu.Lock()
	t.Logf("%d pod events; max pods %d, min ready %d", events, maxPods, minReady)
	mu.Unlock()
}

// Recreate deletes every old pod before the first new pod is created.
func TestDeploymentRecreateOldPodsGoneFirst(t *testing.T) {
	c, ns, ctx := startTest(t, "deploy-recreate", true)

	d := kubectlDeployment("recreate", 3)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	d, err := c.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d = waitRolledOut(t, c, ns, "recreate", d.Generation, 3)
	oldHash := rsByImage(t, c, ns, d)["nginx"].Labels["pod-template-hash"]
	if oldHash == "" {
		t.Fatal("no old pod-template-hash")
	}

	var bad violations
	var mu sync.Mutex
	newAdded := 0
	pods := map[string]*v1.Pod{}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watchAll(t, wctx, podListWatch(c, ns), func(et watch.EventType, o runtime.Object, _ bool) {
		p := o.(*v1.Pod)
		if et == watch.Deleted {
			delete(pods, p.Name)
			return
		}
		pods[p.Name] = p
		if et != watch.Added || p.Labels["pod-template-hash"] == oldHash {
			return
		}
		mu.Lock()
		newAdded++
		mu.Unlock()
		var old []string
		for _, q := range pods {
			if q.Labels["pod-template-hash"] == oldHash {
				old = append(old, q.Name)
			}
		}
		if len(old) > 0 {
			bad.add("new pod %s created while old pods %v exist", p.Name, old)
		}
	})

	d = setImage(t, c, ns, "recreate", "nginx:1.27")
	d = waitRolledOut(t, c, ns, "recreate", d.Generation, 3)
	wcancel()
	bad.report(t)
	mu.Lock()
	defer mu.Unlock()
	if newAdded < 3 {
		t.Errorf("saw %d new pods added, want >= 3", newAdded)
	}
	if rs := rsByImage(t, c, ns, d)["nginx"]; *rs.Spec.Replicas != 0 {
		t.Errorf("old ReplicaSet replicas = %d, want 0", *rs.Spec.Replicas)
	}
}

// Scaling a stalled rollout (old 8, new 5 of 10 with maxSurge 3) to 20
// spreads the 10 extra replicas proportionally: old 8*23/13=14, new 9.
func TestDeploymentProportionalScaling(t *testing.T) {
	c, ns, ctx := startTest(t, "deploy-prop", false)
	// Only pods of the original template ever become ready.
	stepKubelet(ctx, c, ns, 100, 100*time.Millisecond, func(p *v1.Pod) bool { return p.Spec.Containers[0].Image == "nginx" })

	d, err := c.AppsV1().Deployments(ns).Create(ctx, rollingDeployment("prop", 10, 3, 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, c, ns, "prop", d.Generation, 10)
	d = setImage(t, c, ns, "prop", "nginx:404")

	state := func(ctx context.Context) (*appsv1.Deployment, map[string]appsv1.ReplicaSet, string, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "prop", metav1.GetOptions{})
		if err != nil {
			return nil, nil, "", err
		}
		byImg := rsByImage(t, c, ns, d)
		s := fmt.Sprintf("deployment status %+v;", d.Status)
		for img, rs := range byImg {
			s += fmt.Sprintf(" rs %s replicas %d desired %s max %s;", img, *rs.Spec.Replicas,
				rs.Annotations["deployment.kubernetes.io/desired-replicas"], rs.Annotations["deployment.kubernetes.io/max-replicas"])
		}
		return d, byImg, s, nil
	}
	gen := d.Generation
	eventuallyState(t, 60*time.Second, "rollout to stall at old 8 / new 5", func(ctx context.Context) (bool, string, error) {
		d, byImg, s, err := state(ctx)
		if err != nil {
			return false, "", err
		}
		old, nw := byImg["nginx"], byImg["nginx:404"]
		return d.Status.ObservedGeneration >= gen && d.Status.Replicas == 13 && d.Status.UpdatedReplicas == 5 &&
			d.Status.AvailableReplicas == 8 && nw.Spec.Replicas != nil && *old.Spec.Replicas == 8 && *nw.Spec.Replicas == 5, s, nil
	})

	patchDeployment(t, c, ns, "prop", `{"spec":{"replicas":20}}`)
	eventuallyState(t, 60*time.Second, "proportional scale to old 14 / new 9", func(ctx context.Context) (bool, string, error) {
		_, byImg, s, err := state(ctx)
		if err != nil {
			return false, "", err
		}
		old, nw := byImg["nginx"], byImg["nginx:404"]
		if old.Spec.Replicas == nil || nw.Spec.Replicas == nil || *old.Spec.Replicas != 14 || *nw.Spec.Replicas != 9 {
			return false, s, nil
		}
		for _, rs := range []appsv1.ReplicaSet{old, nw} {
			if rs.Annotations["deployment.kubernetes.io/desired-replicas"] != "20" || rs.Annotations["deployment.kubernetes.io/max-replicas"] != "23" {
				return false, s, nil
			}
		}
		return true, s, nil
	})
}

// A paused Deployment ignores template changes until resumed.
func TestDeploymentPauseResume(t *testing.T) { pauseResume(t, false) }

// Upstream's checkPausedConditions writes Progressing=DeploymentResumed with
// its own UpdateStatus before rolling out, so watchers always see it.
func TestDeploymentResumedConditionWritten(t *testing.T) {
	pauseResume(t, true)
}

func pauseResume(t *testing.T, checkResumed bool) {
	c, ns, ctx := startTest(t, "deploy-pause", true)

	d, err := c.AppsV1().Deployments(ns).Create(ctx, kubectlDeployment("pause", 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, c, ns, "pause", d.Generation, 2)

	patchDeployment(t, c, ns, "pause", `{"spec":{"paused":true}}`)
	d = setImage(t, c, ns, "pause", "nginx:1.27")
	gen := d.Generation
	eventuallyState(t, 30*time.Second, "paused template change observed", func(ctx context.Context) (bool, string, error) {
		d, err = c.AppsV1().Deployments(ns).Get(ctx, "pause", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		cond := deploymentCondition(d, appsv1.DeploymentProgressing)
		return d.Status.ObservedGeneration >= gen && cond != nil && cond.Reason == "DeploymentPaused" && cond.Status == v1.ConditionUnknown,
			fmt.Sprintf("%+v", d.Status), nil
	})
	rss, err := replicaSetsOf(ctx, c, ns, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(rss) != 1 {
		t.Fatalf("%d ReplicaSets while paused, want 1", len(rss))
	}
	if d.Status.UpdatedReplicas != 0 || d.Annotations["deployment.kubernetes.io/revision"] != "1" {
		t.Errorf("paused: updatedReplicas %d revision %q, want 0 and 1", d.Status.UpdatedReplicas, d.Annotations["deployment.kubernetes.io/revision"])
	}

	// Record every Progressing reason written after resuming.
	var mu sync.Mutex
	var reasons []string
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	lw := cache.NewListWatchFromClient(c.AppsV1().RESTClient(), "deployments", ns, fields.OneTermEqualSelector("metadata.name", "pause"))
	watchAll(t, wctx, lw, func(_ watch.EventType, o runtime.Object, _ bool) {
		if cond := deploymentCondition(o.(*appsv1.Deployment), appsv1.DeploymentProgressing); cond != nil {
			mu.Lock()
			if len(reasons) == 0 || reasons[len(reasons)-1] != cond.Reason {
				reasons = append(reasons, cond.Reason)
			}
			mu.Unlock()
		}
	})
	d = patchDeployment(t, c, ns, "pause", `{"spec":{"paused":false}}`)
	d = waitRolledOut(t, c, ns, "pause", d.Generation, 2)
	eventuallyState(t, 30*time.Second, "Progressing NewReplicaSetAvailable after resume", func(context.Context) (bool, string, error) {
		mu.Lock()
		defer mu.Unlock()
		resumed := -1
		for i, r := range reasons {
			if r == "DeploymentResumed" && resumed < 0 {
				resumed = i
			}
		}
		if checkResumed && resumed < 0 {
			return false, fmt.Sprint(reasons), nil
		}
		return len(reasons) > 1 && reasons[0] == "DeploymentPaused" && reasons[len(reasons)-1] == "NewReplicaSetAvailable", fmt.Sprint(reasons), nil
	})
	byImg := rsByImage(t, c, ns, d)
	if rs, ok := byImg["nginx:1.27"]; !ok || rs.Annotations["deployment.kubernetes.io/revision"] != "2" || *rs.Spec.Replicas != 2 {
		t.Errorf("new ReplicaSet after resume: %v %+v", ok, rs.Annotations)
	}
}

// Pods that never become ready exceed a 2s progress deadline.
func TestDeploymentProgressDeadlineExceeded(t *testing.T) {
	c, ns, ctx := startTest(t, "deploy-deadline", false)

	d := kubectlDeployment("deadline", 2)
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](2)
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyState(t, 60*time.Second, "ProgressDeadlineExceeded", func(ctx context.Context) (bool, string, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "deadline", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		cond := deploymentCondition(d, appsv1.DeploymentProgressing)
		return cond != nil && cond.Status == v1.ConditionFalse && cond.Reason == "ProgressDeadlineExceeded", fmt.Sprintf("%+v", d.Status.Conditions), nil
	})
}

// revisionHistoryLimit 1 keeps the current ReplicaSet and one old one.
func TestDeploymentRevisionHistoryLimit(t *testing.T) {
	c, ns, ctx := startTest(t, "deploy-history", true)

	d := kubectlDeployment("hist", 2)
	d.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	d, err := c.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, c, ns, "hist", d.Generation, 2)
	for _, img := range []string{"nginx:1.25", "nginx:1.26", "nginx:1.27"} {
		d = setImage(t, c, ns, "hist", img)
		d = waitRolledOut(t, c, ns, "hist", d.Generation, 2)
	}
	eventuallyState(t, 30*time.Second, "2 ReplicaSets: revision 4 current, revision 3 empty", func(ctx context.Context) (bool, string, error) {
		rss, err := replicaSetsOf(ctx, c, ns, d)
		if err != nil {
			return false, "", err
		}
		var got []string
		for _, rs := range rss {
			got = append(got, fmt.Sprintf("%s rev %s replicas %d", rs.Spec.Template.Spec.Containers[0].Image, rs.Annotations["deployment.kubernetes.io/revision"], *rs.Spec.Replicas))
		}
		sort.Strings(got)
		want := []string{"nginx:1.26 rev 3 replicas 0", "nginx:1.27 rev 4 replicas 2"}
		return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprint(got), nil
	})
}

// Scaling down deletes the unscheduled/pending pod first, then the
// running-but-not-ready one, keeping the ready pod.
func TestReplicaSetScaleDownRanking(t *testing.T) {
	c, ns, ctx := startTest(t, "rs-rank", false)

	lbl := map[string]string{"app": "rank"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "rank"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	if _, err := c.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []v1.Pod
	framework.Eventually(t, 30*time.Second, "3 pods", func(ctx context.Context) (bool, error) {
		var err error
		pods, err = podsOf(ctx, c, ns, lbl)
		return len(pods) == 3, err
	})
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	pending, notReady, ready := pods[0].Name, pods[1].Name, pods[2].Name
	// Not-ready first: seeing the ready pod in RS status then implies the
	// controller's cache also holds the earlier update.
	if _, err := markRunningNotReady(ctx, c, &pods[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := (framework.Kubelet{Client: c}).MarkRunningReady(ctx, &pods[2]); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "RS status readyReplicas 1", func(ctx context.Context) (bool, error) {
		got, err := c.AppsV1().ReplicaSets(ns).Get(ctx, "rank", metav1.GetOptions{})
		return err == nil && got.Status.ReadyReplicas == 1, err
	})

	exists := func(ctx context.Context, name string) (bool, error) {
		_, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
	scaleTo := func(n int, gone string, kept ...string) {
		t.Helper()
		if _, err := c.AppsV1().ReplicaSets(ns).Patch(ctx, "rank", types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventuallyState(t, 30*time.Second, fmt.Sprintf("scale to %d", n), func(ctx context.Context) (bool, string, error) {
			cur, err := podsOf(ctx, c, ns, lbl)
			if err != nil {
				return false, "", err
			}
			var names []string
			for _, p := range cur {
				names = append(names, p.Name)
			}
			return len(cur) == n, fmt.Sprint(names), nil
		})
		if ok, err := exists(ctx, gone); err != nil || ok {
			t.Errorf("after scale to %d pod %s still exists (err %v), want it deleted first", n, gone, err)
		}
		for _, k := range kept {
			if ok, err := exists(ctx, k); err != nil || !ok {
				t.Errorf("after scale to %d pod %s was deleted (err %v)", n, k, err)
			}
		}
	}
	scaleTo(2, pending, notReady, ready)
	scaleTo(1, notReady, ready)
}

// A pods quota below spec.replicas gives ReplicaFailure/FailedCreate; raising
// it lets the last pod be created and clears the condition. The test plays
// the resourcequota controller by writing quota status itself: admission
// refuses pods while status.hard is unset, and then updates status.used.
func TestReplicaSetQuotaFailureCondition(t *testing.T) {
	c, ns, ctx := startTest(t, "rs-quota", false)

	rq := &v1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec:       v1.ResourceQuotaSpec{Hard: v1.ResourceList{v1.ResourcePods: resource.MustParse("2")}},
	}
	if _, err := c.CoreV1().ResourceQuotas(ns).Create(ctx, rq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ResourceQuotas(ns).Patch(ctx, "pods", types.MergePatchType,
		[]byte(`{"status":{"hard":{"pods":"2"},"used":{"pods":"0"}}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	lbl := map[string]string{"app": "quota"}
	tmpl := v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: lbl},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	// Wait until quota admission sees the status (dry-run does not charge it).
	framework.Eventually(t, 30*time.Second, "quota admission ready", func(ctx context.Context) (bool, error) {
		probe := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: tmpl.Spec}
		_, err := c.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	})

	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "quota"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: tmpl,
		},
	}
	if _, err := c.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	failure := func(rs *appsv1.ReplicaSet) *appsv1.ReplicaSetCondition {
		for i := range rs.Status.Conditions {
			if rs.Status.Conditions[i].Type == appsv1.ReplicaSetReplicaFailure {
				return &rs.Status.Conditions[i]
			}
		}
		return nil
	}
	eventuallyState(t, 30*time.Second, "2 pods and ReplicaFailure FailedCreate", func(ctx context.Context) (bool, string, error) {
		got, err := c.AppsV1().ReplicaSets(ns).Get(ctx, "quota", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		pods, err := podsOf(ctx, c, ns, lbl)
		if err != nil {
			return false, "", err
		}
		cond := failure(got)
		return len(pods) == 2 && cond != nil && cond.Status == v1.ConditionTrue && cond.Reason == "FailedCreate" &&
			strings.Contains(cond.Message, "exceeded quota"), fmt.Sprintf("%d pods, status %+v", len(pods), got.Status), nil
	})
	eventuallyState(t, 30*time.Second, "FailedCreate event", func(ctx context.Context) (bool, string, error) {
		evs, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=quota,involvedObject.kind=ReplicaSet"})
		if err != nil {
			return false, "", err
		}
		var seen []string
		for _, e := range evs.Items {
			seen = append(seen, e.Type+" "+e.Reason)
			if e.Type == v1.EventTypeWarning && e.Reason == "FailedCreate" && strings.Contains(e.Message, "exceeded quota") {
				return true, "", nil
			}
		}
		return false, fmt.Sprint(seen), nil
	})

	// Raise the quota (spec and, as the quota controller would, status.hard).
	if _, err := c.CoreV1().ResourceQuotas(ns).Patch(ctx, "pods", types.MergePatchType,
		[]byte(`{"spec":{"hard":{"pods":"3"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ResourceQuotas(ns).Patch(ctx, "pods", types.MergePatchType,
		[]byte(`{"status":{"hard":{"pods":"3"}}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	eventuallyState(t, 60*time.Second, "3 pods and no ReplicaFailure", func(ctx context.Context) (bool, string, error) {
		got, err := c.AppsV1().ReplicaSets(ns).Get(ctx, "quota", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		pods, err := podsOf(ctx, c, ns, lbl)
		if err != nil {
			return false, "", err
		}
		return len(pods) == 3 && got.Status.Replicas == 3 && failure(got) == nil, fmt.Sprintf("%d pods, status %+v", len(pods), got.Status), nil
	})
}
