package plugins

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/klog/v2"
)

const (
	// CSIPluginName is the CSI plugin's name, the prefix of CSI volumes'
	// unique names.
	CSIPluginName = "kubernetes.io/csi"
	// csiVolumeNameSep joins driver and volume handle in a CSI volume name.
	csiVolumeNameSep = "^"
	// DefaultCSIAttachTimeout bounds how long one attach or detach waits
	// for the external-attacher before failing (and being retried).
	DefaultCSIAttachTimeout = 2 * time.Minute
)

// Polling of the VolumeAttachment while waiting: starts at half a second
// and slowly stretches towards 7s, which it reaches about when the timeout
// expires.
const (
	csiPollInitial = 500 * time.Millisecond
	csiPollMax     = 7 * time.Second
	csiPollFactor  = 1.05
	csiPollJitter  = 0.1
)

// CSI attaches CSI persistent volumes by creating a VolumeAttachment for
// the driver's external-attacher and waiting until it reports the volume
// attached; it detaches by deleting the VolumeAttachment.
type CSI struct {
	client           clientset.Interface
	driverLister     storagelisters.CSIDriverLister
	attachmentLister storagelisters.VolumeAttachmentLister
	timeout          time.Duration
	pollInitial      time.Duration
	pollMax          time.Duration
}

// NewCSI returns the CSI plugin. The listers are the controller's shared
// CSIDriver and VolumeAttachment caches.
func NewCSI(client clientset.Interface, drivers storagelisters.CSIDriverLister, attachments storagelisters.VolumeAttachmentLister) *CSI {
	return &CSI{
		client:           client,
		driverLister:     drivers,
		attachmentLister: attachments,
		timeout:          DefaultCSIAttachTimeout,
		pollInitial:      csiPollInitial,
		pollMax:          csiPollMax,
	}
}

// SetTimeouts overrides the attach/detach timeout and the initial poll
// interval; for tests.
func (p *CSI) SetTimeouts(timeout, pollInitial time.Duration) {
	p.timeout = timeout
	p.pollInitial = pollInitial
}

// AttachmentName is the name of the VolumeAttachment of a volume on a node:
// "csi-" and the hex SHA-256 of handle, driver and node name concatenated.
func AttachmentName(volumeHandle, driver, nodeName string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(volumeHandle+driver+nodeName)))
}

// csiLogMsg prefixes messages with the plugin name, as the CSI plugin's
// errors always are.
func csiLogMsg(format string, args ...interface{}) string {
	return fmt.Sprintf(CSIPluginName+": "+format, args...)
}

func (p *CSI) Name() string { return CSIPluginName }

func (p *CSI) CanSupport(spec *Spec) bool {
	if spec == nil {
		return false
	}
	return (spec.PersistentVolume != nil && spec.PersistentVolume.Spec.CSI != nil) ||
		(spec.Volume != nil && spec.Volume.CSI != nil)
}

// csiSources returns the inline (ephemeral) or persistent CSI source.
func csiSources(spec *Spec) (*v1.CSIVolumeSource, *v1.CSIPersistentVolumeSource, error) {
	switch {
	case spec == nil:
		return nil, nil, errors.New("volume.Spec nil")
	case spec.Volume != nil && spec.PersistentVolume != nil:
		return nil, nil, errors.New("volume.Spec has both volume and persistent volume sources")
	case spec.Volume != nil && spec.Volume.CSI != nil:
		return spec.Volume.CSI, nil, nil
	case spec.PersistentVolume != nil && spec.PersistentVolume.Spec.CSI != nil:
		return nil, spec.PersistentVolume.Spec.CSI, nil
	}
	return nil, nil, errors.New("volume source not found in volume.Spec")
}

// persistentSource returns the CSI PV source; inline CSI volumes have none.
func persistentSource(spec *Spec) (*v1.CSIPersistentVolumeSource, error) {
	inline, pv, err := csiSources(spec)
	if err != nil {
		return nil, err
	}
	if inline != nil {
		return nil, errors.New("unexpected api.CSIVolumeSource found in volume.Spec")
	}
	return pv, nil
}

// VolumeName is "<driver>^<volume handle>".
func (p *CSI) VolumeName(spec *Spec) (string, error) {
	src, err := persistentSource(spec)
	if err != nil {
		return "", errors.New(csiLogMsg("plugin.GetVolumeName failed to extract volume source from spec: %v", err))
	}
	return src.Driver + csiVolumeNameSep + src.VolumeHandle, nil
}

// CanAttach: inline (ephemeral) CSI volumes are never attached; PVs are,
// unless the driver's CSIDriver says attachRequired: false. A missing
// CSIDriver means attach.
func (p *CSI) CanAttach(spec *Spec) (bool, error) {
	inline, pv, err := csiSources(spec)
	if err != nil {
		return false, err
	}
	if inline != nil {
		return false, nil
	}
	skip, err := p.skipAttach(pv.Driver)
	if err != nil {
		return false, err
	}
	return !skip, nil
}

func (p *CSI) skipAttach(driver string) (bool, error) {
	if p.driverLister == nil {
		return false, errors.New("CSIDriver lister does not exist")
	}
	d, err := p.driverLister.Get(driver)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return d.Spec.AttachRequired != nil && !*d.Spec.AttachRequired, nil
}

