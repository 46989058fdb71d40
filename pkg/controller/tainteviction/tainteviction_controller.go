// Package tainteviction is the taint-eviction-controller: it deletes pods
// from nodes with NoExecute taints the pods do not tolerate, after the
// shortest tolerationSeconds of the tolerations that matched, and cancels
// a pending deletion when the taint goes away or becomes tolerated.
package tainteviction

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// TaintTolerationComparisonOperators (alpha, off in v1.37) lets
	// tolerations compare numeric taint values with Gt/Lt.
	TaintTolerationComparisonOperators featuregate.Feature = "TaintTolerationComparisonOperators"

	// updateWorkerSize workers each own the nodes hashing to them, so
	// one node's updates are handled in order.
	updateWorkerSize      = 8
	nodeUpdateChannelSize = 10
	podUpdateChannelSize  = 1
	// deleteRetries is how often a due deletion is attempted.
	deleteRetries = 5

	podNodeNameIndex = "spec.nodeName"
)

type nodeUpdateItem struct{ nodeName string }

type podUpdateItem struct {
	podName      string
	podNamespace string
	nodeName     string
}

// Controller is the taint eviction controller.
type Controller struct {
	name string
	// comparisonOperators lets tolerations use Lt and Gt.
	comparisonOperators bool

	client      clientset.Interface
	clock       clock.WithDelayedExecution
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	podLister        corelisters.PodLister
	podListerSynced  cache.InformerSynced
	podIndexer       cache.Indexer
	nodeLister       corelisters.NodeLister
	nodeListerSynced cache.InformerSynced

	evictions *timedWorkerQueue

	taintedNodesLock sync.Mutex
	taintedNodes     map[string][]v1.Taint // NoExecute taints per node

	nodeUpdateQueue    workqueue.TypedInterface[nodeUpdateItem]
	podUpdateQueue     workqueue.TypedInterface[podUpdateItem]
	nodeUpdateChannels []chan nodeUpdateItem
	podUpdateChannels  []chan podUpdateItem
}

// NewController returns the controller; controllerName is the source of its events.
// comparisonOperators is the TaintTolerationComparisonOperators gate.
func NewController(ctx context.Context, c clientset.Interface, podInformer coreinformers.PodInformer, nodeInformer coreinformers.NodeInformer, controllerName string, comparisonOperators bool) (*Controller, error) {
	Register()
	logger := klog.FromContext(ctx)
	broadcaster, recorder := controller.NewEventRecorder(ctx, controllerName)
	tc := &Controller{
		name:                controllerName,
		comparisonOperators: comparisonOperators,
		client:              c,
		clock:               clock.RealClock{},
		broadcaster:         broadcaster,
		recorder:            recorder,
		podLister:           podInformer.Lister(),
		podListerSynced:     podInformer.Informer().HasSynced,
		nodeLister:          nodeInformer.Lister(),
		nodeListerSynced:    nodeInformer.Informer().HasSynced,
		taintedNodes:        map[string][]v1.Taint{},
		nodeUpdateQueue:     workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[nodeUpdateItem]{Name: "noexec_taint_node"}),
		podUpdateQueue:      workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[podUpdateItem]{Name: "noexec_taint_pod"}),
	}
	tc.evictions = newTimedWorkerQueue(tc.clock, tc.deletePod)

	podInf := podInformer.Informer()
	if _, ok := podInf.GetIndexer().GetIndexers()[podNodeNameIndex]; !ok {
		if err := podInf.AddIndexers(cache.Indexers{podNodeNameIndex: func(obj interface{}) ([]string, error) {
			pod, ok := obj.(*v1.Pod)
			if !ok || pod.Spec.NodeName == "" {
				return nil, nil
			}
			return []string{pod.Spec.NodeName}, nil
		}}); err != nil {
			return nil, err
		}
	}
	tc.podIndexer = podInf.GetIndexer()

	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { tc.PodUpdated(nil, obj.(*v1.Pod)) },
		UpdateFunc: func(old, cur interface{}) { tc.PodUpdated(old.(*v1.Pod), cur.(*v1.Pod)) },
		DeleteFunc: func(obj interface{}) {
			obj = controller.Untombstone(obj)
			pod, ok := obj.(*v1.Pod)
			if !ok {
				logger.Error(nil, "Received unexpected object", "object", obj)
				return
			}
			tc.PodUpdated(pod, nil)
		},
	}); err != nil {
		return nil, fmt.Errorf("unable to add pod event handler: %w", err)
	}
	if _, err := nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { tc.NodeUpdated(nil, obj.(*v1.Node)) },
		UpdateFunc: func(old, cur interface{}) { tc.NodeUpdated(old.(*v1.Node), cur.(*v1.Node)) },
		DeleteFunc: func(obj interface{}) {
			obj = controller.Untombstone(obj)
			node, ok := obj.(*v1.Node)
			if !ok {
				logger.Error(nil, "Received unexpected object", "object", obj)
				return
			}
			tc.NodeUpdated(node, nil)
		},
	}); err != nil {
		return nil, fmt.Errorf("unable to add node event handler: %w", err)
	}
	return tc, nil
}

