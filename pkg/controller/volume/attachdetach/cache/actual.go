package cache

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
)

// AttachState is what the controller knows of a volume on a node.
type AttachState int

const (
	// AttachStateAttached: the attach was confirmed.
	AttachStateAttached AttachState = iota
	// AttachStateUncertain: an attach or detach was tried and failed, or a
	// VolumeAttachment was found at start-up; the volume may be attached.
	AttachStateUncertain
	// AttachStateDetached: the volume is not attached to the node.
	AttachStateDetached
)

func (s AttachState) String() string {
	return [...]string{"Attached", "Uncertain", "Detached"}[s]
}

// ActualStateOfWorld records the volumes attached (or possibly attached)
// to nodes, which of them each node reports in use, and which volumes
// each node's status.volumesAttached should list. It is safe for
// concurrent use.
type ActualStateOfWorld struct {
	plugins *plugins.Manager

	mu      sync.RWMutex
	volumes map[v1.UniqueVolumeName]*actualVolume
	// reports holds, per node, what status.volumesAttached should say and
	// whether the node object needs patching.
	reports map[types.NodeName]*nodeReport
	// inUse is each node's status.volumesInUse as last seen.
	inUse map[types.NodeName]sets.Set[v1.UniqueVolumeName]
}

type actualVolume struct {
	spec *plugins.Spec
	// devicePath is per volume, not per node: the last attach's wins.
	devicePath string
	nodes      map[types.NodeName]*attachment
}

type attachment struct {
	confirmed           bool
	detachRequestedTime time.Time
}

type nodeReport struct {
	updateNeeded bool
	volumes      sets.Set[v1.UniqueVolumeName]
}

// NewActualStateOfWorld returns an empty actual state.
func NewActualStateOfWorld(pm *plugins.Manager) *ActualStateOfWorld {
	return &ActualStateOfWorld{
		plugins: pm,
		volumes: map[v1.UniqueVolumeName]*actualVolume{},
		reports: map[types.NodeName]*nodeReport{},
		inUse:   map[types.NodeName]sets.Set[v1.UniqueVolumeName]{},
	}
}

// MarkVolumeAsAttached records a confirmed attachment.
func (a *ActualStateOfWorld) MarkVolumeAsAttached(logger klog.Logger, name v1.UniqueVolumeName, spec *plugins.Spec, node types.NodeName, devicePath string) error {
	_, err := a.AddVolumeNode(logger, name, spec, node, devicePath, true)
	return err
}

// MarkVolumeAsUncertain records a possible attachment.
func (a *ActualStateOfWorld) MarkVolumeAsUncertain(logger klog.Logger, name v1.UniqueVolumeName, spec *plugins.Spec, node types.NodeName) error {
	_, err := a.AddVolumeNode(logger, name, spec, node, "", false)
	return err
}

// MarkVolumeAsDetached forgets the volume on node.
func (a *ActualStateOfWorld) MarkVolumeAsDetached(name v1.UniqueVolumeName, node types.NodeName) {
	a.DeleteVolumeNode(name, node)
}

