package util

import (
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"reflect"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/dump"
)

// PodProjectionKey is what the controllers queue for a pod event: just
// enough of the pod to find the Services whose endpoints may have changed.
// Keys are queued as pointers, so every event is its own queue item.
type PodProjectionKey struct {
	Namespace string
	// Labels are the pod's current labels.
	Labels labels.Set
	// OldLabels is set only when an update changed the labels (or the
	// hostname/subdomain, which changes DNS records the same way).
	OldLabels labels.Set
	// PodChanged reports a change of readiness, IPs or deletion state.
	PodChanged bool
}

// GetPodUpdateProjectionKey maps a pod add (old nil), delete (cur nil) or
// update to a key, or nil when the update cannot change any endpoints.
func GetPodUpdateProjectionKey(oldObj, curObj interface{}) *PodProjectionKey {
	cur := podFromObject(curObj)
	old := podFromObject(oldObj)
	switch {
	case cur == nil && old == nil:
		utilruntime.HandleError(fmt.Errorf("pod event without old or new pod, ignoring"))
		return nil
	case old == nil:
		return &PodProjectionKey{Namespace: cur.Namespace, Labels: labels.Set(cur.Labels)}
	case cur == nil:
		return &PodProjectionKey{Namespace: old.Namespace, Labels: labels.Set(old.Labels)}
	}
	if cur.ResourceVersion == old.ResourceVersion {
		// A periodic resync: nothing changed.
		return nil
	}
	podChanged, labelsChanged := podEndpointsChanged(old, cur)
	if !podChanged && !labelsChanged {
		return nil
	}
	key := &PodProjectionKey{Namespace: cur.Namespace, Labels: labels.Set(cur.Labels)}
	if labelsChanged {
		key.OldLabels = labels.Set(old.Labels)
		key.PodChanged = podChanged
	}
	return key
}

// GetServicesToUpdate returns the keys of the Services a pod event affects.
// When the labels changed, a Service selecting both old and new labels only
// needs a sync if the pod itself changed too.
func GetServicesToUpdate(lister corelisters.ServiceLister, key *PodProjectionKey) (sets.Set[string], error) {
	if key == nil {
		return nil, nil
	}
	cur, err := servicesSelecting(lister, key.Namespace, key.Labels)
	if err != nil {
		return nil, err
	}
	if key.OldLabels == nil {
		return cur, nil
	}
	old, err := servicesSelecting(lister, key.Namespace, key.OldLabels)
	if err != nil {
		return nil, err
	}
	if key.PodChanged {
		return cur.Union(old), nil
	}
	return cur.SymmetricDifference(old), nil
}

func servicesSelecting(lister corelisters.ServiceLister, namespace string, podLabels labels.Set) (sets.Set[string], error) {
	services, err := lister.Services(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := sets.New[string]()
	for _, svc := range services {
		if svc.Spec.Selector == nil {
			continue
		}
		if labels.ValidatedSetSelector(svc.Spec.Selector).Matches(podLabels) {
			out.Insert(svc.Namespace + "/" + svc.Name)
		}
	}
	return out, nil
}

// podEndpointsChanged reports (pod fields that matter changed, labels or
// hostname/subdomain changed).
func podEndpointsChanged(old, cur *v1.Pod) (bool, bool) {
	labelsChanged := !reflect.DeepEqual(cur.Labels, old.Labels) ||
		cur.Spec.Hostname != old.Spec.Hostname || cur.Spec.Subdomain != old.Spec.Subdomain
	// Pointer comparison as upstream: any new DeletionTimestamp object counts.
	if cur.DeletionTimestamp != old.DeletionTimestamp {
		return true, labelsChanged
	}
	if IsPodReady(old) != IsPodReady(cur) {
		return true, labelsChanged
	}
	if len(old.Status.PodIPs) != len(cur.Status.PodIPs) {
		return true, labelsChanged
	}
	for i := range old.Status.PodIPs {
		if old.Status.PodIPs[i].IP != cur.Status.PodIPs[i].IP {
			return true, labelsChanged
		}
	}
	return false, labelsChanged
}

func podFromObject(obj interface{}) *v1.Pod {
	if obj == nil {
		return nil
	}
	if pod, ok := obj.(*v1.Pod); ok {
		return pod
	}
	tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("couldn't get object from tombstone %#v", obj))
		return nil
	}
	pod, ok := tombstone.Obj.(*v1.Pod)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("tombstone contained object that is not a Pod: %#v", obj))
		return nil
	}
	return pod
}

// IsPodReady reports whether the pod's Ready condition is True.
func IsPodReady(pod *v1.Pod) bool {
	c := podReadyCondition(&pod.Status)
	return c != nil && c.Status == v1.ConditionTrue
}

func podReadyCondition(status *v1.PodStatus) *v1.PodCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == v1.PodReady {
			return &status.Conditions[i]
		}
	}
	return nil
}

// ShouldPodBeInEndpoints reports whether a pod is a candidate endpoint: not
// terminal, with an IP, and (unless includeTerminating) not being deleted.
func ShouldPodBeInEndpoints(pod *v1.Pod, includeTerminating bool) bool {
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return false
	}
	if pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0 {
		return false
	}
	if !includeTerminating && pod.DeletionTimestamp != nil {
		return false
	}
	return true
}

// ShouldSetHostname reports whether the endpoint gets the pod's hostname:
// the pod sets one and its subdomain is this Service in the same namespace.
func ShouldSetHostname(pod *v1.Pod, svc *v1.Service) bool {
	return pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && svc.Namespace == pod.Namespace
}

// FindPort resolves a Service port's targetPort for a pod: a number is used
// as is, a name is looked up among the pod's container ports with the same
// protocol (then among sidecar init containers).
func FindPort(pod *v1.Pod, svcPort *v1.ServicePort) (int, error) {
	target := svcPort.TargetPort
	switch target.Type {
	case intstr.Int:
		return target.IntValue(), nil
	case intstr.String:
		for _, c := range pod.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name == target.StrVal && p.Protocol == svcPort.Protocol {
					return int(p.ContainerPort), nil
				}
			}
		}
		for _, c := range pod.Spec.InitContainers {
			if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
				continue
			}
			for _, p := range c.Ports {
				if p.Name == target.StrVal && p.Protocol == svcPort.Protocol {
					return int(p.ContainerPort), nil
				}
			}
		}
	}
	return 0, fmt.Errorf("no suitable port for manifest: %s", pod.UID)
}

// DeepHashString hashes any value (FNV-128a over its dump) to hex.
func DeepHashString(obj interface{}) string {
	h := fnv.New128a()
	fmt.Fprint(h, dump.ForHash(obj))
	return hex.EncodeToString(h.Sum(nil))
}
