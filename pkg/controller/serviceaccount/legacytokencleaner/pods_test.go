package legacytokencleaner

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestPodSecretNames(t *testing.T) {
	ref := func(name string) *v1.LocalObjectReference { return &v1.LocalObjectReference{Name: name} }
	envs := func(from, key string) ([]v1.EnvFromSource, []v1.EnvVar) {
		return []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: *ref(from)}}, {ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: *ref("cm")}}},
			[]v1.EnvVar{{Name: "A", Value: "plain"}, {Name: "B", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: *ref(key)}}}}
	}
	initFrom, initEnv := envs("init-from", "init-key")
	mainFrom, mainEnv := envs("main-from", "main-key")
	ephFrom, ephEnv := envs("eph-from", "eph-key")
	vol := func(src v1.VolumeSource) v1.Volume { return v1.Volume{Name: "v", VolumeSource: src} }
	pod := &v1.Pod{Spec: v1.PodSpec{
		ImagePullSecrets:    []v1.LocalObjectReference{{Name: "pull"}, {Name: ""}},
		InitContainers:      []v1.Container{{EnvFrom: initFrom, Env: initEnv}},
		Containers:          []v1.Container{{EnvFrom: mainFrom, Env: mainEnv}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{EnvFrom: ephFrom, Env: ephEnv}}},
		Volumes: []v1.Volume{
			vol(v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "vol-secret"}}),
			vol(v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{Secret: &v1.SecretProjection{LocalObjectReference: *ref("projected")}},
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: *ref("cm")}},
			}}}),
			vol(v1.VolumeSource{AzureFile: &v1.AzureFileVolumeSource{SecretName: "azure"}}),
			vol(v1.VolumeSource{CephFS: &v1.CephFSVolumeSource{SecretRef: ref("cephfs")}}),
			vol(v1.VolumeSource{Cinder: &v1.CinderVolumeSource{SecretRef: ref("cinder")}}),
			vol(v1.VolumeSource{FlexVolume: &v1.FlexVolumeSource{SecretRef: ref("flex")}}),
			vol(v1.VolumeSource{RBD: &v1.RBDVolumeSource{SecretRef: ref("rbd")}}),
			vol(v1.VolumeSource{ScaleIO: &v1.ScaleIOVolumeSource{SecretRef: ref("scaleio")}}),
			vol(v1.VolumeSource{ISCSI: &v1.ISCSIVolumeSource{SecretRef: ref("iscsi")}}),
			vol(v1.VolumeSource{StorageOS: &v1.StorageOSVolumeSource{SecretRef: ref("storageos")}}),
			vol(v1.VolumeSource{CSI: &v1.CSIVolumeSource{NodePublishSecretRef: ref("csi")}}),
			vol(v1.VolumeSource{CephFS: &v1.CephFSVolumeSource{}}),
			vol(v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: *ref("cm")}}),
		},
	}}
	got := podSecretNames(pod)
	slices.Sort(got)
	want := []string{"azure", "cephfs", "cinder", "csi", "eph-from", "eph-key", "flex", "init-from", "init-key", "iscsi",
		"main-from", "main-key", "projected", "pull", "rbd", "scaleio", "storageos", "vol-secret"}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}
