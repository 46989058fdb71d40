package selinuxwarning

import (
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
)

// podUse is how one pod uses a volume.
type podUse struct {
	label  string
	parts  labelParts
	policy v1.PodSELinuxChangePolicy
}

// cachedVolume is a volume with every pod that uses it.
type cachedVolume struct {
	// csiDriver is the volume's CSI driver, "" for other volumes; a change
	// of the driver's SELinuxMount re-evaluates these pods.
	csiDriver string
	pods      map[cache.ObjectName]podUse
}

// volumeCache remembers, per volume, the label and change policy of each
// pod using it, and the conflicts found between them. The metric reports
// the conflicts; events report each new one once.
type volumeCache struct {
	mu           sync.RWMutex
	volumes      map[v1.UniqueVolumeName]*cachedVolume
	podToVolumes map[cache.ObjectName]sets.Set[v1.UniqueVolumeName]
	conflicts    map[v1.UniqueVolumeName][]Conflict
}

func newVolumeCache() *volumeCache {
	return &volumeCache{
		volumes:      map[v1.UniqueVolumeName]*cachedVolume{},
		podToVolumes: map[cache.ObjectName]sets.Set[v1.UniqueVolumeName]{},
		conflicts:    map[v1.UniqueVolumeName][]Conflict{},
	}
}

// addVolume records that pod uses volume with label and policy and returns
// the conflicts this causes, both pods' views. Nothing is returned when the
// pod's use did not change, so a resync emits no duplicate events.
func (c *volumeCache) addVolume(volume v1.UniqueVolumeName, pod cache.ObjectName, label string, policy v1.PodSELinuxChangePolicy, csiDriver string) []Conflict {
	c.mu.Lock()
	defer c.mu.Unlock()

	use := podUse{label: label, parts: parseLabel(label), policy: policy}
	vol, found := c.volumes[volume]
	if !found {
		c.volumes[volume] = &cachedVolume{csiDriver: csiDriver, pods: map[cache.ObjectName]podUse{pod: use}}
		c.registerPodVolume(pod, volume)
		return nil
	}
	if old, found := vol.pods[pod]; found && old == use {
		return nil
	}
	vol.pods[pod] = use
	c.registerPodVolume(pod, volume)

	var conflicts []Conflict
	for other, otherUse := range vol.pods {
		if otherUse.policy != policy {
			conflicts = append(conflicts, conflictPair(propertyChangePolicy, reasonChangePolicy, pod, string(policy), other, string(otherUse.policy))...)
		}
		if labelsConflict(otherUse.parts, use.parts) {
			conflicts = append(conflicts, conflictPair(propertyLabel, reasonLabel, pod, label, other, otherUse.label)...)
		}
	}
	c.setConflicts(volume, append(c.conflictsWithout(volume, pod), conflicts...))
	return conflicts
}

// deletePod forgets pod and every conflict it was part of.
func (c *volumeCache) deletePod(pod cache.ObjectName) {
	c.mu.Lock()
	defer c.mu.Unlock()

	for volume := range c.podToVolumes[pod] {
		c.setConflicts(volume, c.conflictsWithout(volume, pod))
		if vol, found := c.volumes[volume]; found {
			delete(vol.pods, pod)
			if len(vol.pods) == 0 {
				delete(c.volumes, volume)
			}
		}
	}
	delete(c.podToVolumes, pod)
}

// podsForCSIDriver lists the pods using volumes of driver.
func (c *volumeCache) podsForCSIDriver(driver string) []cache.ObjectName {
	c.mu.RLock()
	defer c.mu.RUnlock()

	var pods []cache.ObjectName
	for _, vol := range c.volumes {
		if vol.csiDriver != driver {
			continue
		}
		for pod := range vol.pods {
			pods = append(pods, pod)
		}
	}
	return pods
}

// getConflicts returns every current conflict once.
func (c *volumeCache) getConflicts() []Conflict {
	c.mu.RLock()
	defer c.mu.RUnlock()

	all := sets.New[Conflict]()
	for _, conflicts := range c.conflicts {
		all.Insert(conflicts...)
	}
	return all.UnsortedList()
}

func (c *volumeCache) registerPodVolume(pod cache.ObjectName, volume v1.UniqueVolumeName) {
	if vols, ok := c.podToVolumes[pod]; ok {
		vols.Insert(volume)
		return
	}
	c.podToVolumes[pod] = sets.New(volume)
}

// conflictsWithout is the volume's conflicts that do not involve pod.
func (c *volumeCache) conflictsWithout(volume v1.UniqueVolumeName, pod cache.ObjectName) []Conflict {
	return slices.DeleteFunc(slices.Clone(c.conflicts[volume]), func(conflict Conflict) bool {
		return conflict.involves(pod)
	})
}

func (c *volumeCache) setConflicts(volume v1.UniqueVolumeName, conflicts []Conflict) {
	if len(conflicts) == 0 {
		delete(c.conflicts, volume)
		return
	}
	c.conflicts[volume] = conflicts
}
