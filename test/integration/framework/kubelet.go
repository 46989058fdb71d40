package framework

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
)

// Kubelet plays the node agent for pods in tests: there are no containers,
// so it writes the statuses a kubelet would.
type Kubelet struct {
	Client clientset.Interface
	// Clock supplies condition timestamps; time.Now when nil.
	Clock func() time.Time
}

func (k Kubelet) now() metav1.Time {
	if k.Clock != nil {
		return metav1.NewTime(k.Clock())
	}
	return metav1.Now()
}

// MarkRunningReady moves a pod to Running with Ready and ContainersReady true.
func (k Kubelet) MarkRunningReady(ctx context.Context, pod *v1.Pod) (*v1.Pod, error) {
	now := k.now()
	p := pod.DeepCopy()
	p.Status.Phase = v1.PodRunning
	p.Status.PodIP = "10.244.0.1"
	p.Status.PodIPs = []v1.PodIP{{IP: p.Status.PodIP}}
	if p.Status.StartTime == nil {
		p.Status.StartTime = &now
	}
	p.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now},
	}
	p.Status.ContainerStatuses = containerStatuses(p, func(name string) v1.ContainerState {
		return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}}
	}, true)
	return k.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
}

// MarkSucceeded ends a pod with every container exiting 0.
func (k Kubelet) MarkSucceeded(ctx context.Context, pod *v1.Pod) (*v1.Pod, error) {
	return k.markTerminated(ctx, pod, v1.PodSucceeded, 0)
}

// MarkFailed ends a pod with every container exiting exitCode.
func (k Kubelet) MarkFailed(ctx context.Context, pod *v1.Pod, exitCode int32) (*v1.Pod, error) {
	return k.markTerminated(ctx, pod, v1.PodFailed, exitCode)
}

func (k Kubelet) markTerminated(ctx context.Context, pod *v1.Pod, phase v1.PodPhase, exitCode int32) (*v1.Pod, error) {
	now := k.now()
	p := pod.DeepCopy()
	p.Status.Phase = phase
	reason := "Completed"
	if phase == v1.PodFailed {
		reason = "Error"
	}
	p.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now},
	}
	p.Status.ContainerStatuses = containerStatuses(p, func(string) v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: exitCode, Reason: reason, FinishedAt: now}}
	}, false)
	return k.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
}

func containerStatuses(p *v1.Pod, state func(string) v1.ContainerState, ready bool) []v1.ContainerStatus {
	out := make([]v1.ContainerStatus, 0, len(p.Spec.Containers))
	for _, c := range p.Spec.Containers {
		out = append(out, v1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: "docker://" + c.Image, Ready: ready, State: state(c.Name)})
	}
	return out
}

// Run marks every pod of namespace Running and Ready as it appears, until
// ctx ends: a node that starts whatever it is given, instantly.
func (k Kubelet) Run(ctx context.Context, namespace string) {
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			pods, err := k.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.DeletionTimestamp != nil || p.Status.Phase != v1.PodPending {
					continue
				}
				_, _ = k.MarkRunningReady(ctx, p)
			}
		}
	}()
}