// AddVolumeNode records the volume on node, confirmed or not. The name is
// derived from spec when empty. An existing volume takes the new spec and
// device path. A new volume/node pair is assumed mounted until the node's
// status says otherwise.
func (a *ActualStateOfWorld) AddVolumeNode(logger klog.Logger, name v1.UniqueVolumeName, spec *plugins.Spec, node types.NodeName, devicePath string, attached bool) (v1.UniqueVolumeName, error) {
	if name == "" {
		if spec == nil {
			return "", errors.New("volumeSpec cannot be nil if volumeName is empty")
		}
		p, err := a.plugins.FindAttachableBySpec(spec)
		if err != nil || p == nil {
			if p == nil && err == nil {
				err = errors.New("plugin do not support attachment")
			}
			return "", fmt.Errorf("failed to get AttachablePlugin from volumeSpec for volume %q err=%v", spec.Name(), err)
		}
		if name, err = plugins.UniqueVolumeName(p, spec); err != nil {
			return "", fmt.Errorf("failed to GetUniqueVolumeNameFromSpec for volumeSpec %q err=%v", spec.Name(), err)
		}
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	vol, ok := a.volumes[name]
	if !ok {
		vol = &actualVolume{nodes: map[types.NodeName]*attachment{}}
		a.volumes[name] = vol
	} else {
		logger.V(2).Info("Volume is already added to attachedVolume list to node, update device path", "volumeName", name, "node", klog.KRef("", string(node)), "devicePath", devicePath)
	}
	vol.spec = spec
	vol.devicePath = devicePath

	if at, ok := vol.nodes[node]; ok {
		at.confirmed = attached
	} else {
		vol.nodes[node] = &attachment{confirmed: attached}
		if a.inUse[node] == nil {
			a.inUse[node] = sets.New[v1.UniqueVolumeName]()
		}
		a.inUse[node].Insert(name)
	}
	if attached {
		a.addToReportLocked(logger, name, node)
	}
	return name, nil
}

// SetVolumesMountedByNode replaces the node's in-use set with its
// status.volumesInUse.
func (a *ActualStateOfWorld) SetVolumesMountedByNode(logger klog.Logger, names []v1.UniqueVolumeName, node types.NodeName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inUse[node] = sets.New(names...)
	logger.V(5).Info("SetVolumesMountedByNode volume to the node", "node", klog.KRef("", string(node)), "volumeNames", names)
}

func (a *ActualStateOfWorld) attachmentLocked(name v1.UniqueVolumeName, node types.NodeName) (*attachment, error) {
	if vol, ok := a.volumes[name]; ok {
		if at, ok := vol.nodes[node]; ok {
			return at, nil
		}
	}
	return nil, fmt.Errorf("volume %v is no longer attached to the node %q", name, node)
}

// ResetDetachRequestTime clears the detach request: the volume is wanted.
func (a *ActualStateOfWorld) ResetDetachRequestTime(logger klog.Logger, name v1.UniqueVolumeName, node types.NodeName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, err := a.attachmentLocked(name, node)
	if err != nil {
		logger.Error(err, "Failed to ResetDetachRequestTime with error")
		return
	}
	at.detachRequestedTime = time.Time{}
}

// SetDetachRequestTime records the first wish to detach and returns how
// long ago it was.
func (a *ActualStateOfWorld) SetDetachRequestTime(logger klog.Logger, name v1.UniqueVolumeName, node types.NodeName) (time.Duration, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, err := a.attachmentLocked(name, node)
	if err != nil {
		return 0, fmt.Errorf("failed to set detach request time with error: %v", err)
	}
	if at.detachRequestedTime.IsZero() {
		at.detachRequestedTime = time.Now()
		logger.V(4).Info("Set detach request time to current time for volume on node", "node", klog.KRef("", string(node)), "volumeName", name)
	}
	return time.Since(at.detachRequestedTime), nil
}

// DeleteVolumeNode forgets the volume on node and stops reporting it.
func (a *ActualStateOfWorld) DeleteVolumeNode(name v1.UniqueVolumeName, node types.NodeName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	vol, ok := a.volumes[name]
	if !ok {
		return
	}
	delete(vol.nodes, node)
	if len(vol.nodes) == 0 {
		delete(a.volumes, name)
	}
	_ = a.removeFromReportLocked(name, node)
}

// GetAttachState returns what is known of the volume on node.
func (a *ActualStateOfWorld) GetAttachState(name v1.UniqueVolumeName, node types.NodeName) AttachState {
	a.mu.RLock()
	defer a.mu.RUnlock()
	at, err := a.attachmentLocked(name, node)
	switch {
	case err != nil:
		return AttachStateDetached
	case at.confirmed:
		return AttachStateAttached
	}
	return AttachStateUncertain
}

func (a *ActualStateOfWorld) attachedVolumeLocked(name v1.UniqueVolumeName, vol *actualVolume, node types.NodeName, at *attachment) AttachedVolume {
	return AttachedVolume{
		VolumeName:          name,
		Spec:                vol.spec,
		NodeName:            node,
		DevicePath:          vol.devicePath,
		MountedByNode:       a.inUse[node].Has(name),
		DetachRequestedTime: at.detachRequestedTime,
	}
}

// GetAttachedVolumes lists every volume/node pair, confirmed or not.
func (a *ActualStateOfWorld) GetAttachedVolumes() []AttachedVolume {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := make([]AttachedVolume, 0, len(a.volumes))
	for name, vol := range a.volumes {
		for node, at := range vol.nodes {
			out = append(out, a.attachedVolumeLocked(name, vol, node, at))
		}
	}
	return out
}

// GetAttachedVolumesForNode lists the volumes (maybe) attached to node.
func (a *ActualStateOfWorld) GetAttachedVolumesForNode(node types.NodeName) []AttachedVolume {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []AttachedVolume
	for name, vol := range a.volumes {
		if at, ok := vol.nodes[node]; ok {
			out = append(out, a.attachedVolumeLocked(name, vol, node, at))
		}
	}
	return out
}

// GetAttachedVolumesPerNode groups the confirmed attachments by node.
func (a *ActualStateOfWorld) GetAttachedVolumesPerNode() map[types.NodeName][]AttachedVolume {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := map[types.NodeName][]AttachedVolume{}
	for name, vol := range a.volumes {
		for node, at := range vol.nodes {
			if at.confirmed {
				out[node] = append(out[node], a.attachedVolumeLocked(name, vol, node, at))
			}
		}
	}
	return out
}

// GetNodesForAttachedVolume lists the nodes the volume is confirmed
// attached to.
func (a *ActualStateOfWorld) GetNodesForAttachedVolume(name v1.UniqueVolumeName) []types.NodeName {
	a.mu.RLock()
	defer a.mu.RUnlock()
	nodes := []types.NodeName{}
	if vol, ok := a.volumes[name]; ok {
		for node, at := range vol.nodes {
			if at.confirmed {
				nodes = append(nodes, node)
			}
		}
	}
	return nodes
}

// AddVolumeToReportAsAttached lists the volume in the node's status again
// (after a detach was abandoned or failed).
func (a *ActualStateOfWorld) AddVolumeToReportAsAttached(logger klog.Logger, name v1.UniqueVolumeName, node types.NodeName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.addToReportLocked(logger, name, node)
}

// RemoveVolumeFromReportAsAttached takes the volume out of the node's
// status, which the controller does before detaching it so that the
// kubelet stops mounting it.
func (a *ActualStateOfWorld) RemoveVolumeFromReportAsAttached(name v1.UniqueVolumeName, node types.NodeName) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.removeFromReportLocked(name, node)
}

