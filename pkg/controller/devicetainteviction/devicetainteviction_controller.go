// Package devicetainteviction is the device-taint-eviction-controller of
// Dynamic Resource Allocation. It deletes scheduled pods that use an
// allocated device with a NoExecute taint their claim does not tolerate,
// once the taint's time plus the smallest matching tolerationSeconds has
// passed; taints come from the devices in ResourceSlices and from
// DeviceTaintRules. Before deleting a pod it adds the DisruptionTarget
// condition. It also keeps the EvictionInProgress condition of every
// DeviceTaintRule up to date.
//
// All decisions are made in the informer event handlers, under one mutex
// and without blocking; API calls happen in the queue workers.
package devicetainteviction

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	resourceinformers "k8s.io/client-go/informers/resource/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourceclaim/podclaims"
)

// Feature gates the controller consults (their v1.37 defaults in DefaultFeatures).
const (
	DRADeviceTaintRules       featuregate.Feature = "DRADeviceTaintRules"
	DRAWorkloadResourceClaims featuregate.Feature = "DRAWorkloadResourceClaims"
)

const (
	// ruleStatusPeriod is the shortest time between two status updates of
	// a DeviceTaintRule while it evicts.
	ruleStatusPeriod = 10 * time.Second

	maxEvictedUIDs = 500

	// podGroupIndex indexes pods by namespace/name of their PodGroup.
	podGroupIndex = "podGroupPerPod"
)

// Features are the feature-gate dependent behaviours.
type Features struct {
	// DeviceTaintRules (DRADeviceTaintRules): evict for DeviceTaintRules
	// and maintain their status. Without it the rule informer is not used.
	DeviceTaintRules bool
	// WorkloadResourceClaims (DRAWorkloadResourceClaims): claims reserved
	// for a PodGroup affect the group's pods.
	WorkloadResourceClaims bool
}

// objectRef names one instance of an object.
type objectRef struct {
	Namespace, Name string
	UID             types.UID
}

