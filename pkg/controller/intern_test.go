package controller

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	apps "k8s.io/api/apps/v1"
)

// Interning must change where bytes live, never a value: random objects of
// every kind it handles come out equal to a copy taken before.
func TestInternForCacheChangesNoValue(t *testing.T) {
	filler := randfill.NewWithSeed(1).NilChance(0.2).NumElements(0, 3).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1000), resource.DecimalSI)
		},
	)
	longValue := strings.Repeat("x", maxInternedAnnotation+1)
	for i := 0; i < 200; i++ {
		objs := []runtimeapi.Object{&v1.Pod{}, &v1.Node{}, &discoveryv1.EndpointSlice{}, &apps.ReplicaSet{}, &metav1.PartialObjectMetadata{}}
		for _, obj := range objs {
			filler.Fill(obj)
			if m, ok := obj.(metav1.Object); ok && i%2 == 0 {
				m.SetAnnotations(map[string]string{"long": longValue, "short": "v"})
			}
			// Encoding caches each quantity's string form (interning
			// encodes containers): do it before copying, so the copy has
			// the same caches.
			if _, err := obj.(interface{ Marshal() ([]byte, error) }).Marshal(); err != nil {
				t.Fatal(err)
			}
			want := obj.DeepCopyObject()
			InternForCache(obj)
			if !reflect.DeepEqual(obj, want) {
				t.Fatalf("round %d: interning changed a %T:\n got %#v\nwant %#v", i, obj, obj, want)
			}
		}
	}
}

// wireObject is a generated API type's pointer: it encodes and decodes
// itself.
type wireObject[T any] interface {
	*T
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// decoded is obj as a cache receives it: decoded from the wire, so each
// copy has strings of its own.
func decoded[T any, PT wireObject[T]](t *testing.T, obj PT) PT {
	t.Helper()
	raw, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := PT(new(T))
	if err := out.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	return out
}

func decodedPod(t *testing.T, pod *v1.Pod) *v1.Pod { return decoded(t, pod) }

func sameBytes(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func templatePod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "shop", GenerateName: "web-7d9f-",
			Labels:          map[string]string{"app": "web", "pod-template-hash": "7d9f"},
			Annotations:     map[string]string{"checksum/config": "c0ffee", "big": strings.Repeat("a", maxInternedAnnotation+1)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f", UID: "rs-uid", Controller: ptr.To(true)}},
		},
		Spec: v1.PodSpec{
			NodeName:    "node-1",
			Containers:  []v1.Container{{Name: "web", Image: "registry.example/web:1.2.3"}},
			Tolerations: []v1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}},
		},
		Status: v1.PodStatus{
			Phase:             v1.PodRunning,
			HostIP:            "10.0.0.1",
			Conditions:        []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "web", Image: "registry.example/web:1.2.3", ImageID: "registry.example/web@sha256:0123"}},
		},
	}
}

// Two pods of one template, decoded separately, share the bytes of what
// they repeat once interned; long annotation values keep their own.
func TestInternedPodsShareRepeatedStrings(t *testing.T) {
	a, b := decodedPod(t, templatePod("web-7d9f-aaaaa")), decodedPod(t, templatePod("web-7d9f-bbbbb"))
	if sameBytes(a.Namespace, b.Namespace) {
		t.Fatal("decoded pods already share their namespace's bytes: the test can't see interning")
	}
	InternForCache(a)
	InternForCache(b)
	shared := map[string][2]string{
		"namespace":          {a.Namespace, b.Namespace},
		"generateName":       {a.GenerateName, b.GenerateName},
		"label value":        {a.Labels["app"], b.Labels["app"]},
		"annotation value":   {a.Annotations["checksum/config"], b.Annotations["checksum/config"]},
		"owner name":         {a.OwnerReferences[0].Name, b.OwnerReferences[0].Name},
		"owner uid":          {string(a.OwnerReferences[0].UID), string(b.OwnerReferences[0].UID)},
		"node name":          {a.Spec.NodeName, b.Spec.NodeName},
		"image":              {a.Spec.Containers[0].Image, b.Spec.Containers[0].Image},
		"toleration key":     {a.Spec.Tolerations[0].Key, b.Spec.Tolerations[0].Key},
		"phase":              {string(a.Status.Phase), string(b.Status.Phase)},
		"host IP":            {a.Status.HostIP, b.Status.HostIP},
		"condition type":     {string(a.Status.Conditions[0].Type), string(b.Status.Conditions[0].Type)},
		"container image ID": {a.Status.ContainerStatuses[0].ImageID, b.Status.ContainerStatuses[0].ImageID},
	}
	for field, pair := range shared {
		if !sameBytes(pair[0], pair[1]) {
			t.Errorf("%s %q: two copies after interning", field, pair[0])
		}
	}
	for ka := range a.Labels {
		for kb := range b.Labels {
			if ka == kb && !sameBytes(ka, kb) {
				t.Errorf("label key %q: two copies after interning", ka)
			}
		}
	}
	if sameBytes(a.Annotations["big"], b.Annotations["big"]) {
		t.Error("a long annotation value was interned")
	}
}

