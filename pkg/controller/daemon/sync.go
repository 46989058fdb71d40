package daemon

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/daemon/util"
)

// syncDaemonSet reconciles one DaemonSet: revisions, pods per node,
// rolling update, history cleanup, then status.
func (dsc *Controller) syncDaemonSet(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	start := dsc.now()
	defer func() {
		logger.V(4).Info("Finished syncing daemon set", "daemonset", key, "time", dsc.now().Sub(start))
	}()

	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	nn := types.NamespacedName{Namespace: namespace, Name: name}
	// Acting on caches older than our own writes could, e.g., create a
	// node's pod twice.
	if err := dsc.consistency.EnsureReady(nn); err != nil {
		var ce *controller.ConsistencyError
		if errors.As(err, &ce) {
			staleSyncSkips.WithLabelValues(ce.GroupResource.Group, ce.GroupResource.Resource).Inc()
		}
		return err
	}

	ds, err := dsc.dsLister.DaemonSets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(3).Info("Daemon set has been deleted", "daemonset", key)
		dsc.expectations.DeleteExpectations(logger, key)
		dsc.consistency.Clear(nn, "")
		dsc.uncertainCreates.Forget(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("unable to retrieve ds %v from store: %w", key, err)
	}

	nodes, err := dsc.nodeLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("couldn't get list of nodes when syncing daemon set %#v: %w", ds, err)
	}

	if reflect.DeepEqual(ds.Spec.Selector, &metav1.LabelSelector{}) {
		dsc.eventRecorder.Eventf(ds, v1.EventTypeWarning, SelectingAllReason, "This daemon set is selecting all pods. A non-empty selector is required.")
		return nil
	}

	// While the set is being deleted its revisions may already be gone or
	// orphaned, so neither pods nor status can be computed reliably.
	if ds.DeletionTimestamp != nil {
		return nil
	}
	if dsc.uncertainCreates.Take(key) {
		if err := dsc.awaitUncertainPods(ctx, ds, key); err != nil {
			return err
		}
	}

	cur, old, err := dsc.constructHistory(ctx, ds)
	if err != nil {
		return fmt.Errorf("failed to construct revisions of DaemonSet: %w", err)
	}
	hash := cur.Labels[apps.DefaultDaemonSetUniqueLabelKey]

	if !dsc.expectations.SatisfiedExpectations(logger, key) {
		// Still waiting on our own creates/deletes: refresh the counts but
		// don't claim to have processed this generation.
		return dsc.updateDaemonSetStatus(ctx, ds, nodes, hash, false)
	}

	err = dsc.reconcile(ctx, ds, nodes, hash, key, old)
	statusErr := dsc.updateDaemonSetStatus(ctx, ds, nodes, hash, true)
	switch {
	case err != nil && statusErr != nil:
		logger.Error(statusErr, "Failed to update status", "daemonSet", klog.KObj(ds))
		return err
	case err != nil:
		return err
	default:
		return statusErr
	}
}

// awaitUncertainPods: a pod create of ds had no answer, so its pod may
// exist unseen by the cache; wait until the cache has caught up rather
// than create a node's pod twice.
func (dsc *Controller) awaitUncertainPods(ctx context.Context, ds *apps.DaemonSet, key string) error {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return err
	}
	return dsc.uncertainCreates.AwaitUncertainPods(ctx, dsc.kubeClient, dsc.consistency, key,
		types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}, ds.UID, selector)
}

// reconcile places pods, advances the update strategy, and trims history.
func (dsc *Controller) reconcile(ctx context.Context, ds *apps.DaemonSet, nodes []*v1.Node, hash, key string, old []*apps.ControllerRevision) error {
	if err := dsc.manage(ctx, ds, nodes, hash); err != nil {
		return err
	}
	// Only roll once manage's own creates and deletes have been seen.
	if dsc.expectations.SatisfiedExpectations(klog.FromContext(ctx), key) &&
		ds.Spec.UpdateStrategy.Type == apps.RollingUpdateDaemonSetStrategyType {
		if err := dsc.rollingUpdate(ctx, ds, nodes, hash); err != nil {
			return err
		}
	}
	if err := dsc.cleanupHistory(ctx, ds, old); err != nil {
		return fmt.Errorf("failed to clean up revisions of DaemonSet: %w", err)
	}
	return nil
}

