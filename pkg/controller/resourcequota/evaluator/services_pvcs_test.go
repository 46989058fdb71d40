package evaluator

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func service(svcType corev1.ServiceType, nodePorts ...int32) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Spec: corev1.ServiceSpec{Type: svcType}}
	for i, np := range nodePorts {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: int32(80 + i), NodePort: np})
	}
	return s
}

func TestServiceUsage(t *testing.T) {
	noAlloc := service(corev1.ServiceTypeLoadBalancer, 30001, 0, 30003)
	noAlloc.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
	cases := map[string]struct {
		svc  *corev1.Service
		want corev1.ResourceList
	}{
		"cluster IP": {service(corev1.ServiceTypeClusterIP, 0, 0),
			rl("count/services", "1", "services", "1", "services.nodeports", "0", "services.loadbalancers", "0")},
		"node port counts every port": {service(corev1.ServiceTypeNodePort, 0, 0, 0),
			rl("count/services", "1", "services", "1", "services.nodeports", "3", "services.loadbalancers", "0")},
		"load balancer counts its ports as node ports": {service(corev1.ServiceTypeLoadBalancer, 0, 0),
			rl("count/services", "1", "services", "1", "services.nodeports", "2", "services.loadbalancers", "1")},
		"load balancer without node port allocation counts explicit ones": {noAlloc,
			rl("count/services", "1", "services", "1", "services.nodeports", "2", "services.loadbalancers", "1")},
		"external name": {service(corev1.ServiceTypeExternalName),
			rl("count/services", "1", "services", "1", "services.nodeports", "0", "services.loadbalancers", "0")},
	}
	e := NewServiceEvaluator(nil)
	for name, c := range cases {
		got, err := e.Usage(c.svc)
		if err != nil {
			t.Fatal(err)
		}
		expectList(t, name, got, c.want)
	}
	if got := e.MatchingResources(names("services", "services.nodeports", "services.loadbalancers", "count/services", "pods")); !reflect.DeepEqual(got,
		names("count/services", "services", "services.loadbalancers", "services.nodeports")) {
		t.Errorf("MatchingResources = %v", got)
	}
}

func TestQuotaServiceType(t *testing.T) {
	for typ, want := range map[corev1.ServiceType]corev1.ServiceType{
		corev1.ServiceTypeClusterIP: "", corev1.ServiceTypeExternalName: "", "": "",
		corev1.ServiceTypeNodePort: corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer: corev1.ServiceTypeLoadBalancer,
	} {
		if got := QuotaServiceType(service(typ)); got != want {
			t.Errorf("%q: %q, want %q", typ, got, want)
		}
	}
}

func pvc(class *string, request string) *corev1.PersistentVolumeClaim {
	p := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	p.Spec.StorageClassName = class
	if request != "" {
		p.Spec.Resources.Requests = rl("storage", request)
	}
	return p
}

