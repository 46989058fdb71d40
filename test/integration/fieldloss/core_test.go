package fieldloss

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/endpoint"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/endpointslice"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/namespace"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/nodeipam"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/nodelifecycle"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/ttl"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/persistentvolume"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/pvcprotection"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/pvprotection"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// setPodReady writes the status a kubelet would for a running pod with ip,
// ready or not.
func setPodReady(t *testing.T, c clientset.Interface, ns, name, ip string, ready bool) {
	t.Helper()
	ctx := context.Background()
	p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	now := metav1.Now()
	p.Status.Phase = v1.PodRunning
	p.Status.PodIP = ip
	p.Status.PodIPs = []v1.PodIP{{IP: ip}}
	p.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.ContainersReady, Status: status, LastTransitionTime: now},
		{Type: v1.PodReady, Status: status, LastTransitionTime: now},
	}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A Service's Endpoints object, created beforehand by the user with user
// annotations, and the controller's EndpointSlice, annotated by the user,
// are updated as a pod becomes ready and then not ready. Upstream keeps the
// Endpoints' annotations (but for the trigger time it maintains) and sets
// its labels to the Service's; the slice keeps all of its metadata.
func TestEndpointsAndEndpointSlicesKeepEveryField(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "fieldloss-ep")
	ctx := testContext(t)
	f := newFactory(c)
	ec := endpoint.NewController(ctx, f.Core().V1().Pods(), f.Core().V1().Services(), f.Core().V1().Endpoints(), c, 0)
	esc := endpointslice.NewController(ctx, f.Core().V1().Pods(), f.Core().V1().Services(), f.Core().V1().Nodes(),
		f.Discovery().V1().EndpointSlices(), 100, c, 0)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		e, err := c.CoreV1().Endpoints(ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err == nil {
			t.Logf("Endpoints: labels %v, subsets %+v", e.Labels, e.Subsets)
		}
		if l, err := c.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{}); err == nil {
			for _, s := range l.Items {
				t.Logf("EndpointSlice %s: labels %v, endpoints %+v", s.Name, s.Labels, s.Endpoints)
			}
		}
	})

	svcLabels := map[string]string{"svc": "web"}
	svc := &v1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: userObjectMeta("web", ns),
		Spec: v1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}},
		},
	}
	svc.Labels = svcLabels
	ep := &v1.Endpoints{ //nolint:staticcheck // the Endpoints controller's object
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Endpoints"},
		ObjectMeta: userObjectMeta("web", ns),
	}
	ep.Labels = svcLabels
	var epBefore v1.Endpoints //nolint:staticcheck // the Endpoints controller's object
	applyAt(t, c, "api/v1/namespaces/"+ns+"/endpoints/web", ep, &epBefore)
	var svcBefore v1.Service
	applyAt(t, c, "api/v1/namespaces/"+ns+"/services/web", svc, &svcBefore)
	// Started only now: the Endpoints controller deletes Endpoints whose
	// Service does not exist (yet), as upstream.
	f.Start(ctx.Done())
	go ec.Run(ctx, 2)
	go esc.Run(ctx, 2)

	// The EndpointSlice controller leaves out pods on nodes it does not know.
	node := createNode(t, c, ns+"-ep", nil)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "img", Ports: []v1.ContainerPort{{ContainerPort: 8080}}}}}}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setPodReady(t, c, ns, "web-0", "10.244.1.10", true)

	var sliceName string
	framework.Eventually(t, time.Minute, "a ready address in the Endpoints and the EndpointSlice", func(ctx context.Context) (bool, error) {
		e, err := c.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(e.Subsets) != 1 || len(e.Subsets[0].Addresses) != 1 {
			return false, err
		}
		s, ok, err := serviceSlice(ctx, c, ns)
		if !ok || err != nil {
			return false, err
		}
		sliceName = s.Name
		return len(s.Endpoints) == 1 && isTrue(s.Endpoints[0].Conditions.Ready), nil
	})
	checkEndpoints := func(when string) {
		t.Helper()
		e, err := c.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameMeta(t, "Endpoints "+when, epBefore.ObjectMeta, e.ObjectMeta,
			owned{annotations: []string{v1.EndpointsLastChangeTriggerTime}, labels: []string{endpoint.LabelManagedBy}})
		if e.Labels[endpoint.LabelManagedBy] != endpoint.ControllerName {
			t.Errorf("Endpoints %s: labels %v, want the managed-by label", when, e.Labels)
		}
	}
	checkEndpoints("after the pod became ready")

	// No user label: the controller sets a slice's labels to its
	// Service's, as upstream.
	annotateAt(t, c, "apis/discovery.k8s.io/v1/namespaces/"+ns+"/endpointslices/"+sliceName, "discovery.k8s.io/v1", "EndpointSlice", ns, sliceName)
	sliceBefore, err := c.DiscoveryV1().EndpointSlices(ns).Get(ctx, sliceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	setPodReady(t, c, ns, "web-0", "10.244.1.10", false)
	framework.Eventually(t, time.Minute, "the address not ready in the Endpoints and the EndpointSlice", func(ctx context.Context) (bool, error) {
		e, err := c.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(e.Subsets) != 1 || len(e.Subsets[0].NotReadyAddresses) != 1 {
			return false, err
		}
		s, err := c.DiscoveryV1().EndpointSlices(ns).Get(ctx, sliceName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(s.Endpoints) == 1 && !isTrue(s.Endpoints[0].Conditions.Ready), nil
	})
	checkEndpoints("after the pod became not ready")
	sliceAfter, err := c.DiscoveryV1().EndpointSlices(ns).Get(ctx, sliceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameMeta(t, "EndpointSlice", sliceBefore.ObjectMeta, sliceAfter.ObjectMeta, owned{annotations: []string{v1.EndpointsLastChangeTriggerTime}})
	svcAfter, err := c.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameMeta(t, "Service", svcBefore.ObjectMeta, svcAfter.ObjectMeta)
	if !reflect.DeepEqual(svcBefore.Spec, svcAfter.Spec) {
		t.Errorf("Service: spec changed")
	}
}

func isTrue(b *bool) bool { return b != nil && *b }

// serviceSlice is the one EndpointSlice of Service web.
func serviceSlice(ctx context.Context, c clientset.Interface, ns string) (*discoveryv1.EndpointSlice, bool, error) {
	l, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
	if err != nil || len(l.Items) != 1 {
		return nil, false, err
	}
	return &l.Items[0], true, nil
}

// A node that stops heartbeating, carrying user metadata and a user taint:
// the node-lifecycle controller writes its conditions (UpdateStatus) and
// taints, the TTL controller its TTL annotation, node IPAM its pod CIDR.
func TestNodeKeepsEveryField(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "fieldloss-node")
	ctx := testContext(t)
	f := newFactory(c)
	nlc, err := nodelifecycle.NewController(ctx, f.Coordination().V1().Leases(), f.Core().V1().Pods(),
		f.Core().V1().Nodes(), f.Apps().V1().DaemonSets(), c,
		200*time.Millisecond, 2*time.Second, 2*time.Second, 0.1, 0.01, 50, 0.55, nodelifecycle.Features{LeaseCircuitBreaker: true})
	if err != nil {
		t.Fatal(err)
	}
	tc := ttl.NewController(ctx, f.Core().V1().Nodes(), c)
	cfg, err := nodeipam.NewConfig(klog.FromContext(ctx), nodeipam.Options{
		CIDRAllocatorType: nodeipam.RangeAllocatorType, ClusterCIDR: "10.200.0.0/16", NodeCIDRMaskSize: 24})
	if err != nil {
		t.Fatal(err)
	}
	ipam, err := nodeipam.NewController(ctx, f.Core().V1().Nodes(), c, cfg)
	if err != nil {
		t.Fatal(err)
	}

	name := ns + "-node"
	userTaint := v1.Taint{Key: "example.com/keep", Value: "me", Effect: v1.TaintEffectNoSchedule}
	node := &v1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: userObjectMeta(name, ""),
		Spec:       v1.NodeSpec{ProviderID: "fake://" + name, Taints: []v1.Taint{userTaint}},
	}
	applyAt(t, c, "api/v1/nodes/"+name, node, nil)
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	cur, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	cur.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: now, LastTransitionTime: now}}
	before, err := c.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// A ready pod on the node, which the node-lifecycle controller marks
	// not ready (UpdateStatus of its cached, trimmed copy).
	podMeta := userObjectMeta("on-node", ns)
	pod := &v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: podMeta, Spec: fullPodSpec("img")}
	pod.Spec.NodeName = name
	applyAt(t, c, "api/v1/namespaces/"+ns+"/pods/on-node", pod, nil)
	setPodReady(t, c, ns, "on-node", "10.0.0.9", true)
	podBefore, err := c.CoreV1().Pods(ns).Get(ctx, "on-node", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	f.Start(ctx.Done())
	go nlc.Run(ctx)
	go tc.Run(ctx, 2)
	go ipam.Run(ctx)

	framework.Eventually(t, time.Minute, "the node unreachable, tainted, with a TTL and a pod CIDR", func(ctx context.Context) (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		unknown := false
		for _, cond := range n.Status.Conditions {
			if cond.Type == v1.NodeReady && cond.Status == v1.ConditionUnknown {
				unknown = true
			}
		}
		tainted := false
		for _, tt := range n.Spec.Taints {
			if tt.Key == v1.TaintNodeUnreachable {
				tainted = true
			}
		}
		_, hasTTL := n.Annotations[v1.ObjectTTLAnnotationKey]
		return unknown && tainted && hasTTL && n.Spec.PodCIDR != "", nil
	})
	after, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Taints are an atomic list: the node-lifecycle controller's patch of
	// them makes it their manager, as upstream.
	sameMeta(t, "Node", before.ObjectMeta, after.ObjectMeta, owned{annotations: []string{v1.ObjectTTLAnnotationKey},
		fields: [][]string{{"f:spec", "f:taints"}}})
	kept := false
	for _, tt := range after.Spec.Taints {
		if tt.Key == userTaint.Key && tt.Value == userTaint.Value && tt.Effect == userTaint.Effect {
			kept = true
		}
	}
	if !kept {
		t.Errorf("Node: the user's taint is gone: %v", after.Spec.Taints)
	}
	want := before.Spec.DeepCopy()
	want.PodCIDR, want.PodCIDRs, want.Taints = after.Spec.PodCIDR, after.Spec.PodCIDRs, after.Spec.Taints
	if !reflect.DeepEqual(*want, after.Spec) {
		t.Errorf("Node: spec changed beyond pod CIDRs and taints")
	}

	var podAfter *v1.Pod
	framework.Eventually(t, time.Minute, "the pod on the node marked not ready", func(ctx context.Context) (bool, error) {
		podAfter, err = c.CoreV1().Pods(ns).Get(ctx, "on-node", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range podAfter.Status.Conditions {
			if cond.Type == v1.PodReady && cond.Status == v1.ConditionFalse {
				return true, nil
			}
		}
		return false, nil
	})
	sameMeta(t, "Pod on-node", podBefore.ObjectMeta, podAfter.ObjectMeta)
	samePodSpec(t, "Pod on-node", podBefore, podAfter)
}

// A volume and a claim carrying user metadata are bound by the binder
// (claimRef, annotations, status of both), protected by their protection
// controllers, and the volume released when the claim goes.
func TestPersistentVolumeAndClaimKeepEveryField(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "fieldloss-pv")
	ctx := testContext(t)
	f := newFactory(c)
	core := f.Core().V1()
	binder, err := persistentvolume.NewController(ctx, persistentvolume.ControllerParameters{
		KubeClient: c, SyncPeriod: time.Second,
		VolumeInformer: core.PersistentVolumes(), ClaimInformer: core.PersistentVolumeClaims(),
		ClassInformer: f.Storage().V1().StorageClasses(), PodInformer: core.Pods(), NodeInformer: core.Nodes(),
	})
	if err != nil {
		t.Fatal(err)
	}
	pvcp, err := pvcprotection.NewController(klog.FromContext(ctx), core.PersistentVolumeClaims(), core.Pods(), c, pvcprotection.Features{UnusedSinceTime: true})
	if err != nil {
		t.Fatal(err)
	}
	pvp := pvprotection.NewController(klog.FromContext(ctx), core.PersistentVolumes(), c)
	f.Start(ctx.Done())
	go binder.Run(ctx)
	go pvcp.Run(ctx, 1)
	go pvp.Run(ctx, 1)

	class := "fieldloss-manual"
	size := v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}
	pvName := ns + "-pv"
	pv := &v1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: userObjectMeta(pvName, ""),
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      size,
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			StorageClassName:              class,
			PersistentVolumeSource:        v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp/" + pvName}},
		},
	}
	var pvBefore v1.PersistentVolume
	applyAt(t, c, "api/v1/persistentvolumes/"+pvName, pv, &pvBefore)
	t.Cleanup(func() {
		_ = c.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
	})
	pvc := &v1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: userObjectMeta("claim", ns),
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: size},
			StorageClassName: &class,
		},
	}
	var pvcBefore v1.PersistentVolumeClaim
	applyAt(t, c, "api/v1/namespaces/"+ns+"/persistentvolumeclaims/claim", pvc, &pvcBefore)

	framework.Eventually(t, time.Minute, "the claim and the volume bound", func(ctx context.Context) (bool, error) {
		v, err := c.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cl, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "claim", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return v.Status.Phase == v1.VolumeBound && cl.Status.Phase == v1.ClaimBound &&
			cl.Annotations["pv.kubernetes.io/bind-completed"] == "yes", nil
	})
	pvOwned := owned{annotations: []string{"pv.kubernetes.io/"}}
	checkPV := func(when string) {
		t.Helper()
		v, err := c.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameMeta(t, "PersistentVolume "+when, pvBefore.ObjectMeta, v.ObjectMeta, pvOwned)
		want := pvBefore.Spec.DeepCopy()
		want.ClaimRef = v.Spec.ClaimRef
		if !reflect.DeepEqual(*want, v.Spec) {
			t.Errorf("PersistentVolume %s: spec changed beyond its claimRef", when)
		}
	}
	checkPV("bound")
	cl, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "claim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameMeta(t, "PersistentVolumeClaim", pvcBefore.ObjectMeta, cl.ObjectMeta, pvOwned)
	want := pvcBefore.Spec.DeepCopy()
	want.VolumeName = pvName
	if !reflect.DeepEqual(*want, cl.Spec) {
		t.Errorf("PersistentVolumeClaim: spec changed beyond its volume name")
	}

	// The claim goes (its protection finalizer is removed, no pod uses
	// it); the binder marks the volume Released.
	if err := c.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "claim", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the claim gone and the volume released", func(ctx context.Context) (bool, error) {
		if _, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "claim", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		v, err := c.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		return err == nil && v.Status.Phase == v1.VolumeReleased, err
	})
	checkPV("released")
}

