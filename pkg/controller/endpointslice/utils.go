package endpointslice

import (
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"
	utilnet "k8s.io/utils/net"
	"k8s.io/utils/ptr"

	esutil "github.com/kcmclone/kube-controller-manager/pkg/controller/util/endpointslice"
)

// portMapKey identifies a set of endpoint ports (order-independent). Pods
// resolving a Service's named target ports differently land in different
// slices, one group of slices per key.
type portMapKey string

func newPortMapKey(ports []discovery.EndpointPort) portMapKey {
	hashes := make([]string, 0, len(ports))
	for _, p := range ports {
		hashes = append(hashes, esutil.DeepHashString(p))
	}
	sort.Strings(hashes)
	return portMapKey(esutil.DeepHashString(hashes))
}

// podToEndpoint builds the endpoint of a pod for one address family.
func podToEndpoint(pod *v1.Pod, node *v1.Node, service *v1.Service, addressType discovery.AddressType) discovery.Endpoint {
	serving := endpointsliceutil.IsPodReady(pod)
	terminating := pod.DeletionTimestamp != nil
	// Ready means "serving and not terminating", unless the Service asks
	// for not-ready addresses to be published.
	ready := service.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := discovery.Endpoint{
		Addresses: endpointAddresses(pod.Status, addressType),
		Conditions: discovery.EndpointConditions{
			Ready:       &ready,
			Serving:     &serving,
			Terminating: &terminating,
		},
		TargetRef: &v1.ObjectReference{
			Kind:      "Pod",
			Namespace: pod.Namespace,
			Name:      pod.Name,
			UID:       pod.UID,
		},
	}
	if pod.Spec.NodeName != "" {
		ep.NodeName = ptr.To(pod.Spec.NodeName)
	}
	if node != nil && node.Labels[v1.LabelTopologyZone] != "" {
		ep.Zone = ptr.To(node.Labels[v1.LabelTopologyZone])
	}
	if endpointsliceutil.ShouldSetHostname(pod, service) {
		ep.Hostname = ptr.To(pod.Spec.Hostname)
	}
	return ep
}

// endpointAddresses returns the pod IPs of the given family.
func endpointAddresses(status v1.PodStatus, addressType discovery.AddressType) []string {
	addrs := []string{}
	for _, podIP := range status.PodIPs {
		ip := utilnet.ParseIPSloppy(podIP.IP)
		if ip == nil {
			continue
		}
		isV6 := utilnet.IsIPv6(ip)
		if (isV6 && addressType == discovery.AddressTypeIPv6) || (!isV6 && addressType == discovery.AddressTypeIPv4) {
			addrs = append(addrs, ip.String())
		}
	}
	return addrs
}

// endpointPorts resolves the Service's ports for a pod; ports whose named
// target the pod does not expose are left out.
func endpointPorts(logger klog.Logger, service *v1.Service, pod *v1.Pod) []discovery.EndpointPort {
	out := []discovery.EndpointPort{}
	if len(service.Spec.Ports) == 0 && service.Spec.ClusterIP == v1.ClusterIPNone {
		return out
	}
	for i := range service.Spec.Ports {
		sp := &service.Spec.Ports[i]
		num, err := esutil.FindPort(pod, sp)
		if err != nil {
			logger.V(4).Info("Failed to find port for service", "service", klog.KObj(service), "err", err)
			continue
		}
		out = append(out, discovery.EndpointPort{
			Name:        ptr.To(sp.Name),
			Port:        ptr.To(int32(num)),
			Protocol:    ptr.To(sp.Protocol),
			AppProtocol: sp.AppProtocol,
		})
	}
	return out
}

// newEndpointSlice returns an unsaved, empty slice for the Service.
func newEndpointSlice(logger klog.Logger, service *v1.Service, ports []discovery.EndpointPort, addressType discovery.AddressType, controllerName string) *discovery.EndpointSlice {
	slice := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Labels:       map[string]string{},
			GenerateName: esutil.SlicePrefix(service.Name),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         "v1",
				Kind:               "Service",
				Name:               service.Name,
				UID:                service.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
			Namespace: service.Namespace,
		},
		Ports:       ports,
		AddressType: addressType,
		Endpoints:   []discovery.Endpoint{},
	}
	slice.Labels, _ = desiredSliceLabels(logger, slice, service, controllerName)
	return slice
}

// ownedBy reports whether the slice has an owner reference to this
// Service (same UID).
func ownedBy(slice *discovery.EndpointSlice, svc *v1.Service) bool {
	for _, o := range slice.OwnerReferences {
		if o.UID == svc.UID && o.Kind == "Service" && o.APIVersion == "v1" {
			return true
		}
	}
	return false
}

