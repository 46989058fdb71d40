// Package resourceclaim is the resourceclaim-controller of Dynamic Resource
// Allocation (resource.k8s.io/v1). It
//
//   - creates a ResourceClaim from the template for every
//     spec.resourceClaims entry of a pod that names a
//     resourceClaimTemplateName, controlled by the pod, and records its
//     name in pod.status.resourceClaimStatuses;
//   - reserves allocated claims for scheduled pods that are not yet in
//     claim.status.reservedFor;
//   - drops pods that are done or gone from reservedFor, deallocates a
//     claim nobody uses any more (the scheduler's delete-protection
//     finalizer goes with it), and deletes generated claims whose pod is done;
//   - with DRAWorkloadResourceClaims, does the same for PodGroups.
package resourceclaim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	resourceinformers "k8s.io/client-go/informers/resource/v1"
	schedulinginformers "k8s.io/client-go/informers/scheduling/v1beta1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// Feature gates the controller consults (their v1.37 defaults in DefaultFeatures).
const (
	DRAAdminAccess            featuregate.Feature = "DRAAdminAccess"
	DRAPrioritizedList        featuregate.Feature = "DRAPrioritizedList"
	GenericWorkload           featuregate.Feature = "GenericWorkload"
	DRAWorkloadResourceClaims featuregate.Feature = "DRAWorkloadResourceClaims"
)

const (
	// queueName labels the workqueue metrics, as upstream names the queue.
	queueName = "resource_claim"
	// eventComponent is the source of the events the controller records.
	eventComponent = "resource_claim"
	// fieldManager owns the status fields the controller applies.
	fieldManager = "ResourceClaimController"

	// EventReasonFailedResourceClaimCreation is the reason of the warning
	// on a pod (or PodGroup) whose claim could not be set up.
	EventReasonFailedResourceClaimCreation = "FailedResourceClaimCreation"

	// Work queue keys are "<kind>:<namespace>/<name>".
	claimKeyPrefix    = "claim:"
	podKeyPrefix      = "pod:"
	podGroupKeyPrefix = "podgroup:"

	// Informer index names.
	podClaimIndex           = "podResourceClaim"
	podTemplateIndex        = "podResourceClaimTemplate"
	podGroupClaimIndex      = "podGroupResourceClaim"
	podGroupTemplateIndex   = "podGroupResourceClaimTemplate"
	claimPodOwnerIndex      = "claimPodOwner"
	claimPodGroupOwnerIndex = "claimPodGroupOwner"
	podGroupMembersIndex    = "podGroupMembers"

	// How many freshly created claims the mutation cache remembers until
	// the informer has them, and for how long at most.
	claimMutationCacheSize = 1000
	claimMutationCacheTTL  = time.Hour

	// How many deleted pods and PodGroups are remembered by UID.
	maxDeletedUIDs = 500
)

// Features are the feature-gate dependent behaviours.
type Features struct {
	// AdminAccess (DRAAdminAccess): templates may request admin access.
	AdminAccess bool
	// PrioritizedList (DRAPrioritizedList): templates may use firstAvailable.
	PrioritizedList bool
	// GenericWorkload: pods may belong to a scheduling.k8s.io PodGroup.
	GenericWorkload bool
	// WorkloadResourceClaims (DRAWorkloadResourceClaims, needs
	// GenericWorkload): claims of PodGroups, shared by their pods.
	WorkloadResourceClaims bool
}

// nonRetryableError fails a work item without requeueing it: only a change
// of the object (or the feature gates) can fix it.
type nonRetryableError struct{ error }

