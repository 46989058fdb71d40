package evaluator

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

var (
	pvcsGVR        = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	pvcObjectCount = ObjectCountQuotaResourceNameFor(pvcsGVR.GroupResource())
)

// pvcResources may also be qualified by storage class, as
// <class>.storageclass.storage.k8s.io/<resource>.
var pvcResources = []corev1.ResourceName{
	corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceRequestsStorage,
}

const storageClassSuffix = ".storageclass.storage.k8s.io/"

// ResourceByStorageClass is the quota name of resource within a storage class.
func ResourceByStorageClass(class string, name corev1.ResourceName) corev1.ResourceName {
	return corev1.ResourceName(class + storageClassSuffix + string(name))
}

// pvcEvaluator counts claims and requested storage, overall and per class.
type pvcEvaluator struct {
	list ListFuncByNamespace
}

// NewPersistentVolumeClaimEvaluator measures claims listed through f.
func NewPersistentVolumeClaimEvaluator(f ListerForResourceFunc) Evaluator {
	return &pvcEvaluator{list: ListResourceUsingListerFunc(f, pvcsGVR)}
}

func (p *pvcEvaluator) GroupResource() schema.GroupResource { return pvcsGVR.GroupResource() }

func (p *pvcEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	out := []corev1.ResourceName{}
	for _, name := range input {
		if name == pvcObjectCount || Contains(pvcResources, name) {
			out = append(out, name)
			continue
		}
		for _, r := range pvcResources {
			if strings.HasSuffix(string(name), storageClassSuffix+string(r)) {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

func asPVC(obj runtime.Object) (*corev1.PersistentVolumeClaim, error) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil, fmt.Errorf("expected *v1.PersistentVolumeClaim, got %T", obj)
	}
	return pvc, nil
}

// storageClassOf prefers the legacy beta annotation, as the volume
// controllers do.
func storageClassOf(pvc *corev1.PersistentVolumeClaim) string {
	if class, ok := pvc.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		return class
	}
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	return ""
}

func (p *pvcEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	pvc, err := asPVC(item)
	if err != nil {
		return corev1.ResourceList{}, err
	}
	one := *resource.NewQuantity(1, resource.DecimalSI)
	out := corev1.ResourceList{
		corev1.ResourcePersistentVolumeClaims: one,
		pvcObjectCount:                        one,
	}
	class := storageClassOf(pvc)
	if class != "" {
		out[ResourceByStorageClass(class, corev1.ResourcePersistentVolumeClaims)] = one
	}
	if storage := pvcStorage(pvc); storage != nil {
		out[corev1.ResourceRequestsStorage] = *storage
		if class != "" {
			out[ResourceByStorageClass(class, corev1.ResourceRequestsStorage)] = *storage
		}
	}
	return out, nil
}

// wholeBytes rounds a quantity up to whole bytes: quota status must hold
// integers (https://issue.k8s.io/94313).
func wholeBytes(q resource.Quantity) *resource.Quantity {
	r := q.DeepCopy()
	if !r.RoundUp(0) {
		return &r
	}
	return &q
}

// pvcStorage is the larger of the requested and the allocated size: a
// claim whose expansion is in progress or failed keeps what it holds.
// Nil when the claim requests no storage.
func pvcStorage(pvc *corev1.PersistentVolumeClaim) *resource.Quantity {
	req, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return nil
	}
	out := wholeBytes(req)
	if alloc, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; ok && alloc.Cmp(*out) > 0 {
		out = wholeBytes(alloc)
	}
	return out
}

func (p *pvcEvaluator) UsageStats(options UsageStatsOptions) (UsageStats, error) {
	return CalculateUsageStats(options, p.list, pvcMatchesScope, p.Usage)
}

// pvcMatchesScope decides the VolumeAttributesClass scope; claims have no
// other scope.
func pvcMatchesScope(sel corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
	pvc, err := asPVC(obj)
	if err != nil {
		return false, err
	}
	if sel.ScopeName != corev1.ResourceQuotaScopeVolumeAttributesClass {
		return false, nil
	}
	classes := volumeAttributesClasses(pvc)
	if sel.Operator == corev1.ScopeSelectorOpExists {
		return classes.Len() != 0, nil
	}
	s, err := scopeSelectorAsLabelSelector(sel)
	if err != nil {
		return false, fmt.Errorf("failed to parse and convert selector: %w", err)
	}
	if classes.Len() == 0 {
		return s.Matches(labels.Set{}), nil
	}
	// A claim moving between classes is in both until the move finishes.
	for class := range classes {
		if s.Matches(labels.Set{string(corev1.ResourceQuotaScopeVolumeAttributesClass): class}) {
			return true, nil
		}
	}
	return false, nil
}

// volumeAttributesClasses are the classes a claim asks for, has, or is
// being modified to.
func volumeAttributesClasses(pvc *corev1.PersistentVolumeClaim) sets.Set[string] {
	out := sets.New[string]()
	if n := pvc.Spec.VolumeAttributesClassName; n != nil && *n != "" {
		out.Insert(*n)
	}
	if n := pvc.Status.CurrentVolumeAttributesClassName; n != nil && *n != "" {
		out.Insert(*n)
	}
	if m := pvc.Status.ModifyVolumeStatus; m != nil && m.TargetVolumeAttributesClassName != "" {
		out.Insert(m.TargetVolumeAttributesClassName)
	}
	return out
}

// PVCRequiresReplenish reports whether a claim update may change quota
// usage. Upstream compares two freshly allocated *Quantity pointers for the
// allocated storage, which never compare equal, so every claim update
// counts; kept so replenishment happens exactly as often as upstream's.
func PVCRequiresReplenish(_, _ *corev1.PersistentVolumeClaim) bool {
	return true
}