// getDaemonPods returns the pods ds owns, adopting matching orphans and
// releasing owned pods that no longer match. The pods are cache objects.
func (dsc *Controller) getDaemonPods(ctx context.Context, ds *apps.DaemonSet) ([]*v1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, err
	}
	pods, err := controller.FilterPodsByOwner(dsc.podIndexer, &ds.ObjectMeta, controllerKind.Kind, true)
	if err != nil {
		return nil, err
	}
	cm := controller.NewPodControllerRefManager(dsc.podControl, ds, selector, controllerKind, dsc.canAdopt(ds))
	return cm.ClaimPods(ctx, pods)
}

// canAdopt rechecks with a live read that ds is not being deleted before
// the first adoption: caches lag, and adopting for a dying owner would
// orphan what the garbage collector is about to reap.
func (dsc *Controller) canAdopt(ds *apps.DaemonSet) func(ctx context.Context) error {
	return controller.RecheckDeletionTimestamp(func(ctx context.Context) (metav1.Object, error) {
		fresh, err := dsc.kubeClient.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if fresh.UID != ds.UID {
			return nil, fmt.Errorf("original DaemonSet %v/%v is gone: got uid %v, wanted %v", ds.Namespace, ds.Name, fresh.UID, ds.UID)
		}
		return fresh, nil
	})
}

// getNodesToDaemonPods groups ds's pods by the node they run on or are
// pinned to. Terminal pods already being deleted are left out unless
// includeDeletedTerminal: nothing is left to do with them but wait.
func (dsc *Controller) getNodesToDaemonPods(ctx context.Context, ds *apps.DaemonSet, includeDeletedTerminal bool) (map[string][]*v1.Pod, error) {
	pods, err := dsc.getDaemonPods(ctx, ds)
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	out := make(map[string][]*v1.Pod)
	for _, pod := range pods {
		if !includeDeletedTerminal && controller.IsPodTerminal(pod) && pod.DeletionTimestamp != nil {
			continue
		}
		nodeName, err := util.GetTargetNodeName(pod)
		if err != nil {
			logger.V(4).Info("Failed to get target node name of Pod in DaemonSet", "pod", klog.KObj(pod), "daemonset", klog.KObj(ds))
			continue
		}
		out[nodeName] = append(out[nodeName], pod)
	}
	return out, nil
}

// manage creates the pods missing on eligible nodes and deletes those on
// nodes they must leave, plus failed, succeeded and duplicate ones.
func (dsc *Controller) manage(ctx context.Context, ds *apps.DaemonSet, nodes []*v1.Node, hash string) error {
	nodeToDaemonPods, err := dsc.getNodesToDaemonPods(ctx, ds, false)
	if err != nil {
		return fmt.Errorf("couldn't get node to daemon pod mapping for daemon set %q: %w", ds.Name, err)
	}
	logger := klog.FromContext(ctx)
	p := newPlacement(ds, dsc.comparisonOperators)
	var toCreate, toDelete []string
	for _, node := range nodes {
		create, del := dsc.podsShouldBeOnNode(logger, node, nodeToDaemonPods, ds, hash, p)
		toCreate = append(toCreate, create...)
		toDelete = append(toDelete, del...)
	}
	// An unbound pod pinned to a node that no longer exists would wait for
	// the scheduler forever, and the pod GC only handles bound pods.
	toDelete = append(toDelete, getUnscheduledPodsWithoutNode(nodes, nodeToDaemonPods)...)
	return dsc.syncNodes(ctx, ds, toDelete, toCreate, hash)
}

