package resourceclaim

import (
	"context"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourceclaim/podclaims"
)

// syncClaim drops consumers that are done or gone from reservedFor,
// deallocates the claim when the last one went (or when it is being
// deleted unused), lifts the delete-protection finalizer once nothing is
// allocated, and deletes an unused generated claim whose pod is done.
func (ec *Controller) syncClaim(ctx context.Context, namespace, name string) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "claim", klog.KRef(namespace, name))
	ctx = klog.NewContext(ctx, logger)
	claim, err := ec.claimLister.ResourceClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(5).Info("Nothing to do for claim, it is gone")
		return nil
	}
	if err != nil {
		return err
	}

	remaining := make([]resourceapi.ResourceClaimConsumerReference, 0, len(claim.Status.ReservedFor))
	for _, consumer := range claim.Status.ReservedFor {
		keep := true
		switch {
		case podclaims.IsPodConsumer(consumer):
			keep, err = ec.podStillUsesClaim(ctx, claim, consumer)
		case ec.features.WorkloadResourceClaims && podclaims.IsPodGroupConsumer(consumer):
			keep, err = ec.podGroupStillExists(ctx, claim, consumer)
		default:
			// Consumers of kinds this controller does not know stay.
		}
		if err != nil {
			return err
		}
		if keep {
			remaining = append(remaining, consumer)
		}
	}

	protected := slices.Contains(claim.Finalizers, resourceapi.Finalizer)
	logger.V(5).Info("Claim reserved for counts", "currentCount", len(claim.Status.ReservedFor), "updatedCount", len(remaining), "builtinController", protected)
	switch {
	case len(remaining) < len(claim.Status.ReservedFor):
		if err := ec.releaseClaim(ctx, claim, remaining); err != nil {
			return err
		}
	case protected && claim.DeletionTimestamp != nil && len(remaining) == 0:
		if err := ec.unprotectDeletedClaim(ctx, claim); err != nil {
			return err
		}
	}

	if len(remaining) == 0 {
		return ec.deleteIfPodDone(ctx, claim)
	}
	return nil
}