// Nodes repeat image names and their status vocabulary; EndpointSlices
// their endpoints' node names and target kinds.
func TestInternedNodesAndEndpointSlicesShareRepeatedStrings(t *testing.T) {
	node := func() *v1.Node {
		return decoded(t, &v1.Node{Status: v1.NodeStatus{
			Images:     []v1.ContainerImage{{Names: []string{"registry.example/web@sha256:0123", "registry.example/web:1.2.3"}}},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}},
			NodeInfo:   v1.NodeSystemInfo{KubeletVersion: "v1.37.2"},
		}})
	}
	n1, n2 := node(), node()
	InternForCache(n1)
	InternForCache(n2)
	for _, pair := range [][2]string{
		{n1.Status.Images[0].Names[0], n2.Status.Images[0].Names[0]},
		{n1.Status.Conditions[0].Message, n2.Status.Conditions[0].Message},
		{n1.Status.NodeInfo.KubeletVersion, n2.Status.NodeInfo.KubeletVersion},
	} {
		if !sameBytes(pair[0], pair[1]) {
			t.Errorf("node string %q: two copies after interning", pair[0])
		}
	}

	slice := func() *discoveryv1.EndpointSlice {
		return decoded(t, &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{{NodeName: ptr.To("node-1"), TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: "shop"}}}})
	}
	s1, s2 := slice(), slice()
	InternForCache(s1)
	InternForCache(s2)
	if !sameBytes(*s1.Endpoints[0].NodeName, *s2.Endpoints[0].NodeName) || !sameBytes(s1.Endpoints[0].TargetRef.Kind, s2.Endpoints[0].TargetRef.Kind) {
		t.Error("endpoint node names or target kinds: two copies after interning")
	}
}

// Lists the wire can't tell apart but that differ (nil and empty) are not
// merged, equal ones are, and a copy no object uses is forgotten.
func TestSharedListsAreEqualOnesOnly(t *testing.T) {
	var canon sliceCanon[v1.Container, *v1.Container]
	noop := func(*v1.Container) {}
	first := []v1.Container{{Name: "web", Image: "registry.example/web:1"}}
	if got := canon.canonical(first, noop); &got[0] != &first[0] {
		t.Fatal("the first list of its content was not kept as the shared copy")
	}
	equal := []v1.Container{{Name: "web", Image: "registry.example/web:1"}}
	if got := canon.canonical(equal, noop); &got[0] != &first[0] {
		t.Error("an equal list was not given the shared copy")
	}
	emptyPorts := []v1.Container{{Name: "web", Image: "registry.example/web:1", Ports: []v1.ContainerPort{}}}
	if got := canon.canonical(emptyPorts, noop); &got[0] != &emptyPorts[0] || got[0].Ports == nil {
		t.Error("a list with empty (not nil) ports was given the copy with nil ports")
	}
	if got := canon.canonical(equal, noop); len(got) != 1 || cap(got) != 1 {
		t.Errorf("the shared copy has len %d cap %d: appending to it must not write into it", len(got), cap(got))
	}

	for i := 0; canon.size() > 0 && i < 1000; i++ {
		runtime.GC()
	}
	if n := canon.size(); n != 0 {
		t.Errorf("%d shared copies remembered after every list using them was collected", n)
	}
}

// Pods of one template decoded apart share their containers, tolerations
// and owner references once interned.
func TestInternedPodsShareTemplateLists(t *testing.T) {
	a, b := decodedPod(t, templatePod("web-7d9f-aaaaa")), decodedPod(t, templatePod("web-7d9f-bbbbb"))
	InternForCache(a)
	InternForCache(b)
	if &a.Spec.Containers[0] != &b.Spec.Containers[0] {
		t.Error("containers not shared")
	}
	if &a.Spec.Tolerations[0] != &b.Spec.Tolerations[0] {
		t.Error("tolerations not shared")
	}
	if &a.OwnerReferences[0] != &b.OwnerReferences[0] {
		t.Error("owner references not shared")
	}
	other := templatePod("web-8e0a-ccccc")
	other.Spec.Containers[0].Image = "registry.example/web:1.2.4"
	c := decodedPod(t, other)
	InternForCache(c)
	if &c.Spec.Containers[0] == &a.Spec.Containers[0] || c.Spec.Containers[0].Image != "registry.example/web:1.2.4" {
		t.Error("a pod of another template got the first template's containers")
	}
}
