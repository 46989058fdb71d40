package resourceclaim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	schedulingapply "k8s.io/client-go/applyconfigurations/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourceclaim/podclaims"
)

// maxGenerateNameBase leaves room for the 5 random characters the
// apiserver appends, within a 63 character name.
const maxGenerateNameBase = 57

// syncPod creates the pod's missing claims from their templates, records
// them in the pod status and, once the pod is scheduled, reserves its
// allocated claims for it.
func (ec *Controller) syncPod(ctx context.Context, namespace, name string) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pod", klog.KRef(namespace, name))
	ctx = klog.NewContext(ctx, logger)
	pod, err := ec.podLister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(5).Info("Nothing to do for pod, it is gone")
		return nil
	}
	if err != nil {
		return err
	}
	if pod.DeletionTimestamp != nil {
		logger.V(5).Info("Nothing to do for pod, it is marked for deletion")
		return nil
	}

	podGroup, err := ec.getPodGroup(pod)
	if err != nil {
		return fmt.Errorf("get PodGroup for Pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}

	created := map[string]string{}
	for i := range pod.Spec.ResourceClaims {
		podClaim := &pod.Spec.ResourceClaims[i]
		if err := ec.ensurePodClaim(ctx, pod, podGroup, podClaim, created); err != nil {
			ec.warn(pod, EventReasonFailedResourceClaimCreation, fmt.Sprintf("PodResourceClaim %s: %v", podClaim.Name, err))
			return fmt.Errorf("pod %s/%s, PodResourceClaim %s: %v", namespace, name, podClaim.Name, err)
		}
	}
	if len(created) > 0 {
		if err := ec.applyPodClaimStatuses(ctx, pod, created); err != nil {
			return err
		}
	}

	if pod.Spec.NodeName == "" {
		logger.V(5).Info("Nothing to do for pod, scheduler will deal with it")
		return nil
	}
	return ec.reserveForPod(ctx, pod, podGroup)
}

// applyPodClaimStatuses sets pod.status.resourceClaimStatuses to the known
// entries plus the new ones, sorted by name, with server-side apply.
func (ec *Controller) applyPodClaimStatuses(ctx context.Context, pod *v1.Pod, created map[string]string) error {
	merged := map[string]string{}
	for _, status := range pod.Status.ResourceClaimStatuses {
		if status.ResourceClaimName != nil {
			merged[status.Name] = *status.ResourceClaimName
		}
	}
	maps.Copy(merged, created)
	statuses := make([]*corev1apply.PodResourceClaimStatusApplyConfiguration, 0, len(merged))
	for _, podClaimName := range slices.Sorted(maps.Keys(merged)) {
		statuses = append(statuses, corev1apply.PodResourceClaimStatus().WithName(podClaimName).WithResourceClaimName(merged[podClaimName]))
	}
	apply := corev1apply.Pod(pod.Name, pod.Namespace).WithStatus(corev1apply.PodStatus().WithResourceClaimStatuses(statuses...))
	if _, err := ec.kubeClient.CoreV1().Pods(pod.Namespace).ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("update pod %s/%s ResourceClaimStatuses: %v", pod.Namespace, pod.Name, err)
	}
	return nil
}

// reserveForPod adds the scheduled pod (or its PodGroup) to reservedFor of
// every allocated claim it uses that does not list it yet.
func (ec *Controller) reserveForPod(ctx context.Context, pod *v1.Pod, podGroup *schedulingapi.PodGroup) error {
	logger := klog.FromContext(ctx)
	for i := range pod.Spec.ResourceClaims {
		podClaim := &pod.Spec.ResourceClaims[i]
		name, checkOwner, err := podclaims.Name(pod, podClaim)
		if err != nil {
			return err
		}
		if name == nil {
			continue
		}
		claim, err := ec.claimLister.ResourceClaims(pod.Namespace).Get(*name)
		if apierrors.IsNotFound(err) {
			// The claim event brings the pod back.
			return nil
		}
		if err != nil {
			return fmt.Errorf("retrieve claim: %v", err)
		}
		if checkOwner {
			if err := podclaims.IsForPod(pod, claim, ec.features.WorkloadResourceClaims); err != nil {
				return err
			}
		}
		if claim.Status.Allocation == nil || podclaims.IsReservedForPod(pod, claim, ec.features.WorkloadResourceClaims) {
			continue
		}
		bindTo, err := podclaims.BindTo(pod, podGroup, podClaim)
		if err != nil {
			return err
		}
		if podclaims.IsPodGroupConsumer(bindTo) && !ec.features.WorkloadResourceClaims {
			// Logged at a low level: a claim staying allocated but
			// unreserved is something admins want to find.
			logger.V(3).Info("Not reserving PodGroup ResourceClaim because feature is disabled", "feature", DRAWorkloadResourceClaims, "resourceClaim", klog.KObj(claim))
			continue
		}
		logger.V(5).Info("Reserve claim", "resourceClaim", klog.KObj(claim), "reservedForResource", bindTo.Resource)
		claim = claim.DeepCopy()
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, bindTo)
		if _, err := ec.kubeClient.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("reserve claim %s: %w", klog.KObj(claim), err)
		}
	}
	return nil
}