// podsShouldBeOnNode returns node.Name if it needs a new daemon pod, and
// the names of its daemon pods to delete.
func (dsc *Controller) podsShouldBeOnNode(logger klog.Logger, node *v1.Node, nodeToDaemonPods map[string][]*v1.Pod, ds *apps.DaemonSet, hash string, p *placement) (nodesNeedingDaemonPods, podsToDelete []string) {
	shouldRun, shouldContinueRunning := p.check(logger, node)
	daemonPods, exists := nodeToDaemonPods[node.Name]

	switch {
	case shouldRun && !exists:
		nodesNeedingDaemonPods = append(nodesNeedingDaemonPods, node.Name)

	case shouldContinueRunning:
		var running []*v1.Pod
		for _, pod := range daemonPods {
			if pod.DeletionTimestamp != nil {
				continue
			}
			switch pod.Status.Phase {
			case v1.PodFailed:
				if dsc.failedPodReadyForDeletion(logger, ds, node, pod) {
					podsToDelete = append(podsToDelete, pod.Name)
				}
			case v1.PodSucceeded:
				logger.V(2).Info("Found succeeded daemon pod on node, will try to delete it", "pod", klog.KObj(pod), "node", klog.KObj(node))
				dsc.eventRecorder.Eventf(ds, v1.EventTypeNormal, SucceededDaemonPodReason,
					"Found succeeded daemon pod %s/%s on node %s, will try to delete it", pod.Namespace, pod.Name, node.Name)
				podsToDelete = append(podsToDelete, pod.Name)
			default:
				running = append(running, pod)
			}
		}
		// A replacement for a failed or succeeded pod is created by the
		// next sync, once the deletion has been observed.
		if !util.AllowsSurge(ds) {
			// One pod per node: keep the oldest.
			if len(running) > 1 {
				sort.Sort(podByCreationTimestampAndPhase(running))
				for _, pod := range running[1:] {
					podsToDelete = append(podsToDelete, pod.Name)
				}
			}
			break
		}
		if len(running) <= 1 {
			if len(running) == 0 && shouldRun {
				// Surging keeps at least one live pod per node.
				nodesNeedingDaemonPods = append(nodesNeedingDaemonPods, node.Name)
			}
			break
		}
		podsToDelete = append(podsToDelete, dsc.excessSurgePods(logger, ds, running, hash)...)

	case !shouldContinueRunning && exists:
		for _, pod := range daemonPods {
			if pod.DeletionTimestamp == nil {
				podsToDelete = append(podsToDelete, pod.Name)
			}
		}
	}
	return nodesNeedingDaemonPods, podsToDelete
}

// failedPodReadyForDeletion rate-limits the deletion of failed pods per
// node and generation: a kubelet that keeps rejecting the pod would make us
// hot-loop otherwise. When allowed it records the FailedDaemonPod event.
func (dsc *Controller) failedPodReadyForDeletion(logger klog.Logger, ds *apps.DaemonSet, node *v1.Node, pod *v1.Pod) bool {
	key := failedPodsBackoffKey(ds, node.Name)
	now := dsc.now()
	if dsc.failedPodsBackoff.IsInBackOffSinceUpdate(key, now) {
		delay := dsc.failedPodsBackoff.Get(key)
		logger.V(4).Info("Deleting failed pod on node has been limited by backoff", "pod", klog.KObj(pod), "node", klog.KObj(node), "currentDelay", delay)
		dsc.enqueueAfter(ds, delay)
		return false
	}
	dsc.failedPodsBackoff.Next(key, now)
	logger.V(2).Info("Found failed daemon pod on node, will try to kill it", "pod", klog.KObj(pod), "node", klog.KObj(node))
	dsc.eventRecorder.Eventf(ds, v1.EventTypeWarning, FailedDaemonPodReason,
		"Found failed daemon pod %s/%s on node %s, will try to kill it", pod.Namespace, pod.Name, node.Name)
	return true
}

