package daemon

import (
	"fmt"
	"reflect"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// Informer event handlers. They only enqueue keys and adjust expectations;
// all decisions are taken in the sync.

func (dsc *Controller) addDaemonSet(logger klog.Logger, obj interface{}) {
	ds, ok := obj.(*apps.DaemonSet)
	if !ok {
		return
	}
	logger.V(4).Info("Adding daemon set", "daemonset", klog.KObj(ds))
	dsc.enqueue(ds)
}

// updateDaemonSet enqueues on every update, resyncs included.
func (dsc *Controller) updateDaemonSet(logger klog.Logger, old, cur interface{}) {
	oldDS, ok1 := old.(*apps.DaemonSet)
	curDS, ok2 := cur.(*apps.DaemonSet)
	if !ok1 || !ok2 {
		return
	}
	if oldDS.UID != curDS.UID {
		// Deleted and recreated between two events: forget the old one.
		if key, err := controller.KeyFunc(oldDS); err == nil {
			dsc.deleteDaemonSet(logger, cache.DeletedFinalStateUnknown{Key: key, Obj: oldDS})
		}
	}
	logger.V(4).Info("Updating daemon set", "daemonset", klog.KObj(oldDS))
	dsc.enqueue(curDS)
}

func (dsc *Controller) deleteDaemonSet(logger klog.Logger, obj interface{}) {
	obj = controller.Untombstone(obj)
	ds, ok := obj.(*apps.DaemonSet)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("couldn't get DaemonSet from %#v", obj))
		return
	}
	logger.V(4).Info("Deleting daemon set", "daemonset", klog.KObj(ds))
	key, err := controller.KeyFunc(ds)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	dsc.consistency.Clear(types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}, ds.UID)
	// A new DaemonSet with the same name must start without expectations.
	dsc.expectations.DeleteExpectations(logger, key)
	dsc.queue.Add(key)
}

// resolveControllerRef returns the DaemonSet a controller reference points
// to, or nil if it is another kind, missing, or a different incarnation.
func (dsc *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *apps.DaemonSet {
	if ref.Kind != controllerKind.Kind {
		return nil
	}
	ds, err := dsc.dsLister.DaemonSets(namespace).Get(ref.Name)
	if err != nil || ds.UID != ref.UID {
		return nil
	}
	return ds
}

// daemonSetsForPod returns the DaemonSets whose selector matches an orphan.
func (dsc *Controller) daemonSetsForPod(logger klog.Logger, pod *v1.Pod) []*apps.DaemonSet {
	// The lister errors when nothing matches; that just means none.
	sets, _ := dsc.dsLister.GetPodDaemonSets(pod)
	if len(sets) > 1 {
		// Controller references keep them from fighting, but it is a user error.
		logger.Info("More than one daemon set is selecting pods with labels", "pod", klog.KObj(pod), "labels", pod.Labels)
	}
	return sets
}

func (dsc *Controller) daemonSetsForHistory(logger klog.Logger, h *apps.ControllerRevision) []*apps.DaemonSet {
	sets, _ := dsc.dsLister.GetHistoryDaemonSets(h)
	if len(sets) > 1 {
		logger.V(4).Info("Found more than one DaemonSet selecting the ControllerRevision. This is potentially a user error",
			"controllerRevision", klog.KObj(h), "labels", h.Labels)
	}
	return sets
}

func (dsc *Controller) addHistory(logger klog.Logger, obj interface{}) {
	h, ok := obj.(*apps.ControllerRevision)
	if !ok {
		return
	}
	if h.DeletionTimestamp != nil {
		// Seen for the first time already being deleted (after a restart).
		dsc.deleteHistory(logger, h)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(h); ref != nil {
		// Our own revisions need no sync: we created them.
		if dsc.resolveControllerRef(h.Namespace, ref) != nil {
			logger.V(4).Info("Observed a ControllerRevision", "controllerRevision", klog.KObj(h))
		}
		return
	}
	for _, ds := range dsc.daemonSetsForHistory(logger, h) {
		logger.V(4).Info("Orphan ControllerRevision added", "controllerRevision", klog.KObj(h))
		dsc.enqueue(ds)
	}
}

func (dsc *Controller) updateHistory(logger klog.Logger, old, cur interface{}) {
	oldH, ok1 := old.(*apps.ControllerRevision)
	curH, ok2 := cur.(*apps.ControllerRevision)
	if !ok1 || !ok2 || oldH.ResourceVersion == curH.ResourceVersion {
		return
	}
	curRef := metav1.GetControllerOfNoCopy(curH)
	oldRef := metav1.GetControllerOfNoCopy(oldH)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if ds := dsc.resolveControllerRef(oldH.Namespace, oldRef); ds != nil {
			dsc.enqueue(ds)
		}
	}
	if curRef != nil {
		if ds := dsc.resolveControllerRef(curH.Namespace, curRef); ds != nil {
			logger.V(4).Info("Observed an update to a ControllerRevision", "controllerRevision", klog.KObj(curH))
			dsc.enqueue(ds)
		}
		return
	}
	if refChanged || !reflect.DeepEqual(curH.Labels, oldH.Labels) {
		for _, ds := range dsc.daemonSetsForHistory(logger, curH) {
			logger.V(4).Info("Orphan ControllerRevision updated", "controllerRevision", klog.KObj(curH))
			dsc.enqueue(ds)
		}
	}
}

func (dsc *Controller) deleteHistory(logger klog.Logger, obj interface{}) {
	obj = controller.Untombstone(obj)
	h, ok := obj.(*apps.ControllerRevision)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("couldn't get ControllerRevision from %#v", obj))
		return
	}
	ref := metav1.GetControllerOfNoCopy(h)
	if ref == nil {
		return
	}
	if ds := dsc.resolveControllerRef(h.Namespace, ref); ds != nil {
		logger.V(4).Info("ControllerRevision deleted", "controllerRevision", klog.KObj(h))
		dsc.enqueue(ds)
	}
}