func refOf(obj metav1.Object) objectRef {
	return objectRef{Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
}

func (r objectRef) String() string {
	if r.Namespace == "" {
		return fmt.Sprintf("%s:%s", r.Name, r.UID)
	}
	return fmt.Sprintf("%s/%s:%s", r.Namespace, r.Name, r.UID)
}

// workItem is either a pod that may have to be deleted now (deleteAt says
// whether and when) or a DeviceTaintRule whose status may need an update.
type workItem struct {
	pod  objectRef
	rule objectRef
}

// trackedClaim is an allocated claim and when its users must go, if ever.
type trackedClaim struct {
	claim    *resourceapi.ResourceClaim
	eviction *eviction
}

// Controller is the device-taint-eviction-controller.
type Controller struct {
	name     string
	features Features
	client   clientset.Interface
	recorder record.EventRecorder
	logger   klog.Logger

	podInformer   cache.SharedIndexInformer
	podLister     corelisters.PodLister
	claimInformer cache.SharedIndexInformer
	sliceInformer cache.SharedIndexInformer
	ruleInformer  cache.SharedIndexInformer // nil without DeviceTaintRules
	ruleLister    resourcelisters.DeviceTaintRuleLister
	synced        []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[workItem]

	// onEvict and onCancel observe scheduling decisions in tests.
	onEvict  func(pod objectRef, e eviction)
	onCancel func(pod objectRef)

	// mu guards everything below. Handlers hold it; workers take it only
	// briefly and never during API calls.
	mu sync.Mutex
	// deleteAt holds pods to evict and when. An entry goes when the pod is
	// evicted or no longer needs to be.
	deleteAt map[objectRef]eviction
	// evicted remembers pods already deleted, so that they are not again.
	evicted *uidCache
	// claims are the allocated claims.
	claims map[types.NamespacedName]trackedClaim
	pools  map[poolKey]*pool
	// rules are the DeviceTaintRules with the NoExecute effect, by name.
	rules map[string]*resourceapi.DeviceTaintRule
	// ruleEvictions counts the pods evicted because of a rule (by UID)
	// since the controller started.
	ruleEvictions map[types.UID]int64
}

// NewController returns the controller. controllerName is the source of its events,
// the name of its queue and the field manager of rule statuses.
// ruleInformer may be nil when features.DeviceTaintRules is off; the
// DeviceClass informer is only started and waited for.
func NewController(c clientset.Interface, podInformer coreinformers.PodInformer, claimInformer resourceinformers.ResourceClaimInformer, sliceInformer resourceinformers.ResourceSliceInformer, ruleInformer resourceinformers.DeviceTaintRuleInformer, classInformer resourceinformers.DeviceClassInformer, controllerName string, features Features) *Controller {
	registerMetrics()
	tc := &Controller{
		name:          controllerName,
		features:      features,
		client:        c,
		logger:        klog.Background(),
		podInformer:   podInformer.Informer(),
		podLister:     podInformer.Lister(),
		claimInformer: claimInformer.Informer(),
		sliceInformer: sliceInformer.Informer(),
		queue:         controller.NewNamedTypedQueue[workItem](controllerName),
		deleteAt:      map[objectRef]eviction{},
		evicted:       newUIDCache(maxEvictedUIDs),
		claims:        map[types.NamespacedName]trackedClaim{},
		pools:         map[poolKey]*pool{},
		rules:         map[string]*resourceapi.DeviceTaintRule{},
		ruleEvictions: map[types.UID]int64{},
	}
	// Asking for every informer here makes the factory start them.
	tc.synced = []cache.InformerSynced{
		tc.podInformer.HasSynced,
		tc.claimInformer.HasSynced,
		tc.sliceInformer.HasSynced,
		classInformer.Informer().HasSynced,
	}
	if features.DeviceTaintRules && ruleInformer != nil {
		tc.ruleInformer = ruleInformer.Informer()
		tc.ruleLister = ruleInformer.Lister()
		tc.synced = append(tc.synced, tc.ruleInformer.HasSynced)
	}
	return tc
}

// Run registers the event handlers, waits until the caches and the
// handlers have caught up, then evicts with workers goroutines
// (--concurrent-device-taint-eviction-syncs) until ctx is cancelled. An
// error means the controller could not start.
func (tc *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	tc.logger = logger
	logger.Info("Starting", "controller", tc.name, "numWorkers", workers)
	defer logger.Info("Shut down controller", "controller", tc.name, "reason", context.Cause(ctx))

	broadcaster, recorder := controller.NewEventRecorder(ctx, tc.name)
	tc.recorder = recorder
	stopEvents := controller.StartEventSink(broadcaster, tc.client)
	defer stopEvents()

	controller.ReportQueue(ctx, tc.name, tc.queue.Len)
	// RunWorkers shuts the queue down too; this covers the early returns.
	defer tc.queue.ShutDown()

	if tc.features.WorkloadResourceClaims {
		if err := tc.addPodGroupIndex(); err != nil {
			return err
		}
	}

	synced := append([]cache.InformerSynced(nil), tc.synced...)
	var registered []func()
	defer func() {
		for _, remove := range registered {
			remove()
		}
	}()
	register := func(informer cache.SharedIndexInformer, what string, handler cache.ResourceEventHandlerFuncs) error {
		reg, err := informer.AddEventHandlerWithOptions(handler, cache.HandlerOptions{Logger: &logger})
		if err != nil {
			return fmt.Errorf("adding %s event handler: %w", what, err)
		}
		synced = append(synced, reg.HasSynced)
		registered = append(registered, func() { _ = informer.RemoveEventHandler(reg) })
		return nil
	}
	if err := register(tc.claimInformer, "claim", cache.ResourceEventHandlerFuncs{
		AddFunc:    lockedHandler(tc, logger, tc.handleClaimChange, nil),
		UpdateFunc: lockedUpdateHandler(tc, logger, tc.handleClaimChange),
		DeleteFunc: lockedHandler(tc, logger, nil, tc.handleClaimChange),
	}); err != nil {
		return err
	}
	if err := register(tc.podInformer, "pod", cache.ResourceEventHandlerFuncs{
		AddFunc:    lockedHandler(tc, logger, tc.handlePodChange, nil),
		UpdateFunc: lockedUpdateHandler(tc, logger, tc.handlePodChange),
		DeleteFunc: lockedHandler(tc, logger, nil, tc.handlePodChange),
	}); err != nil {
		return err
	}
	if tc.ruleInformer != nil {
		if err := register(tc.ruleInformer, "DeviceTaintRule", cache.ResourceEventHandlerFuncs{
			AddFunc:    lockedHandler(tc, logger, tc.handleRuleChange, nil),
			UpdateFunc: lockedUpdateHandler(tc, logger, tc.handleRuleChange),
			DeleteFunc: lockedHandler(tc, logger, nil, tc.handleRuleChange),
		}); err != nil {
			return err
		}
	}
	if err := register(tc.sliceInformer, "slice", cache.ResourceEventHandlerFuncs{
		AddFunc:    lockedHandler(tc, logger, tc.handleSliceChange, nil),
		UpdateFunc: lockedUpdateHandler(tc, logger, tc.handleSliceChange),
		DeleteFunc: lockedHandler(tc, logger, nil, tc.handleSliceChange),
	}); err != nil {
		return err
	}

	if !controller.WaitForCacheSync(ctx, tc.name, synced...) {
		// Cancelled while waiting: not an error.
		return nil
	}
	logger.V(1).Info("Underlying informers have synced")

	loop := controller.WorkLoop[workItem]{Name: tc.name, Queue: tc.queue, Sync: tc.syncItem}
	loop.RunWorkers(ctx, workers)
	return nil
}

// lockedHandler returns an add (onAdd) or delete (onDelete) handler that
// calls change(nil, obj) or change(obj, nil) under the mutex.
func lockedHandler[T any](tc *Controller, logger klog.Logger, onAdd, onDelete func(oldObj, newObj *T)) func(obj any) {
	return func(obj any) {
		obj = controller.Untombstone(obj)
		o, ok := obj.(*T)
		if !ok {
			logger.Error(nil, "Unexpected object type", "expected", fmt.Sprintf("%T", new(T)), "actual", fmt.Sprintf("%T", obj))
			return
		}
		tc.mu.Lock()
		defer tc.mu.Unlock()
		if onAdd != nil {
			onAdd(nil, o)
		} else {
			onDelete(o, nil)
		}
	}
}

func lockedUpdateHandler[T any](tc *Controller, logger klog.Logger, change func(oldObj, newObj *T)) func(oldObj, newObj any) {
	return func(oldObj, newObj any) {
		o, ok1 := oldObj.(*T)
		n, ok2 := newObj.(*T)
		if !ok1 || !ok2 {
			logger.Error(nil, "Unexpected object type", "expected", fmt.Sprintf("%T", new(T)), "actual", fmt.Sprintf("%T/%T", oldObj, newObj))
			return
		}
		tc.mu.Lock()
		defer tc.mu.Unlock()
		change(o, n)
	}
}

func (tc *Controller) addPodGroupIndex() error {
	if _, ok := tc.podInformer.GetIndexer().GetIndexers()[podGroupIndex]; ok {
		return nil
	}
	err := tc.podInformer.AddIndexers(cache.Indexers{podGroupIndex: func(obj any) ([]string, error) {
		pod, ok := obj.(*v1.Pod)
		if !ok {
			return nil, fmt.Errorf("unexpected type %T reached Pod informer indexer", obj)
		}
		if group := podclaims.PodGroupName(pod); group != "" {
			return []string{pod.Namespace + "/" + group}, nil
		}
		return nil, nil
	}})
	if err != nil {
		return fmt.Errorf("adding %s indexer for pods: %w", podGroupIndex, err)
	}
	return nil
}

// syncItem evicts a pod or updates a rule's status. Failures are retried
// with backoff but logged only verbosely, as upstream; a later look keeps
// the item's backoff (upstream adds it back without forgetting it).
func (tc *Controller) syncItem(ctx context.Context, item workItem) error {
	var again time.Duration
	var err error
	if item.pod.Name != "" {
		again, err = tc.maybeDeletePod(ctx, item.pod)
	} else {
		again, err = tc.maybeUpdateRuleStatus(ctx, item.rule)
	}
	switch {
	case err != nil:
		return controller.Quietly(err)
	case again > 0:
		return controller.RequeueAfter(again)
	}
	return nil
}

func ruleWork(rule *resourceapi.DeviceTaintRule) workItem {
	return workItem{rule: objectRef{Name: rule.Name, UID: rule.UID}}
}

// handleClaimChange tracks allocated claims and re-evaluates their users.
func (tc *Controller) handleClaimChange(oldClaim, newClaim *resourceapi.ResourceClaim) {
	claim := newClaim
	if claim == nil {
		claim = oldClaim
	}
	key := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
	switch {
	case newClaim == nil:
		delete(tc.claims, key)
		tc.handlePods(claim)
	case oldClaim == nil:
		if claim.Status.Allocation == nil {
			return
		}
		tc.claims[key] = trackedClaim{claim: claim, eviction: claimEviction(claim, tc.pools, tc.rules)}
		tc.handlePods(claim)
	case oldClaim.UID != newClaim.UID:
		// Replaced under the same name: a removal and an addition.
		tc.handleClaimChange(oldClaim, nil)
		tc.handleClaimChange(nil, newClaim)
	default:
		wasAllocated, isAllocated := oldClaim.Status.Allocation != nil, newClaim.Status.Allocation != nil
		switch {
		case !wasAllocated && isAllocated:
			tc.claims[key] = trackedClaim{claim: newClaim, eviction: claimEviction(newClaim, tc.pools, tc.rules)}
		case wasAllocated && !isAllocated:
			delete(tc.claims, key)
		case isAllocated:
			// The allocation is immutable, so is the eviction.
			tc.claims[key] = trackedClaim{claim: newClaim, eviction: tc.claims[key].eviction}
		default:
			return
		}
		// reservedFor may have changed: both old and new users need a look.
		if !apiequality.Semantic.DeepEqual(oldClaim.Status.ReservedFor, newClaim.Status.ReservedFor) {
			tc.handlePods(oldClaim)
		}
		tc.handlePods(newClaim)
	}
}

// handleRuleChange updates the set of evicting rules and, since rule
// changes are rare, re-evaluates every allocated claim.
func (tc *Controller) handleRuleChange(oldRule, newRule *resourceapi.DeviceTaintRule) {
	switch {
	case oldRule == nil:
		// The status is set once right away, before any eviction.
		tc.queue.Add(ruleWork(newRule))
	case newRule == nil:
		delete(tc.ruleEvictions, oldRule.UID)
	case oldRule.UID == newRule.UID:
		if apiequality.Semantic.DeepEqual(&oldRule.Spec, &newRule.Spec) {
			return
		}
		tc.queue.Add(ruleWork(newRule))
	}

	if oldRule != nil {
		delete(tc.rules, oldRule.Name)
	}
	if newRule != nil && newRule.Spec.Taint.Effect == resourceapi.DeviceTaintEffectNoExecute {
		tc.rules[newRule.Name] = newRule
	}
	for key, tracked := range tc.claims {
		e := claimEviction(tracked.claim, tc.pools, tc.rules)
		changed := !e.equal(tracked.eviction)
		tc.claims[key] = trackedClaim{claim: tracked.claim, eviction: e}
		if changed {
			tc.handlePods(tracked.claim)
		}
	}
}

// handleSliceChange updates the pool and re-evaluates the claims using a
// device whose NoExecute taints changed.
func (tc *Controller) handleSliceChange(oldSlice, newSlice *resourceapi.ResourceSlice) {
	slice := newSlice
	if slice == nil {
		slice = oldSlice
	}
	key := poolKey{driver: slice.Spec.Driver, pool: slice.Spec.Pool.Name}
	p := tc.pools[key]
	if p == nil {
		p = &pool{}
	}
	before := p.noExecuteTaints()
	p.remove(oldSlice)
	p.add(newSlice)
	if len(p.slices) == 0 {
		delete(tc.pools, key)
	} else {
		tc.pools[key] = p
	}
	after := p.noExecuteTaints()
	if len(before) == 0 && len(after) == 0 {
		return
	}

	changed := map[string]bool{}
	for device, taints := range before {
		if !apiequality.Semantic.DeepEqual(taints, after[device]) {
			changed[device] = true
		}
	}
	for device := range after {
		if _, ok := before[device]; !ok {
			changed[device] = true
		}
	}
	if len(changed) == 0 {
		return
	}
	for name, tracked := range tc.claims {
		if !usesDevice(tracked.claim, key, changed) {
			continue
		}
		e := claimEviction(tracked.claim, tc.pools, tc.rules)
		if e.equal(tracked.eviction) {
			continue
		}
		tc.claims[name] = trackedClaim{claim: tracked.claim, eviction: e}
		tc.handlePods(tracked.claim)
	}
}

func usesDevice(claim *resourceapi.ResourceClaim, key poolKey, devices map[string]bool) bool {
	for _, result := range claim.Status.Allocation.Devices.Results {
		if result.Driver == key.driver && result.Pool == key.pool && devices[result.Device] {
			return true
		}
	}
	return false
}

// handlePodChange re-evaluates a pod when something that matters for its
// eviction changed: scheduling or its claims (not, e.g., the
// DisruptionTarget condition this controller adds).
func (tc *Controller) handlePodChange(oldPod, newPod *v1.Pod) {
	if newPod == nil {
		tc.cancelEviction(refOf(oldPod))
		return
	}
	if oldPod != nil &&
		oldPod.Spec.NodeName == newPod.Spec.NodeName &&
		podclaims.StatusEqual(oldPod.Status.ResourceClaimStatuses, newPod.Status.ResourceClaimStatuses) &&
		podclaims.ExtendedStatusEqual(oldPod.Status.ExtendedResourceClaimStatus, newPod.Status.ExtendedResourceClaimStatus) {
		return
	}
	tc.handlePod(newPod)
}

// handlePods re-evaluates the users in the claim's reservedFor.
func (tc *Controller) handlePods(claim *resourceapi.ResourceClaim) {
	for _, consumer := range claim.Status.ReservedFor {
		switch {
		case podclaims.IsPodConsumer(consumer):
			pod, err := tc.podLister.Pods(claim.Namespace).Get(consumer.Name)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				utilruntime.HandleErrorWithLogger(tc.logger, err, "retrieve pod from cache")
				continue
			}
			if pod.UID == consumer.UID {
				tc.handlePod(pod)
			}
		case consumer.APIGroup == schedulingapi.GroupName && consumer.Resource == podclaims.PodGroupsResource:
			// Such entries can outlive the feature gate.
			if !tc.features.WorkloadResourceClaims {
				continue
			}
			members, err := tc.podInformer.GetIndexer().ByIndex(podGroupIndex, claim.Namespace+"/"+consumer.Name)
			if err != nil {
				utilruntime.HandleErrorWithLogger(tc.logger, err, "retrieve Pods for PodGroup from cache", "podGroup", klog.KRef(claim.Namespace, consumer.Name))
				continue
			}
			for _, obj := range members {
				if pod, ok := obj.(*v1.Pod); ok {
					tc.handlePod(pod)
				}
			}
		}
	}
}

