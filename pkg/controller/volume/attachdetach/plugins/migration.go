package plugins

import (
	"errors"
	"fmt"

	csitrans "k8s.io/csi-translation-lib"
	"k8s.io/klog/v2"
)

// translator maps in-tree sources to their CSI drivers.
var translator = csitrans.New()

// IsMigratable reports whether the spec is an in-tree source that has a CSI
// driver. Migration is complete for every such plugin (their in-tree code
// is gone), so neither feature gates nor the node's CSINode are consulted,
// as upstream.
func IsMigratable(spec *Spec) (bool, error) {
	if spec == nil {
		return false, errors.New("could not find if plugin is migratable because volume spec is nil")
	}
	return InTreePluginName(spec) != "", nil
}

// InTreePluginName names the in-tree plugin of a migratable spec, e.g.
// "kubernetes.io/gce-pd"; it is empty for any other spec.
func InTreePluginName(spec *Spec) string {
	name, _ := translator.GetInTreePluginNameFromSpec(spec.PersistentVolume, spec.Volume)
	return name
}

// TranslateInTreeSpecToCSI returns the spec of the CSI volume that replaces
// an in-tree PV or inline volume. podNamespace is used by the Azure File
// translation for inline volumes' secrets.
func TranslateInTreeSpecToCSI(logger klog.Logger, spec *Spec, podNamespace string) (*Spec, error) {
	var out *Spec
	switch {
	case spec.PersistentVolume != nil:
		pv, err := translator.TranslateInTreePVToCSI(logger, spec.PersistentVolume)
		if err != nil {
			return nil, fmt.Errorf("failed to translate in-tree pv to CSI: %v", err)
		}
		out = &Spec{PersistentVolume: pv}
	case spec.Volume != nil:
		pv, err := translator.TranslateInTreeInlineVolumeToCSI(logger, spec.Volume, podNamespace)
		if err != nil {
			return nil, fmt.Errorf("failed to translate in-tree pv to CSI: %v", err)
		}
		out = &Spec{PersistentVolume: pv, InlineVolumeSpecForCSIMigration: true}
	default:
		return nil, fmt.Errorf("failed to translate in-tree pv to CSI: %v", errors.New("not a valid volume spec"))
	}
	out.Migrated = true
	out.ReadOnly = spec.ReadOnly
	return out, nil
}

// TranslateIfMigratable translates migratable specs and returns the others
// unchanged.
func TranslateIfMigratable(logger klog.Logger, spec *Spec, podNamespace string) (*Spec, error) {
	ok, err := IsMigratable(spec)
	if err != nil {
		return nil, err
	}
	if !ok {
		return spec, nil
	}
	return TranslateInTreeSpecToCSI(logger, spec, podNamespace)
}
