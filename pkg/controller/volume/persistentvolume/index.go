package persistentvolume

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"
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
	requestedClass := storagehelpers.GetPersistentVolumeClaimClass(claim)
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
		if volume.Spec.ClaimRef != nil && !storagehelpers.IsVolumeBoundToClaim(volume, claim) {
			continue
		}
		volumeQty := volume.Spec.Capacity[v1.ResourceStorage]
		if volumeQty.Cmp(requestedQty) < 0 {
			continue
		}
		if storagehelpers.CheckVolumeModeMismatches(&claim.Spec, &volume.Spec) {
			continue
		}
		if ptr.Deref(volume.Spec.VolumeAttributesClassName, "") != claimVAC {
			continue
		}
		if volume.DeletionTimestamp != nil {
			continue
		}
		if storagehelpers.IsVolumeBoundToClaim(volume, claim) {
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
		if storagehelpers.GetPersistentVolumeClass(volume) != requestedClass {
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

func claimKey(claim *v1.PersistentVolumeClaim) string {
	return claim.Namespace + "/" + claim.Name
}

func claimRefKey(ref *v1.ObjectReference) string {
	return ref.Namespace + "/" + ref.Name
}
