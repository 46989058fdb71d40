package cache

import (
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
)

// DesiredStateOfWorld records, per managed node, the volumes that should
// be attached there and the pods needing each. It is safe for concurrent
// use.
type DesiredStateOfWorld struct {
	plugins *plugins.Manager

	mu    sync.RWMutex
	nodes map[types.NodeName]map[v1.UniqueVolumeName]*desiredVolume
}

type desiredVolume struct {
	spec                     *plugins.Spec
	multiAttachErrorReported bool
	// pods by UID.
	pods map[types.UID]*v1.Pod
}

// NewDesiredStateOfWorld returns an empty desired state.
func NewDesiredStateOfWorld(pm *plugins.Manager) *DesiredStateOfWorld {
	return &DesiredStateOfWorld{plugins: pm, nodes: map[types.NodeName]map[v1.UniqueVolumeName]*desiredVolume{}}
}

// AddNode starts managing a node; a no-op if it is managed already.
func (d *DesiredStateOfWorld) AddNode(node types.NodeName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.nodes[node]; !ok {
		d.nodes[node] = map[v1.UniqueVolumeName]*desiredVolume{}
	}
}

// DeleteNode stops managing a node. It refuses while pods on the node
// still need volumes there.
func (d *DesiredStateOfWorld) DeleteNode(node types.NodeName) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	vols, ok := d.nodes[node]
	if !ok {
		return nil
	}
	if len(vols) > 0 {
		return fmt.Errorf("failed to delete node %q from list of nodes managed by attach/detach controller--the node still contains %v volumes in its list of volumes to attach", node, len(vols))
	}
	delete(d.nodes, node)
	return nil
}

// NodeExists reports whether the node is managed.
func (d *DesiredStateOfWorld) NodeExists(node types.NodeName) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	_, ok := d.nodes[node]
	return ok
}

// AddPod records that pod, on node, needs the volume of spec attached
// there, and returns the volume's unique name. The node must be managed
// and the volume attachable.
func (d *DesiredStateOfWorld) AddPod(pod *v1.Pod, spec *plugins.Spec, node types.NodeName) (v1.UniqueVolumeName, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	vols, ok := d.nodes[node]
	if !ok {
		return "", fmt.Errorf("no node with the name %q exists in the list of managed nodes", node)
	}
	p, err := d.plugins.FindAttachableBySpec(spec)
	if err != nil || p == nil {
		if p == nil && err == nil {
			err = fmt.Errorf("plugin do not support attachment")
		}
		return "", fmt.Errorf("failed to get AttachablePlugin from volumeSpec for volume %q err=%v", spec.Name(), err)
	}
	name, err := plugins.UniqueVolumeName(p, spec)
	if err != nil {
		return "", fmt.Errorf("failed to get UniqueVolumeName from volumeSpec for plugin=%q and volume=%q err=%v", p.Name(), spec.Name(), err)
	}
	vol, ok := vols[name]
	if !ok {
		vol = &desiredVolume{spec: spec, pods: map[types.UID]*v1.Pod{}}
		vols[name] = vol
	}
	if _, ok := vol.pods[pod.UID]; !ok {
		vol.pods[pod.UID] = pod
	}
	return name, nil
}

// DeletePod forgets that the pod (by UID) needs the volume on node; the
// volume goes once no pod needs it.
func (d *DesiredStateOfWorld) DeletePod(podUID types.UID, volume v1.UniqueVolumeName, node types.NodeName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	vol, ok := d.nodes[node][volume]
	if !ok {
		return
	}
	delete(vol.pods, podUID)
	if len(vol.pods) == 0 {
		delete(d.nodes[node], volume)
	}
}

// VolumeExists reports whether some pod needs the volume on node.
func (d *DesiredStateOfWorld) VolumeExists(volume v1.UniqueVolumeName, node types.NodeName) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	_, ok := d.nodes[node][volume]
	return ok
}

// SetMultiAttachError marks the pods as told that the volume is attached
// elsewhere.
func (d *DesiredStateOfWorld) SetMultiAttachError(volume v1.UniqueVolumeName, node types.NodeName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if vol, ok := d.nodes[node][volume]; ok {
		vol.multiAttachErrorReported = true
	}
}

// GetVolumesToAttach lists every volume/node pair with its pods.
func (d *DesiredStateOfWorld) GetVolumesToAttach() []VolumeToAttach {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]VolumeToAttach, 0, len(d.nodes))
	for node, vols := range d.nodes {
		for name, vol := range vols {
			out = append(out, VolumeToAttach{
				MultiAttachErrorReported: vol.multiAttachErrorReported,
				VolumeName:               name,
				Spec:                     vol.spec,
				NodeName:                 node,
				ScheduledPods:            podList(vol.pods),
			})
		}
	}
	return out
}

func podList(pods map[types.UID]*v1.Pod) []*v1.Pod {
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, p)
	}
	return out
}

// PodToAdd is one pod's need for one volume on one node.
type PodToAdd struct {
	Pod        *v1.Pod
	VolumeName v1.UniqueVolumeName
	NodeName   types.NodeName
}

// GetPodsToAdd lists every recorded (pod, volume, node) need.
func (d *DesiredStateOfWorld) GetPodsToAdd() []PodToAdd {
	d.mu.RLock()
	defer d.mu.RUnlock()
	var out []PodToAdd
	for node, vols := range d.nodes {
		for name, vol := range vols {
			for _, pod := range vol.pods {
				out = append(out, PodToAdd{Pod: pod, VolumeName: name, NodeName: node})
			}
		}
	}
	return out
}

// GetVolumePodsOnNodes returns the pods that need volume on any of nodes.
func (d *DesiredStateOfWorld) GetVolumePodsOnNodes(nodes []types.NodeName, volume v1.UniqueVolumeName) []*v1.Pod {
	d.mu.RLock()
	defer d.mu.RUnlock()
	pods := []*v1.Pod{}
	for _, node := range nodes {
		if vol, ok := d.nodes[node][volume]; ok {
			pods = append(pods, podList(vol.pods)...)
		}
	}
	return pods
}
