// Package podgroupprotection implements the podgroup-protection-controller.
// The apiserver's PodGroupProtection admission plugin puts the
// scheduling.k8s.io/podgroup-protection finalizer on every new PodGroup;
// this controller takes it off a PodGroup being deleted once no active
// (not Succeeded or Failed) pod names the group in
// spec.schedulingGroup.podGroupName.
package podgroupprotection

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	schedulinginformers "k8s.io/client-go/informers/scheduling/v1beta1"
	clientset "k8s.io/client-go/kubernetes"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// Finalizer is the finalizer the admission plugin adds and this
	// controller removes.
	Finalizer = "scheduling.k8s.io/podgroup-protection"
	// queueName labels the workqueue metrics, as upstream names it.
	queueName = "podgroupprotection"
	// activePodIndex maps "namespace/podGroupName" to the active pods of
	// that group, so a sync does not scan every pod.
	activePodIndex = "activePodSchedulingGroup"
)

// Controller removes the protection finalizer from unused PodGroups being
// deleted. Its queue holds "namespace/name" keys of PodGroups.
type Controller struct {
	client clientset.Interface

	podGroupLister schedulinglisters.PodGroupLister
	podGroupSynced cache.InformerSynced
	podIndexer     cache.Indexer
	podSynced      cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]
}

// NewController wires the controller to its informers
// and adds the active-pod index to the pod informer.
func NewController(logger klog.Logger,
	podGroupInformer schedulinginformers.PodGroupInformer,
	podInformer coreinformers.PodInformer,
	client clientset.Interface) (*Controller, error) {
	c := &Controller{
		client:         client,
		podGroupLister: podGroupInformer.Lister(),
		podGroupSynced: podGroupInformer.Informer().HasSynced,
		podIndexer:     podInformer.Informer().GetIndexer(),
		podSynced:      podInformer.Informer().HasSynced,
		queue:          controller.NewNamedQueue(queueName),
	}
	c.loop = controller.WorkLoop[string]{Name: queueName, Queue: c.queue, Sync: c.syncPodGroup}

	opts := cache.HandlerOptions{Logger: &logger}
	if _, err := podGroupInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.podGroupChanged(logger, obj) },
		UpdateFunc: func(_, cur interface{}) { c.podGroupChanged(logger, cur) },
	}, opts); err != nil {
		return nil, fmt.Errorf("failed to add event handler to PodGroup informer: %w", err)
	}
	if err := podInformer.Informer().AddIndexers(cache.Indexers{activePodIndex: activePodGroupKeys}); err != nil {
		return nil, fmt.Errorf("could not initialize PodGroup protection controller: %w", err)
	}
	if _, err := podInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.podChanged(logger, nil, obj) },
		UpdateFunc: func(old, cur interface{}) { c.podChanged(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { c.podChanged(logger, obj, nil) },
	}, opts); err != nil {
		return nil, fmt.Errorf("failed to add event handler to pod informer: %w", err)
	}
	return c, nil
}

// Run waits for the caches and syncs PodGroups with workers goroutines
// until ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting PodGroup protection controller")
	defer logger.Info("Shutting down PodGroup protection controller")
	if !controller.WaitForCacheSync(ctx, queueName, c.podGroupSynced, c.podSynced) {
		c.queue.ShutDown()
		return
	}
	c.loop.RunWorkers(ctx, workers)
}

// podGroupName is the group a pod belongs to, or "" for none.
func podGroupName(pod *v1.Pod) string {
	if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
		return *g.PodGroupName
	}
	return ""
}

func isTerminated(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// activePodGroupKeys indexes a pod that has not terminated under its group.
func activePodGroupKeys(obj interface{}) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok || isTerminated(pod) {
		return nil, nil
	}
	if name := podGroupName(pod); name != "" {
		return []string{pod.Namespace + "/" + name}, nil
	}
	return nil, nil
}

func isDeletionCandidate(pg *schedulingv1beta1.PodGroup) bool {
	return pg.DeletionTimestamp != nil && slices.Contains(pg.Finalizers, Finalizer)
}

func (c *Controller) syncPodGroup(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Processing PodGroup", "podGroup", key)
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("error parsing PodGroup key %q: %w", key, err)
	}
	pg, err := c.podGroupLister.PodGroups(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("PodGroup not found, ignoring", "podGroup", key)
		return nil
	}
	if err != nil {
		return err
	}
	if !isDeletionCandidate(pg) {
		return nil
	}
	active, err := c.podIndexer.ByIndex(activePodIndex, key)
	if err != nil {
		return fmt.Errorf("index-based list of active pods failed for PodGroup %s: %w", key, err)
	}
	if len(active) > 0 {
		logger.V(4).Info("Keeping PodGroup finalizer because it is still being used by pods", "podGroup", klog.KObj(pg), "pod", klog.KObj(active[0].(*v1.Pod)))
		return nil
	}
	return c.removeFinalizer(ctx, pg)
}

// removeFinalizer writes with Update (not a patch) as upstream, so a
// PodGroup changed since the cache read fails with a conflict and is
// synced again.
func (c *Controller) removeFinalizer(ctx context.Context, pg *schedulingv1beta1.PodGroup) error {
	logger := klog.FromContext(ctx)
	clone := pg.DeepCopy()
	clone.Finalizers = slices.DeleteFunc(clone.Finalizers, func(f string) bool { return f == Finalizer })
	if _, err := c.client.SchedulingV1beta1().PodGroups(clone.Namespace).Update(ctx, clone, metav1.UpdateOptions{}); err != nil {
		logger.Error(err, "Error removing protection finalizer from PodGroup", "podGroup", klog.KObj(pg))
		return err
	}
	logger.V(3).Info("Removed protection finalizer from PodGroup", "podGroup", klog.KObj(pg))
	return nil
}

// podGroupChanged queues a PodGroup only when it waits for its finalizer.
func (c *Controller) podGroupChanged(logger klog.Logger, obj interface{}) {
	pg, ok := obj.(*schedulingv1beta1.PodGroup)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("PodGroup informer returned non-PodGroup object: %#v", obj))
		return
	}
	if !isDeletionCandidate(pg) {
		return
	}
	logger.V(4).Info("Got event on PodGroup", "podGroup", klog.KObj(pg))
	c.queue.Add(pg.Namespace + "/" + pg.Name)
}

// podChanged queues the group of a pod that stopped counting as active:
// it terminated or went away. A pod added or still running can only keep
// a group in use, so it is ignored.
func (c *Controller) podChanged(logger klog.Logger, old, cur interface{}) {
	oldPod, curPod := podFrom(old), podFrom(cur)
	if curPod != nil && isTerminated(curPod) {
		c.enqueueGroupOf(logger, curPod)
	}
	// An update may hide a delete and re-create under the same name; the
	// old pod may have been the last one holding its group.
	if curPod != nil && oldPod != nil && oldPod.UID != curPod.UID {
		c.enqueueGroupOf(logger, oldPod)
	}
	if curPod == nil && oldPod != nil {
		c.enqueueGroupOf(logger, oldPod)
	}
}

func (c *Controller) enqueueGroupOf(logger klog.Logger, pod *v1.Pod) {
	name := podGroupName(pod)
	if name == "" {
		return
	}
	key := pod.Namespace + "/" + name
	logger.V(4).Info("Enqueuing PodGroup for pod event", "pod", klog.KObj(pod), "podGroup", key)
	c.queue.Add(key)
}

// podFrom unwraps a pod from an event object, tombstones included.
func podFrom(obj interface{}) *v1.Pod {
	pod, _ := controller.ObjectFromEvent[*v1.Pod](obj)
	return pod
}
