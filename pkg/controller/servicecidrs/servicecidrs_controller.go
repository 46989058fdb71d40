// Package servicecidrs implements the service-cidr-controller. It puts the
// networking.k8s.io/service-cidr-finalizer on every ServiceCIDR, reports
// it Ready, and lets a deleted ServiceCIDR go only once no Service
// IPAddress would be left outside every remaining ServiceCIDR.
package servicecidrs

import (
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1apply "k8s.io/client-go/applyconfigurations/networking/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	clientset "k8s.io/client-go/kubernetes"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	controllerName = "service-cidr-controller"
	// queueName labels the workqueue metrics; upstream's name, odd as it is.
	queueName = "ipaddresses"
	// maxRetries drops a ServiceCIDR after this many failed syncs in a row
	// (about 82s of backoff); the next event on it brings it back.
	maxRetries = 15

	// ServiceCIDRProtectionFinalizer holds a ServiceCIDR until its
	// addresses are accounted for.
	ServiceCIDRProtectionFinalizer = "networking.k8s.io/service-cidr-finalizer"

	// deletionGracePeriod is how long after the deletion timestamp the
	// finalizer stays, so every apiserver's allocator has seen the
	// deletion and stopped handing out addresses from the range.
	deletionGracePeriod = 10 * time.Second

	// ipAllocatorName is the managed-by label value of the IPAddresses the
	// apiserver allocates for Services; only those are protected.
	ipAllocatorName = "ipallocator.k8s.io"

	readyMessage       = "Kubernetes Service CIDR is ready"
	terminatingMessage = "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR"
)

// Controller manages the finalizer and Ready condition of ServiceCIDRs.
// Its queue holds ServiceCIDR names.
type Controller struct {
	client      clientset.Interface
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	serviceCIDRLister  networkinglisters.ServiceCIDRLister
	serviceCIDRsSynced cache.InformerSynced
	ipAddressLister    networkinglisters.IPAddressLister
	ipAddressesSynced  cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]
	clock clock.PassiveClock
}

// NewController wires the controller to the ServiceCIDR and IPAddress
// informers.
func NewController(ctx context.Context, serviceCIDRInformer networkinginformers.ServiceCIDRInformer, ipAddressInformer networkinginformers.IPAddressInformer, client clientset.Interface) *Controller {
	logger := klog.FromContext(ctx)
	c := &Controller{
		client:             client,
		serviceCIDRLister:  serviceCIDRInformer.Lister(),
		serviceCIDRsSynced: serviceCIDRInformer.Informer().HasSynced,
		ipAddressLister:    ipAddressInformer.Lister(),
		ipAddressesSynced:  ipAddressInformer.Informer().HasSynced,
		queue:              controller.NewNamedQueue(queueName),
		clock:              clock.RealClock{},
	}
	c.broadcaster, c.recorder = controller.NewEventRecorder(ctx, controllerName)
	c.loop = controller.WorkLoop[string]{Name: controllerName, Queue: c.queue, Sync: c.sync, MaxRetries: maxRetries}

	_, _ = serviceCIDRInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addServiceCIDR,
		UpdateFunc: func(_, cur interface{}) { c.enqueue(cur) },
		DeleteFunc: c.enqueue,
	}, cache.HandlerOptions{Logger: &logger})
	// IPAddresses are immutable: only their coming and going matters.
	_, _ = ipAddressInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.ipAddressChanged,
		DeleteFunc: c.ipAddressChanged,
	}, cache.HandlerOptions{Logger: &logger})
	return c
}

// Run sends events, waits for the caches and syncs with workers goroutines
// until ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	stopEvents := controller.StartEventSink(c.broadcaster, c.client)
	defer stopEvents()

	logger := klog.FromContext(ctx)
	logger.Info("Starting", "controller", controllerName)
	defer logger.Info("Shutting down", "controller", controllerName)
	if !controller.WaitForCacheSync(ctx, controllerName, c.serviceCIDRsSynced, c.ipAddressesSynced) {
		c.queue.ShutDown()
		return
	}
	c.loop.RunWorkers(ctx, workers)
}

