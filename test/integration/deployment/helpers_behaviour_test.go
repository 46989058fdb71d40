package deployment

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// violations collects invariant breaches reported from watch goroutines.
type violations struct {
	mu   sync.Mutex
	msgs []string
}

func (v *violations) add(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.msgs) < 20 {
		v.msgs = append(v.msgs, fmt.Sprintf(format, args...))
	}
}

func (v *violations) report(t *testing.T) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, m := range v.msgs {
		t.Error(m)
	}
}

// watchAll lists the resource, feeds every item as Added with initial set,
// then feeds every watch event in order until ctx ends, re-watching from the
// last seen resourceVersion if the server closes the stream. It returns once
// the initial list has been handled.
func watchAll(t *testing.T, ctx context.Context, lw *cache.ListWatch, handle func(et watch.EventType, o runtime.Object, initial bool)) {
	t.Helper()
	list, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range items {
		handle(watch.Added, o, true)
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		t.Fatal(err)
	}
	rv := lm.GetResourceVersion()
	go func() {
		for ctx.Err() == nil {
			w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					if ctx.Err() == nil {
						t.Errorf("watch error: %v", ev.Object)
					}
					break
				}
				if m, err := meta.Accessor(ev.Object); err == nil {
					rv = m.GetResourceVersion()
				}
				if ev.Type != watch.Bookmark {
					handle(ev.Type, ev.Object, false)
				}
			}
			w.Stop()
		}
	}()
}

func podListWatch(c clientset.Interface, ns string) *cache.ListWatch {
	return cache.NewListWatchFromClient(c.CoreV1().RESTClient(), "pods", ns, fields.Everything())
}

func rsListWatch(c clientset.Interface, ns string) *cache.ListWatch {
	return cache.NewListWatchFromClient(c.AppsV1().RESTClient(), "replicasets", ns, fields.Everything())
}

// stepKubelet marks at most perTick pending pods matching pred Running and
// Ready every interval, playing a slow kubelet.
func stepKubelet(ctx context.Context, c clientset.Interface, ns string, perTick int, interval time.Duration, pred func(*v1.Pod) bool) {
	k := framework.Kubelet{Client: c}
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			n := 0
			for i := range pods.Items {
				p := &pods.Items[i]
				if n >= perTick {
					break
				}
				if p.DeletionTimestamp != nil || p.Status.Phase != v1.PodPending || (pred != nil && !pred(p)) {
					continue
				}
				if _, err := k.MarkRunningReady(ctx, p); err == nil {
					n++
				}
			}
		}
	}()
}

// markRunningNotReady sets a pod Running with Ready=False.
func markRunningNotReady(ctx context.Context, c clientset.Interface, pod *v1.Pod) (*v1.Pod, error) {
	now := metav1.Now()
	p := pod.DeepCopy()
	p.Status.Phase = v1.PodRunning
	p.Status.StartTime = &now
	p.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.ContainersReady, Status: v1.ConditionFalse, LastTransitionTime: now},
		{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: now},
	}
	p.Status.ContainerStatuses = nil
	for _, ct := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{
			Name: ct.Name, Image: ct.Image, ImageID: "docker://" + ct.Image,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func podActive(p *v1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}

func patchDeployment(t *testing.T, c clientset.Interface, ns, name, patch string) *appsv1.Deployment {
	t.Helper()
	d, err := c.AppsV1().Deployments(ns).Patch(context.Background(), name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch %s: %v", patch, err)
	}
	return d
}

func setImage(t *testing.T, c clientset.Interface, ns, name, image string) *appsv1.Deployment {
	t.Helper()
	return patchDeployment(t, c, ns, name, fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":%q}]}}}}`, image))
}

// waitRolledOut waits until generation gen is observed and fully available.
func waitRolledOut(t *testing.T, c clientset.Interface, ns, name string, gen int64, replicas int32) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	framework.Eventually(t, 90*time.Second, fmt.Sprintf("%s generation %d rolled out", name, gen), func(ctx context.Context) (bool, error) {
		var err error
		d, err = c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := d.Status
		return s.ObservedGeneration >= gen && s.UpdatedReplicas == replicas && s.Replicas == replicas && s.AvailableReplicas == replicas, nil
	})
	return d
}

func deploymentCondition(d *appsv1.Deployment, ct appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == ct {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// rsByImage maps first-container image to ReplicaSet.
func rsByImage(t *testing.T, c clientset.Interface, ns string, d *appsv1.Deployment) map[string]appsv1.ReplicaSet {
	t.Helper()
	rss, err := replicaSetsOf(context.Background(), c, ns, d)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]appsv1.ReplicaSet{}
	for _, rs := range rss {
		out[rs.Spec.Template.Spec.Containers[0].Image] = rs
	}
	return out
}