// sliceToFill picks the slice that numEndpoints would fill most closely
// without overflowing it, or nil.
func sliceToFill(slices []*discovery.EndpointSlice, numEndpoints, maxEndpoints int) *discovery.EndpointSlice {
	bestDiff := maxEndpoints
	var best *discovery.EndpointSlice
	for _, s := range slices {
		diff := maxEndpoints - (numEndpoints + len(s.Endpoints))
		if diff >= 0 && diff < bestDiff {
			bestDiff, best = diff, s
			if diff == 0 {
				break
			}
		}
	}
	return best
}

// setTriggerTime sets or clears the last-change-trigger-time annotation.
func setTriggerTime(slice *discovery.EndpointSlice, triggerTime time.Time) {
	if slice.Annotations == nil {
		slice.Annotations = map[string]string{}
	}
	if triggerTime.IsZero() {
		delete(slice.Annotations, v1.EndpointsLastChangeTriggerTime)
		return
	}
	slice.Annotations[v1.EndpointsLastChangeTriggerTime] = triggerTime.UTC().Format(time.RFC3339Nano)
}

// ServiceControllerKey returns the namespace/name key of the Service a
// slice belongs to (from its kubernetes.io/service-name label).
func ServiceControllerKey(slice *discovery.EndpointSlice) (string, error) {
	if slice == nil {
		return "", fmt.Errorf("nil EndpointSlice passed to ServiceControllerKey()")
	}
	name := slice.Labels[discovery.LabelServiceName]
	if name == "" {
		return "", fmt.Errorf("EndpointSlice missing %s label", discovery.LabelServiceName)
	}
	return slice.Namespace + "/" + name, nil
}

func isReservedLabel(key string) bool {
	return key == discovery.LabelServiceName || key == discovery.LabelManagedBy || key == v1.IsHeadlessService
}

// desiredSliceLabels returns the labels a slice of the Service must carry
// (the Service's labels, minus reserved keys, plus service-name, managed-by
// and headless) and whether the copied Service labels differ from the
// slice's current ones.
func desiredSliceLabels(logger klog.Logger, slice *discovery.EndpointSlice, service *v1.Service, controllerName string) (map[string]string, bool) {
	current := map[string]string{}
	for k, v := range slice.Labels {
		if !isReservedLabel(k) {
			current[k] = v
		}
	}
	want := map[string]string{}
	for k, v := range service.Labels {
		if isReservedLabel(k) {
			logger.Info("Service using reserved endpoint slices label", "service", klog.KObj(service), "skipping", k, "label", v)
			continue
		}
		want[k] = v
	}
	changed := !apiequality.Semantic.DeepEqual(current, want)
	if !isServiceIPSet(service) {
		want[v1.IsHeadlessService] = ""
	}
	want[discovery.LabelServiceName] = service.Name
	want[discovery.LabelManagedBy] = controllerName
	return want, changed
}

func isServiceIPSet(service *v1.Service) bool {
	return service.Spec.ClusterIP != v1.ClusterIPNone && service.Spec.ClusterIP != ""
}

// addressTypesForService returns the address types the Service's slices
// use: from spec.ipFamilies, else from the ClusterIP's family, else (an
// old headless Service) both.
func addressTypesForService(logger klog.Logger, service *v1.Service) sets.Set[discovery.AddressType] {
	out := sets.New[discovery.AddressType]()
	for _, family := range service.Spec.IPFamilies {
		switch family {
		case v1.IPv4Protocol:
			out.Insert(discovery.AddressTypeIPv4)
		case v1.IPv6Protocol:
			out.Insert(discovery.AddressTypeIPv6)
		}
	}
	if out.Len() > 0 {
		return out
	}
	if isServiceIPSet(service) {
		t := discovery.AddressTypeIPv4
		if utilnet.IsIPv6String(service.Spec.ClusterIP) {
			t = discovery.AddressTypeIPv6
		}
		logger.V(2).Info("Service has no ipFamilies; using the family of its ClusterIP", "service", klog.KObj(service), "addressType", t)
		return out.Insert(t)
	}
	logger.V(2).Info("Headless Service has no ipFamilies; using both address types", "service", klog.KObj(service))
	return out.Insert(discovery.AddressTypeIPv4, discovery.AddressTypeIPv6)
}

// hintsEnabled reports whether the Service opts into topology-aware hints
// through the (deprecated) annotation.
func hintsEnabled(annotations map[string]string) bool {
	val, ok := annotations[v1.DeprecatedAnnotationTopologyAwareHints]
	if !ok {
		val, ok = annotations[v1.AnnotationTopologyMode]
		if !ok {
			return false
		}
	}
	return val == "Auto" || val == "auto"
}

// unchangedSlices returns the existing slices not being updated or deleted.
func unchangedSlices(existing, toUpdate, toDelete []*discovery.EndpointSlice) []*discovery.EndpointSlice {
	changed := sets.New[string]()
	for _, s := range toUpdate {
		changed.Insert(s.Name)
	}
	for _, s := range toDelete {
		changed.Insert(s.Name)
	}
	out := []*discovery.EndpointSlice{}
	for _, s := range existing {
		if !changed.Has(s.Name) {
			out = append(out, s)
		}
	}
	return out
}