// excessSurgePods picks, among several live pods on one node of a surging
// DaemonSet, the ones to delete. It keeps the oldest current pod and the
// oldest old pod; the old one goes too once it is not ready or the new one
// is available. Pods beyond those two always go.
func (dsc *Controller) excessSurgePods(logger klog.Logger, ds *apps.DaemonSet, running []*v1.Pod, hash string) []string {
	var out []string
	var oldestNew, oldestOld *v1.Pod
	sort.Sort(podByCreationTimestampAndPhase(running))
	for _, pod := range running {
		if pod.Labels[apps.DefaultDaemonSetUniqueLabelKey] == hash {
			if oldestNew == nil {
				oldestNew = pod
				continue
			}
		} else if oldestOld == nil {
			oldestOld = pod
			continue
		}
		out = append(out, pod.Name)
	}
	if oldestNew == nil || oldestOld == nil {
		return out
	}
	switch {
	case !controller.IsPodReady(oldestOld):
		logger.V(5).Info("Pod from daemonset is no longer ready and will be replaced with newer pod", "oldPod", klog.KObj(oldestOld), "daemonset", klog.KObj(ds), "newPod", klog.KObj(oldestNew))
		out = append(out, oldestOld.Name)
	case controller.IsPodAvailable(oldestNew, ds.Spec.MinReadySeconds, metav1.NewTime(dsc.now())):
		logger.V(5).Info("Pod from daemonset is now ready and will replace older pod", "newPod", klog.KObj(oldestNew), "daemonset", klog.KObj(ds), "oldPod", klog.KObj(oldestOld))
		out = append(out, oldestOld.Name)
	}
	return out
}

// syncNodes deletes podsToDelete and creates a pod on each node of
// nodesNeedingDaemonPods, at most burstReplicas of each, with expectations
// set first so the informer events can't race them. Creations go in
// slow-start batches: when a batch fails (quota, admission) the rest is
// left for a later sync instead of failing hundreds of times.
func (dsc *Controller) syncNodes(ctx context.Context, ds *apps.DaemonSet, podsToDelete, nodesNeedingDaemonPods []string, hash string) error {
	logger := klog.FromContext(ctx)
	key, err := controller.KeyFunc(ds)
	if err != nil {
		return fmt.Errorf("couldn't get key for object %#v: %w", ds, err)
	}
	createDiff := min(len(nodesNeedingDaemonPods), dsc.burstReplicas)
	deleteDiff := min(len(podsToDelete), dsc.burstReplicas)
	_ = dsc.expectations.SetExpectations(logger, key, createDiff, deleteDiff)

	var mu sync.Mutex
	var errs []error
	addErr := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}

	logger.V(4).Info("Nodes needing daemon pods for daemon set, creating", "daemonset", klog.KObj(ds), "needCount", nodesNeedingDaemonPods, "createCount", createDiff)
	// A template generation that does not parse is ignored: the hash
	// identifies the revision anyway.
	generation, err := util.GetTemplateGeneration(ds)
	if err != nil {
		generation = nil
	}
	template := util.CreatePodTemplate(ds.Spec.Template, generation, hash)
	var attempted atomic.Int32
	_, _ = controller.SlowStartBatch(createDiff, controller.SlowStartInitialBatchSize, func() error {
		nodeName := nodesNeedingDaemonPods[attempted.Add(1)-1]
		podTemplate := template.DeepCopy()
		// Pin the pod to its node for the scheduler; the node was checked
		// against the template's own affinity already.
		podTemplate.Spec.Affinity = util.ReplaceDaemonSetPodNodeNameNodeAffinity(podTemplate.Spec.Affinity, nodeName)
		err := dsc.podControl.CreatePods(ctx, ds.Namespace, podTemplate, ds, metav1.NewControllerRef(ds, controllerKind))
		dsc.uncertainCreates.Record(key, err)
		if err == nil || apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			// Every create fails in a terminating namespace; nothing to retry.
			return nil
		}
		logger.V(2).Info("Failed creation, decrementing expectations for daemon set", "daemonset", klog.KObj(ds))
		dsc.expectations.CreationObserved(logger, key)
		utilruntime.HandleError(err)
		addErr(err)
		return err
	})
	if skipped := createDiff - int(attempted.Load()); skipped > 0 {
		logger.V(2).Info("Slow-start failure. Skipping creation pods, decrementing expectations for daemon set", "skippedPods", skipped, "daemonset", klog.KObj(ds))
		dsc.expectations.LowerExpectations(logger, key, skipped, 0)
	}

	logger.V(4).Info("Pods to delete for daemon set, deleting", "daemonset", klog.KObj(ds), "toDeleteCount", podsToDelete, "deleteCount", deleteDiff)
	var wg sync.WaitGroup
	for _, name := range podsToDelete[:deleteDiff] {
		wg.Go(func() {
			err := dsc.podControl.DeletePod(ctx, ds.Namespace, name, ds)
			if err == nil {
				return
			}
			// A failed delete will never be observed.
			dsc.expectations.DeletionObserved(logger, key)
			if !apierrors.IsNotFound(err) {
				logger.V(2).Info("Failed deletion, decremented expectations for daemon set", "daemonset", klog.KObj(ds))
				utilruntime.HandleError(err)
				addErr(err)
			}
		})
	}
	wg.Wait()
	return utilerrors.NewAggregate(errs)
}

