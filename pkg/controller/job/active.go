package job

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// activePods counts, per Job UID, the pods the pod informer shows under
// that Job's controller reference that are neither finished nor being
// deleted. It only decides when a sync runs: the pod that leaves a Job
// with none running syncs it at once instead of after SyncJobBatchPeriod,
// since no other pod of that Job can add to the batch. A count that is
// off hastens or delays one sync; it never changes what a sync does.
type activePods struct {
	mu    sync.Mutex
	byJob map[types.UID]int
}

func newActivePods() *activePods {
	return &activePods{byJob: map[types.UID]int{}}
}

// observe records a pod event (old nil for an add, cur nil for a delete)
// and returns how many pods stay active under cur's Job (0 without one).
func (a *activePods) observe(old, cur *v1.Pod) int {
	oldJob, curJob := runningUnder(old), runningUnder(cur)
	a.mu.Lock()
	defer a.mu.Unlock()
	if oldJob != "" {
		if n := a.byJob[oldJob] - 1; n > 0 {
			a.byJob[oldJob] = n
		} else {
			delete(a.byJob, oldJob)
		}
	}
	if curJob != "" {
		a.byJob[curJob]++
	}
	if cur == nil {
		return 0
	}
	if ref := metav1.GetControllerOf(cur); ref != nil {
		return a.byJob[ref.UID]
	}
	return 0
}

// runningUnder is the UID of the Job pod runs under while it is active,
// "" otherwise.
func runningUnder(pod *v1.Pod) types.UID {
	if pod == nil || !controller.IsPodActive(pod) {
		return ""
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != controllerKind.Kind {
		return ""
	}
	return ref.UID
}

// podFromEvent unwraps a delete event's tombstone; nil if it holds no pod.
func podFromEvent(obj interface{}) *v1.Pod {
	switch o := obj.(type) {
	case *v1.Pod:
		return o
	case cache.DeletedFinalStateUnknown:
		pod, _ := o.Obj.(*v1.Pod)
		return pod
	}
	return nil
}