// Controller is the resourceclaim-controller.
type Controller struct {
	features   Features
	kubeClient clientset.Interface
	recorder   record.EventRecorder

	podLister  corelisters.PodLister
	podIndexer cache.Indexer
	podsSynced cache.InformerSynced

	podGroupLister  schedulinglisters.PodGroupLister
	podGroupIndexer cache.Indexer
	podGroupsSynced cache.InformerSynced

	claimLister  resourcelisters.ResourceClaimLister
	claimsSynced cache.InformerSynced
	// claimCache overlays the claim informer with the claims this
	// controller created, so that a retry before the informer has seen a
	// new claim finds it instead of creating a second one.
	claimCache cache.MutationCache

	templateLister  resourcelisters.ResourceClaimTemplateLister
	templatesSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]

	// deleted remembers UIDs of pods and PodGroups seen going away, so that
	// their reservations can be dropped without asking the apiserver.
	deleted *uidCache
}

// NewController wires the controller to its informers. podGroupInformer is
// used only with features.GenericWorkload (lister) and
// features.WorkloadResourceClaims (events, indexes).
func NewController(
	logger klog.Logger,
	kubeClient clientset.Interface,
	podInformer coreinformers.PodInformer,
	podGroupInformer schedulinginformers.PodGroupInformer,
	claimInformer resourceinformers.ResourceClaimInformer,
	templateInformer resourceinformers.ResourceClaimTemplateInformer,
	features Features,
) (*Controller, error) {
	if features.WorkloadResourceClaims && !features.GenericWorkload {
		return nil, fmt.Errorf("feature %s requires %s", DRAWorkloadResourceClaims, GenericWorkload)
	}
	ec := &Controller{
		features:        features,
		kubeClient:      kubeClient,
		podLister:       podInformer.Lister(),
		podIndexer:      podInformer.Informer().GetIndexer(),
		podsSynced:      podInformer.Informer().HasSynced,
		podGroupsSynced: func() bool { return true },
		claimLister:     claimInformer.Lister(),
		claimsSynced:    claimInformer.Informer().HasSynced,
		templateLister:  templateInformer.Lister(),
		templatesSynced: templateInformer.Informer().HasSynced,
		queue:           controller.NewNamedQueue(queueName),
		deleted:         newUIDCache(maxDeletedUIDs),
	}
	ec.loop = controller.WorkLoop[string]{Name: queueName, Queue: ec.queue, Sync: ec.syncItem}
	registerMetrics(&claimCollector{lister: ec.claimLister, logger: logger})

	handlerOpts := cache.HandlerOptions{Logger: &logger}
	if _, err := podInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { ec.enqueuePod(logger, obj, false) },
		UpdateFunc: func(_, obj any) { ec.enqueuePod(logger, obj, false) },
		DeleteFunc: func(obj any) { ec.enqueuePod(logger, obj, true) },
	}, handlerOpts); err != nil {
		return nil, err
	}
	if _, err := claimInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { ec.enqueueClaim(logger, nil, obj) },
		UpdateFunc: func(old, obj any) { ec.enqueueClaim(logger, old, obj) },
		DeleteFunc: func(obj any) { ec.enqueueClaim(logger, obj, nil) },
	}, handlerOpts); err != nil {
		return nil, err
	}
	// A deleted template needs nothing: the pods wait for it to come back.
	if _, err := templateInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { ec.enqueueTemplate(logger, obj) },
		UpdateFunc: func(_, obj any) { ec.enqueueTemplate(logger, obj) },
	}, handlerOpts); err != nil {
		return nil, err
	}

	podIndexers := cache.Indexers{podClaimIndex: podClaimKeys, podTemplateIndex: podTemplateKeys}
	claimIndexers := cache.Indexers{claimPodOwnerIndex: claimPodOwnerKeys}

	if features.GenericWorkload {
		ec.podGroupLister = podGroupInformer.Lister()
	}
	if features.WorkloadResourceClaims {
		pgInformer := podGroupInformer.Informer()
		ec.podGroupsSynced = pgInformer.HasSynced
		ec.podGroupIndexer = pgInformer.GetIndexer()
		if _, err := pgInformer.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { ec.enqueuePodGroup(logger, obj, false) },
			UpdateFunc: func(_, obj any) { ec.enqueuePodGroup(logger, obj, false) },
			DeleteFunc: func(obj any) { ec.enqueuePodGroup(logger, obj, true) },
		}, handlerOpts); err != nil {
			return nil, err
		}
		if err := addIndexers(pgInformer, cache.Indexers{
			podGroupClaimIndex:    podGroupClaimKeys,
			podGroupTemplateIndex: podGroupTemplateKeys,
		}); err != nil {
			return nil, err
		}
		podIndexers[podGroupMembersIndex] = podGroupMemberKeys
		claimIndexers[claimPodGroupOwnerIndex] = claimPodGroupOwnerKeys
	}
	if err := addIndexers(podInformer.Informer(), podIndexers); err != nil {
		return nil, err
	}
	claimIndexer := claimInformer.Informer().GetIndexer()
	if err := addIndexers(claimInformer.Informer(), claimIndexers); err != nil {
		return nil, err
	}
	// IncludeAdds: a claim may be in here before the informer has it; if it
	// got deleted meanwhile, the informer event fixes the pod status later.
	ec.claimCache = cache.NewIntegerResourceVersionMutationCacheWithOptions(logger, claimIndexer, cache.MutationCacheOptions{
		Indexer:      claimIndexer,
		TTL:          claimMutationCacheTTL,
		IncludeAdds:  true,
		MaxCacheSize: claimMutationCacheSize,
	})
	return ec, nil
}

