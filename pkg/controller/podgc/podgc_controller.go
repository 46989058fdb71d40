// Package podgc force-deletes pods nobody else will clean up: terminated
// pods beyond --terminated-pod-gc-threshold (oldest first), pods bound to
// nodes that no longer exist, terminating pods that were never scheduled,
// and terminating pods on not-ready nodes tainted out-of-service.
package podgc

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// gcCheckPeriod is how often the whole collection runs.
	gcCheckPeriod = 20 * time.Second
	// quarantineTime is how long a missing node must stay missing before
	// its pods count as orphaned (guards against a lagging node cache).
	quarantineTime = 40 * time.Second
	// evictedReason is the pod status reason the kubelet sets on eviction.
	evictedReason = "Evicted"
)

// Values of the "reason" label.
const (
	reasonTerminated              = "terminated"
	reasonTerminatingOutOfService = "out-of-service"
	reasonOrphaned                = "orphaned"
	reasonTerminatingUnscheduled  = "unscheduled"
)

var (
	deletingPodsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "pod_gc_collector",
		Name:           "force_delete_pods_total",
		Help:           "Number of pods that are being forcefully deleted since the Pod GC Controller started.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"namespace", "reason"})
	deletingPodsErrorTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "pod_gc_collector",
		Name:           "force_delete_pod_errors_total",
		Help:           "Number of errors encountered when forcefully deleting the pods since the Pod GC Controller started.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"namespace", "reason"})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(deletingPodsTotal, deletingPodsErrorTotal) })
}

// Controller is the pod garbage collector.
type Controller struct {
	kubeClient clientset.Interface

	podLister        corelisters.PodLister
	podListerSynced  cache.InformerSynced
	nodeLister       corelisters.NodeLister
	nodeListerSynced cache.InformerSynced

	// nodeQueue delays the check of a missing node by quarantineTime.
	nodeQueue workqueue.TypedDelayingInterface[string]

	terminatedPodThreshold int
	gcCheckPeriod          time.Duration
	quarantineTime         time.Duration
}

// NewController returns a collector; a terminatedPodThreshold <= 0 disables the
// terminated-pod collection.
func NewController(ctx context.Context, kubeClient clientset.Interface, podInformer coreinformers.PodInformer, nodeInformer coreinformers.NodeInformer, terminatedPodThreshold int) *Controller {
	return newController(ctx, kubeClient, podInformer, nodeInformer, terminatedPodThreshold, gcCheckPeriod, quarantineTime, clock.RealClock{})
}

func newController(_ context.Context, kubeClient clientset.Interface, podInformer coreinformers.PodInformer, nodeInformer coreinformers.NodeInformer,
	terminatedPodThreshold int, checkPeriod, quarantine time.Duration, clk clock.WithTicker) *Controller {
	registerMetrics()
	return &Controller{
		kubeClient:             kubeClient,
		terminatedPodThreshold: terminatedPodThreshold,
		podLister:              podInformer.Lister(),
		podListerSynced:        podInformer.Informer().HasSynced,
		nodeLister:             nodeInformer.Lister(),
		nodeListerSynced:       nodeInformer.Informer().HasSynced,
		nodeQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{
			Name: "orphaned_pods_nodes", Clock: clk}),
		gcCheckPeriod:  checkPeriod,
		quarantineTime: quarantine,
	}
}

// Run collects every gcCheckPeriod until ctx is cancelled.
func (gcc *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting GC controller")
	defer func() {
		logger.Info("Shutting down GC controller")
		gcc.nodeQueue.ShutDown()
	}()
	controller.ReportQueue(ctx, "orphaned_pods_nodes", gcc.nodeQueue.Len)
	if !controller.WaitForCacheSync(ctx, "GC", gcc.podListerSynced, gcc.nodeListerSynced) {
		return
	}
	wait.UntilWithContext(ctx, gcc.gc, gcc.gcCheckPeriod)
}

func (gcc *Controller) gc(ctx context.Context) {
	logger := klog.FromContext(ctx)
	pods, err := gcc.podLister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Error while listing all pods")
		return
	}
	nodes, err := gcc.nodeLister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Error while listing all nodes")
		return
	}
	if gcc.terminatedPodThreshold > 0 {
		gcc.gcTerminated(ctx, pods)
	}
	gcc.gcTerminating(ctx, pods)
	gcc.gcOrphaned(ctx, pods, nodes)
	gcc.gcUnscheduledTerminating(ctx, pods)
}

// isPodTerminated: any phase but Pending, Running and Unknown.
func isPodTerminated(pod *v1.Pod) bool {
	p := pod.Status.Phase
	return p != v1.PodPending && p != v1.PodRunning && p != v1.PodUnknown
}

