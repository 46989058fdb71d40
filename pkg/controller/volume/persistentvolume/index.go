package persistentvolume

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// accessModesIndex groups the cached volumes by their set of access modes,
// so a claim is matched against the groups able to serve it, the groups
// with the fewest extra modes first.
const accessModesIndex = "accessmodes"

// volumeIndex is the controller's own cache of volumes (see the controller
// type for why it is not the informer's).
type volumeIndex struct {
	store cache.Indexer
}

func newVolumeIndex() volumeIndex {
	return volumeIndex{store: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{accessModesIndex: indexByAccessModes})}
}

func indexByAccessModes(obj interface{}) ([]string, error) {
	pv, ok := obj.(*v1.PersistentVolume)
	if !ok {
		return []string{""}, fmt.Errorf("object is not a persistent volume: %v", obj)
	}
	return []string{accessModesKey(pv.Spec.AccessModes)}, nil
}

// The short names of the access modes, in the fixed order of the index keys.
var accessModeAbbreviations = []struct {
	mode  v1.PersistentVolumeAccessMode
	short string
}{
	{v1.ReadWriteOnce, "RWO"},
	{v1.ReadOnlyMany, "ROX"},
	{v1.ReadWriteMany, "RWX"},
	{v1.ReadWriteOncePod, "RWOP"},
}

// accessModesKey is the canonical string of a set of modes, e.g. "RWO,ROX".
func accessModesKey(modes []v1.PersistentVolumeAccessMode) string {
	var parts []string
	for _, a := range accessModeAbbreviations {
		if hasAccessMode(modes, a.mode) {
			parts = append(parts, a.short)
		}
	}
	return strings.Join(parts, ",")
}

// accessModesFromKey reverses accessModesKey.
func accessModesFromKey(key string) []v1.PersistentVolumeAccessMode {
	modes := []v1.PersistentVolumeAccessMode{}
	for _, part := range strings.Split(key, ",") {
		part = strings.TrimSpace(part)
		for _, a := range accessModeAbbreviations {
			if part == a.short {
				modes = append(modes, a.mode)
			}
		}
	}
	return modes
}

func hasAccessMode(modes []v1.PersistentVolumeAccessMode, mode v1.PersistentVolumeAccessMode) bool {
	for _, m := range modes {
		if m == mode {
			return true
		}
	}
	return false
}

func hasAllAccessModes(have, want []v1.PersistentVolumeAccessMode) bool {
	for _, m := range want {
		if !hasAccessMode(have, m) {
			return false
		}
	}
	return true
}

// candidateModeSets lists the indexed sets of access modes that include
// every mode the claim asks for, smallest sets first.
func (idx volumeIndex) candidateModeSets(requested []v1.PersistentVolumeAccessMode) [][]v1.PersistentVolumeAccessMode {
	var sets [][]v1.PersistentVolumeAccessMode
	keys := idx.store.ListIndexFuncValues(accessModesIndex)
	sort.Strings(keys) // a stable order among sets of the same size
	for _, key := range keys {
		modes := accessModesFromKey(key)
		if hasAllAccessModes(modes, requested) {
			sets = append(sets, modes)
		}
	}
	sort.SliceStable(sets, func(i, j int) bool { return len(sets[i]) < len(sets[j]) })
	return sets
}

func (idx volumeIndex) volumesWithModes(modes []v1.PersistentVolumeAccessMode) ([]*v1.PersistentVolume, error) {
	objs, err := idx.store.ByIndex(accessModesIndex, accessModesKey(modes))
	if err != nil {
		return nil, err
	}
	volumes := make([]*v1.PersistentVolume, 0, len(objs))
	for _, obj := range objs {
		if pv, ok := obj.(*v1.PersistentVolume); ok {
			volumes = append(volumes, pv)
		}
	}
	return volumes, nil
}

// findBestMatchForClaim returns the volume the claim should be bound to, or
// nil. A volume pre-bound to the claim wins; otherwise the smallest
// Available volume that fits, searching the closest access mode sets first.
// With delayBinding only pre-bound volumes are returned: the scheduler
// picks the others.
func (idx volumeIndex) findBestMatchForClaim(claim *v1.PersistentVolumeClaim, delayBinding bool) (*v1.PersistentVolume, error) {
	for _, modes := range idx.candidateModeSets(claim.Spec.AccessModes) {
		volumes, err := idx.volumesWithModes(modes)
		if err != nil {
			return nil, err
		}
		best, err := findMatchingVolume(claim, volumes, delayBinding)
		if err != nil {
			return nil, err
		}
		if best != nil {
			return best, nil
		}
	}
	return nil, nil
}

