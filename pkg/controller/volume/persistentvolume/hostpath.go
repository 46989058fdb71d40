package persistentvolume

import (
	"context"
	"fmt"
	"os"
	"regexp"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	clientset "k8s.io/client-go/kubernetes"
)

const (
	hostPathPluginName = "kubernetes.io/host-path"
	nfsPluginName      = "kubernetes.io/nfs"
)

// hostPathPlugin is the in-tree hostPath plugin as the controller manager
// uses it: for development and single-node clusters only. It provisions
// directories under /tmp/hostpath_pv on the controller manager's own host,
// deletes directories under /tmp and recycles with a scrubber pod.
type hostPathPlugin struct {
	client              clientset.Interface
	recycler            recyclerPodConfig
	provisioningEnabled bool
	// baseDir is where provisioned directories go; "/tmp" in production.
	baseDir string
}

var (
	_ provisionablePlugin = &hostPathPlugin{}
	_ deletablePlugin     = &hostPathPlugin{}
	_ recyclablePlugin    = &hostPathPlugin{}
)

func (p *hostPathPlugin) name() string { return hostPathPluginName }

func (p *hostPathPlugin) canSupport(pv *v1.PersistentVolume) bool {
	return pv != nil && pv.Spec.HostPath != nil
}

func (p *hostPathPlugin) supportsMountOption() bool { return false }

func (p *hostPathPlugin) recycle(ctx context.Context, pvName string, pv *v1.PersistentVolume, record recordFunc) error {
	if pv == nil || pv.Spec.HostPath == nil {
		return fmt.Errorf("spec.PersistentVolume.Spec.HostPath is nil")
	}
	pod := p.recycler.podFor(pv)
	pod.Spec.Volumes[0].VolumeSource = v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: pv.Spec.HostPath.Path}}
	return recycleWithPod(ctx, p.client, pvName, pod, record)
}

func (p *hostPathPlugin) newDeleter(pv *v1.PersistentVolume) (deleter, error) {
	if pv.Spec.HostPath == nil {
		return nil, fmt.Errorf("spec.PersistentVolumeSource.HostPath is nil")
	}
	return hostPathDeleter{path: pv.Spec.HostPath.Path}, nil
}

func (p *hostPathPlugin) newProvisioner(opts provisionOptions) (provisioner, error) {
	if !p.provisioningEnabled {
		return nil, fmt.Errorf("provisioning in volume plugin %q is disabled", p.name())
	}
	return &hostPathProvisioner{opts: opts, baseDir: p.baseDir}, nil
}

// tmpPathPattern bounds what the hostPath deleter may remove.
var tmpPathPattern = regexp.MustCompile("/tmp/.+")

type hostPathDeleter struct{ path string }

func (d hostPathDeleter) deleteVolume() error {
	if !tmpPathPattern.MatchString(d.path) {
		return fmt.Errorf("host_path deleter only supports /tmp/.+ but received provided %s", d.path)
	}
	return os.RemoveAll(d.path)
}

type hostPathProvisioner struct {
	opts    provisionOptions
	baseDir string
}

func (r *hostPathProvisioner) provision(_ context.Context, _ *v1.Node, _ []v1.TopologySelectorTerm) (*v1.PersistentVolume, error) {
	claim := r.opts.claim
	if claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == v1.PersistentVolumeBlock {
		return nil, fmt.Errorf("%s does not support block volume provisioning", hostPathPluginName)
	}
	path := fmt.Sprintf("%s/hostpath_pv/%s", r.baseDir, uuid.NewUUID())
	modes := claim.Spec.AccessModes
	if len(modes) == 0 {
		modes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        r.opts.pvName,
			Annotations: map[string]string{annCreatedBy: "hostpath-dynamic-provisioner"},
		},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: r.opts.reclaimPolicy,
			AccessModes:                   modes,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: claim.Spec.Resources.Requests[v1.ResourceStorage]},
			PersistentVolumeSource:        v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path}},
		},
	}
	if err := os.MkdirAll(path, 0o750); err != nil {
		return nil, err
	}
	return pv, nil
}

// nfsPlugin only recycles: NFS volumes are neither provisioned nor deleted
// by the controller manager.
type nfsPlugin struct {
	client   clientset.Interface
	recycler recyclerPodConfig
}

var _ recyclablePlugin = &nfsPlugin{}

func (p *nfsPlugin) name() string { return nfsPluginName }

func (p *nfsPlugin) canSupport(pv *v1.PersistentVolume) bool {
	return pv != nil && pv.Spec.NFS != nil
}

func (p *nfsPlugin) recycle(ctx context.Context, pvName string, pv *v1.PersistentVolume, record recordFunc) error {
	if pv == nil || pv.Spec.NFS == nil {
		return fmt.Errorf("spec.PersistentVolumeSource.NFS is nil")
	}
	pod := p.recycler.podFor(pv)
	pod.GenerateName = "pv-recycler-nfs-"
	pod.Spec.Volumes[0].VolumeSource = v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: pv.Spec.NFS.Server, Path: pv.Spec.NFS.Path}}
	return recycleWithPod(ctx, p.client, pvName, pod, record)
}
