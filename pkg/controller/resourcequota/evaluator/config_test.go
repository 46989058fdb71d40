package evaluator

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestNewEvaluators(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	evals, err := NewEvaluators(fakeListers{}.lister, factory, v137Features)
	if err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry(evals)
	for gr, quotaName := range map[schema.GroupResource]corev1.ResourceName{
		{Resource: "pods"}:                                     "requests.cpu",
		{Resource: "services"}:                                 "services.nodeports",
		{Resource: "persistentvolumeclaims"}:                   "requests.storage",
		{Group: "resource.k8s.io", Resource: "resourceclaims"}: "gpu.deviceclass.resource.k8s.io/devices",
		{Resource: "configmaps"}:                               "configmaps",
		{Resource: "secrets"}:                                  "secrets",
		{Resource: "replicationcontrollers"}:                   "replicationcontrollers",
		{Resource: "resourcequotas"}:                           "resourcequotas",
	} {
		e := reg.Get(gr)
		if e == nil {
			t.Errorf("no evaluator for %v", gr)
			continue
		}
		if len(e.MatchingResources([]corev1.ResourceName{quotaName})) != 1 {
			t.Errorf("%v does not measure %s", gr, quotaName)
		}
	}
	// Extended-resource charging needs these informers, so they exist.
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	synced := factory.WaitForCacheSync(stop)
	for _, obj := range []interface{}{&resourceapi.DeviceClass{}, &resourceapi.ResourceClaim{}, &corev1.Pod{}} {
		if !synced[reflect.TypeOf(obj)] {
			t.Errorf("no informer for %T", obj)
		}
	}
}

func TestDefaultIgnoredResources(t *testing.T) {
	got := DefaultIgnoredResources()
	for _, gr := range []schema.GroupResource{
		{Resource: "events"}, {Group: "events.k8s.io", Resource: "events"}, {Resource: "bindings"}, {Resource: "componentstatuses"},
		{Group: "authentication.k8s.io", Resource: "tokenreviews"}, {Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
	} {
		if _, ok := got[gr]; !ok {
			t.Errorf("%v not ignored", gr)
		}
	}
	if _, ok := got[schema.GroupResource{Resource: "pods"}]; ok {
		t.Error("pods ignored")
	}
	// A copy: callers may not change the defaults.
	delete(got, schema.GroupResource{Resource: "events"})
	if _, ok := DefaultIgnoredResources()[schema.GroupResource{Resource: "events"}]; !ok {
		t.Error("DefaultIgnoredResources returned shared state")
	}
}

func TestDefaultUpdateFilter(t *testing.T) {
	filter := DefaultUpdateFilter()
	running := podWith(container("a", rl("cpu", "1"), nil))
	running.Status.Phase = corev1.PodRunning
	running.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "a", Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "1")}}}
	relabelled := running.DeepCopy()
	relabelled.Labels = map[string]string{"x": "y"}
	succeeded := running.DeepCopy()
	succeeded.Status.Phase = corev1.PodSucceeded
	resized := running.DeepCopy()
	resized.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "2")}
	initResizedOld := running.DeepCopy()
	initResizedOld.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "side", Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "1")}}}
	initResizedNew := initResizedOld.DeepCopy()
	initResizedNew.Status.InitContainerStatuses[0].Resources.Requests = rl("cpu", "3")
	deadline := running.DeepCopy()
	deadline.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
	expired := running.DeepCopy()
	expired.DeletionTimestamp = &metav1.Time{Time: time.Now().Add(-time.Hour)}
	expired.DeletionGracePeriodSeconds = ptr.To[int64](30)

	pods := corev1.SchemeGroupVersion.WithResource("pods")
	services := corev1.SchemeGroupVersion.WithResource("services")
	pvcs := corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	cases := []struct {
		name     string
		gvr      schema.GroupVersionResource
		old, new interface{}
		want     bool
	}{
		{"pod metadata change", pods, running, relabelled, false},
		{"pod became terminal", pods, running, succeeded, true},
		{"terminal pod updated again", pods, succeeded, succeeded, false},
		{"pod deletion grace expired", pods, running, expired, true},
		{"pod resized", pods, running, resized, true},
		{"pod sidecar resized", pods, initResizedOld, initResizedNew, true},
		{"pod got an active deadline", pods, running, deadline, true},
		{"service to node port", services, service(corev1.ServiceTypeClusterIP), service(corev1.ServiceTypeNodePort), true},
		{"service node port to load balancer", services, service(corev1.ServiceTypeNodePort), service(corev1.ServiceTypeLoadBalancer), true},
		{"service cluster IP to external name", services, service(corev1.ServiceTypeClusterIP), service(corev1.ServiceTypeExternalName), false},
		{"service ports changed", services, service(corev1.ServiceTypeNodePort, 0), service(corev1.ServiceTypeNodePort, 0, 0), false},
		// Upstream's check compares fresh pointers: every claim update counts.
		{"claim updated", pvcs, pvc(nil, "1Gi"), pvc(nil, "1Gi"), true},
		{"configmap updated", corev1.SchemeGroupVersion.WithResource("configmaps"), &corev1.ConfigMap{}, &corev1.ConfigMap{}, false},
		{"unexpected type", pods, &corev1.ConfigMap{}, &corev1.ConfigMap{}, false},
	}
	for _, c := range cases {
		if got := filter(c.gvr, c.old, c.new); got != c.want {
			t.Errorf("%s: filter = %v, want %v", c.name, got, c.want)
		}
	}
}
