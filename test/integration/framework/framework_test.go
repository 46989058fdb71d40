package framework

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { Main(m) }

// The control plane serves requests, and the kubelet helper moves a pod
// through the phases a real kubelet would.
func TestControlPlaneAndKubelet(t *testing.T) {
	cp := Shared(t)
	c := cp.Client(t)
	ns := CreateNamespace(t, c, "framework")
	ctx := context.Background()
	pod, err := c.CoreV1().Pods(ns).Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k := Kubelet{Client: c}
	pod, err = k.MarkRunningReady(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != v1.PodRunning || len(pod.Status.Conditions) == 0 {
		t.Fatalf("pod not running: %+v", pod.Status)
	}
	pod, err = k.MarkFailed(ctx, pod, 3)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != v1.PodFailed || pod.Status.ContainerStatuses[0].State.Terminated.ExitCode != 3 {
		t.Fatalf("pod not failed with 3: %+v", pod.Status)
	}
}