// findMatchingVolume is the PV controller's half of the matching shared
// with the scheduler: node affinity is not checked (immediate binding
// ignores topology) and access modes were already narrowed by the index.
func findMatchingVolume(claim *v1.PersistentVolumeClaim, volumes []*v1.PersistentVolume, delayBinding bool) (*v1.PersistentVolume, error) {
	requestedQty := claim.Spec.Resources.Requests[v1.ResourceStorage]
	requestedClass := claimClass(claim)
	claimVAC := ptr.Deref(claim.Spec.VolumeAttributesClassName, "")

	var selector labels.Selector
	if claim.Spec.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(claim.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("error creating internal label selector for claim: %v: %v", claimKey(claim), err)
		}
		selector = s
	}

	// One pass: a volume pre-bound to this claim must be found even if a
	// smaller unbound one comes first, so the loop never stops early on a
	// size match.
	var smallest *v1.PersistentVolume
	for _, volume := range volumes {
		if volume.Spec.ClaimRef != nil && !isVolumeBoundToClaim(volume, claim) {
			continue
		}
		volumeQty := volume.Spec.Capacity[v1.ResourceStorage]
		if volumeQty.Cmp(requestedQty) < 0 {
			continue
		}
		if volumeModeMismatch(&claim.Spec, &volume.Spec) {
			continue
		}
		if ptr.Deref(volume.Spec.VolumeAttributesClassName, "") != claimVAC {
			continue
		}
		if volume.DeletionTimestamp != nil {
			continue
		}
		if isVolumeBoundToClaim(volume, claim) {
			return volume, nil
		}
		if delayBinding {
			continue
		}
		// Volumes not yet Available are skipped: they will become
		// Available shortly, and binding them now would mostly conflict.
		if volume.Status.Phase != v1.VolumeAvailable {
			continue
		}
		if selector != nil && !selector.Matches(labels.Set(volume.Labels)) {
			continue
		}
		if volumeClass(volume) != requestedClass {
			continue
		}
		if smallest == nil {
			smallest = volume
			continue
		}
		smallestQty := smallest.Spec.Capacity[v1.ResourceStorage]
		if smallestQty.Cmp(volumeQty) > 0 {
			smallest = volume
		}
	}
	return smallest, nil
}

// isVolumeBoundToClaim reports whether the volume's claimRef names the
// claim (and, when the reference has a UID, this very instance of it).
func isVolumeBoundToClaim(volume *v1.PersistentVolume, claim *v1.PersistentVolumeClaim) bool {
	ref := volume.Spec.ClaimRef
	if ref == nil || ref.Name != claim.Name || ref.Namespace != claim.Namespace {
		return false
	}
	return ref.UID == "" || ref.UID == claim.UID
}

// volumeModeMismatch compares volume modes, an unset mode meaning
// Filesystem (an older apiserver may not have defaulted it).
func volumeModeMismatch(claimSpec *v1.PersistentVolumeClaimSpec, volumeSpec *v1.PersistentVolumeSpec) bool {
	want := ptr.Deref(claimSpec.VolumeMode, v1.PersistentVolumeFilesystem)
	have := ptr.Deref(volumeSpec.VolumeMode, v1.PersistentVolumeFilesystem)
	return want != have
}

// claimClass is the claim's StorageClass, the deprecated annotation first.
func claimClass(claim *v1.PersistentVolumeClaim) string {
	if class, ok := claim.Annotations[v1.BetaStorageClassAnnotation]; ok {
		return class
	}
	return ptr.Deref(claim.Spec.StorageClassName, "")
}

// claimHasClass tells an explicit "" class (no dynamic provisioning) from
// no class at all (the default class may still be assigned).
func claimHasClass(claim *v1.PersistentVolumeClaim) bool {
	if _, ok := claim.Annotations[v1.BetaStorageClassAnnotation]; ok {
		return true
	}
	return claim.Spec.StorageClassName != nil
}

// volumeClass is the volume's StorageClass, the deprecated annotation first.
func volumeClass(volume *v1.PersistentVolume) string {
	if class, ok := volume.Annotations[v1.BetaStorageClassAnnotation]; ok {
		return class
	}
	return volume.Spec.StorageClassName
}

func claimKey(claim *v1.PersistentVolumeClaim) string {
	return claim.Namespace + "/" + claim.Name
}

func claimRefKey(ref *v1.ObjectReference) string {
	return ref.Namespace + "/" + ref.Name
}
