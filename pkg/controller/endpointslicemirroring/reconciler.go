package endpointslicemirroring

import (
	"context"
	"fmt"
	"maps"
	"sort"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/endpoint"
	esutil "github.com/kcmclone/kube-controller-manager/pkg/controller/util/endpointslice"
)

// reconciler turns an Endpoints object and the slices mirrored from it so
// far into creates, updates and deletes. Each subset becomes (at most) one
// slice per address type, so a slice is simply rewritten when anything in
// it changed and left alone otherwise.
type reconciler struct {
	client                clientset.Interface
	tracker               *endpointsliceutil.EndpointSliceTracker
	eventRecorder         record.EventRecorder
	maxEndpointsPerSubset int32
	metrics               *metricsCache
}

// desiredState is the mirrored form of an Endpoints object: endpoints and
// ports per port mapping.
type desiredState struct {
	endpoints map[portMapKey]esutil.EndpointSet
	ports     map[portMapKey][]discovery.EndpointPort
}

type slicesByAction struct {
	toCreate, toUpdate, toDelete []*discovery.EndpointSlice
}

func (s *slicesByAction) append(o slicesByAction) {
	s.toCreate = append(s.toCreate, o.toCreate...)
	s.toUpdate = append(s.toUpdate, o.toUpdate...)
	s.toDelete = append(s.toDelete, o.toDelete...)
}

type totalsByAction struct {
	added, updated, removed int
}

func (t *totalsByAction) add(o totalsByAction) {
	t.added += o.added
	t.updated += o.updated
	t.removed += o.removed
}

// reconcile makes the mirrored slices of ep match it.
func (r *reconciler) reconcile(ctx context.Context, ep *endpoints, existing []*discovery.EndpointSlice) error {
	d := r.desired(klog.FromContext(ctx), ep)

	existingByKey := map[portMapKey][]*discovery.EndpointSlice{}
	for _, s := range existing {
		k := newPortMapKey(s.Ports, s.AddressType)
		existingByKey[k] = append(existingByKey[k], s)
	}

	var plan slicesByAction
	var totals totalsByAction
	eff := map[portMapKey]esutil.PortMapEfficiency{}
	for k, want := range d.endpoints {
		numEndpoints := len(want)
		p, t := r.reconcilePortMapping(ep, existingByKey[k], want, d.ports[k], k.addressType)
		plan.append(p)
		totals.add(t)
		eff[k] = esutil.PortMapEfficiency{
			Endpoints: numEndpoints,
			Slices:    len(existingByKey[k]) + len(p.toCreate) - len(p.toDelete),
		}
	}
	// Port mappings no subset has anymore.
	for k, slices := range existingByKey {
		if _, ok := d.endpoints[k]; !ok {
			plan.toDelete = append(plan.toDelete, slices...)
		}
	}

	endpointsAddedPerSync.WithLabelValues().Observe(float64(totals.added))
	endpointsUpdatedPerSync.WithLabelValues().Observe(float64(totals.updated))
	endpointsRemovedPerSync.WithLabelValues().Observe(float64(totals.removed))
	r.metrics.update(types.NamespacedName{Namespace: ep.Namespace, Name: ep.Name}, eff)

	return r.finalize(ctx, ep, plan)
}

// desired computes the mirrored endpoints of ep. The subsets are repacked
// first (merging subsets that list the same addresses), then each keeps at
// most maxEndpointsPerSubset valid addresses, ready ones first; what is
// left out is reported as events on the Endpoints object.
func (r *reconciler) desired(logger klog.Logger, ep *endpoints) desiredState {
	d := desiredState{
		endpoints: map[portMapKey]esutil.EndpointSet{},
		ports:     map[portMapKey][]discovery.EndpointPort{},
	}
	limit := int(r.maxEndpointsPerSubset)
	invalid, skipped := 0, 0
	for _, subset := range endpoint.RepackSubsets(ep.Subsets) {
		ports := toSlicePorts(subset.Ports)
		keys := map[discovery.AddressType]portMapKey{}
		// Both families get a (possibly empty) entry so that slices of a
		// family the subset no longer has are deleted.
		for _, t := range []discovery.AddressType{discovery.AddressTypeIPv4, discovery.AddressTypeIPv6} {
			k := newPortMapKey(ports, t)
			keys[t] = k
			if _, ok := d.endpoints[k]; !ok {
				d.endpoints[k] = esutil.EndpointSet{}
			}
			d.ports[k] = ports
		}

		added := 0
		addAll := func(addrs []endpointAddress, ready bool) {
			for _, addr := range addrs {
				if added >= limit {
					return
				}
				e, addressType, ok := addressToEndpoint(addr, ready)
				if !ok {
					invalid++
					logger.Info("Address in Endpoints is not a valid IP, it will not be mirrored to an EndpointSlice", "endpoints", klog.KObj(ep), "IP", addr.IP)
					continue
				}
				d.endpoints[keys[addressType]].Insert(e)
				added++
			}
		}
		addAll(subset.Addresses, true)
		addAll(subset.NotReadyAddresses, false)
		skipped += len(subset.Addresses) + len(subset.NotReadyAddresses) - added
	}

	// Counts both invalid addresses and those over the limit.
	addressesSkippedPerSync.WithLabelValues().Observe(float64(skipped))
	if invalid > 0 {
		r.eventRecorder.Eventf(ep, v1.EventTypeWarning, InvalidIPAddress,
			"Skipped %d invalid IP addresses when mirroring to EndpointSlices", invalid)
	}
	if skipped > invalid {
		logger.Info("Addresses in Endpoints were skipped due to exceeding MaxEndpointsPerSubset", "skippedAddresses", skipped, "endpoints", klog.KObj(ep))
		r.eventRecorder.Eventf(ep, v1.EventTypeWarning, TooManyAddressesToMirror,
			"A max of %d addresses can be mirrored to EndpointSlices per Endpoints subset. %d addresses were skipped", r.maxEndpointsPerSubset, skipped)
	}
	return d
}