// Attach creates the VolumeAttachment unless it exists and waits until
// the external-attacher reports it attached. The device path is always
// empty: nodes find the device from the attachment themselves.
func (p *CSI) Attach(ctx context.Context, spec *Spec, node types.NodeName) (string, error) {
	if spec == nil {
		return "", errors.New("missing spec")
	}
	src, err := persistentSource(spec)
	if err != nil {
		return "", errors.New(csiLogMsg("attacher.Attach failed to get CSIPersistentVolumeSource: %v", err))
	}
	logger := klog.FromContext(ctx)
	name := AttachmentName(src.VolumeHandle, src.Driver, string(node))

	existing, err := p.attachmentLister.Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return "", errors.New(csiLogMsg("failed to get volume attachment from lister: %v", err))
	}
	if existing == nil {
		var source storagev1.VolumeAttachmentSource
		if spec.InlineVolumeSpecForCSIMigration {
			// No PV object exists: the attacher reads the translated spec
			// (access modes, mount options) from the attachment itself.
			source.InlineVolumeSpec = &spec.PersistentVolume.Spec
		} else {
			pvName := spec.PersistentVolume.Name
			source.PersistentVolumeName = &pvName
		}
		va := &storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: storagev1.VolumeAttachmentSpec{
				Attacher: src.Driver,
				NodeName: string(node),
				Source:   source,
			},
		}
		_, err := p.client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
			logger.V(4).Info("VolumeAttachment already exists, not recreating it", "volumeAttachment", name, "volumeHandle", src.VolumeHandle)
		case err != nil:
			return "", errors.New(csiLogMsg("attacher.Attach failed: %v", err))
		default:
			logger.V(4).Info("VolumeAttachment created", "volumeAttachment", name, "volumeHandle", src.VolumeHandle)
		}
	}

	check := func() (bool, error) {
		va, err := p.attachmentLister.Get(name)
		if apierrors.IsNotFound(err) {
			// Just created; the informer has not caught up yet.
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return attachmentAttached(va)
	}
	if err := p.waitFor(ctx, check, "attach", src.Driver, src.VolumeHandle); err != nil {
		return "", err
	}
	logger.V(4).Info("Attach finished", "volumeAttachment", name)
	return "", nil
}

// attachmentAttached reads the external-attacher's verdict.
func attachmentAttached(va *storagev1.VolumeAttachment) (bool, error) {
	if va.DeletionTimestamp != nil {
		return false, errors.New("volume attachment is being deleted")
	}
	if va.Status.Attached {
		return true, nil
	}
	if va.Status.AttachError != nil {
		return false, errors.New(va.Status.AttachError.Message)
	}
	return false, nil
}

// Detach deletes the VolumeAttachment and waits until the external-attacher
// has detached the volume and let the object go.
func (p *CSI) Detach(ctx context.Context, volumeName string, node types.NodeName) error {
	if volumeName == "" {
		return errors.New("missing expected parameter volumeName")
	}
	parts := strings.Split(volumeName, csiVolumeNameSep)
	if len(parts) != 2 {
		return errors.New("volumeName missing expected data")
	}
	driver, handle := parts[0], parts[1]
	name := AttachmentName(handle, driver, string(node))
	logger := klog.FromContext(ctx)

	err := p.client.StorageV1().VolumeAttachments().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("VolumeAttachment not found, volume detached", "volumeAttachment", name, "volumeHandle", handle)
		return nil
	}
	if err != nil {
		return errors.New(csiLogMsg("detacher.Detach failed to delete VolumeAttachment [%s]: %v", name, err))
	}

	check := func() (bool, error) {
		va, err := p.attachmentLister.Get(name)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, errors.New(csiLogMsg("detacher.WaitForDetach failed for volume [%s] (will continue to try): %v", handle, err))
		}
		if va.Status.DetachError != nil {
			return false, errors.New(va.Status.DetachError.Message)
		}
		return false, nil
	}
	// Without a spec the driver is reported as unknown, as upstream does.
	return p.waitFor(ctx, check, "detach", "unknown", handle)
}

// waitFor polls check with a slowly growing interval until it reports
// done, fails, or the timeout passes.
func (p *CSI) waitFor(ctx context.Context, check func() (bool, error), op, driver, handle string) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	delay := p.pollInitial
	for {
		timer := time.NewTimer(wait.Jitter(delay, csiPollJitter))
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("timed out waiting for external-attacher of %v CSI driver to %v volume %v", driver, op, handle)
		case <-timer.C:
		}
		done, err := check()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		delay = min(time.Duration(float64(delay)*csiPollFactor), p.pollMax)
	}
}

// VolumesAreAttached reads each volume's VolumeAttachment (cache first,
// then the API server). Volumes of drivers that skip attach count as
// attached.
func (p *CSI) VolumesAreAttached(ctx context.Context, specs []*Spec, node types.NodeName) (map[*Spec]bool, error) {
	logger := klog.FromContext(ctx)
	attached := make(map[*Spec]bool, len(specs))
	for _, spec := range specs {
		if spec == nil {
			return nil, errors.New("missing spec")
		}
		src, err := persistentSource(spec)
		if err != nil {
			attached[spec] = false
			logger.Error(err, "VolumesAreAttached failed to get CSIPersistentVolumeSource")
			continue
		}
		skip, err := p.skipAttach(src.Driver)
		if err != nil {
			logger.Error(err, "Failed to check CSIDriver", "driver", src.Driver)
		} else if skip {
			attached[spec] = true
			continue
		}
		name := AttachmentName(src.VolumeHandle, src.Driver, string(node))
		if va, err := p.attachmentLister.Get(name); err == nil {
			attached[spec] = va.Status.Attached
			continue
		}
		va, err := p.client.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			attached[spec] = false
			logger.Error(err, "VolumesAreAttached failed to get VolumeAttachment", "volumeAttachment", name)
			continue
		}
		attached[spec] = va.Status.Attached
	}
	return attached, nil
}