// handlePod schedules or cancels the pod's eviction.
func (tc *Controller) handlePod(pod *v1.Pod) {
	ref := refOf(pod)
	e := tc.podEviction(pod, tc.claims)
	if e == nil {
		if tc.cancelEviction(ref) {
			tc.podEvent(ref, "Cancelling deletion")
			tc.logger.V(3).Info("Canceled pod eviction", "pod", ref)
		}
		return
	}
	tc.scheduleEviction(ref, *e)
	// Rules evicting this pod get a status update, a bit later because more
	// pods are likely to follow.
	for _, reason := range e.reasons {
		if reason.rule != nil {
			tc.queue.AddAfter(ruleWork(reason.rule), ruleStatusPeriod)
		}
	}
}

// podEviction returns when the pod must be evicted, nil if not at all: a
// scheduled pod goes when the first of the allocated claims it really
// uses (generated for it where required, reserved for it) says so.
func (tc *Controller) podEviction(pod *v1.Pod, claims map[types.NamespacedName]trackedClaim) *eviction {
	if pod.Spec.NodeName == "" {
		return nil
	}
	var e *eviction
	for name, checkOwner := range podclaims.All(pod) {
		tracked, ok := claims[types.NamespacedName{Namespace: pod.Namespace, Name: name}]
		if !ok || tracked.eviction == nil {
			continue
		}
		if checkOwner && podclaims.IsForPod(pod, tracked.claim, tc.features.WorkloadResourceClaims) != nil {
			continue
		}
		// A pod of the same name that replaced the claim's user does not count.
		if !podclaims.IsReservedForPod(pod, tracked.claim, tc.features.WorkloadResourceClaims) {
			continue
		}
		e = e.merge(tracked.eviction)
	}
	return e
}

