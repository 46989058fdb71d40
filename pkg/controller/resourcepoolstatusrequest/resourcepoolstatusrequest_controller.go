// Package resourcepoolstatusrequest implements the
// resourcepoolstatusrequest-controller (DRAResourcePoolStatus). A
// ResourcePoolStatusRequest asks once for the state of a driver's DRA
// pools; the controller computes it from the ResourceSlices, the allocated
// ResourceClaims and the DeviceTaintRules in its caches, writes it to the
// request's status and later deletes old requests.
package resourcepoolstatusrequest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	resourcev1informers "k8s.io/client-go/informers/resource/v1"
	resourcev1alpha3informers "k8s.io/client-go/informers/resource/v1alpha3"
	clientset "k8s.io/client-go/kubernetes"
	resourcev1listers "k8s.io/client-go/listers/resource/v1"
	resourcev1alpha3listers "k8s.io/client-go/listers/resource/v1alpha3"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// ControllerName is the controller's name.
	ControllerName = "resourcepoolstatusrequest-controller"

	maxRetries = 5
	// Old requests are deleted: finished ones an hour after they finished,
	// unprocessed ones a day after creation, checked every 10 minutes.
	cleanupInterval = 10 * time.Minute
	completedTTL    = time.Hour
	pendingTTL      = 24 * time.Hour
	maxErrorLength  = 256
)

// Controller processes each request once. Its queue holds request names.
type Controller struct {
	client clientset.Interface

	requestLister   resourcev1alpha3listers.ResourcePoolStatusRequestLister
	sliceLister     resourcev1listers.ResourceSliceLister
	claimLister     resourcev1listers.ResourceClaimLister
	taintRuleLister resourcev1listers.DeviceTaintRuleLister // nil without DRADeviceTaintRules
	synced          []cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]
	// now is time.Now, replaceable in tests.
	now func() time.Time
}

// Features holds the feature gates the controller consults; the caller
// reads them from the component's feature gate.
type Features struct {
	// DeviceTaintRules (DRADeviceTaintRules): taints from DeviceTaintRules
	// make the devices they select unavailable.
	DeviceTaintRules bool
}

// NewController wires the controller to its informers. taintRuleInformer is
// used only with features.DeviceTaintRules and may then be nil.
func NewController(ctx context.Context, client clientset.Interface,
	requestInformer resourcev1alpha3informers.ResourcePoolStatusRequestInformer,
	sliceInformer resourcev1informers.ResourceSliceInformer,
	claimInformer resourcev1informers.ResourceClaimInformer,
	taintRuleInformer resourcev1informers.DeviceTaintRuleInformer,
	features Features) (*Controller, error) {
	logger := klog.FromContext(ctx)
	c := &Controller{
		client:        client,
		requestLister: requestInformer.Lister(),
		sliceLister:   sliceInformer.Lister(),
		claimLister:   claimInformer.Lister(),
		synced:        []cache.InformerSynced{requestInformer.Informer().HasSynced, sliceInformer.Informer().HasSynced, claimInformer.Informer().HasSynced},
		// Upstream's queue has no name, so it exports no workqueue metrics.
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		now:   time.Now,
	}
	if taintRuleInformer != nil && features.DeviceTaintRules {
		c.taintRuleLister = taintRuleInformer.Lister()
		c.synced = append(c.synced, taintRuleInformer.Informer().HasSynced)
	}
	c.loop = controller.WorkLoop[string]{Name: ControllerName, Queue: c.queue, Sync: c.syncRequest, MaxRetries: maxRetries}
	registerMetrics()
	if _, err := requestInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.enqueue(logger, obj) },
		UpdateFunc: func(_, cur interface{}) { c.enqueue(logger, cur) },
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return nil, fmt.Errorf("failed to add request event handler: %w", err)
	}
	return c, nil
}

