package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// PersistentVolumeBinderControllerOptions holds the
// persistentvolume-binder-controller flags.
type PersistentVolumeBinderControllerOptions struct {
	*kcmconfig.PersistentVolumeBinderControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *PersistentVolumeBinderControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	const devOnly = "  For development and testing only; does not work in a multi-node cluster."
	vc := &o.VolumeConfiguration
	rc := &vc.PersistentVolumeRecyclerConfiguration
	fs.DurationVar(&o.PVClaimBinderSyncPeriod.Duration, "pvclaimbinder-sync-period", o.PVClaimBinderSyncPeriod.Duration,
		"How often persistent volumes and claims are synced.")
	fs.StringVar(&rc.PodTemplateFilePathNFS, "pv-recycler-pod-template-filepath-nfs", rc.PodTemplateFilePathNFS,
		"File holding the pod definition used as the template for recycling NFS persistent volumes")
	fs.Int32Var(&rc.MinimumTimeoutNFS, "pv-recycler-minimum-timeout-nfs", rc.MinimumTimeoutNFS,
		"The smallest ActiveDeadlineSeconds given to an NFS recycler pod")
	fs.Int32Var(&rc.IncrementTimeoutNFS, "pv-recycler-increment-timeout-nfs", rc.IncrementTimeoutNFS,
		"Seconds added to an NFS scrubber pod's ActiveDeadlineSeconds per Gi of volume")
	fs.StringVar(&rc.PodTemplateFilePathHostPath, "pv-recycler-pod-template-filepath-hostpath", rc.PodTemplateFilePathHostPath,
		"File holding the pod definition used as the template for recycling HostPath persistent volumes."+devOnly)
	fs.Int32Var(&rc.MinimumTimeoutHostPath, "pv-recycler-minimum-timeout-hostpath", rc.MinimumTimeoutHostPath,
		"The smallest ActiveDeadlineSeconds given to a HostPath recycler pod."+devOnly)
	fs.Int32Var(&rc.IncrementTimeoutHostPath, "pv-recycler-timeout-increment-hostpath", rc.IncrementTimeoutHostPath,
		"Seconds added to a HostPath scrubber pod's ActiveDeadlineSeconds per Gi of volume."+devOnly)
	fs.BoolVar(&vc.EnableHostPathProvisioning, "enable-hostpath-provisioner", vc.EnableHostPathProvisioning,
		"Provision HostPath PVs when no cloud provider is used, to test and develop provisioning. "+
			"Unsupported, single-node only, never for anything but testing or development.")
	fs.BoolVar(&vc.EnableDynamicProvisioning, "enable-dynamic-provisioning", vc.EnableDynamicProvisioning,
		"Provision volumes dynamically where the environment supports it.")
	fs.StringVar(&vc.FlexVolumePluginDir, "flex-volume-plugin-dir", vc.FlexVolumePluginDir,
		"Absolute directory searched for third-party flex volume plugins.")
}

// ApplyTo copies the options into cfg.
func (o *PersistentVolumeBinderControllerOptions) ApplyTo(cfg *kcmconfig.PersistentVolumeBinderControllerConfiguration) error {
	if o == nil {
		return nil
	}
	*cfg = *o.PersistentVolumeBinderControllerConfiguration
	return nil
}

// Validate accepts any value, as upstream does.
func (o *PersistentVolumeBinderControllerOptions) Validate() []error {
	return nil
}