// A namespace carrying user metadata is deleted while an object in it
// holds a finalizer: the namespace controller writes its conditions
// (UpdateStatus) and, once the object goes, finalizes it.
func TestNamespaceKeepsEveryField(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	ctx := testContext(t)
	mc, err := metadata.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	f := newFactory(c)
	nc := namespace.NewController(ctx, c, mc, c.Discovery().ServerPreferredNamespacedResources,
		f.Core().V1().Namespaces(), 5*time.Minute, v1.FinalizerKubernetes)
	nc.WakeWhenPodsGone(f.Core().V1().Pods())
	f.Start(ctx.Done())
	go nc.Run(ctx, 2)

	name := fmt.Sprintf("fieldloss-gone-%d", time.Now().UnixNano()%1e9)
	ns := &v1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: userObjectMeta(name, "")}
	var before v1.Namespace
	applyAt(t, c, "api/v1/namespaces/"+name, ns, &before)
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: name, Finalizers: []string{"example.com/hold"}}}
	if _, err := c.CoreV1().ConfigMaps(name).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	release := func() {
		_, _ = c.CoreV1().ConfigMaps(name).Patch(context.Background(), "held", types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
	t.Cleanup(release)
	if err := c.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the namespace waiting for the finalizer", func(ctx context.Context) (bool, error) {
		n, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == v1.NamespaceFinalizersRemaining && cond.Status == v1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	after, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameMeta(t, "Namespace", before.ObjectMeta, after.ObjectMeta)
	if !reflect.DeepEqual(before.Spec, after.Spec) {
		t.Errorf("Namespace: spec changed while the content remains")
	}
	release()
	framework.Eventually(t, time.Minute, "the namespace finalized", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
