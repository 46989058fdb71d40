package util

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestFindPort(t *testing.T) {
	p := &v1.Pod{Spec: v1.PodSpec{
		Containers: []v1.Container{{Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: v1.ProtocolTCP}}}},
		InitContainers: []v1.Container{{
			RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways),
			Ports:         []v1.ContainerPort{{Name: "side", ContainerPort: 90, Protocol: v1.ProtocolTCP}},
		}},
	}}
	for _, tc := range []struct {
		target intstr.IntOrString
		proto  v1.Protocol
		want   int
		err    bool
	}{
		{intstr.FromInt32(8080), v1.ProtocolTCP, 8080, false},
		{intstr.FromString("http"), v1.ProtocolTCP, 80, false},
		{intstr.FromString("http"), v1.ProtocolUDP, 0, true},
		{intstr.FromString("side"), v1.ProtocolTCP, 90, false},
		{intstr.FromString("missing"), v1.ProtocolTCP, 0, true},
	} {
		got, err := FindPort(p, &v1.ServicePort{TargetPort: tc.target, Protocol: tc.proto})
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%v/%s: got %d, %v", tc.target, tc.proto, got, err)
		}
	}
}