// addIndexers adds those of indexers the informer does not have yet.
func addIndexers(informer cache.SharedIndexInformer, indexers cache.Indexers) error {
	existing := informer.GetIndexer().GetIndexers()
	missing := cache.Indexers{}
	for name, fn := range indexers {
		if _, ok := existing[name]; !ok {
			missing[name] = fn
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := informer.AddIndexers(missing); err != nil {
		return fmt.Errorf("could not initialize ResourceClaim controller: %w", err)
	}
	return nil
}

// Run sends events, waits for the caches and syncs keys with workers
// goroutines (--concurrent-resourceclaim-syncs) until ctx is cancelled.
func (ec *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	broadcaster, recorder := controller.NewEventRecorder(ctx, eventComponent)
	ec.recorder = recorder
	stopEvents := controller.StartEventSink(broadcaster, ec.kubeClient)
	defer stopEvents()

	ec.loop.Run(ctx, workers, ec.podsSynced, ec.podGroupsSynced, ec.claimsSynced, ec.templatesSynced)
}

// syncItem is syncKey with a nonRetryableError dropped instead of retried.
func (ec *Controller) syncItem(ctx context.Context, key string) error {
	err := ec.syncKey(ctx, key)
	if _, final := errors.AsType[nonRetryableError](err); final {
		return controller.GiveUp(err)
	}
	return err
}

// syncKey dispatches a queue key to the sync of its kind.
func (ec *Controller) syncKey(ctx context.Context, key string) error {
	kind, object, found := strings.Cut(key, ":")
	if !found {
		return fmt.Errorf("unexpected key: %s", key)
	}
	namespace, name, err := cache.SplitMetaNamespaceKey(object)
	if err != nil {
		return err
	}
	switch kind + ":" {
	case podKeyPrefix:
		return ec.syncPod(ctx, namespace, name)
	case podGroupKeyPrefix:
		return ec.syncPodGroup(ctx, namespace, name)
	case claimKeyPrefix:
		return ec.syncClaim(ctx, namespace, name)
	default:
		return fmt.Errorf("unexpected key prefix: %s", kind+":")
	}
}

// warn records a warning event on obj once events are being sent.
func (ec *Controller) warn(obj runtime.Object, reason, message string) {
	if ec.recorder != nil {
		ec.recorder.Event(obj, v1.EventTypeWarning, reason, message)
	}
}

// claimKey is the queue key of a claim.
func claimKey(namespace, name string) string {
	return claimKeyPrefix + namespace + "/" + name
}

// isPodDone reports that none of the pod's containers runs or ever will:
// it finished, or it was deleted before being scheduled.
func isPodDone(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed ||
		pod.DeletionTimestamp != nil && pod.Spec.NodeName == ""
}