// ensurePodClaim makes sure the claim of one spec.resourceClaims entry
// exists; when the pod status must (newly or again) point at a claim, its
// name goes into created under the entry's name.
func (ec *Controller) ensurePodClaim(ctx context.Context, pod *v1.Pod, podGroup *schedulingapi.PodGroup, podClaim *v1.PodResourceClaim, created map[string]string) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "podClaim", podClaim.Name)
	ctx = klog.NewContext(ctx, logger)

	// Name is called even for entries without a template: an API field
	// this code does not know must not be ignored silently.
	name, checkOwner, err := podclaims.Name(pod, podClaim)
	switch {
	case errors.Is(err, podclaims.ErrNotCreated):
	case err != nil:
		return fmt.Errorf("checking for claim before creating it: %v", err)
	case name == nil:
		return nil
	case *name != "":
		// The status names a claim; it exists unless somebody deleted it,
		// in which case it is made again.
		exists, err := ec.claimExists(ctx, pod.Namespace, *name, func(claim *resourceapi.ResourceClaim) bool {
			if !checkOwner {
				return true
			}
			if err := podclaims.IsForPod(pod, claim, ec.features.WorkloadResourceClaims); err != nil {
				logger.Error(err, "Claim that was created for the pod is no longer owned by the pod, creating a new one", "resourceClaim", *name)
				return false
			}
			return true
		})
		if err != nil {
			return fmt.Errorf("checking claim existence: %w", err)
		}
		if exists {
			logger.V(5).Info("Claim already created", "resourceClaim", *name)
			return nil
		}
	}
	if podClaim.ResourceClaimTemplateName == nil {
		return nil
	}

	bindTo, err := podclaims.BindTo(pod, podGroup, podClaim)
	if err != nil {
		return err
	}
	var claim *resourceapi.ResourceClaim
	if podclaims.IsPodGroupConsumer(bindTo) {
		// The PodGroup's claim is made by the PodGroup sync; the pod only
		// points at it once it exists.
		if !ec.features.WorkloadResourceClaims {
			return nonRetryableError{fmt.Errorf("claim %s is a PodGroup claim but the %s feature is disabled", podClaim.Name, DRAWorkloadResourceClaims)}
		}
		claim, err = ec.findOwnedClaim(claimPodGroupOwnerIndex, podGroup.Namespace, podGroup.UID, podClaim.Name)
		if err != nil {
			return fmt.Errorf("finding ResourceClaim for claim %s in PodGroup %s/%s failed: %w", podClaim.Name, podGroup.Namespace, podGroup.Name, err)
		}
	} else {
		// A claim made earlier whose name did not make it into the pod
		// status (the status update failed) is taken instead of a new one.
		claim, err = ec.findOwnedClaim(claimPodOwnerIndex, pod.Namespace, pod.UID, podClaim.Name)
		if err != nil {
			return fmt.Errorf("finding ResourceClaim for claim %s in pod %s/%s failed: %w", podClaim.Name, pod.Namespace, pod.Name, err)
		}
		if claim == nil {
			owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}
			claim, err = ec.createFromTemplate(ctx, pod.Namespace, pod.Name, podClaim.Name, *podClaim.ResourceClaimTemplateName, owner)
			if err != nil {
				return err
			}
			logger.V(4).Info("Created ResourceClaim", "claim", klog.KObj(claim), "pod", klog.KObj(pod))
		}
	}
	if claim != nil {
		created[podClaim.Name] = claim.Name
	}
	return nil
}

