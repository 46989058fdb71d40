// Package cache holds the attach/detach controller's two in-memory views:
// the desired state of the world (which volumes the pods scheduled to
// managed nodes need attached where) and the actual state of the world
// (which volumes are, or may be, attached where, and what each node's
// status should report).
package cache

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
)

// VolumeToAttach is a volume some pods on a node need attached.
type VolumeToAttach struct {
	// MultiAttachErrorReported is set once the pods were told the volume
	// is held by another node, so they are told only once.
	MultiAttachErrorReported bool
	VolumeName               v1.UniqueVolumeName
	Spec                     *plugins.Spec
	NodeName                 types.NodeName
	ScheduledPods            []*v1.Pod
}

// AttachedVolume is a volume attached, or perhaps attached, to a node.
type AttachedVolume struct {
	VolumeName v1.UniqueVolumeName
	// Spec is nil for volumes known only from node status at start-up
	// that no pod has claimed since.
	Spec       *plugins.Spec
	NodeName   types.NodeName
	DevicePath string
	// MountedByNode: the node lists the volume in status.volumesInUse (or
	// has not said otherwise since it was attached), so detaching is unsafe.
	MountedByNode bool
	// DetachRequestedTime is when the controller first wanted the volume
	// gone from the node; zero while it is wanted.
	DetachRequestedTime time.Time
}

func specName(s *plugins.Spec) string {
	if s == nil {
		return "nil"
	}
	return s.Name()
}

// Message is the user-facing text "<prefix> for volume "<name>" <suffix>",
// used in pod events.
func (v *VolumeToAttach) Message(prefix, suffix string) string {
	return fmt.Sprintf("%v for volume %q %v", prefix, specName(v.Spec), suffix)
}

// DetailedMessage adds the unique name and node, for logs.
func (v *VolumeToAttach) DetailedMessage(prefix, suffix string) string {
	return fmt.Sprintf("%v for volume %q (UniqueName: %q) from node %q %v", prefix, specName(v.Spec), v.VolumeName, v.NodeName, suffix)
}

func (v *VolumeToAttach) String() string {
	return fmt.Sprintf("%s (UniqueName: %s) from node %s", specName(v.Spec), v.VolumeName, v.NodeName)
}

// DetailedMessage is the log text for operations on an attached volume.
func (v *AttachedVolume) DetailedMessage(prefix, suffix string) string {
	return fmt.Sprintf("%v for volume %q (UniqueName: %q) on node %q %v", prefix, specName(v.Spec), v.VolumeName, v.NodeName, suffix)
}

func (v *AttachedVolume) String() string {
	return fmt.Sprintf("%s (UniqueName: %s) on node %s", specName(v.Spec), v.VolumeName, v.NodeName)
}

// ErrSuffix renders an error as the ": <err>" message suffix.
func ErrSuffix(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf(": %v", err)
}
