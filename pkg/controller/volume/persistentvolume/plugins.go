package persistentvolume

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/persistentvolume/metrics"
)

// Upstream's controller loads, of the in-tree volume plugins, those that can
// provision, delete or recycle: hostPath (all three, provisioning only with
// --enable-hostpath-provisioner) and NFS (recycle). Everything else is
// either CSI (external provisioner/deleter) or an in-tree plugin migrated
// to CSI. These are the two, behind the same lookups and error messages.

// volumePlugin is an in-tree volume plugin the controller can use.
type volumePlugin interface {
	// name is the plugin name, e.g. "kubernetes.io/host-path".
	name() string
	// canSupport reports whether the plugin serves the PV's volume source.
	canSupport(pv *v1.PersistentVolume) bool
}

// provisionOptions is what a provisioner gets to create a volume.
type provisionOptions struct {
	reclaimPolicy v1.PersistentVolumeReclaimPolicy
	mountOptions  []string
	pvName        string
	claim         *v1.PersistentVolumeClaim
	parameters    map[string]string
}

type provisionablePlugin interface {
	volumePlugin
	supportsMountOption() bool
	newProvisioner(opts provisionOptions) (provisioner, error)
}

type provisioner interface {
	// provision creates the storage asset and returns its PV (not saved).
	provision(ctx context.Context, selectedNode *v1.Node, allowedTopologies []v1.TopologySelectorTerm) (*v1.PersistentVolume, error)
}

type deletablePlugin interface {
	volumePlugin
	newDeleter(pv *v1.PersistentVolume) (deleter, error)
}

type deleter interface {
	// deleteVolume removes the storage asset.
	deleteVolume() error
}

// recordFunc sends an event (type, message) about a volume.
type recordFunc func(eventtype, message string)

type recyclablePlugin interface {
	volumePlugin
	// recycle scrubs the volume; it blocks until done.
	recycle(ctx context.Context, pvName string, pv *v1.PersistentVolume, record recordFunc) error
}

var errNoPluginMatched = errors.New("no volume plugin matched")

// pluginManager finds plugins by name or by the PV they must handle.
type pluginManager struct {
	plugins map[string]volumePlugin
}

func newPluginManager(plugins ...volumePlugin) (*pluginManager, error) {
	m := &pluginManager{plugins: map[string]volumePlugin{}}
	for _, p := range plugins {
		if _, dup := m.plugins[p.name()]; dup {
			return nil, fmt.Errorf("volume plugin %q was registered more than once", p.name())
		}
		m.plugins[p.name()] = p
	}
	return m, nil
}

func (m *pluginManager) findByName(name string) (volumePlugin, error) {
	if p, ok := m.plugins[name]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("no volume plugin matched name: %s", name)
}

func (m *pluginManager) findBySpec(pv *v1.PersistentVolume) (volumePlugin, error) {
	var match volumePlugin
	var names []string
	for _, p := range m.plugins {
		if p.canSupport(pv) {
			match = p
			names = append(names, p.name())
		}
	}
	switch len(names) {
	case 0:
		return nil, errNoPluginMatched
	case 1:
		return match, nil
	default:
		sort.Strings(names)
		return nil, fmt.Errorf("multiple volume plugins matched: %s", strings.Join(names, ","))
	}
}

func (m *pluginManager) findProvisionableByName(name string) (provisionablePlugin, error) {
	p, err := m.findByName(name)
	if err != nil {
		return nil, err
	}
	if pp, ok := p.(provisionablePlugin); ok {
		return pp, nil
	}
	return nil, fmt.Errorf("no provisionable volume plugin matched")
}

func (m *pluginManager) findDeletableByName(name string) (deletablePlugin, error) {
	p, err := m.findByName(name)
	if err != nil {
		return nil, err
	}
	if dp, ok := p.(deletablePlugin); ok {
		return dp, nil
	}
	return nil, fmt.Errorf("no deletable volume plugin matched")
}

func (m *pluginManager) findDeletableBySpec(pv *v1.PersistentVolume) (deletablePlugin, error) {
	p, err := m.findBySpec(pv)
	if err != nil {
		return nil, err
	}
	if dp, ok := p.(deletablePlugin); ok {
		return dp, nil
	}
	return nil, fmt.Errorf("no deletable volume plugin matched")
}

func (m *pluginManager) findRecyclableBySpec(pv *v1.PersistentVolume) (recyclablePlugin, error) {
	p, err := m.findBySpec(pv)
	if err != nil {
		return nil, err
	}
	if rp, ok := p.(recyclablePlugin); ok {
		return rp, nil
	}
	return nil, fmt.Errorf("no recyclable volume plugin matched")
}

// metricPluginName is the plugin_name label of pv_collector_total_pv_count.
func (m *pluginManager) metricPluginName(pv *v1.PersistentVolume) string {
	p, err := m.findBySpec(pv)
	if err != nil {
		return metrics.PluginNameNotAvailable
	}
	// A CSI PV would be suffixed with its driver, but no CSI plugin is
	// among the provisioning/deleting/recycling plugins.
	return p.name()
}