// createFromTemplate creates the claim <owner>-<claim>-xxxxx from the
// template, controlled by owner and annotated with the claim's entry name.
func (ec *Controller) createFromTemplate(ctx context.Context, namespace, ownerName, entryName, templateName string, owner metav1.OwnerReference) (*resourceapi.ResourceClaim, error) {
	template, err := ec.templateLister.ResourceClaimTemplates(namespace).Get(templateName)
	if err != nil {
		return nil, fmt.Errorf("resource claim template %q: %w", templateName, err)
	}
	if !ec.features.AdminAccess && templateNeedsAdminAccess(template) {
		return nil, errors.New("admin access is requested, but the feature is disabled")
	}
	if !ec.features.PrioritizedList && templateHasPrioritizedList(template) {
		return nil, errors.New("template includes a prioritized list of subrequests, but the feature is disabled")
	}

	annotations := maps.Clone(template.Spec.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[resourceapi.PodResourceClaimAnnotation] = entryName
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    claimGenerateName(ownerName, entryName),
			OwnerReferences: []metav1.OwnerReference{owner},
			Annotations:     annotations,
			Labels:          maps.Clone(template.Spec.Labels),
		},
		Spec: *template.Spec.Spec.DeepCopy(),
	}
	newClaim, err := ec.kubeClient.ResourceV1().ResourceClaims(namespace).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		countCreate(claim, "failure")
		return nil, fmt.Errorf("create ResourceClaim %s: %w", claim.Name, err)
	}
	countCreate(claim, "success")
	ec.claimCache.Mutation(newClaim)
	return newClaim, nil
}

// claimGenerateName is "<owner>-<claim>-". When that is too long, both
// parts are cut in proportion to their length (the apiserver would only
// cut the end, losing the claim name), joined by a single dash.
func claimGenerateName(ownerName, entryName string) string {
	base := ownerName + "-" + entryName + "-"
	if n := len(base); n > maxGenerateNameBase {
		return ownerName[:len(ownerName)*maxGenerateNameBase/n] + "-" + entryName[:len(entryName)*maxGenerateNameBase/n]
	}
	return base
}

func templateNeedsAdminAccess(template *resourceapi.ResourceClaimTemplate) bool {
	for _, request := range template.Spec.Spec.Devices.Requests {
		if request.Exactly != nil && ptr.Deref(request.Exactly.AdminAccess, false) {
			return true
		}
	}
	return false
}

func templateHasPrioritizedList(template *resourceapi.ResourceClaimTemplate) bool {
	for _, request := range template.Spec.Spec.Devices.Requests {
		if len(request.FirstAvailable) > 0 {
			return true
		}
	}
	return false
}

// findOwnedClaim returns a claim controlled by the owner with that UID
// (looked up by index, including claims created but not yet seen by the
// informer) that was generated for the entry name, nil if none. With
// several (which should not happen), the first wins; the others go with
// the owner.
func (ec *Controller) findOwnedClaim(index, namespace string, ownerUID types.UID, entryName string) (*resourceapi.ResourceClaim, error) {
	objs, err := ec.claimCache.ByIndex(index, namespace+"/"+string(ownerUID))
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		claim, ok := obj.(*resourceapi.ResourceClaim)
		if !ok {
			return nil, fmt.Errorf("unexpected object of type %T returned by claim cache", obj)
		}
		// Claims without the annotation were not generated from a template.
		if entry, ok := claim.Annotations[resourceapi.PodResourceClaimAnnotation]; ok && entry == entryName {
			return claim, nil
		}
	}
	return nil, nil
}

