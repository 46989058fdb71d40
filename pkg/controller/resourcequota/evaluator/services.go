package evaluator

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	servicesGVR        = corev1.SchemeGroupVersion.WithResource("services")
	serviceObjectCount = ObjectCountQuotaResourceNameFor(servicesGVR.GroupResource())
)

var serviceResources = []corev1.ResourceName{
	serviceObjectCount,
	corev1.ResourceServices,
	corev1.ResourceServicesNodePorts,
	corev1.ResourceServicesLoadBalancers,
}

// serviceEvaluator counts services, node ports and load balancers.
type serviceEvaluator struct {
	list ListFuncByNamespace
}

// NewServiceEvaluator measures services listed through f.
func NewServiceEvaluator(f ListerForResourceFunc) Evaluator {
	return &serviceEvaluator{list: ListResourceUsingListerFunc(f, servicesGVR)}
}

func (s *serviceEvaluator) GroupResource() schema.GroupResource { return servicesGVR.GroupResource() }

func (s *serviceEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	return Intersection(input, serviceResources)
}

func (s *serviceEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	svc, ok := item.(*corev1.Service)
	if !ok {
		return corev1.ResourceList{}, fmt.Errorf("expected *v1.Service, got %T", item)
	}
	one := *resource.NewQuantity(1, resource.DecimalSI)
	out := corev1.ResourceList{
		serviceObjectCount:                   one,
		corev1.ResourceServices:              one,
		corev1.ResourceServicesLoadBalancers: {Format: resource.DecimalSI},
		corev1.ResourceServicesNodePorts:     {Format: resource.DecimalSI},
	}
	ports := int64(len(svc.Spec.Ports))
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		out[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(ports, resource.DecimalSI)
	case corev1.ServiceTypeLoadBalancer:
		// Node ports are not allocated yet when this is first charged, so
		// count the intent: every port, or, when allocation is turned off,
		// only ports asking for an explicit node port.
		if a := svc.Spec.AllocateLoadBalancerNodePorts; a != nil && !*a {
			ports = 0
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					ports++
				}
			}
		}
		out[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(ports, resource.DecimalSI)
		out[corev1.ResourceServicesLoadBalancers] = one
	}
	return out, nil
}

func (s *serviceEvaluator) UsageStats(options UsageStatsOptions) (UsageStats, error) {
	return CalculateUsageStats(options, s.list, MatchesNoScope, s.Usage)
}

// QuotaServiceType is the service's type if quota charges it specially
// (NodePort, LoadBalancer), else "".
func QuotaServiceType(svc *corev1.Service) corev1.ServiceType {
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		return svc.Spec.Type
	}
	return ""
}