// Run starts the workers and blocks until ctx is cancelled; pending
// deletions are cancelled on the way out.
func (tc *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting", "controller", tc.name)
	stopEvents := controller.StartEventSink(tc.broadcaster, tc.client)
	defer stopEvents()

	var wg sync.WaitGroup
	defer func() {
		logger.Info("Shutting down controller", "controller", tc.name)
		tc.nodeUpdateQueue.ShutDown()
		tc.podUpdateQueue.ShutDown()
		tc.evictions.CancelAndWait()
		wg.Wait()
	}()
	controller.ReportQueue(ctx, "noexec_taint_node", tc.nodeUpdateQueue.Len)
	controller.ReportQueue(ctx, "noexec_taint_pod", tc.podUpdateQueue.Len)
	if !controller.WaitForCacheSync(ctx, tc.name, tc.podListerSynced, tc.nodeListerSynced) {
		return
	}

	for i := 0; i < updateWorkerSize; i++ {
		tc.nodeUpdateChannels = append(tc.nodeUpdateChannels, make(chan nodeUpdateItem, nodeUpdateChannelSize))
		tc.podUpdateChannels = append(tc.podUpdateChannels, make(chan podUpdateItem, podUpdateChannelSize))
	}
	// Dispatchers route items to the worker owning their node. The item
	// stays "processing" in its queue until the worker calls Done.
	wg.Go(func() {
		for {
			item, quit := tc.nodeUpdateQueue.Get()
			if quit {
				return
			}
			select {
			case <-ctx.Done():
				tc.nodeUpdateQueue.Done(item)
				return
			case tc.nodeUpdateChannels[workerFor(item.nodeName)] <- item:
			}
		}
	})
	wg.Go(func() {
		for {
			item, quit := tc.podUpdateQueue.Get()
			if quit {
				return
			}
			select {
			case <-ctx.Done():
				tc.podUpdateQueue.Done(item)
				return
			case tc.podUpdateChannels[workerFor(item.nodeName)] <- item:
			}
		}
	})
	for i := 0; i < updateWorkerSize; i++ {
		wg.Go(func() { tc.worker(ctx, i) })
	}
	<-ctx.Done()
}

func workerFor(nodeName string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(nodeName))
	return int(h.Sum32() % updateWorkerSize)
}

// worker handles node updates before pod updates, so pods are judged
// against the newest taints of their node.
func (tc *Controller) worker(ctx context.Context, i int) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-tc.nodeUpdateChannels[i]:
			tc.handleNodeUpdate(ctx, n)
			tc.nodeUpdateQueue.Done(n)
		case p := <-tc.podUpdateChannels[i]:
		drain:
			for {
				select {
				case n := <-tc.nodeUpdateChannels[i]:
					tc.handleNodeUpdate(ctx, n)
					tc.nodeUpdateQueue.Done(n)
				default:
					break drain
				}
			}
			tc.handlePodUpdate(ctx, p)
			tc.podUpdateQueue.Done(p)
		}
	}
}

// PodUpdated queues a pod whose node or tolerations changed (or which was
// added or deleted).
func (tc *Controller) PodUpdated(oldPod, newPod *v1.Pod) {
	var item podUpdateItem
	var oldTol, newTol []v1.Toleration
	if oldPod != nil {
		item = podUpdateItem{podName: oldPod.Name, podNamespace: oldPod.Namespace, nodeName: oldPod.Spec.NodeName}
		oldTol = oldPod.Spec.Tolerations
	}
	if newPod != nil {
		item = podUpdateItem{podName: newPod.Name, podNamespace: newPod.Namespace, nodeName: newPod.Spec.NodeName}
		newTol = newPod.Spec.Tolerations
	}
	if oldPod != nil && newPod != nil && oldPod.Spec.NodeName == newPod.Spec.NodeName && apiequality.Semantic.DeepEqual(oldTol, newTol) {
		return
	}
	tc.podUpdateQueue.Add(item)
}

// NodeUpdated queues a node whose NoExecute taints changed (or which was
// added or deleted).
func (tc *Controller) NodeUpdated(oldNode, newNode *v1.Node) {
	var name string
	var oldTaints, newTaints []v1.Taint
	if oldNode != nil {
		name = oldNode.Name
		oldTaints = noExecuteTaints(oldNode.Spec.Taints)
	}
	if newNode != nil {
		name = newNode.Name
		newTaints = noExecuteTaints(newNode.Spec.Taints)
	}
	if oldNode != nil && newNode != nil && apiequality.Semantic.DeepEqual(oldTaints, newTaints) {
		return
	}
	tc.nodeUpdateQueue.Add(nodeUpdateItem{nodeName: name})
}

