package controller

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Event reasons for pod creation and deletion; the Failed ones are also the
// reasons of a ReplicaSet's ReplicaFailure condition.
const (
	FailedCreatePodReason     = "FailedCreate"
	SuccessfulCreatePodReason = "SuccessfulCreate"
	FailedDeletePodReason     = "FailedDelete"
	SuccessfulDeletePodReason = "SuccessfulDelete"
)

// PodControlInterface creates, deletes and patches pods on behalf of a
// controller object, recording events on that object. It is an interface so
// syncs can be tested with testutil.FakePodControl.
type PodControlInterface interface {
	// CreatePods creates a pod from template, controlled by controllerRef,
	// with generateName "<controller name>-".
	CreatePods(ctx context.Context, namespace string, template *v1.PodTemplateSpec, controllerObject runtime.Object, controllerRef *metav1.OwnerReference) error
	// CreatePodsWithGenerateName is CreatePods with an explicit generateName
	// (empty keeps the default).
	CreatePodsWithGenerateName(ctx context.Context, namespace string, template *v1.PodTemplateSpec, controllerObject runtime.Object, controllerRef *metav1.OwnerReference, generateName string) error
	// DeletePod deletes the named pod; a NotFound error is returned as is and
	// without an event so callers can ignore it.
	DeletePod(ctx context.Context, namespace string, podID string, controllerObject runtime.Object) error
	// PatchPod applies a strategic-merge patch.
	PatchPod(ctx context.Context, namespace, name string, data []byte) error
}

// RealPodControl is the PodControlInterface that talks to the API server.
type RealPodControl struct {
	KubeClient clientset.Interface
	Recorder   record.EventRecorder
	// OnWrite, if set, is told about every pod this control created or
	// patched, with its controller reference (nil when it has none). The
	// ReplicaSet controller uses it to wait for its informer to catch up.
	OnWrite func(pod *v1.Pod, controllerRef *metav1.OwnerReference)
}

var _ PodControlInterface = RealPodControl{}

// CreatePods implements PodControlInterface.
func (r RealPodControl) CreatePods(ctx context.Context, namespace string, template *v1.PodTemplateSpec, controllerObject runtime.Object, controllerRef *metav1.OwnerReference) error {
	return r.CreatePodsWithGenerateName(ctx, namespace, template, controllerObject, controllerRef, "")
}

// CreatePodsWithGenerateName implements PodControlInterface.
func (r RealPodControl) CreatePodsWithGenerateName(ctx context.Context, namespace string, template *v1.PodTemplateSpec, controllerObject runtime.Object, controllerRef *metav1.OwnerReference, generateName string) error {
	if err := checkControllerRef(controllerRef); err != nil {
		return err
	}
	pod, err := GetPodFromTemplate(template, controllerObject, controllerRef)
	if err != nil {
		return err
	}
	if generateName != "" {
		pod.GenerateName = generateName
	}
	if len(pod.Labels) == 0 {
		return fmt.Errorf("unable to create pods, no labels")
	}
	created, err := r.KubeClient.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		// Every create fails while the namespace terminates; don't spam events.
		if !apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			r.Recorder.Eventf(controllerObject, v1.EventTypeWarning, FailedCreatePodReason, "Error creating: %v", err)
		}
		return err
	}
	if r.OnWrite != nil {
		r.OnWrite(created, controllerRef)
	}
	logger := klog.FromContext(ctx)
	if m, err := meta.Accessor(controllerObject); err == nil {
		logger.V(4).Info("Controller created pod", "controller", m.GetName(), "pod", klog.KObj(created))
	}
	r.Recorder.Eventf(controllerObject, v1.EventTypeNormal, SuccessfulCreatePodReason, "Created pod: %v", created.Name)
	return nil
}

// DeletePod implements PodControlInterface.
func (r RealPodControl) DeletePod(ctx context.Context, namespace string, podID string, controllerObject runtime.Object) error {
	m, err := meta.Accessor(controllerObject)
	if err != nil {
		return fmt.Errorf("object does not have ObjectMeta, %v", err)
	}
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Deleting pod", "controller", m.GetName(), "pod", klog.KRef(namespace, podID))
	if err := r.KubeClient.CoreV1().Pods(namespace).Delete(ctx, podID, metav1.DeleteOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			logger.V(4).Info("Pod has already been deleted.", "pod", klog.KRef(namespace, podID))
			return err
		}
		r.Recorder.Eventf(controllerObject, v1.EventTypeWarning, FailedDeletePodReason, "Error deleting: %v", err)
		return fmt.Errorf("unable to delete pods: %v", err)
	}
	r.Recorder.Eventf(controllerObject, v1.EventTypeNormal, SuccessfulDeletePodReason, "Deleted pod: %v", podID)
	return nil
}

// PatchPod implements PodControlInterface.
func (r RealPodControl) PatchPod(ctx context.Context, namespace, name string, data []byte) error {
	pod, err := r.KubeClient.CoreV1().Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
	if err == nil && r.OnWrite != nil {
		r.OnWrite(pod, metav1.GetControllerOfNoCopy(pod))
	}
	return err
}

// checkControllerRef refuses refs the API server would reject or that would
// create pods the garbage collector cannot tie to their owner.
func checkControllerRef(ref *metav1.OwnerReference) error {
	switch {
	case ref == nil:
		return fmt.Errorf("controllerRef is nil")
	case ref.APIVersion == "":
		return fmt.Errorf("controllerRef has empty APIVersion")
	case ref.Kind == "":
		return fmt.Errorf("controllerRef has empty Kind")
	case ref.Controller == nil || !*ref.Controller:
		return fmt.Errorf("controllerRef.Controller is not set to true")
	case ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion:
		return fmt.Errorf("controllerRef.BlockOwnerDeletion is not set")
	}
	return nil
}

// GetPodFromTemplate builds the pod a controller creates from its template:
// copies of the template's labels, annotations, finalizers and spec,
// generateName "<parent name>-" (the bare name when the dash would make it
// invalid) and controllerRef as the only owner reference.
func GetPodFromTemplate(template *v1.PodTemplateSpec, parentObject runtime.Object, controllerRef *metav1.OwnerReference) (*v1.Pod, error) {
	parent, err := meta.Accessor(parentObject)
	if err != nil {
		return nil, fmt.Errorf("parentObject does not have ObjectMeta, %v", err)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: podNamePrefix(parent.GetName()),
			Labels:       copyStringMap(template.Labels),
			Annotations:  copyStringMap(template.Annotations),
			Finalizers:   append([]string{}, template.Finalizers...),
		},
		Spec: *template.Spec.DeepCopy(),
	}
	if controllerRef != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*controllerRef}
	}
	return pod, nil
}

// copyStringMap always returns a non-nil map, like upstream's label sets.
func copyStringMap(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

func podNamePrefix(controllerName string) string {
	prefix := controllerName + "-"
	if len(apivalidation.NameIsDNSSubdomain(prefix, true)) != 0 {
		return controllerName
	}
	return prefix
}
