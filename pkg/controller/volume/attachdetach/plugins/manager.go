package plugins

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Plugin is an attachable volume plugin, as seen from the controller.
type Plugin interface {
	// Name is the plugin's name, e.g. "kubernetes.io/csi".
	Name() string
	// CanSupport reports whether the spec is this plugin's kind of volume.
	CanSupport(spec *Spec) bool
	// VolumeName identifies the backing volume within the plugin; it is
	// what Detach gets back when no spec is known.
	VolumeName(spec *Spec) (string, error)
	// CanAttach reports whether the supported spec needs attaching at all.
	CanAttach(spec *Spec) (bool, error)
	// Attach attaches the volume to the node and returns the device path
	// to report in node status.
	Attach(ctx context.Context, spec *Spec, node types.NodeName) (string, error)
	// Detach detaches the volume named by VolumeName from the node.
	Detach(ctx context.Context, volumeName string, node types.NodeName) error
	// VolumesAreAttached checks which of specs are still attached to node.
	VolumesAreAttached(ctx context.Context, specs []*Spec, node types.NodeName) (map[*Spec]bool, error)
}

// Manager finds the plugin for a volume.
type Manager struct {
	plugins []Plugin
}

// NewManager returns a manager over plugins, which must have distinct names.
func NewManager(plugins ...Plugin) *Manager {
	return &Manager{plugins: plugins}
}

// FindBySpec returns the single plugin supporting spec.
func (m *Manager) FindBySpec(spec *Spec) (Plugin, error) {
	if spec == nil {
		return nil, fmt.Errorf("could not find plugin because volume spec is nil")
	}
	var match Plugin
	var names []string
	for _, p := range m.plugins {
		if p.CanSupport(spec) {
			match = p
			names = append(names, p.Name())
		}
	}
	switch len(names) {
	case 0:
		return nil, ErrNoPluginMatched
	case 1:
		return match, nil
	}
	return nil, fmt.Errorf("multiple volume plugins matched: %s", strings.Join(names, ","))
}

// FindAttachableBySpec returns the plugin supporting spec if the volume
// needs attaching, nil (and no error) if it does not.
func (m *Manager) FindAttachableBySpec(spec *Spec) (Plugin, error) {
	p, err := m.FindBySpec(spec)
	if err != nil {
		return nil, err
	}
	ok, err := p.CanAttach(spec)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, nil
	}
	return p, nil
}

// FindDetachableBySpec is FindAttachableBySpec except that a CSI volume is
// always detachable: one left uncertain must be detachable even if its
// driver has since stopped requiring attachment.
func (m *Manager) FindDetachableBySpec(spec *Spec) (Plugin, error) {
	p, err := m.FindBySpec(spec)
	if err != nil {
		return nil, err
	}
	if p.Name() == CSIPluginName {
		return p, nil
	}
	ok, err := p.CanAttach(spec)
	if err != nil || !ok {
		return nil, err
	}
	return p, nil
}

// FindByName returns the plugin called name.
func (m *Manager) FindByName(name string) (Plugin, error) {
	for _, p := range m.plugins {
		if p.Name() == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no volume plugin matched name: %s", name)
}

// IsAttachable reports whether spec is a volume some plugin attaches.
func (m *Manager) IsAttachable(spec *Spec) bool {
	p, _ := m.FindAttachableBySpec(spec)
	return p != nil
}