func noExecuteTaints(taints []v1.Taint) []v1.Taint {
	out := []v1.Taint{}
	for _, t := range taints {
		if t.Effect == v1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

// matchingTolerations reports whether every taint is tolerated and, if
// so, the toleration used for each.
func matchingTolerations(logger klog.Logger, taints []v1.Taint, tolerations []v1.Toleration, cmpOps bool) (bool, []v1.Toleration) {
	if len(taints) == 0 {
		return true, nil
	}
	var used []v1.Toleration
	for i := range taints {
		found := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(logger, &taints[i], cmpOps) {
				used = append(used, tolerations[j])
				found = true
				break
			}
		}
		if !found {
			return false, nil
		}
	}
	return true, used
}

// minTolerationTime is the shortest tolerationSeconds among used: 0 when
// none were used or one is <= 0, -1 when all tolerate forever.
func minTolerationTime(used []v1.Toleration) time.Duration {
	if len(used) == 0 {
		return 0
	}
	minSeconds := int64(math.MaxInt64)
	for _, t := range used {
		if t.TolerationSeconds == nil {
			continue
		}
		if *t.TolerationSeconds <= 0 {
			return 0
		}
		minSeconds = min(minSeconds, *t.TolerationSeconds)
	}
	if minSeconds == math.MaxInt64 {
		return -1
	}
	return time.Duration(minSeconds) * time.Second
}

func (tc *Controller) cancelWorkWithEvent(logger klog.Logger, nn types.NamespacedName) {
	if tc.evictions.CancelWork(logger, nn.String()) {
		tc.podEvent(nn, "Cancelling deletion of Pod %s")
	}
}

// processPodOnNode schedules, keeps or cancels the deletion of one pod
// given its node's NoExecute taints.
func (tc *Controller) processPodOnNode(ctx context.Context, nn types.NamespacedName, nodeName string, tolerations []v1.Toleration, taints []v1.Taint, now time.Time) {
	logger := klog.FromContext(ctx)
	if len(taints) == 0 {
		tc.cancelWorkWithEvent(logger, nn)
	}
	allTolerated, used := matchingTolerations(logger, taints, tolerations, tc.comparisonOperators)
	if !allTolerated {
		logger.V(2).Info("Not all taints are tolerated after update for pod on node", "pod", nn.String(), "node", klog.KRef("", nodeName))
		if tc.evictions.running(nn.String()) {
			// Already being deleted; do not delete (and announce) twice.
			return
		}
		// Delete at once, replacing any later deletion.
		tc.cancelWorkWithEvent(logger, nn)
		tc.evictions.AddWork(ctx, nn.String(), now, now)
		return
	}
	minTime := minTolerationTime(used)
	if minTime < 0 {
		logger.V(4).Info("Current tolerations for pod tolerate forever, cancelling any scheduled deletion", "pod", nn.String())
		tc.cancelWorkWithEvent(logger, nn)
		return
	}
	start := now
	trigger := start.Add(minTime)
	if scheduled := tc.evictions.get(nn.String()); scheduled != nil {
		// The clock started when the pod first became evictable.
		start = scheduled.createdAt
		if start.Add(minTime).Before(trigger) {
			return
		}
		tc.cancelWorkWithEvent(logger, nn)
	}
	tc.evictions.AddWork(ctx, nn.String(), start, trigger)
}

func (tc *Controller) handlePodUpdate(ctx context.Context, item podUpdateItem) {
	logger := klog.FromContext(ctx)
	nn := types.NamespacedName{Namespace: item.podNamespace, Name: item.podName}
	pod, err := tc.podLister.Pods(item.podNamespace).Get(item.podName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			logger.V(4).Info("Noticed pod deletion", "pod", nn)
			tc.cancelWorkWithEvent(logger, nn)
			return
		}
		utilruntime.HandleErrorWithContext(ctx, err, "Could not get pod", "pod", nn)
		return
	}
	// A stale item: a newer one for the pod's current node follows.
	if pod.Spec.NodeName != item.nodeName || pod.Spec.NodeName == "" {
		return
	}
	logger.V(4).Info("Noticed pod update", "pod", nn)
	tc.taintedNodesLock.Lock()
	taints, ok := tc.taintedNodes[pod.Spec.NodeName]
	tc.taintedNodesLock.Unlock()
	if !ok {
		return
	}
	tc.processPodOnNode(ctx, nn, pod.Spec.NodeName, pod.Spec.Tolerations, taints, tc.clock.Now())
}