func (c *Controller) enqueue(obj interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// addServiceCIDR also wakes the ServiceCIDRs it overlaps: a new parent
// range may unblock their deletion.
func (c *Controller) addServiceCIDR(obj interface{}) {
	cidr, ok := obj.(*networkingv1.ServiceCIDR)
	if !ok {
		return
	}
	c.queue.Add(cidr.Name)
	names := sets.New[string]()
	for _, p := range prefixes(cidr) {
		for _, other := range c.matchingServiceCIDRs(func(q netip.Prefix) bool { return q.Overlaps(p) }) {
			names.Insert(other.Name)
		}
	}
	for name := range names {
		c.queue.Add(name)
	}
}

// ipAddressChanged wakes the ServiceCIDRs holding the address: a new one
// may block their deletion, a removed one may unblock it.
func (c *Controller) ipAddressChanged(obj interface{}) {
	obj = controller.Untombstone(obj)
	ip, ok := obj.(*networkingv1.IPAddress)
	if !ok {
		return
	}
	if ip.Labels[networkingv1.LabelManagedBy] != ipAllocatorName {
		return
	}
	addr, err := netip.ParseAddr(ip.Name)
	if err != nil {
		// The apiserver validates IPAddress names; nothing to map it to.
		return
	}
	names := sets.New[string]()
	for _, cidr := range c.serviceCIDRsContaining(addr) {
		names.Insert(cidr.Name)
	}
	for name := range names {
		c.queue.Add(name)
	}
}

func (c *Controller) sync(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx)
	start := c.clock.Now()
	defer func() {
		logger.V(4).Info("Finished syncing ServiceCIDR", "ServiceCIDR", name, "elapsed", c.clock.Since(start))
	}()

	cidr, err := c.serviceCIDRLister.Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("ServiceCIDR no longer exist", "ServiceCIDR", name)
		return nil
	}
	if err != nil {
		return err
	}
	if cidr.DeletionTimestamp != nil {
		return c.syncDeleting(ctx, cidr)
	}

	if err := c.addFinalizer(ctx, cidr); err != nil {
		return err
	}
	ready := metav1.Condition{
		Type:    networkingv1.ServiceCIDRConditionReady,
		Status:  metav1.ConditionTrue,
		Message: readyMessage,
	}
	if err := c.setCondition(ctx, cidr, ready); err != nil {
		logger.Info("error updating default ServiceCIDR status", "error", err)
		c.recorder.Eventf(cidr, v1.EventTypeWarning, "KubernetesServiceCIDRError", "The ServiceCIDR Status can not be set to Ready=True")
		return err
	}
	return nil
}

// syncDeleting removes the finalizer once no address depends on the
// ServiceCIDR and the grace period is over; until then it reports why the
// deletion waits.
func (c *Controller) syncDeleting(ctx context.Context, cidr *networkingv1.ServiceCIDR) error {
	ok, err := c.canDelete(ctx, cidr)
	if err != nil {
		return err
	}
	if !ok {
		// An IPAddress or ServiceCIDR event brings it back.
		return c.setCondition(ctx, cidr, metav1.Condition{
			Type:    networkingv1.ServiceCIDRConditionReady,
			Status:  metav1.ConditionFalse,
			Reason:  networkingv1.ServiceCIDRReasonTerminating,
			Message: terminatingMessage,
		})
	}
	if wait := deletionGracePeriod - c.clock.Since(cidr.DeletionTimestamp.Time); wait > 0 {
		c.queue.AddAfter(cidr.Name, wait)
		return nil
	}
	return c.removeFinalizer(ctx, cidr)
}

// canDelete reports whether deleting the ServiceCIDR orphans no Service
// IPAddress: either another ServiceCIDR contains each of its ranges, or
// no address in them belongs to it alone.
func (c *Controller) canDelete(ctx context.Context, cidr *networkingv1.ServiceCIDR) (bool, error) {
	logger := klog.FromContext(ctx)
	own := prefixes(cidr)
	covered := true
	for _, p := range own {
		parents := c.matchingServiceCIDRs(func(q netip.Prefix) bool { return q.Overlaps(p) && q.Bits() <= p.Bits() })
		if len(parents) == 0 || len(parents) == 1 && parents[0].Name == cidr.Name {
			covered = false
		}
	}
	if covered {
		logger.Info("Deleting ServiceCIDR contained in other ServiceCIDR", "ServiceCIDR", klog.KObj(cidr))
		return true, nil
	}

	for _, p := range own {
		family := v1.IPv4Protocol
		if p.Addr().Is6() {
			family = v1.IPv6Protocol
		}
		selector := labels.SelectorFromSet(labels.Set{
			networkingv1.LabelIPAddressFamily: string(family),
			networkingv1.LabelManagedBy:       ipAllocatorName,
		})
		ips, err := c.ipAddressLister.List(selector)
		if err != nil {
			return false, err
		}
		for _, ip := range ips {
			addr, err := netip.ParseAddr(ip.Name)
			if err != nil {
				logger.Info("[SHOULD NOT HAPPEN] unexpected error parsing IPAddress", "IPAddress", ip.Name, "error", err)
				continue
			}
			holders := c.serviceCIDRsContaining(addr)
			if len(holders) == 1 && holders[0].Name == cidr.Name {
				logger.Info("Deleting ServiceCIDR blocked by IP address", "IPAddress", addr.String())
				return false, nil
			}
		}
	}
	logger.Info("Deleting ServiceCIDR no longer have orphan IPs", "ServiceCIDR", klog.KObj(cidr))
	return true, nil
}

