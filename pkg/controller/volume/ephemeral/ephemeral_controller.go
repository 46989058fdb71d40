// Package ephemeral implements the ephemeral-volume-controller: for every
// generic ephemeral volume of a pod it creates the PersistentVolumeClaim
// <pod>-<volume> from the volume's claim template, controlled by the pod so
// that the garbage collector deletes it with the pod.
package ephemeral

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ephemeralutil "k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// queueName labels the workqueue metrics, as upstream names it.
	queueName = "ephemeral_volume"
	// eventComponent is the source of the events this controller records.
	eventComponent = "ephemeral_volume"
	// EventReasonFailedBinding is the reason of the warning recorded on a pod
	// whose claim could not be created or is not its own.
	EventReasonFailedBinding = "FailedBinding"
)

// Controller creates the PVCs of generic ephemeral volumes.
type Controller struct {
	kubeClient  clientset.Interface
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	podLister  corelisters.PodLister
	podIndexer cache.Indexer
	podsSynced cache.InformerSynced
	pvcLister  corelisters.PersistentVolumeClaimLister
	pvcsSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]
}

// NewController wires the controller to the pod and PVC informers. Its
// queue holds namespace/name keys of pods.
func NewController(ctx context.Context, kubeClient clientset.Interface, podInformer coreinformers.PodInformer, pvcInformer coreinformers.PersistentVolumeClaimInformer) (*Controller, error) {
	registerMetrics()
	broadcaster, recorder := controller.NewEventRecorder(ctx, eventComponent)
	ec := &Controller{
		kubeClient:  kubeClient,
		broadcaster: broadcaster,
		recorder:    recorder,
		podLister:   podInformer.Lister(),
		podIndexer:  podInformer.Informer().GetIndexer(),
		podsSynced:  podInformer.Informer().HasSynced,
		pvcLister:   pvcInformer.Lister(),
		pvcsSynced:  pvcInformer.Informer().HasSynced,
		queue:       controller.NewNamedQueue(queueName),
	}
	ec.loop = controller.WorkLoop[string]{Name: queueName, Queue: ec.queue, Sync: ec.syncPod}

	logger := klog.FromContext(ctx)
	// A pod spec cannot change, so only new pods can need a claim; a deleted
	// pod's claims go through the garbage collector.
	if _, err := podInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc: ec.enqueuePod,
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return nil, fmt.Errorf("could not add pod event handler: %w", err)
	}
	// A claim deleted while its pod still exists is created again.
	if _, err := pvcInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		DeleteFunc: ec.deletePVC,
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return nil, fmt.Errorf("could not add pvc event handler: %w", err)
	}
	if err := AddPodPVCIndexer(podInformer.Informer()); err != nil {
		return nil, fmt.Errorf("could not initialize ephemeral volume controller: %w", err)
	}
	return ec, nil
}

// Run starts sending events, waits for the caches and syncs pods with
// workers goroutines (--concurrent-ephemeralvolume-syncs) until ctx is
// cancelled.
func (ec *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	stopEvents := controller.StartEventSink(ec.broadcaster, ec.kubeClient)
	defer stopEvents()
	ec.loop.Run(ctx, workers, ec.podsSynced, ec.pvcsSynced)
}

// enqueuePod queues a pod that is not being deleted and has at least one
// ephemeral volume.
func (ec *Controller) enqueuePod(obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.DeletionTimestamp != nil || !hasEphemeralVolume(pod) {
		return
	}
	key, err := controller.KeyFunc(pod)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for pod %s: %w", klog.KObj(pod), err))
		return
	}
	ec.queue.Add(key)
}

func hasEphemeralVolume(pod *v1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Ephemeral != nil {
			return true
		}
	}
	return false
}

// deletePVC queues the pods that name the deleted claim; the index narrows
// them down and the sync decides whether the claim was theirs.
func (ec *Controller) deletePVC(obj interface{}) {
	obj = controller.Untombstone(obj)
	pvc, ok := obj.(*v1.PersistentVolumeClaim)
	if !ok {
		return
	}
	pods, err := PodsForPVC(ec.podIndexer, pvc.Namespace, pvc.Name)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("listing pods from cache: %w", err))
		return
	}
	for _, pod := range pods {
		ec.enqueuePod(pod)
	}
}

// syncPod makes sure every ephemeral volume of the pod has its claim. The
// first volume that fails stops the sync: a warning event on the pod says
// why, and the pod is retried with backoff.
func (ec *Controller) syncPod(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	pod, err := ec.podLister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(5).Info("Ephemeral: nothing to do for pod, it is gone", "podKey", key)
		return nil
	}
	if err != nil {
		return err
	}
	if pod.DeletionTimestamp != nil {
		logger.V(5).Info("Ephemeral: nothing to do for pod, it is marked for deletion", "podKey", key)
		return nil
	}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if err := ec.ensureClaim(ctx, pod, vol); err != nil {
			ec.recorder.Event(pod, v1.EventTypeWarning, EventReasonFailedBinding, fmt.Sprintf("ephemeral volume %s: %v", vol.Name, err))
			return fmt.Errorf("pod %s, ephemeral volume %s: %w", key, vol.Name, err)
		}
	}
	return nil
}

// ensureClaim creates the claim of an ephemeral volume unless it exists.
// An existing claim that is not the pod's is an error: the pod must not
// use somebody else's data.
func (ec *Controller) ensureClaim(ctx context.Context, pod *v1.Pod, vol *v1.Volume) error {
	if vol.Ephemeral == nil {
		return nil
	}
	logger := klog.FromContext(ctx)
	claimName := ephemeralutil.VolumeClaimName(pod, vol)
	existing, err := ec.pvcLister.PersistentVolumeClaims(pod.Namespace).Get(claimName)
	switch {
	case err == nil:
		if err := ephemeralutil.VolumeIsForPod(pod, existing); err != nil {
			return err
		}
		logger.V(5).Info("Ephemeral: PVC already created", "volumeName", vol.Name, "PVC", klog.KObj(existing))
		return nil
	case !apierrors.IsNotFound(err):
		return err
	}

	pvc, err := claimFor(pod, vol, claimName)
	if err != nil {
		return err
	}
	createAttempts.Inc()
	if _, err := ec.kubeClient.CoreV1().PersistentVolumeClaims(pod.Namespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		createFailures.Inc()
		return fmt.Errorf("create PVC %s: %w", claimName, err)
	}
	logger.V(4).Info("Ephemeral: created PVC", "volumeName", vol.Name, "PVC", klog.KRef(pod.Namespace, claimName))
	return nil
}

// claimFor builds the claim of vol from its template, controlled by pod
// (blocking the pod's foreground deletion until the claim is gone).
func claimFor(pod *v1.Pod, vol *v1.Volume, claimName string) (*v1.PersistentVolumeClaim, error) {
	template := vol.Ephemeral.VolumeClaimTemplate
	if template == nil {
		// The apiserver requires a template; do not crash on a bad object.
		return nil, errors.New("volumeClaimTemplate is missing")
	}
	// Copy so the informer's pod is never aliased by the new object.
	template = template.DeepCopy()
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        claimName,
			Labels:      template.Labels,
			Annotations: template.Annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         "v1",
				Kind:               "Pod",
				Name:               pod.Name,
				UID:                pod.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: template.Spec,
	}, nil
}
