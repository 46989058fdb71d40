package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// BaseControllerRefManager decides, object by object, whether a controller
// owns it, adopting matching orphans and releasing owned objects that no
// longer match. Kind-specific managers below wrap it.
type BaseControllerRefManager struct {
	Controller metav1.Object
	Selector   labels.Selector

	// CanAdoptFunc runs before the first adoption only (at most once per
	// manager); typically a live GET that refuses adoption when the
	// controller is being deleted (see RecheckDeletionTimestamp).
	CanAdoptFunc func(ctx context.Context) error

	canAdoptOnce sync.Once
	canAdoptErr  error
}

// CanAdopt runs CanAdoptFunc once and returns its (remembered) result.
func (m *BaseControllerRefManager) CanAdopt(ctx context.Context) error {
	m.canAdoptOnce.Do(func() {
		if m.CanAdoptFunc != nil {
			m.canAdoptErr = m.CanAdoptFunc(ctx)
		}
	})
	return m.canAdoptErr
}

// ClaimObject reports whether the controller owns obj after reconciling:
//   - controlled by another controller: never touched, not owned;
//   - controlled by us and matching: owned (even while we are deleted);
//   - controlled by us, not matching: released unless we are being deleted;
//   - orphan, matching, same namespace, neither side being deleted: adopted.
//
// An error means an adoption or release failed and the caller should retry
// later; NotFound (the object is gone) is not an error.
func (m *BaseControllerRefManager) ClaimObject(ctx context.Context, obj metav1.Object, match func(metav1.Object) bool, adopt, release func(context.Context, metav1.Object) error) (bool, error) {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		if ref.UID != m.Controller.GetUID() {
			return false, nil
		}
		if match(obj) {
			return true, nil
		}
		if m.Controller.GetDeletionTimestamp() != nil {
			return false, nil
		}
		if err := release(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return false, nil
	}

	if m.Controller.GetDeletionTimestamp() != nil || !match(obj) || obj.GetDeletionTimestamp() != nil {
		return false, nil
	}
	if ns := m.Controller.GetNamespace(); ns != "" && ns != obj.GetNamespace() {
		return false, nil
	}
	if err := adopt(ctx, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// claimAll runs ClaimObject over items and returns the claimed ones and an
// aggregate of the failures.
func claimAll[T metav1.Object](ctx context.Context, m *BaseControllerRefManager, items []T, match func(metav1.Object) bool, adopt, release func(context.Context, T) error) ([]T, error) {
	var claimed []T
	var errs []error
	for _, item := range items {
		ok, err := m.ClaimObject(ctx, item, match,
			func(ctx context.Context, o metav1.Object) error { return adopt(ctx, o.(T)) },
			func(ctx context.Context, o metav1.Object) error { return release(ctx, o.(T)) })
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			claimed = append(claimed, item)
		}
	}
	return claimed, utilerrors.NewAggregate(errs)
}

// ignoreReleaseError drops the errors a release patch gets when there is
// nothing left to release: NotFound (object gone) and Invalid (no owner
// references left, or the UID precondition failed because the object was
// recreated).
func ignoreReleaseError(err error) error {
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}

// PodControllerRefManager claims pods for a controller.
type PodControllerRefManager struct {
	BaseControllerRefManager
	controllerKind schema.GroupVersionKind
	podControl     PodControlInterface
	finalizers     []string
}

// NewPodControllerRefManager returns a manager for one sync pass; canAdopt
// runs at most once, before the first adoption. finalizers are added to
// adopted pods and removed from released ones.
func NewPodControllerRefManager(podControl PodControlInterface, controller metav1.Object, selector labels.Selector, controllerKind schema.GroupVersionKind, canAdopt func(ctx context.Context) error, finalizers ...string) *PodControllerRefManager {
	return &PodControllerRefManager{
		BaseControllerRefManager: BaseControllerRefManager{Controller: controller, Selector: selector, CanAdoptFunc: canAdopt},
		controllerKind:           controllerKind,
		podControl:               podControl,
		finalizers:               finalizers,
	}
}

// ClaimPods returns the pods the controller owns after adopting and
// releasing as ClaimObject describes. A pod matches when the selector does
// and every filter returns true.
func (m *PodControllerRefManager) ClaimPods(ctx context.Context, pods []*v1.Pod, filters ...func(*v1.Pod) bool) ([]*v1.Pod, error) {
	match := func(o metav1.Object) bool {
		pod := o.(*v1.Pod)
		if !m.Selector.Matches(labels.Set(pod.Labels)) {
			return false
		}
		for _, f := range filters {
			if !f(pod) {
				return false
			}
		}
		return true
	}
	return claimAll(ctx, &m.BaseControllerRefManager, pods, match, m.AdoptPod, m.ReleasePod)
}

// AdoptPod patches the controller in as the pod's controller owner.
func (m *PodControllerRefManager) AdoptPod(ctx context.Context, pod *v1.Pod) error {
	if err := m.CanAdopt(ctx); err != nil {
		return fmt.Errorf("can't adopt Pod %v/%v (%v): %v", pod.Namespace, pod.Name, pod.UID, err)
	}
	patch, err := ownerRefControllerPatch(m.Controller, m.controllerKind, pod.UID, m.finalizers...)
	if err != nil {
		return err
	}
	return m.podControl.PatchPod(ctx, pod.Namespace, pod.Name, patch)
}

// ReleasePod patches the controller's owner reference out of the pod.
func (m *PodControllerRefManager) ReleasePod(ctx context.Context, pod *v1.Pod) error {
	klog.FromContext(ctx).V(2).Info("Patching pod to remove its controllerRef", "pod", klog.KObj(pod), "gvk", m.controllerKind, "controller", m.Controller.GetName())
	patch, err := GenerateDeleteOwnerRefStrategicMergeBytes(pod.UID, []types.UID{m.Controller.GetUID()}, m.finalizers...)
	if err != nil {
		return err
	}
	return ignoreReleaseError(m.podControl.PatchPod(ctx, pod.Namespace, pod.Name, patch))
}

// RSControlInterface patches ReplicaSets; an interface for tests.
type RSControlInterface interface {
	PatchReplicaSet(ctx context.Context, namespace, name string, data []byte) error
}

// RealRSControl is the RSControlInterface that talks to the API server.
type RealRSControl struct {
	KubeClient clientset.Interface
}

// PatchReplicaSet applies a strategic-merge patch to a ReplicaSet.
func (r RealRSControl) PatchReplicaSet(ctx context.Context, namespace, name string, data []byte) error {
	_, err := r.KubeClient.AppsV1().ReplicaSets(namespace).Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
	return err
}

// ReplicaSetControllerRefManager claims ReplicaSets for a Deployment.
type ReplicaSetControllerRefManager struct {
	BaseControllerRefManager
	controllerKind schema.GroupVersionKind
	rsControl      RSControlInterface
}

// NewReplicaSetControllerRefManager returns a manager for one sync pass;
// canAdopt runs at most once, before the first adoption.
func NewReplicaSetControllerRefManager(rsControl RSControlInterface, controller metav1.Object, selector labels.Selector, controllerKind schema.GroupVersionKind, canAdopt func(ctx context.Context) error) *ReplicaSetControllerRefManager {
	return &ReplicaSetControllerRefManager{
		BaseControllerRefManager: BaseControllerRefManager{Controller: controller, Selector: selector, CanAdoptFunc: canAdopt},
		controllerKind:           controllerKind,
		rsControl:                rsControl,
	}
}

// ClaimReplicaSets returns the ReplicaSets the controller owns after
// adopting and releasing as ClaimObject describes (matching on labels).
func (m *ReplicaSetControllerRefManager) ClaimReplicaSets(ctx context.Context, sets []*apps.ReplicaSet) ([]*apps.ReplicaSet, error) {
	return claimAll(ctx, &m.BaseControllerRefManager, sets, m.labelsMatch, m.AdoptReplicaSet, m.ReleaseReplicaSet)
}

func (m *ReplicaSetControllerRefManager) labelsMatch(o metav1.Object) bool {
	return m.Selector.Matches(labels.Set(o.GetLabels()))
}

// AdoptReplicaSet patches the controller in as the ReplicaSet's controller owner.
func (m *ReplicaSetControllerRefManager) AdoptReplicaSet(ctx context.Context, rs *apps.ReplicaSet) error {
	if err := m.CanAdopt(ctx); err != nil {
		return fmt.Errorf("can't adopt ReplicaSet %v/%v (%v): %v", rs.Namespace, rs.Name, rs.UID, err)
	}
	patch, err := ownerRefControllerPatch(m.Controller, m.controllerKind, rs.UID)
	if err != nil {
		return err
	}
	return m.rsControl.PatchReplicaSet(ctx, rs.Namespace, rs.Name, patch)
}

// ReleaseReplicaSet patches the controller's owner reference out of the ReplicaSet.
func (m *ReplicaSetControllerRefManager) ReleaseReplicaSet(ctx context.Context, rs *apps.ReplicaSet) error {
	klog.FromContext(ctx).V(2).Info("Patching ReplicaSet to remove its controllerRef", "replicaSet", klog.KObj(rs), "gvk", m.controllerKind, "controller", m.Controller.GetName())
	patch, err := GenerateDeleteOwnerRefStrategicMergeBytes(rs.UID, []types.UID{m.Controller.GetUID()})
	if err != nil {
		return err
	}
	return ignoreReleaseError(m.rsControl.PatchReplicaSet(ctx, rs.Namespace, rs.Name, patch))
}

// ControllerRevisionControlInterface patches ControllerRevisions; an interface for tests.
type ControllerRevisionControlInterface interface {
	PatchControllerRevision(ctx context.Context, namespace, name string, data []byte) error
}

// RealControllerRevisionControl is the ControllerRevisionControlInterface that talks to the API server.
type RealControllerRevisionControl struct {
	KubeClient clientset.Interface
}

// PatchControllerRevision applies a strategic-merge patch to a ControllerRevision.
func (r RealControllerRevisionControl) PatchControllerRevision(ctx context.Context, namespace, name string, data []byte) error {
	_, err := r.KubeClient.AppsV1().ControllerRevisions(namespace).Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
	return err
}

// ControllerRevisionControllerRefManager claims ControllerRevisions for a
// DaemonSet or StatefulSet.
type ControllerRevisionControllerRefManager struct {
	BaseControllerRefManager
	controllerKind schema.GroupVersionKind
	crControl      ControllerRevisionControlInterface
}

// NewControllerRevisionControllerRefManager returns a manager for one sync
// pass; canAdopt runs at most once, before the first adoption.
func NewControllerRevisionControllerRefManager(crControl ControllerRevisionControlInterface, controller metav1.Object, selector labels.Selector, controllerKind schema.GroupVersionKind, canAdopt func(ctx context.Context) error) *ControllerRevisionControllerRefManager {
	return &ControllerRevisionControllerRefManager{
		BaseControllerRefManager: BaseControllerRefManager{Controller: controller, Selector: selector, CanAdoptFunc: canAdopt},
		controllerKind:           controllerKind,
		crControl:                crControl,
	}
}

// ClaimControllerRevisions returns the revisions the controller owns after
// adopting and releasing as ClaimObject describes (matching on labels).
func (m *ControllerRevisionControllerRefManager) ClaimControllerRevisions(ctx context.Context, revisions []*apps.ControllerRevision) ([]*apps.ControllerRevision, error) {
	match := func(o metav1.Object) bool { return m.Selector.Matches(labels.Set(o.GetLabels())) }
	return claimAll(ctx, &m.BaseControllerRefManager, revisions, match, m.AdoptControllerRevision, m.ReleaseControllerRevision)
}

// AdoptControllerRevision patches the controller in as the revision's controller owner.
func (m *ControllerRevisionControllerRefManager) AdoptControllerRevision(ctx context.Context, cr *apps.ControllerRevision) error {
	if err := m.CanAdopt(ctx); err != nil {
		return fmt.Errorf("can't adopt ControllerRevision %v/%v (%v): %v", cr.Namespace, cr.Name, cr.UID, err)
	}
	patch, err := ownerRefControllerPatch(m.Controller, m.controllerKind, cr.UID)
	if err != nil {
		return err
	}
	return m.crControl.PatchControllerRevision(ctx, cr.Namespace, cr.Name, patch)
}

// ReleaseControllerRevision patches the controller's owner reference out of the revision.
func (m *ControllerRevisionControllerRefManager) ReleaseControllerRevision(ctx context.Context, cr *apps.ControllerRevision) error {
	klog.FromContext(ctx).V(2).Info("Patching ControllerRevision to remove its controllerRef", "controllerRevision", klog.KObj(cr), "gvk", m.controllerKind, "controller", m.Controller.GetName())
	patch, err := GenerateDeleteOwnerRefStrategicMergeBytes(cr.UID, []types.UID{m.Controller.GetUID()})
	if err != nil {
		return err
	}
	return ignoreReleaseError(m.crControl.PatchControllerRevision(ctx, cr.Namespace, cr.Name, patch))
}

// RecheckDeletionTimestamp turns a live getter into a CanAdoptFunc that
// refuses adoption when the fetched controller is being deleted. Caches can
// lag, and adopting for a controller on its way out would orphan the
// objects the garbage collector is about to reap (upstream #42639).
func RecheckDeletionTimestamp(getObject func(context.Context) (metav1.Object, error)) func(context.Context) error {
	return func(ctx context.Context) error {
		obj, err := getObject(ctx)
		if err != nil {
			return fmt.Errorf("can't recheck DeletionTimestamp: %v", err)
		}
		if ts := obj.GetDeletionTimestamp(); ts != nil {
			return fmt.Errorf("%v/%v has just been deleted at %v", obj.GetNamespace(), obj.GetName(), ts)
		}
		return nil
	}
}

// Patch bodies. Both carry metadata.uid: the server rejects the patch if the
// object was deleted and recreated under the same name meanwhile.

type adoptPatch struct {
	Metadata adoptPatchMeta `json:"metadata"`
}

type adoptPatchMeta struct {
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
	UID             types.UID               `json:"uid"`
	Finalizers      []string                `json:"finalizers,omitempty"`
}

// ownerRefControllerPatch adds controller as the controlling owner of the
// object with UID uid (strategic merge keys ownerReferences by uid, so
// other owners are kept), plus the given finalizers.
func ownerRefControllerPatch(controller metav1.Object, kind schema.GroupVersionKind, uid types.UID, finalizers ...string) ([]byte, error) {
	yes := true
	return json.Marshal(adoptPatch{Metadata: adoptPatchMeta{
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion:         kind.GroupVersion().String(),
			Kind:               kind.Kind,
			Name:               controller.GetName(),
			UID:                controller.GetUID(),
			Controller:         &yes,
			BlockOwnerDeletion: &yes,
		}},
		UID:        uid,
		Finalizers: finalizers,
	}})
}

type releasePatch struct {
	Metadata releasePatchMeta `json:"metadata"`
}

type releasePatchMeta struct {
	UID             types.UID           `json:"uid"`
	OwnerReferences []map[string]string `json:"ownerReferences"`
	// Strategic-merge directive removing values from a primitive list.
	DeleteFinalizers []string `json:"$deleteFromPrimitiveList/finalizers,omitempty"`
}

// GenerateDeleteOwnerRefStrategicMergeBytes returns a strategic-merge patch
// removing the owner references with ownerUIDs (and the given finalizers)
// from the object with UID dependentUID.
func GenerateDeleteOwnerRefStrategicMergeBytes(dependentUID types.UID, ownerUIDs []types.UID, finalizers ...string) ([]byte, error) {
	var refs []map[string]string
	for _, uid := range ownerUIDs {
		refs = append(refs, map[string]string{"$patch": "delete", "uid": string(uid)})
	}
	return json.Marshal(releasePatch{Metadata: releasePatchMeta{
		UID:              dependentUID,
		OwnerReferences:  refs,
		DeleteFinalizers: finalizers,
	}})
}