// prefixes parses the ServiceCIDR's ranges, skipping any that do not
// parse (the apiserver validates them).
func prefixes(cidr *networkingv1.ServiceCIDR) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range cidr.Spec.CIDRs {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// matchingServiceCIDRs returns the cached ServiceCIDRs with a range
// matching match, once per matching range.
func (c *Controller) matchingServiceCIDRs(match func(netip.Prefix) bool) []*networkingv1.ServiceCIDR {
	all, err := c.serviceCIDRLister.List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*networkingv1.ServiceCIDR
	for _, cidr := range all {
		for _, p := range prefixes(cidr) {
			if match(p) {
				out = append(out, cidr)
			}
		}
	}
	return out
}

// serviceCIDRsContaining returns the ServiceCIDRs that could have
// allocated addr: the network address, and the broadcast address of an
// IPv4 range, are never allocated.
func (c *Controller) serviceCIDRsContaining(addr netip.Addr) []*networkingv1.ServiceCIDR {
	return c.matchingServiceCIDRs(func(p netip.Prefix) bool {
		return allocatable(p, addr)
	})
}

func allocatable(p netip.Prefix, addr netip.Addr) bool {
	p = p.Masked()
	if !p.Contains(addr) || p.Addr() == addr {
		return false
	}
	return !addr.Is4() || addr != lastAddr(p)
}

// lastAddr returns the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for bit := p.Bits(); bit < len(b)*8; bit++ {
		b[bit/8] |= 0x80 >> (bit % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func (c *Controller) addFinalizer(ctx context.Context, cidr *networkingv1.ServiceCIDR) error {
	if slices.Contains(cidr.Finalizers, ServiceCIDRProtectionFinalizer) {
		return nil
	}
	// A strategic merge patch adds to the finalizers others may hold.
	patch := map[string]interface{}{
		"metadata": map[string]interface{}{"finalizers": []string{ServiceCIDRProtectionFinalizer}},
	}
	if err := c.patch(ctx, cidr.Name, patch); err != nil {
		return err
	}
	klog.FromContext(ctx).V(4).Info("Added protection finalizer to ServiceCIDR", "ServiceCIDR", cidr.Name)
	return nil
}

func (c *Controller) removeFinalizer(ctx context.Context, cidr *networkingv1.ServiceCIDR) error {
	if !slices.Contains(cidr.Finalizers, ServiceCIDRProtectionFinalizer) {
		return nil
	}
	patch := map[string]interface{}{
		"metadata": map[string]interface{}{"$deleteFromPrimitiveList/finalizers": []string{ServiceCIDRProtectionFinalizer}},
	}
	if err := c.patch(ctx, cidr.Name, patch); err != nil {
		return err
	}
	klog.FromContext(ctx).V(4).Info("Removed protection finalizer from ServiceCIDRs", "ServiceCIDR", cidr.Name)
	return nil
}

// patch sends a strategic merge patch; a ServiceCIDR gone meanwhile needs
// nothing more.
func (c *Controller) patch(ctx context.Context, name string, patch map[string]interface{}) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.client.NetworkingV1().ServiceCIDRs().Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// setCondition applies cond to the status unless the ServiceCIDR already
// has it with the same status, reason and message.
func (c *Controller) setCondition(ctx context.Context, cidr *networkingv1.ServiceCIDR, cond metav1.Condition) error {
	logger := klog.FromContext(ctx)
	if cur := apimeta.FindStatusCondition(cidr.Status.Conditions, cond.Type); cur != nil &&
		cur.Status == cond.Status && cur.Reason == cond.Reason && cur.Message == cond.Message {
		logger.V(4).Info("ServiceCIDR condition already up to date", "ServiceCIDR", cidr.Name, "conditionType", cond.Type)
		return nil
	}
	logger.V(2).Info("Updating ServiceCIDR condition", "ServiceCIDR", cidr.Name, "conditionType", cond.Type, "newStatus", cond.Status, "newReason", cond.Reason)
	apply := networkingv1apply.ServiceCIDR(cidr.Name).WithStatus(networkingv1apply.ServiceCIDRStatus().WithConditions(
		metav1apply.Condition().
			WithType(cond.Type).
			WithStatus(cond.Status).
			WithReason(cond.Reason).
			WithMessage(cond.Message).
			WithLastTransitionTime(metav1.NewTime(c.clock.Now()))))
	_, err := c.client.NetworkingV1().ServiceCIDRs().ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: controllerName, Force: true})
	return err
}
