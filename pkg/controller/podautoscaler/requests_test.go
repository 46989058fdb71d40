package podautoscaler

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func container(name string, requests v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: requests}}
}

func sidecar(name string, requests v1.ResourceList) v1.Container {
	c := container(name, requests)
	c.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
	return c
}

func cpu(q string) v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse(q)} }

func TestCalculateRequests(t *testing.T) {
	cases := []struct {
		name      string
		spec      v1.PodSpec
		container string
		res       v1.ResourceName
		want      int64
		wantErr   string
	}{{
		name: "sum of containers",
		spec: v1.PodSpec{Containers: []v1.Container{container("a", cpu("100m")), container("b", cpu("200m"))}},
		want: 300,
	}, {
		name:      "one container",
		spec:      v1.PodSpec{Containers: []v1.Container{container("a", cpu("100m")), container("b", cpu("200m"))}},
		container: "b",
		want:      200,
	}, {
		// Sidecars run alongside the containers; plain init containers do not.
		name: "sidecars count, init containers do not",
		spec: v1.PodSpec{
			InitContainers: []v1.Container{container("init", cpu("5")), sidecar("proxy", cpu("50m"))},
			Containers:     []v1.Container{container("a", cpu("100m"))},
		},
		want: 150,
	}, {
		name: "a sidecar can be the named container",
		spec: v1.PodSpec{
			InitContainers: []v1.Container{sidecar("proxy", cpu("50m"))},
			Containers:     []v1.Container{container("a", cpu("100m"))},
		},
		container: "proxy",
		want:      50,
	}, {
		name:    "missing request",
		spec:    v1.PodSpec{Containers: []v1.Container{container("a", cpu("100m")), container("b", nil)}},
		wantErr: "missing request for cpu in container b of Pod p",
	}, {
		// Other containers' missing requests do not matter.
		name:      "missing request elsewhere",
		spec:      v1.PodSpec{Containers: []v1.Container{container("a", nil), container("b", cpu("200m"))}},
		container: "b",
		want:      200,
	}, {
		name:      "unknown container",
		spec:      v1.PodSpec{Containers: []v1.Container{container("a", cpu("100m"))}},
		container: "nope",
		wantErr:   "container nope not found in Pod p",
	}, {
		name: "pod-level request wins",
		spec: v1.PodSpec{
			Resources:  &v1.ResourceRequirements{Requests: cpu("2")},
			Containers: []v1.Container{container("a", cpu("100m"))},
		},
		want: 2000,
	}, {
		name: "pod-level request plus overhead",
		spec: v1.PodSpec{
			Resources:  &v1.ResourceRequirements{Requests: cpu("2")},
			Overhead:   cpu("250m"),
			Containers: []v1.Container{container("a", cpu("100m"))},
		},
		want: 2250,
	}, {
		// A container named in the HPA wins over pod-level requests.
		name: "named container ignores pod level",
		spec: v1.PodSpec{
			Resources:  &v1.ResourceRequirements{Requests: cpu("2")},
			Containers: []v1.Container{container("a", cpu("100m"))},
		},
		container: "a",
		want:      100,
	}, {
		// Pod-level requests for another resource: the containers'
		// effective request applies, an init container's peak included.
		name: "pod level set for another resource",
		spec: v1.PodSpec{
			Resources:      &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}},
			InitContainers: []v1.Container{container("init", cpu("1"))},
			Containers:     []v1.Container{container("a", cpu("100m"))},
		},
		want: 1000,
	}, {
		name: "pod level set, resource nowhere",
		spec: v1.PodSpec{
			Resources:  &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}},
			Containers: []v1.Container{container("a", nil)},
		},
		wantErr: "missing pod-level request for cpu in Pod p",
	}, {
		name: "pod-level requests of unsupported resources are ignored",
		spec: v1.PodSpec{
			Resources:  &v1.ResourceRequirements{Requests: v1.ResourceList{"example.com/gpu": resource.MustParse("1")}},
			Containers: []v1.Container{container("a", cpu("100m"))},
		},
		want: 100,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.res
			if res == "" {
				res = v1.ResourceCPU
			}
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: tc.spec}
			got, err := calculateRequests([]*v1.Pod{pod}, tc.container, res, true)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got["p"] != tc.want {
				t.Errorf("request = %d, want %d", got["p"], tc.want)
			}
		})
	}
}

func TestEffectiveContainerRequestsSidecarsBeforeInit(t *testing.T) {
	// The init container runs with the sidecar started before it: its
	// peak is 50m + 900m, above the steady 50m + 100m.
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{sidecar("proxy", cpu("50m")), container("init", cpu("900m"))},
		Containers:     []v1.Container{container("a", cpu("100m"))},
	}}
	got := effectiveContainerRequests(pod)[v1.ResourceCPU]
	if got.MilliValue() != 950 {
		t.Errorf("effective request = %v, want 950m", got.String())
	}
}

func TestCalculateRequestsPodLevelGateOff(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{
		Resources:  &v1.ResourceRequirements{Requests: cpu("2")},
		Containers: []v1.Container{container("a", cpu("100m"))},
	}}
	got, err := calculateRequests([]*v1.Pod{pod}, "", v1.ResourceCPU, false)
	if err != nil || got["p"] != 100 {
		t.Errorf("request = %d (%v), want the containers' 100", got["p"], err)
	}
}
