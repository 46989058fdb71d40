package statefulset

import (
	"regexp"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// The API server defaults a StatefulSet's pod template when the set is
// written, and later releases default more fields. A revision written by an
// older release therefore restores a template lacking fields that today's
// set carries. Upstream defaults the restored set before comparing it with
// the proposed revision; defaultTemplate applies the same core/v1 defaults
// to the template (the only part a revision stores), so such a revision
// still counts as unchanged and no pod is rolled.

// defaultTemplate applies the API defaults of a pod template in place.
func defaultTemplate(t *v1.PodTemplateSpec) {
	spec := &t.Spec
	defaultPodSpec(spec)
	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
	controller.UpdateContainers(spec, defaultContainer)
	roundUpQuantities(spec.Overhead)
	if spec.Resources != nil {
		roundUpQuantities(spec.Resources.Limits)
		roundUpQuantities(spec.Resources.Requests)
	}
}

func defaultPodSpec(s *v1.PodSpec) {
	// serviceAccount is the deprecated alias of serviceAccountName.
	if s.ServiceAccountName == "" {
		s.ServiceAccountName = s.DeprecatedServiceAccount
	}
	s.DeprecatedServiceAccount = s.ServiceAccountName
	if s.DNSPolicy == "" {
		s.DNSPolicy = v1.DNSClusterFirst
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = v1.RestartPolicyAlways
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &v1.PodSecurityContext{}
	}
	if s.TerminationGracePeriodSeconds == nil {
		grace := int64(v1.DefaultTerminationGracePeriodSeconds)
		s.TerminationGracePeriodSeconds = &grace
	}
	if s.SchedulerName == "" {
		s.SchedulerName = v1.DefaultSchedulerName
	}
}

func defaultVolume(vol *v1.Volume) {
	src := &vol.VolumeSource
	if src.HostPath == nil && src.EmptyDir == nil && src.GCEPersistentDisk == nil && src.AWSElasticBlockStore == nil &&
		src.GitRepo == nil && src.Secret == nil && src.NFS == nil && src.ISCSI == nil && src.Glusterfs == nil &&
		src.PersistentVolumeClaim == nil && src.RBD == nil && src.FlexVolume == nil && src.Cinder == nil &&
		src.CephFS == nil && src.Flocker == nil && src.DownwardAPI == nil && src.FC == nil && src.AzureFile == nil &&
		src.ConfigMap == nil && src.VsphereVolume == nil && src.Quobyte == nil && src.AzureDisk == nil &&
		src.PhotonPersistentDisk == nil && src.Projected == nil && src.PortworxVolume == nil && src.ScaleIO == nil &&
		src.StorageOS == nil && src.CSI == nil && src.Ephemeral == nil && src.Image == nil {
		src.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	// ImageVolume is GA and locked on.
	if src.Image != nil && src.Image.PullPolicy == "" {
		src.Image.PullPolicy = pullPolicyFor(src.Image.Reference)
	}
	if src.HostPath != nil && src.HostPath.Type == nil {
		unset := v1.HostPathUnset
		src.HostPath.Type = &unset
	}
	if src.Secret != nil && src.Secret.DefaultMode == nil {
		src.Secret.DefaultMode = int32Ptr(v1.SecretVolumeSourceDefaultMode)
	}
	if src.ISCSI != nil && src.ISCSI.ISCSIInterface == "" {
		src.ISCSI.ISCSIInterface = "default"
	}
	if r := src.RBD; r != nil {
		if r.RBDPool == "" {
			r.RBDPool = "rbd"
		}
		if r.RadosUser == "" {
			r.RadosUser = "admin"
		}
		if r.Keyring == "" {
			r.Keyring = "/etc/ceph/keyring"
		}
	}
	if d := src.DownwardAPI; d != nil {
		if d.DefaultMode == nil {
			d.DefaultMode = int32Ptr(v1.DownwardAPIVolumeSourceDefaultMode)
		}
		for i := range d.Items {
			defaultFieldRef(d.Items[i].FieldRef)
		}
	}
	if src.ConfigMap != nil && src.ConfigMap.DefaultMode == nil {
		src.ConfigMap.DefaultMode = int32Ptr(v1.ConfigMapVolumeSourceDefaultMode)
	}
	if d := src.AzureDisk; d != nil {
		if d.CachingMode == nil {
			mode := v1.AzureDataDiskCachingReadWrite
			d.CachingMode = &mode
		}
		if d.FSType == nil {
			fs := "ext4"
			d.FSType = &fs
		}
		if d.ReadOnly == nil {
			ro := false
			d.ReadOnly = &ro
		}
		if d.Kind == nil {
			kind := v1.AzureSharedBlobDisk
			d.Kind = &kind
		}
	}
	if p := src.Projected; p != nil {
		if p.DefaultMode == nil {
			p.DefaultMode = int32Ptr(v1.ProjectedVolumeSourceDefaultMode)
		}
		for i := range p.Sources {
			s := &p.Sources[i]
			if s.DownwardAPI != nil {
				for j := range s.DownwardAPI.Items {
					defaultFieldRef(s.DownwardAPI.Items[j].FieldRef)
				}
			}
			if s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds == nil {
				hour := int64(time.Hour / time.Second)
				s.ServiceAccountToken.ExpirationSeconds = &hour
			}
		}
	}
	if s := src.ScaleIO; s != nil {
		if s.StorageMode == "" {
			s.StorageMode = "ThinProvisioned"
		}
		if s.FSType == "" {
			s.FSType = "xfs"
		}
	}
	if e := src.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		spec := &e.VolumeClaimTemplate.Spec
		if spec.VolumeMode == nil {
			mode := v1.PersistentVolumeFilesystem
			spec.VolumeMode = &mode
		}
		roundUpQuantities(spec.Resources.Limits)
		roundUpQuantities(spec.Resources.Requests)
	}
}

func defaultContainer(c *v1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = pullPolicyFor(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = v1.ProtocolTCP
		}
	}
	for i := range c.Env {
		from := c.Env[i].ValueFrom
		if from == nil {
			continue
		}
		defaultFieldRef(from.FieldRef)
		if from.FileKeyRef != nil && from.FileKeyRef.Optional == nil {
			optional := false
			from.FileKeyRef.Optional = &optional
		}
	}
	roundUpQuantities(c.Resources.Limits)
	roundUpQuantities(c.Resources.Requests)
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	if c.Lifecycle != nil {
		for _, h := range []*v1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

func defaultProbe(p *v1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		empty := ""
		p.GRPC.Service = &empty
	}
}

func defaultHTTPGet(h *v1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = v1.URISchemeHTTP
	}
}

