package testutil

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// FakePodControl implements controller.PodControlInterface by recording
// the calls instead of making them, so a sync's pod writes can be checked
// without an API. (It is checked against the interface in package
// controller's tests: importing that package here would make an import
// cycle with those tests.)
type FakePodControl struct {
	sync.Mutex
	Templates      []v1.PodTemplateSpec
	ControllerRefs []metav1.OwnerReference
	DeletePodName  []string
	Patches        [][]byte
	// Err, if set, is returned by every call (after recording it).
	Err error
	// CreateLimit, if > 0, makes creations beyond that many fail.
	CreateLimit     int
	CreateCallCount int
}

// CreatePods records a creation from template.
func (f *FakePodControl) CreatePods(ctx context.Context, namespace string, template *v1.PodTemplateSpec, object runtime.Object, controllerRef *metav1.OwnerReference) error {
	return f.CreatePodsWithGenerateName(ctx, namespace, template, object, controllerRef, "")
}

// CreatePodsWithGenerateName records a creation from template, keeping
// generateName in the recorded template.
func (f *FakePodControl) CreatePodsWithGenerateName(ctx context.Context, namespace string, template *v1.PodTemplateSpec, object runtime.Object, controllerRef *metav1.OwnerReference, generateName string) error {
	f.Lock()
	defer f.Unlock()
	f.CreateCallCount++
	if f.CreateLimit != 0 && f.CreateCallCount > f.CreateLimit {
		return fmt.Errorf("not creating pod, limit %d already reached (create call %d)", f.CreateLimit, f.CreateCallCount)
	}
	t := *template.DeepCopy()
	t.GenerateName = generateName
	f.Templates = append(f.Templates, t)
	f.ControllerRefs = append(f.ControllerRefs, *controllerRef)
	return f.Err
}

// DeletePod records the name of the pod to delete.
func (f *FakePodControl) DeletePod(ctx context.Context, namespace string, podID string, object runtime.Object) error {
	f.Lock()
	defer f.Unlock()
	f.DeletePodName = append(f.DeletePodName, podID)
	return f.Err
}

// PatchPod records the patch.
func (f *FakePodControl) PatchPod(ctx context.Context, namespace, name string, data []byte) error {
	f.Lock()
	defer f.Unlock()
	f.Patches = append(f.Patches, data)
	return f.Err
}

// Clear forgets recorded calls and limits (Err is kept).
func (f *FakePodControl) Clear() {
	f.Lock()
	defer f.Unlock()
	f.Templates = nil
	f.ControllerRefs = nil
	f.DeletePodName = nil
	f.Patches = nil
	f.CreateLimit = 0
	f.CreateCallCount = 0
}

// NamePods makes client name the pods it creates from their generateName,
// as the API server does (the fake tracker does not), so a controller
// creating pods through the fake API can find them again by name.
func NamePods(client *fake.Clientset) {
	var mu sync.Mutex
	n := 0
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.CreateAction).GetObject().(*v1.Pod)
		if p.Name == "" {
			mu.Lock()
			n++
			p.Name = p.GenerateName + strconv.Itoa(n)
			mu.Unlock()
		}
		return false, nil, nil
	})
}