// scheduleEviction records when the pod must go and queues it for then.
func (tc *Controller) scheduleEviction(ref objectRef, e eviction) {
	tc.deleteAt[ref] = e
	if delay := time.Until(e.when.Time); delay > 0 {
		tc.logger.V(3).Info("Adding delayed pod eviction", "pod", ref, "eviction", &e, "delay", delay)
		tc.queue.AddAfter(workItem{pod: ref}, delay)
	} else {
		tc.logger.V(3).Info("Adding immediate pod eviction", "pod", ref, "eviction", &e)
		tc.queue.Add(workItem{pod: ref})
	}
	if tc.onEvict != nil {
		tc.onEvict(ref, e)
	}
}

// cancelEviction forgets a scheduled eviction; it reports whether there was
// one. A queued work item finds nothing to do.
func (tc *Controller) cancelEviction(ref objectRef) bool {
	if _, ok := tc.deleteAt[ref]; !ok {
		return false
	}
	delete(tc.deleteAt, ref)
	if tc.onCancel != nil {
		tc.onCancel(ref)
	}
	return true
}

// podEvent records a normal event about the pod, once events are sent.
func (tc *Controller) podEvent(ref objectRef, message string) {
	if tc.recorder == nil {
		return
	}
	tc.recorder.Eventf(&v1.ObjectReference{
		APIVersion: "v1",
		Kind:       "Pod",
		Namespace:  ref.Namespace,
		Name:       ref.Name,
		UID:        ref.UID,
	}, v1.EventTypeNormal, "DeviceTaintManagerEviction", "%s", message)
}