func defaultFieldRef(f *v1.ObjectFieldSelector) {
	if f != nil && f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

// roundUpQuantities rounds every quantity up to milli precision, as the
// API server stores them.
func roundUpQuantities(l v1.ResourceList) {
	for name, q := range l {
		q.RoundUp(-3)
		l[name] = q
	}
}

func int32Ptr(v int32) *int32 { return &v }

// Image reference grammar (the distribution project's, which the API
// server's defaulting parses with): [domain/]path[:tag][@digest].
var (
	imagePathComponent = `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
	imageDomain        = `(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?`
	imageReference     = regexp.MustCompile(`^(?:(` + imageDomain + `)/)?` + imagePathComponent + `(?:/` + imagePathComponent + `)*` +
		`(?::([\w][\w.-]{0,127}))?(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$`)
)

// pullPolicyFor is the default pull policy of an image: Always for the
// latest tag (explicit, or implied by neither tag nor digest), else
// IfNotPresent, and IfNotPresent for a reference that does not parse.
func pullPolicyFor(image string) v1.PullPolicy {
	m := imageReference.FindStringSubmatch(image)
	if m == nil {
		return v1.PullIfNotPresent
	}
	tag, digest := m[2], m[3]
	if tag == "latest" || (tag == "" && digest == "") {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}
