package resourceclaim

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

const (
	ns            = "ns"
	templateName  = "tmpl"
	podClaimName  = "gpu"
	testNodeName  = "node-1"
	testDriver    = "gpu.example.com"
	testPool      = "pool-a"
	testClassName = "gpu-class"
)

// fixture is a controller over a fake clientset whose informer stores are
// filled directly, so that a sync sees exactly the given objects.
type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	ec       *Controller
	recorder *record.FakeRecorder
}

func allFeatures() Features {
	return Features{AdminAccess: true, PrioritizedList: true}
}

func newFixture(t *testing.T, features Features, objs ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(objs...)
	// The fake tracker does not generate names; do it like the apiserver.
	var n atomic.Int32
	client.PrependReactor("create", "resourceclaims", func(action clienttesting.Action) (bool, runtime.Object, error) {
		claim := action.(clienttesting.CreateAction).GetObject().(*resourceapi.ResourceClaim)
		if claim.Name == "" && claim.GenerateName != "" {
			claim.Name = fmt.Sprintf("%s%05d", claim.GenerateName, n.Add(1))
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	ec, err := NewController(klog.FromContext(ctx), client,
		factory.Core().V1().Pods(), factory.Scheduling().V1beta1().PodGroups(),
		factory.Resource().V1().ResourceClaims(), factory.Resource().V1().ResourceClaimTemplates(), features)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: ctx, client: client, factory: factory, ec: ec, recorder: record.NewFakeRecorder(100)}
	ec.recorder = f.recorder
	for _, obj := range objs {
		f.addToStore(obj)
	}
	client.ClearActions()
	return f
}

func (f *fixture) addToStore(obj runtime.Object) {
	f.t.Helper()
	var err error
	switch o := obj.(type) {
	case *v1.Pod:
		err = f.factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
	case *resourceapi.ResourceClaim:
		err = f.factory.Resource().V1().ResourceClaims().Informer().GetIndexer().Add(o)
	case *resourceapi.ResourceClaimTemplate:
		err = f.factory.Resource().V1().ResourceClaimTemplates().Informer().GetIndexer().Add(o)
	case *schedulingapi.PodGroup:
		err = f.factory.Scheduling().V1beta1().PodGroups().Informer().GetIndexer().Add(o)
	default:
		f.t.Fatalf("unexpected object %T", obj)
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) sync(key string) error {
	f.t.Helper()
	return f.ec.syncKey(f.ctx, key)
}

func (f *fixture) mustSync(key string) {
	f.t.Helper()
	if err := f.sync(key); err != nil {
		f.t.Fatalf("sync %s: %v", key, err)
	}
}

func (f *fixture) claims() []resourceapi.ResourceClaim {
	f.t.Helper()
	list, err := f.client.ResourceV1().ResourceClaims(ns).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

func (f *fixture) claim(name string) *resourceapi.ResourceClaim {
	f.t.Helper()
	c, err := f.client.ResourceV1().ResourceClaims(ns).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *fixture) pod(name string) *v1.Pod {
	f.t.Helper()
	p, err := f.client.CoreV1().Pods(ns).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// writes lists the verbs and resources of the client's mutating calls.
func (f *fixture) writes() []string {
	return testutil.Describe(testutil.AllWrites(f.client))
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// queued drains the work queue.
func (f *fixture) queued() []string {
	keys := testutil.Drain[string](f.ec.queue)
	sort.Strings(keys)
	return keys
}

func podWithTemplate(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid")},
		Spec: v1.PodSpec{
			Containers:     []v1.Container{{Name: "c", Image: "img"}},
			ResourceClaims: []v1.PodResourceClaim{{Name: podClaimName, ResourceClaimTemplateName: ptr.To(templateName)}},
		},
	}
}

func podWithClaimName(name, claimName string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid")},
		Spec: v1.PodSpec{
			Containers:     []v1.Container{{Name: "c", Image: "img"}},
			ResourceClaims: []v1.PodResourceClaim{{Name: podClaimName, ResourceClaimName: ptr.To(claimName)}},
		},
	}
}

func withStatus(pod *v1.Pod, claimName string) *v1.Pod {
	pod = pod.DeepCopy()
	pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses, v1.PodResourceClaimStatus{Name: podClaimName, ResourceClaimName: ptr.To(claimName)})
	return pod
}

func scheduled(pod *v1.Pod) *v1.Pod {
	pod = pod.DeepCopy()
	pod.Spec.NodeName = testNodeName
	return pod
}

func withPhase(pod *v1.Pod, phase v1.PodPhase) *v1.Pod {
	pod = pod.DeepCopy()
	pod.Status.Phase = phase
	return pod
}

func template() *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: templateName},
		Spec: resourceapi.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{"app": "train"},
				Annotations: map[string]string{"note": "from-template"},
			},
			Spec: claimSpec(),
		},
	}
}

func claimSpec() resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "req", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: testClassName}}},
	}}
}

// generatedClaim is a claim as the controller creates it for pod.
func generatedClaim(name string, pod *v1.Pod) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ns,
			Name:            name,
			UID:             types.UID(name + "-uid"),
			ResourceVersion: "1",
			Annotations:     map[string]string{resourceapi.PodResourceClaimAnnotation: podClaimName},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}},
		},
		Spec: claimSpec(),
	}
}

func userClaim(name string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid"), ResourceVersion: "1"},
		Spec:       claimSpec(),
	}
}

func allocated(claim *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	claim = claim.DeepCopy()
	claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "req", Driver: testDriver, Pool: testPool, Device: "dev-0"}},
	}}
	return claim
}

func reservedFor(claim *resourceapi.ResourceClaim, pods ...*v1.Pod) *resourceapi.ResourceClaim {
	claim = claim.DeepCopy()
	for _, pod := range pods {
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID})
	}
	return claim
}

func deleting(obj metav1.Object) {
	obj.SetDeletionTimestamp(ptr.To(metav1.Now()))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}

type runtimeObject = runtime.Object

func (f *fixture) logger() klog.Logger { return klog.FromContext(f.ctx) }
