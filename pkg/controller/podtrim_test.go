package controller

import (
	"testing"

	"encoding/json"
	"reflect"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// readContainer has only fields some controller reads: trimming keeps it
// as it is.
func readContainer(name string) v1.Container {
	return v1.Container{
		Name:          name,
		Image:         "registry.example/app:1",
		Ports:         []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		Resources:     v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}, Claims: []v1.ResourceClaim{{Name: "gpu"}}},
		RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
		Env:           []v1.EnvVar{{Name: "TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "token"}, Key: "t"}}}},
		EnvFrom:       []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}}}},
	}
}

// withUnread adds to c what no controller reads.
func withUnread(c v1.Container) v1.Container {
	c.Command, c.Args, c.WorkingDir = []string{"/app"}, []string{"--serve"}, "/srv"
	c.Env = append([]v1.EnvVar{{Name: "PLAIN", Value: "x"}, {Name: "FROM_CM", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{Key: "k"}}}}, c.Env...)
	c.EnvFrom = append(c.EnvFrom, v1.EnvFromSource{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}})
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz"}}}
	c.LivenessProbe, c.ReadinessProbe, c.StartupProbe = probe, probe, probe
	c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"stop"}}}}
	c.VolumeMounts = []v1.VolumeMount{{Name: "config", MountPath: "/etc/app"}}
	c.VolumeDevices = []v1.VolumeDevice{{Name: "raw", DevicePath: "/dev/raw"}}
	c.SecurityContext = &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}
	c.TerminationMessagePath, c.TerminationMessagePolicy, c.ImagePullPolicy = "/dev/termination-log", v1.TerminationMessageReadFile, v1.PullIfNotPresent
	return c
}

func TestTrimPodForCacheKeepsWhatControllersRead(t *testing.T) {
	claim := v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}}
	secret := v1.Volume{Name: "certs", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "certs"}}}
	projectedSecret := v1.Volume{Name: "bundle", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}},
		{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "legacy-token"}}}}}}}
	ephemeral := v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}
	attachable := v1.Volume{Name: "disk", VolumeSource: v1.VolumeSource{GCEPersistentDisk: &v1.GCEPersistentDiskVolumeSource{PDName: "pd"}}}
	serviceAccount := v1.Volume{Name: "kube-api-access-x", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
		{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
		{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace"}}}}}}}}
	unreadVolumes := []v1.Volume{
		serviceAccount,
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
		{Name: "tmp", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}},
	}

	meta := metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "a"},
		Annotations:     map[string]string{"controller.kubernetes.io/pod-deletion-cost": "5"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", UID: "u", Controller: ptr.To(true)}}}
	status := v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.1",
		Conditions:        []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", RestartCount: 2, Image: "registry.example/app:1"}}}
	keptSpec := v1.PodSpec{
		InitContainers:                []v1.Container{readContainer("sidecar")},
		Containers:                    []v1.Container{readContainer("app")},
		EphemeralContainers:           []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon(readContainer("debug")), TargetContainerName: "app"}},
		Volumes:                       []v1.Volume{claim, secret, projectedSecret, ephemeral, attachable},
		NodeName:                      "node-1",
		Hostname:                      "p",
		Subdomain:                     "svc",
		ServiceAccountName:            "sa",
		ImagePullSecrets:              []v1.LocalObjectReference{{Name: "pull"}},
		Tolerations:                   []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}},
		Affinity:                      &v1.Affinity{PodAffinity: &v1.PodAffinity{}},
		NodeSelector:                  map[string]string{"zone": "a"},
		PriorityClassName:             "high",
		Priority:                      ptr.To[int32](10),
		ActiveDeadlineSeconds:         ptr.To[int64](60),
		TerminationGracePeriodSeconds: ptr.To[int64](30),
		RestartPolicy:                 v1.RestartPolicyAlways,
		SchedulingGates:               []v1.PodSchedulingGate{{Name: "gate"}},
		ResourceClaims:                []v1.PodResourceClaim{{Name: "gpu"}},
		Overhead:                      v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Mi")},
		SecurityContext:               &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
	}

	pod := &v1.Pod{ObjectMeta: meta, Spec: *keptSpec.DeepCopy(), Status: status}
	pod.Spec.InitContainers[0] = withUnread(pod.Spec.InitContainers[0])
	pod.Spec.Containers[0] = withUnread(pod.Spec.Containers[0])
	pod.Spec.EphemeralContainers[0].EphemeralContainerCommon = v1.EphemeralContainerCommon(withUnread(v1.Container(pod.Spec.EphemeralContainers[0].EphemeralContainerCommon)))
	// The unread volumes between the kept ones.
	pod.Spec.Volumes = append(append([]v1.Volume{unreadVolumes[0]}, pod.Spec.Volumes[:2]...), append(unreadVolumes[1:], pod.Spec.Volumes[2:]...)...)

	TrimPodForCache(pod)
	want := &v1.Pod{ObjectMeta: meta, Spec: keptSpec, Status: status}
	samePod(t, "trimmed", want, pod)
	if cap(pod.Spec.Volumes) != len(pod.Spec.Volumes) {
		t.Errorf("kept volumes in a slice of capacity %d for %d: the dropped ones stay reachable", cap(pod.Spec.Volumes), len(pod.Spec.Volumes))
	}

	TrimPodForCache(pod)
	samePod(t, "trimmed twice", want, pod)
}

func TestTrimPodForCacheDropsEmptiedLists(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		Containers: []v1.Container{withUnread(v1.Container{Name: "c"})},
		Volumes:    []v1.Volume{{Name: "tmp", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
	}}
	TrimPodForCache(pod)
	if pod.Spec.Volumes != nil || pod.Spec.Containers[0].Env != nil || pod.Spec.Containers[0].EnvFrom != nil {
		t.Errorf("emptied lists kept: volumes %v, env %v, envFrom %v", pod.Spec.Volumes, pod.Spec.Containers[0].Env, pod.Spec.Containers[0].EnvFrom)
	}
}

func samePod(t *testing.T, what string, want, got *v1.Pod) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		w, _ := json.MarshalIndent(want.Spec, "", " ")
		g, _ := json.MarshalIndent(got.Spec, "", " ")
		t.Fatalf("%s pod differs\nwant spec %s\ngot spec %s\n(metadata or status: %v)", what, w, g,
			!reflect.DeepEqual(want.ObjectMeta, got.ObjectMeta) || !reflect.DeepEqual(want.Status, got.Status))
	}
}
