package endpointslice

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"

	esutil "github.com/kcmclone/kube-controller-manager/pkg/controller/util/endpointslice"
)

// reconciler turns (Service, selected pods, existing slices) into creates,
// updates and deletes of EndpointSlices, keeping churn low: endpoints are
// updated in place, new endpoints fill slices already being written, then
// the unchanged slice they fit best, and only then new slices.
type reconciler struct {
	client                        clientset.Interface
	nodeLister                    corelisters.NodeLister
	maxEndpointsPerSlice          int32
	tracker                       *endpointsliceutil.EndpointSliceTracker
	metrics                       *metricsCache
	controllerName                string
	preferSameTrafficDistribution bool
	topology                      *topologyCache
	eventRecorder                 record.EventRecorder
}

// reconcile writes the slices of one Service, per address type, and
// deletes slices of address types the Service no longer has.
func (r *reconciler) reconcile(ctx context.Context, service *v1.Service, pods []*v1.Pod, existing []*discovery.EndpointSlice, triggerTime time.Time) error {
	logger := klog.FromContext(ctx)
	var errs []error
	var toDelete []*discovery.EndpointSlice
	byType := map[discovery.AddressType][]*discovery.EndpointSlice{}
	types := addressTypesForService(logger, service)
	for _, s := range existing {
		if !types.Has(s.AddressType) {
			r.topology.removeHints(service.Namespace+"/"+service.Name, s.AddressType)
			toDelete = append(toDelete, s)
			continue
		}
		byType[s.AddressType] = append(byType[s.AddressType], s)
	}
	// Deterministic order keeps tests and logs stable.
	for _, t := range sets.List(types) {
		if err := r.reconcileByAddressType(ctx, service, pods, byType[t], triggerTime, t); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range toDelete {
		if err := r.client.DiscoveryV1().EndpointSlices(service.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("error deleting %s EndpointSlice for Service %s/%s: %w", s.Name, service.Namespace, service.Name, err))
			continue
		}
		r.tracker.ExpectDeletion(s)
		endpointSliceChanges.WithLabelValues("delete").Inc()
	}
	return utilerrors.NewAggregate(errs)
}