// Run waits for the caches, then processes requests with workers
// goroutines and deletes expired ones until ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting ResourcePoolStatusRequest controller")
	defer logger.Info("Shutting down ResourcePoolStatusRequest controller")
	if !controller.WaitForCacheSync(ctx, ControllerName, c.synced...) {
		c.queue.ShutDown()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { wait.UntilWithContext(ctx, c.cleanup, cleanupInterval) })
	c.loop.RunWorkers(ctx, workers)
	wg.Wait()
}

// enqueue queues requests not yet answered.
func (c *Controller) enqueue(logger klog.Logger, obj interface{}) {
	req, ok := obj.(*resourcev1alpha3.ResourcePoolStatusRequest)
	if !ok {
		logger.Error(nil, "Failed to cast object to ResourcePoolStatusRequest")
		return
	}
	if req.Status == nil {
		c.queue.Add(req.Name)
	}
}

// syncRequest answers one request. A pool whose slices are not all seen
// yet makes it retry (at most maxRetries times) rather than answer with a
// partial pool.
func (c *Controller) syncRequest(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx)
	req, err := c.requestLister.Get(name)
	if err != nil {
		return nil // gone
	}
	if req.Status != nil {
		logger.V(4).Info("Request already processed, skipping", "request", name)
		return nil
	}
	driver := req.Spec.Driver
	start := c.now()
	logger.V(2).Info("Processing ResourcePoolStatusRequest", "request", name, "driver", driver)
	status := c.computeStatus(ctx, req)
	for _, p := range status.Pools {
		if p.ValidationError != nil && strings.HasPrefix(*p.ValidationError, prefixPoolIncomplete) {
			return fmt.Errorf("incomplete pools detected, requeueing")
		}
	}
	req = req.DeepCopy()
	req.Status = &status
	_, err = c.client.ResourceV1alpha3().ResourcePoolStatusRequests().UpdateStatus(ctx, req, metav1.UpdateOptions{})
	requestDuration.WithLabelValues(driver).Observe(time.Since(start).Seconds())
	requestsProcessed.WithLabelValues(driver).Inc()
	if err != nil {
		requestErrors.WithLabelValues(driver).Inc()
		return fmt.Errorf("failed to update status for request %s: %w", name, err)
	}
	logger.V(2).Info("Successfully processed ResourcePoolStatusRequest", "request", name, "poolCount", len(status.Pools))
	return nil
}

// poolAcc accumulates the slices of one pool at its newest generation.
type poolAcc struct {
	driver, name  string
	node          string
	mixedNodes    bool
	devices       int32
	unavailable   int32
	slices        int32
	expected      int64
	generation    int64
	records       []device
	sharedCounter []resourcev1.CounterSet
}