// addPod observes a creation for the pod's DaemonSet, or offers an orphan
// to every DaemonSet whose selector matches it.
func (dsc *Controller) addPod(logger klog.Logger, obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already being deleted: no creation to observe.
		dsc.deletePod(logger, pod)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		ds := dsc.resolveControllerRef(pod.Namespace, ref)
		if ds == nil {
			return
		}
		key, err := controller.KeyFunc(ds)
		if err != nil {
			return
		}
		logger.V(4).Info("Pod added", "pod", klog.KObj(pod))
		dsc.expectations.CreationObserved(logger, key)
		dsc.queue.Add(key)
		return
	}
	// Orphans never satisfy a creation expectation.
	for _, ds := range dsc.daemonSetsForPod(logger, pod) {
		logger.V(4).Info("Orphan Pod added", "pod", klog.KObj(pod))
		dsc.enqueue(ds)
	}
}

// updatePod wakes the DaemonSets concerned by a pod change.
func (dsc *Controller) updatePod(logger klog.Logger, old, cur interface{}) {
	oldPod, ok1 := old.(*v1.Pod)
	curPod, ok2 := cur.(*v1.Pod)
	if !ok1 || !ok2 || oldPod.ResourceVersion == curPod.ResourceVersion {
		// Periodic resync: nothing changed.
		return
	}
	if curPod.DeletionTimestamp != nil {
		// Graceful deletion started: count it now so the replacement is not
		// held back until the kubelet finishes.
		dsc.deletePod(logger, curPod)
		return
	}
	curRef := metav1.GetControllerOfNoCopy(curPod)
	oldRef := metav1.GetControllerOfNoCopy(oldPod)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if ds := dsc.resolveControllerRef(oldPod.Namespace, oldRef); ds != nil {
			dsc.enqueue(ds)
		}
	}
	if curRef != nil {
		ds := dsc.resolveControllerRef(curPod.Namespace, curRef)
		if ds == nil {
			return
		}
		logger.V(4).Info("Pod updated", "pod", klog.KObj(curPod))
		dsc.enqueue(ds)
		// A pod that just became ready becomes available minReadySeconds
		// later without another event. The extra second absorbs the
		// millisecond skew of AddAfter.
		if ds.Spec.MinReadySeconds > 0 && !controller.IsPodReady(oldPod) && controller.IsPodReady(curPod) {
			dsc.enqueueAfter(ds, time.Duration(ds.Spec.MinReadySeconds)*time.Second+time.Second)
		}
		return
	}
	sets := dsc.daemonSetsForPod(logger, curPod)
	if len(sets) == 0 {
		return
	}
	logger.V(4).Info("Orphan Pod updated", "pod", klog.KObj(curPod))
	if refChanged || !reflect.DeepEqual(curPod.Labels, oldPod.Labels) {
		for _, ds := range sets {
			dsc.enqueue(ds)
		}
	}
}

// deletePod observes a deletion for the pod's DaemonSet.
func (dsc *Controller) deletePod(logger klog.Logger, obj interface{}) {
	obj = controller.Untombstone(obj)
	pod, ok := obj.(*v1.Pod)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("couldn't get pod from %#v", obj))
		return
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		// Nobody waits for an orphan's deletion.
		return
	}
	ds := dsc.resolveControllerRef(pod.Namespace, ref)
	if ds == nil {
		return
	}
	key, err := controller.KeyFunc(ds)
	if err != nil {
		return
	}
	logger.V(4).Info("Pod deleted", "pod", klog.KObj(pod))
	dsc.expectations.DeletionObserved(logger, key)
	dsc.queue.Add(key)
}

// Node events go to their own queue: a node change is checked against every
// DaemonSet there, and only the DaemonSets it affects are synced.

func (dsc *Controller) addNode(logger klog.Logger, obj interface{}) {
	node, ok := obj.(*v1.Node)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("couldn't get node from object %#v", obj))
		return
	}
	logger.V(4).Info("Queuing node addition", "node", klog.KObj(node))
	dsc.nodeUpdateQueue.Add(node.Name)
}

// shouldIgnoreNodeUpdate reports whether a node update cannot change where
// daemon pods run: the placement checks only read labels and taints (and
// the name, which does not change).
func shouldIgnoreNodeUpdate(oldNode, curNode *v1.Node) bool {
	return apiequality.Semantic.DeepEqual(oldNode.Labels, curNode.Labels) &&
		apiequality.Semantic.DeepEqual(oldNode.Spec.Taints, curNode.Spec.Taints)
}

func (dsc *Controller) updateNode(logger klog.Logger, old, cur interface{}) {
	oldNode, ok1 := old.(*v1.Node)
	curNode, ok2 := cur.(*v1.Node)
	if !ok1 || !ok2 || shouldIgnoreNodeUpdate(oldNode, curNode) {
		return
	}
	logger.V(4).Info("Queuing node update", "node", klog.KObj(curNode))
	dsc.nodeUpdateQueue.Add(curNode.Name)
}