func (r *reconciler) reconcileByAddressType(ctx context.Context, service *v1.Service, pods []*v1.Pod, existing []*discovery.EndpointSlice, triggerTime time.Time, addressType discovery.AddressType) error {
	logger := klog.FromContext(ctx)
	var errs []error
	var toCreate, toUpdate, toDelete []*discovery.EndpointSlice

	// Slices not owned by this Service (same name, different UID: a
	// recreated Service) are replaced.
	existingByPorts := map[portMapKey][]*discovery.EndpointSlice{}
	for _, s := range existing {
		if ownedBy(s, service) {
			k := newPortMapKey(s.Ports)
			existingByPorts[k] = append(existingByPorts[k], s)
		} else {
			toDelete = append(toDelete, s)
		}
	}

	desiredPorts := map[portMapKey][]discovery.EndpointPort{}
	desiredByPorts := map[portMapKey]esutil.EndpointSet{}
	for _, pod := range pods {
		if !endpointsliceutil.ShouldPodBeInEndpoints(pod, true) {
			continue
		}
		ports := endpointPorts(logger, service, pod)
		k := newPortMapKey(ports)
		if _, ok := desiredByPorts[k]; !ok {
			desiredByPorts[k] = esutil.EndpointSet{}
			desiredPorts[k] = ports
		}
		node, err := r.nodeLister.Get(pod.Spec.NodeName)
		if err != nil {
			if !apierrors.IsNotFound(err) {
				return err
			}
			if !service.Spec.PublishNotReadyAddresses {
				logger.Info("skipping Pod for Service, Node not found", "pod", klog.KObj(pod), "service", klog.KObj(service), "node", klog.KRef("", pod.Spec.NodeName))
				errs = append(errs, fmt.Errorf("skipping Pod %s for Service %s/%s: Node %s Not Found", pod.Name, service.Namespace, service.Name, pod.Spec.NodeName))
				continue
			}
			node = nil
		}
		ep := podToEndpoint(pod, node, service, addressType)
		if len(ep.Addresses) > 0 {
			desiredByPorts[k].Insert(&ep)
		}
	}

	efficiency := map[portMapKey]esutil.PortMapEfficiency{}
	added, removed := 0, 0
	// Sorted keys: deterministic order of creates.
	keys := make([]string, 0, len(desiredByPorts))
	for k := range desiredByPorts {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	for _, ks := range keys {
		k := portMapKey(ks)
		desired := desiredByPorts[k]
		n := len(desired)
		c, u, d, a, rm := r.reconcileByPortMapping(logger, service, existingByPorts[k], desired, desiredPorts[k], addressType)
		added += a
		removed += rm
		efficiency[k] = esutil.PortMapEfficiency{Endpoints: n, Slices: len(existingByPorts[k]) + len(c) - len(d)}
		toCreate = append(toCreate, c...)
		toUpdate = append(toUpdate, u...)
		toDelete = append(toDelete, d...)
	}
	for k, slices := range existingByPorts {
		if _, ok := desiredByPorts[k]; !ok {
			toDelete = append(toDelete, slices...)
		}
	}

	// A Service with no endpoints keeps exactly one empty placeholder slice.
	if len(existing) == len(toDelete) && len(toCreate) == 0 {
		placeholder := newEndpointSlice(logger, service, []discovery.EndpointPort{}, addressType, r.controllerName)
		if len(toDelete) == 1 && isPlaceholderFor(toDelete[0], placeholder) {
			toDelete = toDelete[:0]
		} else {
			toCreate = append(toCreate, placeholder)
		}
		efficiency[newPortMapKey(placeholder.Ports)] = esutil.PortMapEfficiency{Endpoints: 0, Slices: 1}
	}

	endpointsAddedPerSync.WithLabelValues().Observe(float64(added))
	endpointsRemovedPerSync.WithLabelValues().Observe(float64(removed))
	nn := types.NamespacedName{Namespace: service.Namespace, Name: service.Name}
	r.metrics.updateService(nn, efficiency)

	svcKey := service.Namespace + "/" + service.Name
	var events []*topologyEvent
	useTrafficDist := r.validTrafficDistribution(service.Spec.TrafficDistribution) && !hintsEnabled(service.Annotations)
	if hintsEnabled(service.Annotations) {
		toCreate, toUpdate, events = r.topology.addHints(logger, svcKey, addressType, toCreate, toUpdate, unchangedSlices(existing, toUpdate, toDelete))
	} else {
		if r.topology.hasPopulatedHints(svcKey) {
			logger.Info("TopologyAwareHints annotation has changed, removing hints", "serviceKey", svcKey, "addressType", addressType)
			events = append(events, hintsDisabledEvent(withAddressType(msgTopologyAwareHintsDisabled, addressType)))
		}
		r.topology.removeHints(svcKey, addressType)
		if !useTrafficDist {
			toCreate, toUpdate = removeHints(toCreate, toUpdate, unchangedSlices(existing, toUpdate, toDelete))
		}
	}
	if useTrafficDist {
		r.metrics.updateTrafficDistribution(nn, service.Spec.TrafficDistribution)
		toCreate, toUpdate = reconcileCloseHints(*service.Spec.TrafficDistribution, toCreate, toUpdate, unchangedSlices(existing, toUpdate, toDelete))
	} else {
		r.metrics.updateTrafficDistribution(nn, nil)
	}

	if err := r.finalize(ctx, service, toCreate, toUpdate, toDelete, triggerTime); err != nil {
		errs = append(errs, err)
	}
	for _, ev := range events {
		r.eventRecorder.Event(service, ev.eventType, ev.reason, ev.message)
	}
	return utilerrors.NewAggregate(errs)
}

// isPlaceholderFor reports whether an existing slice is equivalent to the
// empty placeholder (same namespace, labels, owner, ports, type, no endpoints).
func isPlaceholderFor(existing, placeholder *discovery.EndpointSlice) bool {
	if existing.Namespace != placeholder.Namespace || existing.AddressType != placeholder.AddressType {
		return false
	}
	if len(existing.Endpoints) != 0 || len(existing.Ports) != 0 {
		return false
	}
	if len(existing.Labels) != len(placeholder.Labels) {
		return false
	}
	for k, v := range placeholder.Labels {
		if ev, ok := existing.Labels[k]; !ok || ev != v {
			return false
		}
	}
	if len(existing.OwnerReferences) != len(placeholder.OwnerReferences) {
		return false
	}
	for i := range existing.OwnerReferences {
		if existing.OwnerReferences[i].String() != placeholder.OwnerReferences[i].String() {
			return false
		}
	}
	return true
}

// reconcileByPortMapping computes the slice changes for the endpoints
// sharing one set of ports. It returns slices to create, update and
// delete, and the numbers of endpoints added and removed.
func (r *reconciler) reconcileByPortMapping(logger klog.Logger, service *v1.Service, existing []*discovery.EndpointSlice, desired esutil.EndpointSet, ports []discovery.EndpointPort, addressType discovery.AddressType) ([]*discovery.EndpointSlice, []*discovery.EndpointSlice, []*discovery.EndpointSlice, int, int) {
	max := int(r.maxEndpointsPerSlice)
	byName := map[string]*discovery.EndpointSlice{}
	unchangedNames := sets.New[string]()
	updateNames := sets.New[string]()
	deleteNames := sets.New[string]()
	removed := 0

	// 1. Keep the endpoints still desired where they are, refreshed.
	for _, s := range existing {
		byName[s.Name] = s
		kept := []discovery.Endpoint{}
		changed := false
		for i := range s.Endpoints {
			cur := &s.Endpoints[i]
			want := desired.Get(cur)
			if want == nil {
				continue
			}
			kept = append(kept, *want)
			if !esutil.EqualBeyondKey(want, cur) {
				changed = true
			}
			desired.Remove(cur)
		}
		labels, labelsChanged := desiredSliceLabels(logger, s, service, r.controllerName)
		switch {
		case changed || len(kept) != len(s.Endpoints):
			removed += len(s.Endpoints) - len(kept)
			if len(kept) == 0 {
				deleteNames.Insert(s.Name)
				continue
			}
			c := s.DeepCopy()
			c.Endpoints = kept
			c.Labels = labels
			byName[s.Name] = c
			updateNames.Insert(s.Name)
		case labelsChanged:
			c := s.DeepCopy()
			c.Labels = labels
			byName[s.Name] = c
			updateNames.Insert(s.Name)
		default:
			unchangedNames.Insert(s.Name)
		}
	}
	added := len(desired)

	// 2. New endpoints first go into slices being updated anyway, fullest first.
	if len(desired) > 0 && updateNames.Len() > 0 {
		slices := make([]*discovery.EndpointSlice, 0, updateNames.Len())
		for _, n := range sets.List(updateNames) {
			slices = append(slices, byName[n])
		}
		sort.SliceStable(slices, func(i, j int) bool { return len(slices[i].Endpoints) > len(slices[j].Endpoints) })
		for _, s := range slices {
			for len(desired) > 0 && len(s.Endpoints) < max {
				s.Endpoints = append(s.Endpoints, *desired.PopAny())
			}
		}
	}

	// 3. The rest fill the unchanged slice they fit best, else new slices.
	var toCreate []*discovery.EndpointSlice
	for len(desired) > 0 {
		var fill *discovery.EndpointSlice
		if len(desired) < max && unchangedNames.Len() > 0 {
			candidates := make([]*discovery.EndpointSlice, 0, unchangedNames.Len())
			for _, n := range sets.List(unchangedNames) {
				candidates = append(candidates, byName[n])
			}
			fill = sliceToFill(candidates, len(desired), max)
		}
		if fill == nil {
			fill = newEndpointSlice(logger, service, ports, addressType, r.controllerName)
		} else {
			fill = fill.DeepCopy()
			byName[fill.Name] = fill
		}
		for len(desired) > 0 && len(fill.Endpoints) < max {
			fill.Endpoints = append(fill.Endpoints, *desired.PopAny())
		}
		if fill.Name != "" {
			updateNames.Insert(fill.Name)
			unchangedNames.Delete(fill.Name)
		} else {
			toCreate = append(toCreate, fill)
		}
	}

	var toUpdate, toDelete []*discovery.EndpointSlice
	for _, n := range sets.List(updateNames) {
		toUpdate = append(toUpdate, byName[n])
	}
	for _, n := range sets.List(deleteNames) {
		toDelete = append(toDelete, byName[n])
	}
	return toCreate, toUpdate, toDelete, added, removed
}

// finalize writes the changes. A slice to delete and a slice to create of
// the same type are merged into an update of the old slice (fewer watch
// events than delete+create). Nothing is created for a Service being deleted.
func (r *reconciler) finalize(ctx context.Context, service *v1.Service, toCreate, toUpdate, toDelete []*discovery.EndpointSlice, triggerTime time.Time) error {
	for i := 0; i < len(toDelete) && len(toCreate) > 0; {
		old := toDelete[i]
		last := toCreate[len(toCreate)-1]
		if old.AddressType == last.AddressType && ownedBy(old, service) {
			last.Name = old.Name
			toCreate = toCreate[:len(toCreate)-1]
			toUpdate = append(toUpdate, last)
			toDelete = append(toDelete[:i], toDelete[i+1:]...)
			continue
		}
		i++
	}

	slices := r.client.DiscoveryV1().EndpointSlices(service.Namespace)
	if service.DeletionTimestamp == nil {
		for _, s := range toCreate {
			setTriggerTime(s, triggerTime)
			created, err := slices.Create(ctx, s, metav1.CreateOptions{})
			if err != nil {
				if apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
					return nil
				}
				return fmt.Errorf("failed to create EndpointSlice for Service %s/%s: %w", service.Namespace, service.Name, err)
			}
			r.tracker.Update(created)
			endpointSliceChanges.WithLabelValues("create").Inc()
		}
	}
	for _, s := range toUpdate {
		setTriggerTime(s, triggerTime)
		updated, err := slices.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("failed to update %s EndpointSlice for Service %s/%s: %w", s.Name, service.Namespace, service.Name, err)
		}
		r.tracker.Update(updated)
		endpointSliceChanges.WithLabelValues("update").Inc()
	}
	for _, s := range toDelete {
		if err := slices.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("failed to delete %s EndpointSlice for Service %s/%s: %w", s.Name, service.Namespace, service.Name, err)
		}
		r.tracker.ExpectDeletion(s)
		endpointSliceChanges.WithLabelValues("delete").Inc()
	}

	topology := "Disabled"
	if hintsEnabled(service.Annotations) {
		topology = "Auto"
	}
	td := ""
	if r.validTrafficDistribution(service.Spec.TrafficDistribution) && !hintsEnabled(service.Annotations) {
		td = *service.Spec.TrafficDistribution
	}
	endpointSlicesChangedPerSync.WithLabelValues(topology, td).Observe(float64(len(toCreate) + len(toUpdate) + len(toDelete)))
	return nil
}

// managedByController reports whether this controller manages the slice.
func (r *reconciler) managedByController(s *discovery.EndpointSlice) bool {
	return s.Labels[discovery.LabelManagedBy] == r.controllerName
}