func (c *Controller) computeStatus(ctx context.Context, req *resourcev1alpha3.ResourcePoolStatusRequest) resourcev1alpha3.ResourcePoolStatusRequestStatus {
	logger := klog.FromContext(ctx)
	driver := req.Spec.Driver
	poolFilter := ptr.Deref(req.Spec.PoolName, "")

	allSlices, err := c.sliceLister.List(labels.Everything())
	if err != nil {
		return failedStatus(c.now(), "Failed to list ResourceSlices: "+err.Error())
	}
	var rules []*resourcev1.DeviceTaintRule
	if c.taintRuleLister != nil {
		if rules, err = c.taintRuleLister.List(labels.Everything()); err != nil {
			return failedStatus(c.now(), "Failed to list DeviceTaintRules: "+err.Error())
		}
	}

	// Only the newest generation of a pool counts.
	var slices []*resourcev1.ResourceSlice
	newest := map[string]int64{}
	for _, s := range allSlices {
		if s.Spec.Driver != driver || (poolFilter != "" && s.Spec.Pool.Name != poolFilter) {
			continue
		}
		slices = append(slices, s)
		k := s.Spec.Driver + "/" + s.Spec.Pool.Name
		if g, ok := newest[k]; !ok || s.Spec.Pool.Generation > g {
			newest[k] = s.Spec.Pool.Generation
		}
	}
	pools := map[string]*poolAcc{}
	for _, s := range slices {
		k := s.Spec.Driver + "/" + s.Spec.Pool.Name
		if s.Spec.Pool.Generation < newest[k] {
			continue
		}
		unavailable := int32(0)
		for i := range s.Spec.Devices {
			if unavailableDevice(s.Spec.Driver, s.Spec.Pool.Name, &s.Spec.Devices[i], rules) {
				unavailable++
			}
		}
		node := ptr.Deref(s.Spec.NodeName, "")
		p := pools[k]
		if p == nil {
			p = &poolAcc{driver: s.Spec.Driver, name: s.Spec.Pool.Name, node: node, expected: s.Spec.Pool.ResourceSliceCount, generation: newest[k]}
			pools[k] = p
		} else if node != p.node {
			p.mixedNodes = true
		}
		p.devices += int32(len(s.Spec.Devices))
		p.unavailable += unavailable
		p.slices++
		p.records = append(p.records, devicesOf(s)...)
		p.sharedCounter = append(p.sharedCounter, s.Spec.SharedCounters...)
	}

	claims, err := c.claimLister.List(labels.Everything())
	if err != nil {
		return failedStatus(c.now(), "Failed to list ResourceClaims: "+err.Error())
	}
	inUse := map[string]map[string]struct{}{}
	consumed := map[string]map[resourcev1.QualifiedName]resource.Quantity{}
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if ptr.Deref(r.AdminAccess, false) {
				continue // admin access does not use the device up
			}
			k := r.Driver + "/" + r.Pool
			if inUse[k] == nil {
				inUse[k] = map[string]struct{}{}
			}
			inUse[k][r.Device] = struct{}{}
			for name, q := range r.ConsumedCapacity {
				if consumed[k] == nil {
					consumed[k] = map[resourcev1.QualifiedName]resource.Quantity{}
				}
				sum := consumed[k][name].DeepCopy()
				sum.Add(q)
				consumed[k][name] = sum
			}
		}
	}

	out := make([]resourcev1alpha3.PoolStatus, 0, len(pools))
	for k, p := range pools {
		ps := resourcev1alpha3.PoolStatus{Driver: p.driver, PoolName: p.name, Generation: p.generation}
		if p.node != "" && !p.mixedNodes {
			ps.NodeName = ptr.To(p.node)
		}
		if int64(p.slices) < p.expected {
			ps.ValidationError = ptr.To(truncate(fmt.Sprintf("%s pool %s/%s is incomplete: observed %d/%d slices at generation %d",
				prefixPoolIncomplete, p.driver, p.name, p.slices, p.expected, p.generation)))
			out = append(out, ps)
			continue
		}
		allocated := int32(len(inUse[k]))
		ps.ResourceSliceCount = ptr.To(p.slices)
		ps.TotalDevices = ptr.To(p.devices)
		ps.AllocatedDevices = ptr.To(allocated)
		ps.AvailableDevices = ptr.To(max(0, p.devices-allocated-p.unavailable))
		ps.UnavailableDevices = ptr.To(p.unavailable)
		in := pool{driver: p.driver, name: p.name, devices: p.records, sharedCounters: p.sharedCounter, inUse: inUse[k], consumed: consumed[k]}
		resolvePartitions(req.Spec.DefaultPartitionTypeAttribute, &in)
		var problem string
		ps.PartitionSummary, ps.ShareableSummary, problem = views(in)
		if problem != "" {
			ps.ValidationError = ptr.To(truncate(problem))
		}
		out = append(out, ps)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Driver != out[j].Driver {
			return out[i].Driver < out[j].Driver
		}
		return out[i].PoolName < out[j].PoolName
	})
	count := int32(len(out))
	limit := ptr.Deref(req.Spec.Limit, resourcev1alpha3.ResourcePoolStatusRequestLimitDefault)
	if count > limit {
		out = out[:limit]
	}
	flagged := 0
	for _, p := range out {
		if p.ValidationError != nil {
			flagged++
		}
	}
	msg := fmt.Sprintf("Calculated status for %d pools", len(out))
	if flagged > 0 {
		msg = fmt.Sprintf("Calculated status for %d pools (%d incomplete)", len(out), flagged)
	}
	logger.V(4).Info("Calculated pool status", "request", req.Name, "poolCount", count, "returned", len(out))
	return resourcev1alpha3.ResourcePoolStatusRequestStatus{
		PoolCount: ptr.To(count),
		Pools:     out,
		Conditions: []metav1.Condition{{
			Type: resourcev1alpha3.ResourcePoolStatusRequestConditionComplete, Status: metav1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(c.now()), Reason: "CalculationComplete", Message: msg,
		}},
	}
}