func (a *ActualStateOfWorld) addToReportLocked(logger klog.Logger, name v1.UniqueVolumeName, node types.NodeName) {
	if _, err := a.attachmentLocked(name, node); err != nil {
		logger.V(4).Info("Volume is no longer attached to node", "node", klog.KRef("", string(node)), "volumeName", name)
		return
	}
	r, ok := a.reports[node]
	if !ok {
		r = &nodeReport{updateNeeded: true, volumes: sets.New[v1.UniqueVolumeName]()}
		a.reports[node] = r
		logger.V(4).Info("Add new node to nodesToUpdateStatusFor", "node", klog.KRef("", string(node)))
	}
	if !r.volumes.Has(name) {
		r.volumes.Insert(name)
		r.updateNeeded = true
		logger.V(4).Info("Report volume as attached to node", "node", klog.KRef("", string(node)), "volumeName", name)
	}
}

func (a *ActualStateOfWorld) removeFromReportLocked(name v1.UniqueVolumeName, node types.NodeName) error {
	if r, ok := a.reports[node]; ok && r.volumes.Has(name) {
		r.volumes.Delete(name)
		r.updateNeeded = true
		return nil
	}
	return fmt.Errorf("volume %q does not exist in volumesToReportAsAttached list or node %q does not exist in nodesToUpdateStatusFor list", name, node)
}

// SetNodeStatusUpdateNeeded makes the node's status be patched again, e.g.
// after a failed patch or when the node object was (re)created.
func (a *ActualStateOfWorld) SetNodeStatusUpdateNeeded(logger klog.Logger, node types.NodeName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.reports[node]
	if !ok {
		logger.Info("Failed to update statusUpdateNeeded field in actual state of world", "err",
			fmt.Sprintf("Failed to set statusUpdateNeeded to needed %t, because nodeName=%q does not exist", true, node))
		return
	}
	r.updateNeeded = true
}

// GetVolumesToReportAttached returns, for every node whose status needs
// patching, the volumesAttached it should list, and clears the flags: the
// caller is expected to patch (and call SetNodeStatusUpdateNeeded on
// failure).
func (a *ActualStateOfWorld) GetVolumesToReportAttached(logger klog.Logger) map[types.NodeName][]v1.AttachedVolume {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[types.NodeName][]v1.AttachedVolume{}
	for node, r := range a.reports {
		if r.updateNeeded {
			out[node] = a.reportLocked(r)
		}
		r.updateNeeded = false
	}
	return out
}

// GetVolumesToReportAttachedForNode is GetVolumesToReportAttached for one
// node; ok is false when that node needs no patch.
func (a *ActualStateOfWorld) GetVolumesToReportAttachedForNode(logger klog.Logger, node types.NodeName) (bool, []v1.AttachedVolume) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.reports[node]
	if !ok || !r.updateNeeded {
		return false, nil
	}
	r.updateNeeded = false
	return true, a.reportLocked(r)
}

// reportLocked renders the node's volumesAttached, sorted by name so
// that repeated patches do not reorder the list.
func (a *ActualStateOfWorld) reportLocked(r *nodeReport) []v1.AttachedVolume {
	out := make([]v1.AttachedVolume, 0, r.volumes.Len())
	for name := range r.volumes {
		var devicePath string
		if vol, ok := a.volumes[name]; ok {
			devicePath = vol.devicePath
		}
		out = append(out, v1.AttachedVolume{Name: name, DevicePath: devicePath})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
