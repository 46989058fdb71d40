package plugins

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
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

// ProbeEvent is a dynamically found plugin appearing, changing or (Remove)
// going away.
type ProbeEvent struct {
	// Plugin is the new or changed plugin; nil when Remove.
	Plugin Plugin
	// Name is the plugin's name.
	Name   string
	Remove bool
}

// Prober finds the plugins installed at run time (FlexVolume drivers). It
// is asked on every plugin lookup and reports only what changed since.
type Prober interface {
	Probe() ([]ProbeEvent, error)
}

// Manager finds the plugin for a volume.
type Manager struct {
	plugins []Plugin

	mu     sync.Mutex
	prober Prober
	probed map[string]Plugin
}

// NewManager returns a manager over plugins, which must have distinct names.
func NewManager(plugins ...Plugin) *Manager {
	return &Manager{plugins: plugins, probed: map[string]Plugin{}}
}

// SetProber adds the plugins prober finds, now and on later lookups.
func (m *Manager) SetProber(logger klog.Logger, prober Prober) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prober = prober
	m.refreshLocked(logger)
}

// refreshLocked applies what the prober found; a plugin that fails to load
// is skipped until it changes again.
func (m *Manager) refreshLocked(logger klog.Logger) {
	if m.prober == nil {
		return
	}
	events, err := m.prober.Probe()
	if err != nil {
		logger.Error(err, "Error dynamically probing plugins")
	}
	for _, ev := range events {
		if ev.Remove {
			delete(m.probed, ev.Name)
			continue
		}
		name := ev.Plugin.Name()
		if errs := validation.IsQualifiedName(name); len(errs) != 0 {
			logger.Error(fmt.Errorf("volume plugin has invalid name: %q: %s", name, strings.Join(errs, ";")),
				"Error initializing dynamically probed plugin", "pluginName", name)
			continue
		}
		logger.V(1).Info("Loaded volume plugin", "pluginName", name)
		m.probed[name] = ev.Plugin
	}
}

// all is the static plugins followed by the probed ones, by name.
func (m *Manager) all() []Plugin {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refreshLocked(klog.TODO())
	if len(m.probed) == 0 {
		return m.plugins
	}
	out := slices.Clone(m.plugins)
	for _, name := range slices.Sorted(maps.Keys(m.probed)) {
		out = append(out, m.probed[name])
	}
	return out
}

// FindBySpec returns the single plugin supporting spec.
func (m *Manager) FindBySpec(spec *Spec) (Plugin, error) {
	if spec == nil {
		return nil, fmt.Errorf("could not find plugin because volume spec is nil")
	}
	var match Plugin
	var names []string
	for _, p := range m.all() {
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
	for _, p := range m.all() {
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
