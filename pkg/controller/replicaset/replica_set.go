package replicaset

import (
	"context"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	clientset "k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// controllerUIDIndex indexes ReplicaSets by the UID of their controller
// (a Deployment), to find a ReplicaSet's siblings.
const controllerUIDIndex = "controllerUID"

// rsAdapter is the Adapter for apps/v1 ReplicaSets.
type rsAdapter struct {
	informer cache.SharedIndexInformer
	lister   appslisters.ReplicaSetLister
	client   clientset.Interface
}

func newRSAdapter(ctx context.Context, rsInformer appsinformers.ReplicaSetInformer, client clientset.Interface) *rsAdapter {
	inf := rsInformer.Informer()
	if _, ok := inf.GetIndexer().GetIndexers()[controllerUIDIndex]; !ok {
		err := inf.AddIndexers(cache.Indexers{controllerUIDIndex: func(obj interface{}) ([]string, error) {
			rs, ok := obj.(*apps.ReplicaSet)
			if !ok {
				return nil, nil
			}
			if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
				return []string{string(ref.UID)}, nil
			}
			return nil, nil
		}})
		if err != nil {
			klog.FromContext(ctx).Error(err, "Unable to add the ReplicaSet controller index")
		}
	}
	return &rsAdapter{informer: inf, lister: rsInformer.Lister(), client: client}
}

func (a *rsAdapter) Informer() cache.SharedIndexInformer { return a.informer }

func (a *rsAdapter) ToOwner(obj interface{}) (*Owner, bool) {
	rs, ok := obj.(*apps.ReplicaSet)
	if !ok {
		return nil, false
	}
	return rsOwner(rs), true
}

func (a *rsAdapter) Get(namespace, name string) (*Owner, error) {
	rs, err := a.lister.ReplicaSets(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	return rsOwner(rs), nil
}

func (a *rsAdapter) GetLive(ctx context.Context, namespace, name string) (*Owner, error) {
	rs, err := a.client.AppsV1().ReplicaSets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return rsOwner(rs), nil
}

func (a *rsAdapter) OwnersOfPod(pod *v1.Pod) []*Owner {
	// The lister errors when nothing matches; that just means no owners.
	sets, _ := a.lister.GetPodReplicaSets(pod)
	if len(sets) > 1 {
		// Not fatal (controller refs prevent fights) but a user mistake.
		klog.Background().Info("More than one ReplicaSet is selecting pods with labels", "pod", klog.KObj(pod), "labels", pod.Labels)
	}
	out := make([]*Owner, 0, len(sets))
	for _, rs := range sets {
		out = append(out, rsOwner(rs))
	}
	return out
}

func (a *rsAdapter) Siblings(o *Owner) []*Owner {
	ref := metav1.GetControllerOfNoCopy(o.Object)
	if ref == nil {
		return nil
	}
	objs, err := a.informer.GetIndexer().ByIndex(controllerUIDIndex, string(ref.UID))
	if err != nil {
		return nil
	}
	out := make([]*Owner, 0, len(objs))
	for _, obj := range objs {
		if rs, ok := obj.(*apps.ReplicaSet); ok {
			out = append(out, rsOwner(rs))
		}
	}
	return out
}

func (a *rsAdapter) UpdateStatus(ctx context.Context, o *Owner, st Status) (*Owner, error) {
	rs := o.Object.(*apps.ReplicaSet).DeepCopy()
	rs.Status = apps.ReplicaSetStatus{
		Replicas:             st.Replicas,
		FullyLabeledReplicas: st.FullyLabeledReplicas,
		ReadyReplicas:        st.ReadyReplicas,
		AvailableReplicas:    st.AvailableReplicas,
		TerminatingReplicas:  st.TerminatingReplicas,
		ObservedGeneration:   st.ObservedGeneration,
	}
	for _, c := range st.Conditions {
		rs.Status.Conditions = append(rs.Status.Conditions, apps.ReplicaSetCondition{
			Type:               apps.ReplicaSetConditionType(c.Type),
			Status:             c.Status,
			LastTransitionTime: c.LastTransitionTime,
			Reason:             c.Reason,
			Message:            c.Message,
		})
	}
	updated, err := a.client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return rsOwner(updated), nil
}

// rsOwner views a ReplicaSet. spec.replicas is defaulted to 1 by the API
// server; nil is treated the same way.
func rsOwner(rs *apps.ReplicaSet) *Owner {
	replicas := int32(1)
	if rs.Spec.Replicas != nil {
		replicas = *rs.Spec.Replicas
	}
	o := &Owner{
		Object:          rs,
		Replicas:        replicas,
		MinReadySeconds: rs.Spec.MinReadySeconds,
		Selector:        rs.Spec.Selector,
		Template:        &rs.Spec.Template,
		Status: Status{
			Replicas:             rs.Status.Replicas,
			FullyLabeledReplicas: rs.Status.FullyLabeledReplicas,
			ReadyReplicas:        rs.Status.ReadyReplicas,
			AvailableReplicas:    rs.Status.AvailableReplicas,
			TerminatingReplicas:  rs.Status.TerminatingReplicas,
			ObservedGeneration:   rs.Status.ObservedGeneration,
		},
	}
	for _, c := range rs.Status.Conditions {
		o.Status.Conditions = append(o.Status.Conditions, Condition{
			Type:               string(c.Type),
			Status:             c.Status,
			LastTransitionTime: c.LastTransitionTime,
			Reason:             c.Reason,
			Message:            c.Message,
		})
	}
	return o
}