// claimExists reports whether the named claim exists and passes isOwned.
// The informer (with the controller's own creations) is asked first, the
// apiserver when the claim is not there.
func (ec *Controller) claimExists(ctx context.Context, namespace, name string, isOwned func(*resourceapi.ResourceClaim) bool) (bool, error) {
	obj, found, err := ec.claimCache.GetByKey(cache.NewObjectName(namespace, name).String())
	if err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	claim, _ := obj.(*resourceapi.ResourceClaim)
	if !found || claim == nil {
		claim, err = ec.kubeClient.ResourceV1().ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return isOwned(claim), nil
}

// syncPodGroup creates the PodGroup's missing claims from their templates
// and records them in the PodGroup status.
func (ec *Controller) syncPodGroup(ctx context.Context, namespace, name string) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "podgroup", klog.KRef(namespace, name))
	ctx = klog.NewContext(ctx, logger)
	if ec.podGroupLister == nil {
		return nil
	}
	podGroup, err := ec.podGroupLister.PodGroups(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(5).Info("Nothing to do for PodGroup, it is gone")
		return nil
	}
	if err != nil {
		return err
	}
	if podGroup.DeletionTimestamp != nil {
		logger.V(5).Info("Nothing to do for PodGroup, it is marked for deletion")
		return nil
	}

	created := map[string]string{}
	for i := range podGroup.Spec.ResourceClaims {
		groupClaim := &podGroup.Spec.ResourceClaims[i]
		if err := ec.ensurePodGroupClaim(ctx, podGroup, groupClaim, created); err != nil {
			ec.warn(podGroup, EventReasonFailedResourceClaimCreation, fmt.Sprintf("PodGroupResourceClaim %s: %v", groupClaim.Name, err))
			return fmt.Errorf("PodGroup %s/%s, PodGroupResourceClaim %s: %w", namespace, name, groupClaim.Name, err)
		}
	}
	if len(created) == 0 {
		return nil
	}
	statuses := make([]*schedulingapply.PodGroupResourceClaimStatusApplyConfiguration, 0, len(created))
	for _, entry := range slices.Sorted(maps.Keys(created)) {
		statuses = append(statuses, schedulingapply.PodGroupResourceClaimStatus().WithName(entry).WithResourceClaimName(created[entry]))
	}
	apply := schedulingapply.PodGroup(name, namespace).WithStatus(schedulingapply.PodGroupStatus().WithResourceClaimStatuses(statuses...))
	if _, err := ec.kubeClient.SchedulingV1beta1().PodGroups(namespace).ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("update PodGroup %s/%s ResourceClaimStatuses: %w", namespace, name, err)
	}
	return nil
}

// ensurePodGroupClaim is ensurePodClaim for a PodGroup's claim entry.
func (ec *Controller) ensurePodGroupClaim(ctx context.Context, podGroup *schedulingapi.PodGroup, groupClaim *schedulingapi.PodGroupResourceClaim, created map[string]string) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "podGroupClaim", groupClaim.Name)
	ctx = klog.NewContext(ctx, logger)

	name, checkOwner, err := podclaims.NameForPodGroup(podGroup, groupClaim)
	switch {
	case errors.Is(err, podclaims.ErrNotCreated):
	case err != nil:
		return fmt.Errorf("checking for claim before creating it: %w", err)
	case name == nil:
		return nil
	case *name != "":
		exists, err := ec.claimExists(ctx, podGroup.Namespace, *name, func(claim *resourceapi.ResourceClaim) bool {
			if !checkOwner {
				return true
			}
			if err := podclaims.IsForPodGroup(podGroup, claim); err != nil {
				logger.Error(err, "Claim that was created for the PodGroup is no longer owned by the PodGroup, creating a new one", "resourceClaim", *name)
				return false
			}
			return true
		})
		if err != nil {
			return fmt.Errorf("checking claim existence: %w", err)
		}
		if exists {
			logger.V(5).Info("Claim already created", "resourceClaim", *name)
			return nil
		}
	}
	if groupClaim.ResourceClaimTemplateName == nil {
		return nil
	}

	claim, err := ec.findOwnedClaim(claimPodGroupOwnerIndex, podGroup.Namespace, podGroup.UID, groupClaim.Name)
	if err != nil {
		return fmt.Errorf("finding ResourceClaim for claim %s in PodGroup %s/%s failed: %w", groupClaim.Name, podGroup.Namespace, podGroup.Name, err)
	}
	if claim == nil {
		owner := metav1.OwnerReference{
			APIVersion: schedulingapi.SchemeGroupVersion.String(),
			Kind:       "PodGroup",
			Name:       podGroup.Name,
			UID:        podGroup.UID,
			Controller: ptr.To(true),
		}
		claim, err = ec.createFromTemplate(ctx, podGroup.Namespace, podGroup.Name, groupClaim.Name, *groupClaim.ResourceClaimTemplateName, owner)
		if err != nil {
			return err
		}
		logger.V(4).Info("Created ResourceClaim", "claim", klog.KObj(claim), "podgroup", klog.KObj(podGroup))
	}
	created[groupClaim.Name] = claim.Name
	return nil
}