func isNodeReady(node *v1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func hasOutOfServiceTaint(node *v1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == v1.TaintNodeOutOfService {
			return true
		}
	}
	return false
}

// gcTerminating deletes terminating pods on not-ready nodes tainted
// node.kubernetes.io/out-of-service (their kubelet will not finish them).
func (gcc *Controller) gcTerminating(ctx context.Context, pods []*v1.Pod) {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("GC'ing terminating pods that are on out-of-service nodes")
	var victims []*v1.Pod
	for _, pod := range pods {
		if pod.DeletionTimestamp == nil {
			continue
		}
		node, err := gcc.nodeLister.Get(pod.Spec.NodeName)
		if err != nil {
			logger.Error(err, "Failed to get node", "node", klog.KRef("", pod.Spec.NodeName))
			continue
		}
		if !isNodeReady(node) && hasOutOfServiceTaint(node) {
			logger.V(4).Info("Garbage collecting pod that is terminating", "pod", klog.KObj(pod), "phase", pod.Status.Phase)
			victims = append(victims, pod)
		}
	}
	if len(victims) == 0 {
		return
	}
	logger.V(4).Info("Garbage collecting pods that are terminating on node tainted with node.kubernetes.io/out-of-service", "numPods", len(victims))
	sort.Sort(byEvictionAndCreationTimestamp(victims))
	gcc.deleteAll(ctx, victims, reasonTerminatingOutOfService, nil)
}

// gcTerminated deletes the terminated pods above the threshold, evicted
// ones first, then oldest first.
func (gcc *Controller) gcTerminated(ctx context.Context, pods []*v1.Pod) {
	var terminated []*v1.Pod
	for _, pod := range pods {
		if isPodTerminated(pod) {
			terminated = append(terminated, pod)
		}
	}
	n := len(terminated) - gcc.terminatedPodThreshold
	if n <= 0 {
		return
	}
	klog.FromContext(ctx).Info("Garbage collecting pods", "numPods", n)
	sort.Sort(byEvictionAndCreationTimestamp(terminated))
	gcc.deleteAll(ctx, terminated[:n], reasonTerminated, nil)
}

// deleteAll deletes pods in parallel, counting attempts and errors.
func (gcc *Controller) deleteAll(ctx context.Context, pods []*v1.Pod, reason string, cond func(*v1.Pod) *v1.PodCondition) {
	var wg sync.WaitGroup
	for _, pod := range pods {
		wg.Go(func() {
			gcc.deleteOne(ctx, pod, reason, cond)
		})
	}
	wg.Wait()
}

func (gcc *Controller) deleteOne(ctx context.Context, pod *v1.Pod, reason string, cond func(*v1.Pod) *v1.PodCondition) {
	var c *v1.PodCondition
	if cond != nil {
		c = cond(pod)
	}
	deletingPodsTotal.WithLabelValues(pod.Namespace, reason).Inc()
	if err := gcc.markFailedAndDeletePod(ctx, pod, c); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Failed to delete pod", "pod", klog.KObj(pod), "reason", reason)
		deletingPodsErrorTotal.WithLabelValues(pod.Namespace, reason).Inc()
		return
	}
	if reason == reasonOrphaned || reason == reasonTerminatingUnscheduled {
		klog.FromContext(ctx).Info("Forced deletion of pod succeeded", "pod", klog.KObj(pod), "reason", reason)
	}
}

// gcOrphaned deletes pods bound to nodes that are missing from the cache
// and, after the quarantine, also from a live read.
func (gcc *Controller) gcOrphaned(ctx context.Context, pods []*v1.Pod, nodes []*v1.Node) {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("GC'ing orphaned")
	existing := sets.New[string]()
	for _, n := range nodes {
		existing.Insert(n.Name)
	}
	for _, pod := range pods {
		if pod.Spec.NodeName != "" && !existing.Has(pod.Spec.NodeName) {
			gcc.nodeQueue.AddAfter(pod.Spec.NodeName, gcc.quarantineTime)
		}
	}
	deleted, quit := gcc.discoverDeletedNodes(ctx, existing)
	if quit {
		return
	}
	for _, pod := range pods {
		if !deleted.Has(pod.Spec.NodeName) {
			continue
		}
		logger.V(2).Info("Found orphaned Pod assigned to the Node, deleting", "pod", klog.KObj(pod), "node", klog.KRef("", pod.Spec.NodeName))
		gcc.deleteOne(ctx, pod, reasonOrphaned, func(p *v1.Pod) *v1.PodCondition {
			return &v1.PodCondition{
				Type: v1.DisruptionTarget,
				// PodObservedGenerationTracking is GA in v1.37.
				ObservedGeneration: p.Generation,
				Status:             v1.ConditionTrue,
				Reason:             "DeletionByPodGC",
				Message:            "PodGC: node no longer exists",
			}
		})
	}
}