// podByCreationTimestampAndPhase orders bound pods before unbound ones,
// then oldest first, then by name.
type podByCreationTimestampAndPhase []*v1.Pod

func (o podByCreationTimestampAndPhase) Len() int      { return len(o) }
func (o podByCreationTimestampAndPhase) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o podByCreationTimestampAndPhase) Less(i, j int) bool {
	iBound, jBound := o[i].Spec.NodeName != "", o[j].Spec.NodeName != ""
	if iBound != jBound {
		return iBound
	}
	if o[i].CreationTimestamp.Equal(&o[j].CreationTimestamp) {
		return o[i].Name < o[j].Name
	}
	return o[i].CreationTimestamp.Before(&o[j].CreationTimestamp)
}

// failedPodsBackoffKey scopes the failed-pod backoff to a DaemonSet
// incarnation, its observed generation and a node, so a new template is
// tried without waiting out the old one's backoff.
func failedPodsBackoffKey(ds *apps.DaemonSet, nodeName string) string {
	return fmt.Sprintf("%s/%d/%s", ds.UID, ds.Status.ObservedGeneration, nodeName)
}

// getUnscheduledPodsWithoutNode returns the unbound pods pinned to nodes
// that are not in nodes.
func getUnscheduledPodsWithoutNode(nodes []*v1.Node, nodeToDaemonPods map[string][]*v1.Pod) []string {
	exists := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		exists[n.Name] = true
	}
	var out []string
	for nodeName, pods := range nodeToDaemonPods {
		if exists[nodeName] {
			continue
		}
		for _, pod := range pods {
			if pod.Spec.NodeName == "" {
				out = append(out, pod.Name)
			}
		}
	}
	return out
}

// syncNodeUpdate enqueues the DaemonSets a node change affects: those that
// now need a pod there, those whose pod must leave, and those reporting
// misscheduled pods that have a pod there (which may be fine again).
func (dsc *Controller) syncNodeUpdate(ctx context.Context, nodeName string) error {
	logger := klog.FromContext(ctx)
	node, err := dsc.nodeLister.Get(nodeName)
	if apierrors.IsNotFound(err) {
		logger.V(3).Info("Node not found, skipping update", "node", nodeName)
		return nil
	}
	if err != nil {
		return fmt.Errorf("error getting node %s: %w", nodeName, err)
	}
	sets, err := dsc.dsLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("error listing daemon sets: %w", err)
	}
	objs, err := dsc.podIndexer.ByIndex(podNodeNameIndex, nodeName)
	if err != nil {
		return fmt.Errorf("error getting pods by node name: %w", err)
	}
	podsBySet := map[string]int{}
	for _, obj := range objs {
		pod, ok := obj.(*v1.Pod)
		if !ok {
			continue
		}
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil || ref.Kind != controllerKind.Kind {
			continue
		}
		podsBySet[pod.Namespace+"/"+ref.Name]++
	}
	for _, ds := range sets {
		shouldRun, shouldContinueRunning := newPlacement(ds, dsc.comparisonOperators).check(logger, node)
		key, err := controller.KeyFunc(ds)
		if err != nil {
			return fmt.Errorf("error getting key for object %#v: %w", ds, err)
		}
		scheduled := podsBySet[key] > 0
		if (shouldRun && !scheduled) || (!shouldContinueRunning && scheduled) || (scheduled && ds.Status.NumberMisscheduled > 0) {
			dsc.enqueue(ds)
		}
	}
	return nil
}