// podStillUsesClaim decides whether a pod in reservedFor keeps its entry.
// A pod seen being deleted goes at once; one missing from the informer is
// checked with the apiserver, because the scheduler may just have reserved
// the claim for a pod the informer has not delivered yet.
func (ec *Controller) podStillUsesClaim(ctx context.Context, claim *resourceapi.ResourceClaim, consumer resourceapi.ResourceClaimConsumerReference) (bool, error) {
	logger := klog.FromContext(ctx)
	if ec.deleted.Has(consumer.UID) {
		return false, nil
	}
	pod, err := ec.podLister.Pods(claim.Namespace).Get(consumer.Name)
	switch {
	case apierrors.IsNotFound(err):
		pod, err := ec.kubeClient.CoreV1().Pods(claim.Namespace).Get(ctx, consumer.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		if err != nil || pod == nil || pod.UID != consumer.UID {
			logger.V(6).Info("Remove reservation because pod is gone or got replaced", "pod", klog.KRef(claim.Namespace, consumer.Name))
			return false, nil
		}
		return true, nil
	case err != nil:
		return false, err
	case pod.UID != consumer.UID:
		logger.V(6).Info("Remove reservation because pod got replaced with new instance", "pod", klog.KObj(pod))
		return false, nil
	case isPodDone(pod):
		logger.V(6).Info("Remove reservation because pod will not run anymore", "pod", klog.KObj(pod))
		return false, nil
	}
	return true, nil
}

// podGroupStillExists is podStillUsesClaim for a PodGroup in reservedFor:
// it keeps its entry for as long as it exists.
func (ec *Controller) podGroupStillExists(ctx context.Context, claim *resourceapi.ResourceClaim, consumer resourceapi.ResourceClaimConsumerReference) (bool, error) {
	logger := klog.FromContext(ctx)
	if ec.deleted.Has(consumer.UID) {
		return false, nil
	}
	podGroup, err := ec.podGroupLister.PodGroups(claim.Namespace).Get(consumer.Name)
	switch {
	case apierrors.IsNotFound(err):
		podGroup, err := ec.kubeClient.SchedulingV1beta1().PodGroups(claim.Namespace).Get(ctx, consumer.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		if err != nil || podGroup == nil || podGroup.UID != consumer.UID {
			logger.V(6).Info("Remove reservation because PodGroup is gone or got replaced", "podgroup", klog.KRef(claim.Namespace, consumer.Name))
			return false, nil
		}
		return true, nil
	case err != nil:
		return false, err
	case podGroup.UID != consumer.UID:
		logger.V(6).Info("Remove reservation because PodGroup got replaced with new instance", "podgroup", klog.KObj(podGroup))
		return false, nil
	}
	return true, nil
}

// releaseClaim writes the shorter reservedFor. When nobody is left, the
// claim is deallocated (if the scheduler allocated it, i.e. it carries the
// finalizer): a claim is allocated again for its next consumer rather than
// tying that one to the node chosen for the last. Without an allocation
// the finalizer goes too.
func (ec *Controller) releaseClaim(ctx context.Context, claim *resourceapi.ResourceClaim, remaining []resourceapi.ResourceClaimConsumerReference) error {
	logger := klog.FromContext(ctx)
	claim = claim.DeepCopy()
	claim.Status.ReservedFor = remaining
	if len(remaining) == 0 && slices.Contains(claim.Finalizers, resourceapi.Finalizer) {
		claim.Status.Allocation = nil
	}
	// An update, not a patch: it must fail if the claim changed meanwhile.
	claim, err := ec.kubeClient.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	logger.V(5).Info("Removed consumers", "currentCount", len(claim.Status.ReservedFor), "allocated", claim.Status.Allocation != nil)
	if claim.Status.Allocation == nil && slices.Contains(claim.Finalizers, resourceapi.Finalizer) {
		if err := ec.removeFinalizer(ctx, claim); err != nil {
			return err
		}
		logger.V(5).Info("Removed finalizer after removing consumers")
	}
	return nil
}

// unprotectDeletedClaim deallocates an unused claim that is being deleted
// (it may have stayed allocated after its last user) and lifts its
// finalizer so that the deletion can finish.
func (ec *Controller) unprotectDeletedClaim(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	logger := klog.FromContext(ctx)
	claim = claim.DeepCopy()
	if claim.Status.Allocation != nil {
		claim.Status.Allocation = nil
		var err error
		claim, err = ec.kubeClient.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		logger.V(5).Info("Removed allocation because not needed")
	}
	if err := ec.removeFinalizer(ctx, claim); err != nil {
		return err
	}
	logger.V(5).Info("Removed finalizer because not needed")
	return nil
}

// removeFinalizer updates claim (which the caller owns) without the
// delete-protection finalizer.
func (ec *Controller) removeFinalizer(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	i := slices.Index(claim.Finalizers, resourceapi.Finalizer)
	if i < 0 {
		return nil
	}
	claim.Finalizers = slices.Delete(claim.Finalizers, i, i+1)
	_, err := ec.kubeClient.ResourceV1().ResourceClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
	return err
}

// deleteIfPodDone deletes an unused claim generated for a pod that is done
// or was replaced. The garbage collector would do it only once the pod
// object is gone, which may take long.
func (ec *Controller) deleteIfPodDone(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	logger := klog.FromContext(ctx)
	podName, podUID := owningPod(claim)
	if podName == "" {
		logger.V(5).Info("Claim not generated for a pod")
		return nil
	}
	pod, err := ec.podLister.Pods(claim.Namespace).Get(podName)
	switch {
	case apierrors.IsNotFound(err):
		// Perhaps not in the informer yet; if it is really gone, the
		// garbage collector takes the claim.
		logger.V(5).Info("Pod for claim not found", "pod", klog.KRef(claim.Namespace, podName))
		return nil
	case err != nil:
		return fmt.Errorf("lookup pod: %v", err)
	case pod.UID != podUID || isPodDone(pod):
		if err := ec.kubeClient.ResourceV1().ResourceClaims(claim.Namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete unused generated claim %s: %w", klog.KObj(claim), err)
		}
		logger.V(5).Info("Deleted unused generated claim", "pod", klog.KObj(pod))
	}
	return nil
}

// owningPod returns name and UID of the pod controlling the claim.
func owningPod(claim *resourceapi.ResourceClaim) (string, types.UID) {
	for _, owner := range claim.OwnerReferences {
		if isPodController(owner) {
			return owner.Name, owner.UID
		}
	}
	return "", ""
}