func (tc *Controller) handleNodeUpdate(ctx context.Context, item nodeUpdateItem) {
	logger := klog.FromContext(ctx)
	node, err := tc.nodeLister.Get(item.nodeName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			logger.V(4).Info("Noticed node deletion", "node", klog.KRef("", item.nodeName))
			tc.taintedNodesLock.Lock()
			delete(tc.taintedNodes, item.nodeName)
			tc.taintedNodesLock.Unlock()
			return
		}
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot get node", "node", item.nodeName)
		return
	}
	logger.V(4).Info("Noticed node update", "node", klog.KObj(node))
	taints := noExecuteTaints(node.Spec.Taints)
	tc.taintedNodesLock.Lock()
	if len(taints) == 0 {
		delete(tc.taintedNodes, node.Name)
	} else {
		tc.taintedNodes[node.Name] = taints
	}
	tc.taintedNodesLock.Unlock()

	objs, err := tc.podIndexer.ByIndex(podNodeNameIndex, node.Name)
	if err != nil {
		logger.Error(err, "Failed to get pods assigned to node", "node", klog.KObj(node))
		return
	}
	now := tc.clock.Now()
	for _, o := range objs {
		pod, ok := o.(*v1.Pod)
		if !ok {
			continue
		}
		nn := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
		if len(taints) == 0 {
			tc.cancelWorkWithEvent(logger, nn)
			continue
		}
		tc.processPodOnNode(ctx, nn, node.Name, pod.Spec.Tolerations, taints, now)
	}
}

// deletePod is the timed work: announce, mark DisruptionTarget, delete.
func (tc *Controller) deletePod(ctx context.Context, fireAt time.Time, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Deleting pod", "controller", tc.name, "pod", klog.KRef(ns, name))
	tc.podEvent(types.NamespacedName{Namespace: ns, Name: name}, "Marking for deletion Pod %s")
	for i := 0; i < deleteRetries; i++ {
		err = tc.addConditionAndDeletePod(ctx, ns, name)
		if apierrors.IsNotFound(err) {
			// Gone already: nothing to evict.
			return nil
		}
		if err == nil {
			podDeletionsTotal.Inc()
			podDeletionsLatency.Observe(tc.clock.Since(fireAt).Seconds())
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

// addConditionAndDeletePod tells the pod's owner why the pod goes (a
// DisruptionTarget condition, which Job pod failure policies match on)
// before deleting it.
func (tc *Controller) addConditionAndDeletePod(ctx context.Context, ns, name string) error {
	pod, err := tc.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	newStatus := pod.Status.DeepCopy()
	if setPodCondition(newStatus, v1.PodCondition{
		Type:               v1.DisruptionTarget,
		ObservedGeneration: pod.Generation,
		Status:             v1.ConditionTrue,
		Reason:             "DeletionByTaintManager",
		Message:            "Taint manager: deleting due to NoExecute taint",
		LastTransitionTime: metav1.NewTime(tc.clock.Now()),
	}) {
		if err := patchPodStatus(ctx, tc.client, pod, *newStatus); err != nil {
			return err
		}
	}
	return tc.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
}

// setPodCondition adds or replaces cond, keeping the transition time when
// the status did not change; it reports whether anything changed.
func setPodCondition(status *v1.PodStatus, cond v1.PodCondition) bool {
	for i := range status.Conditions {
		old := &status.Conditions[i]
		if old.Type != cond.Type {
			continue
		}
		if old.Status == cond.Status {
			cond.LastTransitionTime = old.LastTransitionTime
		}
		changed := !apiequality.Semantic.DeepEqual(*old, cond)
		*old = cond
		return changed
	}
	status.Conditions = append(status.Conditions, cond)
	return true
}

// patchPodStatus sends a strategic merge patch of the status subresource,
// guarded by the pod's UID so a re-created pod is never touched.
func patchPodStatus(ctx context.Context, c clientset.Interface, pod *v1.Pod, newStatus v1.PodStatus) error {
	oldData, err := json.Marshal(v1.Pod{Status: pod.Status})
	if err != nil {
		return err
	}
	newData, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: pod.UID}, Status: newStatus})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Pod{})
	if err != nil {
		return err
	}
	if _, err := c.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("failed to patch status %q for pod %s/%s: %w", patch, pod.Namespace, pod.Name, err)
	}
	return nil
}

func (tc *Controller) podEvent(nn types.NamespacedName, format string) {
	ref := &v1.ObjectReference{APIVersion: "v1", Kind: "Pod", Name: nn.Name, Namespace: nn.Namespace}
	tc.recorder.Eventf(ref, v1.EventTypeNormal, "TaintManagerEviction", format, nn.String())
}