func TestPVCUsage(t *testing.T) {
	annotated := pvc(ptr.To("gold"), "1Gi")
	annotated.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: "silver"}
	expanding := pvc(nil, "1Gi")
	expanding.Status.AllocatedResources = rl("storage", "2Gi")
	shrinking := pvc(nil, "2Gi")
	shrinking.Status.AllocatedResources = rl("storage", "1Gi")

	cases := map[string]struct {
		claim *corev1.PersistentVolumeClaim
		want  corev1.ResourceList
	}{
		"no class": {pvc(nil, "1Gi"), rl("count/persistentvolumeclaims", "1", "persistentvolumeclaims", "1", "requests.storage", "1Gi")},
		"charged to its class too": {pvc(ptr.To("gold"), "1Gi"), rl("count/persistentvolumeclaims", "1", "persistentvolumeclaims", "1", "requests.storage", "1Gi",
			"gold.storageclass.storage.k8s.io/persistentvolumeclaims", "1", "gold.storageclass.storage.k8s.io/requests.storage", "1Gi")},
		"the beta annotation wins over the field": {annotated, rl("count/persistentvolumeclaims", "1", "persistentvolumeclaims", "1", "requests.storage", "1Gi",
			"silver.storageclass.storage.k8s.io/persistentvolumeclaims", "1", "silver.storageclass.storage.k8s.io/requests.storage", "1Gi")},
		"no storage request": {pvc(ptr.To("gold"), ""), rl("count/persistentvolumeclaims", "1", "persistentvolumeclaims", "1",
			"gold.storageclass.storage.k8s.io/persistentvolumeclaims", "1")},
		"fractional bytes are rounded up":           {pvc(nil, "1500m"), rl("count/persistentvolumeclaims", "1", "persistentvolumeclaims", "1", "requests.storage", "2")},
		"allocated larger than requested counts":    {expanding, rl("count/persistentvolumeclaims", "1", "persistentvolumeclaims", "1", "requests.storage", "2Gi")},
		"allocated smaller than requested does not": {shrinking, rl("count/persistentvolumeclaims", "1", "persistentvolumeclaims", "1", "requests.storage", "2Gi")},
	}
	e := NewPersistentVolumeClaimEvaluator(nil)
	for name, c := range cases {
		got, err := e.Usage(c.claim)
		if err != nil {
			t.Fatal(err)
		}
		expectList(t, name, got, c.want)
	}
	in := names("persistentvolumeclaims", "requests.storage", "count/persistentvolumeclaims", "gold.storageclass.storage.k8s.io/requests.storage",
		"gold.storageclass.storage.k8s.io/persistentvolumeclaims", "gold.storageclass.storage.k8s.io/limits.storage", "pods")
	if got := e.MatchingResources(in); !reflect.DeepEqual(got, in[:5]) {
		t.Errorf("MatchingResources = %v", got)
	}
}

func TestPVCVolumeAttributesClassScope(t *testing.T) {
	none := pvc(nil, "1Gi")
	gold := pvc(nil, "1Gi")
	gold.Spec.VolumeAttributesClassName = ptr.To("gold")
	moving := pvc(nil, "1Gi")
	moving.Status.CurrentVolumeAttributesClassName = ptr.To("silver")
	moving.Status.ModifyVolumeStatus = &corev1.ModifyVolumeStatus{TargetVolumeAttributesClassName: "bronze"}

	vac := func(op corev1.ScopeSelectorOperator, values ...string) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopeVolumeAttributesClass, Operator: op, Values: values}
	}
	cases := []struct {
		name  string
		sel   corev1.ScopedResourceSelectorRequirement
		claim *corev1.PersistentVolumeClaim
		want  bool
	}{
		{"Exists/none", vac(corev1.ScopeSelectorOpExists), none, false},
		{"Exists/spec", vac(corev1.ScopeSelectorOpExists), gold, true},
		{"Exists/status only", vac(corev1.ScopeSelectorOpExists), moving, true},
		{"In/spec", vac(corev1.ScopeSelectorOpIn, "gold"), gold, true},
		{"In/other", vac(corev1.ScopeSelectorOpIn, "silver"), gold, false},
		{"In/modify target", vac(corev1.ScopeSelectorOpIn, "bronze"), moving, true},
		{"In/current", vac(corev1.ScopeSelectorOpIn, "silver"), moving, true},
		{"NotIn/none", vac(corev1.ScopeSelectorOpNotIn, "gold"), none, true},
		{"NotIn/spec", vac(corev1.ScopeSelectorOpNotIn, "gold"), gold, false},
		{"DoesNotExist/none", vac(corev1.ScopeSelectorOpDoesNotExist), none, true},
		{"pod scopes never match claims", corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopeBestEffort, Operator: corev1.ScopeSelectorOpExists}, none, false},
	}
	for _, c := range cases {
		got, err := pvcMatchesScope(c.sel, c.claim)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s: matches = %v, want %v", c.name, got, c.want)
		}
	}

	l := fakeListers{}
	none.Name = "none"
	l.add(t, pvcsGVR, none, gold)
	e := NewPersistentVolumeClaimEvaluator(l.lister)
	stats, err := e.UsageStats(UsageStatsOptions{Namespace: "ns", Resources: names("requests.storage"),
		ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{vac(corev1.ScopeSelectorOpIn, "gold")}}})
	if err != nil {
		t.Fatal(err)
	}
	expectList(t, "gold-scoped usage", stats.Used, rl("requests.storage", "1Gi", "persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1"))
}