func truncate(s string) string {
	if len(s) > maxErrorLength {
		return s[:maxErrorLength]
	}
	return s
}

func failedStatus(now time.Time, msg string) resourcev1alpha3.ResourcePoolStatusRequestStatus {
	return resourcev1alpha3.ResourcePoolStatusRequestStatus{
		PoolCount: ptr.To[int32](0),
		Conditions: []metav1.Condition{{
			Type: resourcev1alpha3.ResourcePoolStatusRequestConditionFailed, Status: metav1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now), Reason: "CalculationFailed", Message: msg,
		}},
	}
}

// unavailableDevice: a NoSchedule or NoExecute taint, on the device or
// from a DeviceTaintRule selecting it, makes a device unavailable.
func unavailableDevice(driver, pool string, d *resourcev1.Device, rules []*resourcev1.DeviceTaintRule) bool {
	for _, t := range d.Taints {
		if blocking(t.Effect) {
			return true
		}
	}
	for _, r := range rules {
		sel := r.Spec.DeviceSelector
		if !blocking(r.Spec.Taint.Effect) || sel == nil {
			continue
		}
		if (sel.Driver == nil || *sel.Driver == driver) && (sel.Pool == nil || *sel.Pool == pool) && (sel.Device == nil || *sel.Device == d.Name) {
			return true
		}
	}
	return false
}

func blocking(e resourcev1.DeviceTaintEffect) bool {
	return e == resourcev1.DeviceTaintEffectNoSchedule || e == resourcev1.DeviceTaintEffectNoExecute
}

// cleanup deletes expired requests (with a UID precondition, so a new
// request of the same name survives).
func (c *Controller) cleanup(ctx context.Context) {
	logger := klog.FromContext(ctx)
	reqs, err := c.requestLister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Failed to list ResourcePoolStatusRequests for cleanup")
		return
	}
	deleted := 0
	for _, r := range reqs {
		if !c.expired(r) {
			continue
		}
		err := c.client.ResourceV1alpha3().ResourcePoolStatusRequests().Delete(ctx, r.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &r.UID}})
		if err != nil {
			if !apierrors.IsNotFound(err) {
				logger.Error(err, "Failed to delete expired ResourcePoolStatusRequest", "request", r.Name)
			}
			continue
		}
		deleted++
		logger.V(2).Info("Deleted expired ResourcePoolStatusRequest", "request", r.Name)
	}
	if deleted > 0 {
		logger.Info("Cleanup completed", "deletedCount", deleted)
	}
}

// expired: answered requests go an hour after their Complete or Failed
// condition (or creation), unanswered ones a day after creation.
func (c *Controller) expired(r *resourcev1alpha3.ResourcePoolStatusRequest) bool {
	older := func(t time.Time, d time.Duration) bool { return !t.IsZero() && c.now().Sub(t) > d }
	if r.Status == nil {
		return older(r.CreationTimestamp.Time, pendingTTL)
	}
	for _, cond := range r.Status.Conditions {
		if cond.Type == resourcev1alpha3.ResourcePoolStatusRequestConditionComplete || cond.Type == resourcev1alpha3.ResourcePoolStatusRequestConditionFailed {
			return older(cond.LastTransitionTime.Time, completedTTL)
		}
	}
	return older(r.CreationTimestamp.Time, completedTTL)
}
