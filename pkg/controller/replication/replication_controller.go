// Package replication runs ReplicationControllers with the ReplicaSet
// controller's logic: a ReplicationController is treated as a ReplicaSet
// with an equality-based selector and no terminatingReplicas.
package replication

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/replicaset"
)

// BurstReplicas is the default cap on pods created or deleted per sync.
const BurstReplicas = replicaset.BurstReplicas

// Controller keeps ReplicationControllers' pods at spec.replicas.
type Controller struct {
	*replicaset.BaseController
}

// Features are the feature gates the ReplicationController controller consults.
type Features struct {
	// PodDeletionCost honours the pod-deletion-cost annotation on scale-down.
	PodDeletionCost bool
}

// NewController returns the ReplicationController controller; start it with Run.
func NewController(ctx context.Context, podInformer coreinformers.PodInformer, rcInformer coreinformers.ReplicationControllerInformer, kubeClient clientset.Interface, burstReplicas int, features Features) *Controller {
	adapter := &rcAdapter{informer: rcInformer.Informer(), lister: rcInformer.Lister(), client: kubeClient}
	return &Controller{replicaset.NewBaseController(ctx, adapter, podInformer, kubeClient, burstReplicas, replicaset.Options{
		GVK:               v1.SchemeGroupVersion.WithKind("ReplicationController"),
		QueueName:         "replicationmanager",
		EventComponent:    "replication-controller",
		StatusMinInterval: replicaset.DefaultStatusMinInterval,
		PodDeletionCost:   features.PodDeletionCost,
		// The ReplicationController API has no terminatingReplicas, and
		// upstream does not do the stale-cache check for it.
	})}
}

// rcAdapter is the replicaset.Adapter for core/v1 ReplicationControllers.
type rcAdapter struct {
	informer cache.SharedIndexInformer
	lister   corelisters.ReplicationControllerLister
	client   clientset.Interface
}

func (a *rcAdapter) Informer() cache.SharedIndexInformer { return a.informer }

func (a *rcAdapter) ToOwner(obj interface{}) (*replicaset.Owner, bool) {
	rc, ok := obj.(*v1.ReplicationController)
	if !ok {
		return nil, false
	}
	return rcOwner(rc), true
}

func (a *rcAdapter) Get(namespace, name string) (*replicaset.Owner, error) {
	rc, err := a.lister.ReplicationControllers(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	return rcOwner(rc), nil
}

func (a *rcAdapter) GetLive(ctx context.Context, namespace, name string) (*replicaset.Owner, error) {
	rc, err := a.client.CoreV1().ReplicationControllers(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return rcOwner(rc), nil
}

func (a *rcAdapter) OwnersOfPod(pod *v1.Pod) []*replicaset.Owner {
	// The lister errors when nothing matches; that just means no owners.
	rcs, _ := a.lister.GetPodControllers(pod)
	if len(rcs) > 1 {
		klog.Background().Info("More than one ReplicationController is selecting pods with labels", "pod", klog.KObj(pod), "labels", pod.Labels)
	}
	out := make([]*replicaset.Owner, 0, len(rcs))
	for _, rc := range rcs {
		out = append(out, rcOwner(rc))
	}
	return out
}

// Siblings returns nil: upstream never finds related controllers for an
// RC, so scale-down ranks all of an RC's pods with co-location rank 0.
func (a *rcAdapter) Siblings(*replicaset.Owner) []*replicaset.Owner { return nil }

func (a *rcAdapter) UpdateStatus(ctx context.Context, o *replicaset.Owner, st replicaset.Status) (*replicaset.Owner, error) {
	rc := o.Object.(*v1.ReplicationController).DeepCopy()
	rc.Status = v1.ReplicationControllerStatus{
		Replicas:             st.Replicas,
		FullyLabeledReplicas: st.FullyLabeledReplicas,
		ReadyReplicas:        st.ReadyReplicas,
		AvailableReplicas:    st.AvailableReplicas,
		ObservedGeneration:   st.ObservedGeneration,
	}
	for _, c := range st.Conditions {
		rc.Status.Conditions = append(rc.Status.Conditions, v1.ReplicationControllerCondition{
			Type:               v1.ReplicationControllerConditionType(c.Type),
			Status:             c.Status,
			LastTransitionTime: c.LastTransitionTime,
			Reason:             c.Reason,
			Message:            c.Message,
		})
	}
	updated, err := a.client.CoreV1().ReplicationControllers(rc.Namespace).UpdateStatus(ctx, rc, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return rcOwner(updated), nil
}

// emptyTemplate stands in for a missing template; creating from it fails
// ("no labels"), as it does upstream.
var emptyTemplate = &v1.PodTemplateSpec{}

// rcOwner views a ReplicationController the way upstream converts it to a
// ReplicaSet: the selector map becomes matchLabels (nil selects nothing),
// a nil spec.replicas (normally defaulted by the API server) means 1.
func rcOwner(rc *v1.ReplicationController) *replicaset.Owner {
	replicas := int32(1)
	if rc.Spec.Replicas != nil {
		replicas = *rc.Spec.Replicas
	}
	o := &replicaset.Owner{
		Object:          rc,
		Replicas:        replicas,
		MinReadySeconds: rc.Spec.MinReadySeconds,
		Template:        rc.Spec.Template,
		Status: replicaset.Status{
			Replicas:             rc.Status.Replicas,
			FullyLabeledReplicas: rc.Status.FullyLabeledReplicas,
			ReadyReplicas:        rc.Status.ReadyReplicas,
			AvailableReplicas:    rc.Status.AvailableReplicas,
			ObservedGeneration:   rc.Status.ObservedGeneration,
		},
	}
	if rc.Spec.Selector != nil {
		o.Selector = &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}
	}
	if o.Template == nil {
		o.Template = emptyTemplate
	}
	for _, c := range rc.Status.Conditions {
		o.Status.Conditions = append(o.Status.Conditions, replicaset.Condition{
			Type:               string(c.Type),
			Status:             c.Status,
			LastTransitionTime: c.LastTransitionTime,
			Reason:             c.Reason,
			Message:            c.Message,
		})
	}
	return o
}