// discoverDeletedNodes drains the nodes whose quarantine has passed and
// returns those still missing from the cache and from the apiserver.
func (gcc *Controller) discoverDeletedNodes(ctx context.Context, existing sets.Set[string]) (sets.Set[string], bool) {
	deleted := sets.New[string]()
	for gcc.nodeQueue.Len() > 0 {
		name, quit := gcc.nodeQueue.Get()
		if quit {
			return nil, true
		}
		if !existing.Has(name) {
			exists, err := gcc.nodeExists(ctx, name)
			switch {
			case err != nil:
				klog.FromContext(ctx).Error(err, "Error while getting node", "node", klog.KRef("", name))
			case !exists:
				deleted.Insert(name)
			}
		}
		gcc.nodeQueue.Done(name)
	}
	return deleted, false
}

func (gcc *Controller) nodeExists(ctx context.Context, name string) (bool, error) {
	_, err := gcc.kubeClient.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// gcUnscheduledTerminating deletes terminating pods with no node: no
// kubelet will ever confirm their termination.
func (gcc *Controller) gcUnscheduledTerminating(ctx context.Context, pods []*v1.Pod) {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("GC'ing unscheduled pods which are terminating")
	for _, pod := range pods {
		if pod.DeletionTimestamp == nil || pod.Spec.NodeName != "" {
			continue
		}
		logger.V(2).Info("Found unscheduled terminating Pod not assigned to any Node, deleting", "pod", klog.KObj(pod))
		gcc.deleteOne(ctx, pod, reasonTerminatingUnscheduled, nil)
	}
}

// byEvictionAndCreationTimestamp: evicted pods first, then oldest, then by name.
type byEvictionAndCreationTimestamp []*v1.Pod

func (o byEvictionAndCreationTimestamp) Len() int      { return len(o) }
func (o byEvictionAndCreationTimestamp) Swap(i, j int) { o[i], o[j] = o[j], o[i] }
func (o byEvictionAndCreationTimestamp) Less(i, j int) bool {
	ie, je := isEvicted(o[i]), isEvicted(o[j])
	if ie != je {
		return ie
	}
	if o[i].CreationTimestamp.Equal(&o[j].CreationTimestamp) {
		return o[i].Name < o[j].Name
	}
	return o[i].CreationTimestamp.Before(&o[j].CreationTimestamp)
}

func isEvicted(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodFailed && p.Status.Reason == evictedReason
}

// markFailedAndDeletePod moves a non-terminal pod to Failed (with cond, if
// any) so controllers count it as failed, then deletes it with no grace.
func (gcc *Controller) markFailedAndDeletePod(ctx context.Context, pod *v1.Pod, cond *v1.PodCondition) error {
	klog.FromContext(ctx).Info("PodGC is force deleting Pod", "pod", klog.KObj(pod))
	if pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed {
		status := pod.Status.DeepCopy()
		status.Phase = v1.PodFailed
		status.ObservedGeneration = pod.Generation
		if cond != nil {
			setPodCondition(status, cond, metav1.Now())
		}
		if err := patchPodStatus(ctx, gcc.kubeClient, pod, *status); err != nil {
			return err
		}
	}
	return gcc.kubeClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, *metav1.NewDeleteOptions(0))
}

// setPodCondition adds or updates a condition, keeping the transition time
// when the status does not change.
func setPodCondition(status *v1.PodStatus, cond *v1.PodCondition, now metav1.Time) {
	c := *cond
	c.LastTransitionTime = now
	for i := range status.Conditions {
		old := &status.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		*old = c
		return
	}
	status.Conditions = append(status.Conditions, c)
}

// patchPodStatus sends a strategic-merge patch of the status subresource
// from pod.Status to status, with the pod UID as a precondition.
func patchPodStatus(ctx context.Context, c clientset.Interface, pod *v1.Pod, status v1.PodStatus) error {
	oldData, err := json.Marshal(v1.Pod{Status: pod.Status})
	if err != nil {
		return err
	}
	newData, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: pod.UID}, Status: status})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Pod{})
	if err != nil {
		return fmt.Errorf("failed to CreateTwoWayMergePatch for pod %q/%q: %v", pod.Namespace, pod.Name, err)
	}
	if string(patch) == fmt.Sprintf(`{"metadata":{"uid":%q}}`, pod.UID) {
		return nil // nothing changed
	}
	if _, err := c.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("failed to patch status %q for pod %q/%q: %v", patch, pod.Namespace, pod.Name, err)
	}
	return nil
}
