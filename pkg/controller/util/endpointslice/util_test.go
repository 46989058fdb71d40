package util

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func pod(rv string, labels map[string]string, ready bool, ips ...string) *v1.Pod {
	s := v1.ConditionFalse
	if ready {
		s = v1.ConditionTrue
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: rv, Labels: labels},
		Status:     v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: s}}},
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, v1.PodIP{IP: ip})
	}
	return p
}

func TestGetPodUpdateProjectionKey(t *testing.T) {
	a := map[string]string{"app": "a"}
	b := map[string]string{"app": "b"}
	cases := []struct {
		name       string
		old, cur   *v1.Pod
		wantNil    bool
		wantOld    bool
		podChanged bool
	}{
		{name: "resync", old: pod("1", a, true), cur: pod("1", a, false), wantNil: true},
		{name: "irrelevant change", old: pod("1", a, true), cur: pod("2", a, true), wantNil: true},
		{name: "readiness", old: pod("1", a, true), cur: pod("2", a, false)},
		{name: "ip", old: pod("1", a, true, "10.0.0.1"), cur: pod("2", a, true, "10.0.0.2")},
		{name: "labels", old: pod("1", a, true), cur: pod("2", b, true), wantOld: true},
		{name: "labels and readiness", old: pod("1", a, true), cur: pod("2", b, false), wantOld: true, podChanged: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := GetPodUpdateProjectionKey(tc.old, tc.cur)
			if (k == nil) != tc.wantNil {
				t.Fatalf("key = %+v", k)
			}
			if k == nil {
				return
			}
			if (k.OldLabels != nil) != tc.wantOld || k.PodChanged != tc.podChanged {
				t.Errorf("key = %+v", k)
			}
		})
	}
	if k := GetPodUpdateProjectionKey(nil, pod("1", a, true)); k == nil || k.Labels["app"] != "a" {
		t.Errorf("add key %+v", k)
	}
}

func TestGetServicesToUpdate(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	idx := factory.Core().V1().Services().Informer().GetIndexer()
	for _, s := range []struct {
		name string
		sel  map[string]string
	}{{"a", map[string]string{"app": "a"}}, {"b", map[string]string{"app": "b"}}, {"all", map[string]string{}}, {"none", nil}} {
		_ = idx.Add(&v1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: "ns"}, Spec: v1.ServiceSpec{Selector: s.sel}})
	}
	lister := factory.Core().V1().Services().Lister()
	got, err := GetServicesToUpdate(lister, &PodProjectionKey{Namespace: "ns", Labels: map[string]string{"app": "b"}, OldLabels: map[string]string{"app": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != 2 || !got.Has("ns/a") || !got.Has("ns/b") {
		t.Errorf("label move: %v", got)
	}
	got, _ = GetServicesToUpdate(lister, &PodProjectionKey{Namespace: "ns", Labels: map[string]string{"app": "b"}, OldLabels: map[string]string{"app": "a"}, PodChanged: true})
	if got.Len() != 3 || !got.Has("ns/all") {
		t.Errorf("label move with pod change: %v", got)
	}
}

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

func TestTriggerTimeTracker(t *testing.T) {
	tr := NewTriggerTimeTracker()
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", CreationTimestamp: metav1.NewTime(created)}}
	p := pod("1", nil, true)
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(created.Add(time.Hour))
	if got := tr.ComputeEndpointLastChangeTriggerTime("ns", svc, []*v1.Pod{p}); !got.Equal(created) {
		t.Errorf("first sync: %v", got)
	}
	if got := tr.ComputeEndpointLastChangeTriggerTime("ns", svc, []*v1.Pod{p}); !got.IsZero() {
		t.Errorf("nothing changed: %v", got)
	}
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(created.Add(2 * time.Hour))
	if got := tr.ComputeEndpointLastChangeTriggerTime("ns", svc, []*v1.Pod{p}); !got.Equal(created.Add(2 * time.Hour)) {
		t.Errorf("pod transition: %v", got)
	}
}