// reconcilePortMapping plans the slices of one port mapping: none when no
// endpoints are wanted, else exactly one. The first existing slice is kept
// (untouched when it already matches, rewritten otherwise) and any others
// are deleted.
func (r *reconciler) reconcilePortMapping(ep *endpoints, existing []*discovery.EndpointSlice, want esutil.EndpointSet,
	ports []discovery.EndpointPort, addressType discovery.AddressType) (slicesByAction, totalsByAction) {
	var plan slicesByAction
	var totals totalsByAction
	if len(want) == 0 {
		plan.toDelete = existing
		for _, s := range existing {
			totals.removed += len(s.Endpoints)
		}
		return plan, totals
	}

	name := ""
	if len(existing) == 0 {
		totals.added = len(want)
	} else {
		// Lister order is random; keep the choice stable across syncs.
		existing = append([]*discovery.EndpointSlice(nil), existing...)
		sort.Slice(existing, func(i, j int) bool { return existing[i].Name < existing[j].Name })
		keep := existing[0]
		plan.toDelete = existing[1:]
		totals = totalChanges(keep, want)
		if totals == (totalsByAction{}) &&
			maps.Equal(keep.Labels, desiredLabels(ep)) &&
			maps.Equal(keep.Annotations, desiredAnnotations(ep)) &&
			!ownerRecreated(ep, keep) {
			// A slice we did not write (e.g. after a restart) must still be
			// tracked, or its later changes would go unnoticed.
			if !r.tracker.Has(keep) {
				r.tracker.Update(keep)
			}
			return plan, totals
		}
		name = keep.Name
	}

	slice := newEndpointSlice(ep, ports, addressType, name)
	for _, e := range want.SortedList() {
		if len(slice.Endpoints) >= int(r.maxEndpointsPerSubset) {
			break
		}
		slice.Endpoints = append(slice.Endpoints, e)
	}
	if name == "" {
		plan.toCreate = append(plan.toCreate, slice)
	} else {
		plan.toUpdate = append(plan.toUpdate, slice)
	}
	return plan, totals
}

// totalChanges counts the endpoints a slice must gain, change and lose to
// hold exactly want.
func totalChanges(slice *discovery.EndpointSlice, want esutil.EndpointSet) totalsByAction {
	var t totalsByAction
	matched := 0
	for i := range slice.Endpoints {
		have := &slice.Endpoints[i]
		w := want.Get(have)
		if w == nil {
			t.removed++
			continue
		}
		matched++
		if !esutil.EqualBeyondKey(w, have) {
			t.updated++
		}
	}
	t.added = len(want) - matched
	return t
}

// recycleSlices turns a create plus a delete of the same address type into
// an update of the slice that would have been deleted: one write instead
// of two, and consumers see the slice change rather than churn.
func recycleSlices(plan *slicesByAction) {
	var creates []*discovery.EndpointSlice
	for _, c := range plan.toCreate {
		recycled := false
		for i, d := range plan.toDelete {
			if d.AddressType == c.AddressType {
				c.Name, c.GenerateName = d.Name, ""
				plan.toUpdate = append(plan.toUpdate, c)
				plan.toDelete = append(plan.toDelete[:i:i], plan.toDelete[i+1:]...)
				recycled = true
				break
			}
		}
		if !recycled {
			creates = append(creates, c)
		}
	}
	plan.toCreate = creates
}

// finalize performs the planned writes, recording each in the tracker so
// that a cache that has not caught up with them is recognised.
func (r *reconciler) finalize(ctx context.Context, ep *endpoints, plan slicesByAction) error {
	recycleSlices(&plan)
	client := r.client.DiscoveryV1().EndpointSlices(ep.Namespace)

	// An Endpoints object being deleted gets no new slices.
	if ep.DeletionTimestamp == nil {
		for _, s := range plan.toCreate {
			created, err := client.Create(ctx, s, metav1.CreateOptions{})
			if err != nil {
				// Creates keep failing in a terminating namespace; the
				// namespace deletion removes everything anyway.
				if apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
					return nil
				}
				return fmt.Errorf("failed to create EndpointSlice for Endpoints %s/%s: %w", ep.Namespace, ep.Name, err)
			}
			r.tracker.Update(created)
			endpointSliceChanges.WithLabelValues("create").Inc()
		}
	}
	for _, s := range plan.toUpdate {
		updated, err := client.Update(ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("failed to update %s EndpointSlice for Endpoints %s/%s: %w", s.Name, ep.Namespace, ep.Name, err)
		}
		r.tracker.Update(updated)
		endpointSliceChanges.WithLabelValues("update").Inc()
	}
	for _, s := range plan.toDelete {
		if err := client.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete %s EndpointSlice for Endpoints %s/%s: %w", s.Name, ep.Namespace, ep.Name, err)
		}
		r.tracker.ExpectDeletion(s)
		endpointSliceChanges.WithLabelValues("delete").Inc()
	}
	return nil
}

// deleteAll removes every slice mirrored for an Endpoints object that is
// gone or no longer mirrored, and its metrics.
func (r *reconciler) deleteAll(ctx context.Context, namespace, name string, slices []*discovery.EndpointSlice) error {
	r.metrics.delete(types.NamespacedName{Namespace: namespace, Name: name})
	var errs []error
	for _, s := range slices {
		err := r.client.DiscoveryV1().EndpointSlices(namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("error(s) deleting %d/%d EndpointSlices for %s/%s Endpoints, including: %w", len(errs), len(slices), namespace, name, errs[0])
	}
	return nil
}
