package controller

import (
	"fmt"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// benchPod is pod i of a Deployment of ten, running on one of 200 nodes,
// with what the API server and a kubelet (kwok) fill in.
func benchPod(i int) *v1.Pod {
	rs := fmt.Sprintf("deploy-%d-5d8f7c9b4", i/10)
	hostIP := fmt.Sprintf("10.0.%d.1", i%200)
	podIP := fmt.Sprintf("10.244.%d.%d", i/250, i%250)
	toleration := func(key string) v1.Toleration {
		return v1.Toleration{Key: key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%05d", rs, i), GenerateName: rs + "-", Namespace: "bench",
			UID: types.UID(fmt.Sprintf("0b6c1f3e-1111-2222-3333-%012d", i)), ResourceVersion: fmt.Sprint(100000 + i),
			Labels: map[string]string{"app": fmt.Sprintf("deploy-%d", i/10), "pod-template-hash": "5d8f7c9b4"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs,
				UID: types.UID(fmt.Sprintf("aaaaaaaa-1111-2222-3333-%012d", i/10)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}},
			RestartPolicy: v1.RestartPolicyAlways, DNSPolicy: v1.DNSClusterFirst, SchedulerName: "default-scheduler",
			ServiceAccountName: "default", DeprecatedServiceAccount: "default", NodeName: fmt.Sprintf("kwok-node-%d", i%200),
			TerminationGracePeriodSeconds: ptr.To[int64](30), Priority: ptr.To[int32](0), EnableServiceLinks: ptr.To(true),
			PreemptionPolicy: ptr.To(v1.PreemptLowerPriority),
			Tolerations:      []v1.Toleration{toleration(v1.TaintNodeNotReady), toleration(v1.TaintNodeUnreachable)},
		},
		Status: v1.PodStatus{
			Phase: v1.PodRunning, QOSClass: v1.PodQOSBurstable, HostIP: hostIP, HostIPs: []v1.HostIP{{IP: hostIP}},
			PodIP: podIP, PodIPs: []v1.PodIP{{IP: podIP}}, StartTime: ptr.To(metav1.Now()),
			Conditions: []v1.PodCondition{{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}, {Type: v1.PodInitialized, Status: v1.ConditionTrue},
				{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: v1.ContainersReady, Status: v1.ConditionTrue}, {Type: v1.PodScheduled, Status: v1.ConditionTrue}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				ImageID: "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a",
				Ready:   true, Started: ptr.To(true), State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}},
		},
	}
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkCachedPods decodes pods as an informer does and reports the heap
// each one keeps (retained-B/pod) and the transform's time (ns/op, one pod),
// trimmed only and trimmed and shared:
//
//	go test -run '^$' -bench CachedPods -benchtime 20000x ./pkg/controller/
func BenchmarkCachedPods(b *testing.B) {
	for _, share := range []bool{false, true} {
		name := "trimmed"
		if share {
			name = "trimmed+shared"
		}
		b.Run(name, func(b *testing.B) {
			raw := make([][]byte, b.N)
			for i := range raw {
				var err error
				if raw[i], err = benchPod(i).Marshal(); err != nil {
					b.Fatal(err)
				}
			}
			cached := make([]*v1.Pod, b.N)
			before := liveHeap()
			b.ResetTimer()
			for i := range cached {
				pod := &v1.Pod{}
				if err := pod.Unmarshal(raw[i]); err != nil {
					b.Fatal(err)
				}
				TrimPodForCache(pod)
				if share {
					InternForCache(pod)
				}
				cached[i] = pod
			}
			b.StopTimer()
			b.ReportMetric(float64(liveHeap()-before)/float64(b.N), "retained-B/pod")
			runtime.KeepAlive(cached)
		})
	}
}
