package replicaset

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// The sync logic is shared by ReplicaSets and ReplicationControllers. It
// works on Owner, a read-only view of either object, and reaches the
// kind-specific informer, lister and client through an Adapter.

// OwnerObject is the typed object (*apps.ReplicaSet or
// *v1.ReplicationController) exactly as the informer holds it. Events and
// controller references are made from it, so they name the real kind.
type OwnerObject interface {
	metav1.Object
	runtime.Object
}

// Owner is the part of a ReplicaSet or ReplicationController the sync reads.
// It points into informer cache objects: never modify it.
type Owner struct {
	Object          OwnerObject
	Replicas        int32
	MinReadySeconds int32
	// Selector is nil when the object has none (it then selects nothing).
	Selector *metav1.LabelSelector
	Template *v1.PodTemplateSpec
	Status   Status
}

// Status is the kind-neutral form of the status both kinds share.
type Status struct {
	Replicas             int32
	FullyLabeledReplicas int32
	ReadyReplicas        int32
	AvailableReplicas    int32
	// TerminatingReplicas is nil when not reported (ReplicationControllers,
	// or the DeploymentReplicaSetTerminatingReplicas feature off).
	TerminatingReplicas *int32
	ObservedGeneration  int64
	Conditions          []Condition
}

// Condition is the kind-neutral form of a status condition.
type Condition struct {
	Type               string
	Status             v1.ConditionStatus
	LastTransitionTime metav1.Time
	Reason             string
	Message            string
}

// Adapter gives the shared controller access to one kind.
type Adapter interface {
	// Informer is the kind's shared informer (handlers and sync state).
	Informer() cache.SharedIndexInformer
	// ToOwner views an object delivered by the informer; false if it is not
	// of the adapter's kind.
	ToOwner(obj interface{}) (*Owner, bool)
	// Get reads one object from the lister.
	Get(namespace, name string) (*Owner, error)
	// GetLive reads one object from the API server.
	GetLive(ctx context.Context, namespace, name string) (*Owner, error)
	// OwnersOfPod lists, from the lister, the objects whose selector matches the pod.
	OwnersOfPod(pod *v1.Pod) []*Owner
	// Siblings lists the objects controlled by the same controller as o
	// (o included); nil when o has no controller or the kind doesn't track it.
	Siblings(o *Owner) []*Owner
	// UpdateStatus writes status to o's status subresource and returns the result.
	UpdateStatus(ctx context.Context, o *Owner, status Status) (*Owner, error)
}

// Options are the per-kind settings of the shared controller.
type Options struct {
	// GVK is the owners' kind; it goes into pods' controller references.
	GVK schema.GroupVersionKind
	// QueueName labels the workqueue_* metrics.
	QueueName string
	// EventComponent is the source of the events recorded on owners.
	EventComponent string
	// TerminatingReplicas reports status.terminatingReplicas.
	TerminatingReplicas bool
	// PodDeletionCost honours controller.kubernetes.io/pod-deletion-cost
	// when choosing pods to delete.
	PodDeletionCost bool
	// Resource, when set, enables skipping syncs while the informers lag
	// behind this controller's own writes (counted in
	// replicaset_controller_stale_sync_skips_total).
	Resource schema.GroupResource
	// StatusMinInterval spaces out status writes of intermediate states (pods
	// still starting, stopping or becoming ready): within it of the last
	// write, a sync that finds only such a change comes back when it ends.
	// A new generation, a condition change, a change of availableReplicas
	// while a sibling (an older ReplicaSet of the same Deployment) still
	// has replicas, or reaching the settled state (every replica created, labeled and
	// available) is written at once.
	// 0 writes every change at once, as upstream does.
	StatusMinInterval time.Duration
}
