// Package namespace tests the namespace-controller against a real
// apiserver: a deleted namespace is emptied and goes away, and content held
// by a finalizer keeps it, with upstream's conditions, until released.
package namespace

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/namespace"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// The controller waits 5s before its first pass and up to 8s between
// passes while finalizers hold content.
const waitTimeout = 60 * time.Second

// runController runs the namespace controller in-process, wired as the
// controller manager wires it, until the test ends.
func runController(t *testing.T) clientset.Interface {
	t.Helper()
	return runControllerRecording(t, nil)
}

// runControllerRecording is runController whose requests also go to
// record, if not nil.
func runControllerRecording(t *testing.T, record func(*http.Request)) clientset.Interface {
	t.Helper()
	cp := framework.Shared(t)
	cfg := rest.CopyConfig(cp.Config)
	cfg.UserAgent = "namespace-controller"
	if record != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				record(req)
				return rt.RoundTrip(req)
			})
		})
	}
	c, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	factory := informers.NewSharedInformerFactory(c, 0)
	nc := namespace.NewController(ctx, c, md, c.Discovery().ServerPreferredNamespacedResources,
		factory.Core().V1().Namespaces(), 5*time.Minute, v1.FinalizerKubernetes)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { nc.Run(ctx, 10); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	return cp.Client(t)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func waitGone(t *testing.T, c clientset.Interface, ns string) {
	t.Helper()
	framework.Eventually(t, waitTimeout, "namespace "+ns+" to disappear", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

func TestDeletedNamespaceIsEmptiedAndRemoved(t *testing.T) {
	c := runController(t)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, c, "ns-delete")

	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"a": "b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Unscheduled, so the apiserver deletes it at once despite its grace period.
	if _, err := c.CoreV1().Pods(ns).Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err == nil && got.Status.Phase != v1.NamespaceTerminating {
		t.Errorf("phase right after delete = %q, want Terminating", got.Status.Phase)
	}
	waitGone(t, c, ns)
}

func TestFinalizerOnContentBlocksDeletion(t *testing.T) {
	c := runController(t)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, c, "ns-blocked")
	const finalizer = "example.com/block"

	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{finalizer}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "free"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	want := map[v1.NamespaceConditionType]v1.NamespaceCondition{
		v1.NamespaceDeletionDiscoveryFailure: {Status: v1.ConditionFalse, Reason: "ResourcesDiscovered", Message: "All resources successfully discovered"},
		v1.NamespaceDeletionGVParsingFailure: {Status: v1.ConditionFalse, Reason: "ParsedGroupVersions", Message: "All legacy kube types successfully parsed"},
		v1.NamespaceDeletionContentFailure:   {Status: v1.ConditionFalse, Reason: "ContentDeleted", Message: "All content successfully deleted, may be waiting on finalization"},
		v1.NamespaceContentRemaining: {Status: v1.ConditionTrue, Reason: "SomeResourcesRemain",
			Message: "Some resources are remaining: configmaps. has 1 resource instances"},
		v1.NamespaceFinalizersRemaining: {Status: v1.ConditionTrue, Reason: "SomeFinalizersRemain",
			Message: fmt.Sprintf("Some content in the namespace has finalizers remaining: %s in 1 resource instances", finalizer)},
	}
	var last []v1.NamespaceCondition
	framework.Eventually(t, waitTimeout, "content-remaining conditions", func(ctx context.Context) (bool, error) {
		got, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = got.Status.Conditions
		matched := 0
		for _, cond := range got.Status.Conditions {
			if w, ok := want[cond.Type]; ok && cond.Status == w.Status && cond.Reason == w.Reason && cond.Message == w.Message {
				matched++
			}
		}
		return matched == len(want), nil
	})
	t.Logf("conditions: %+v", last)

	// The unfinalized ConfigMap went; the namespace is still there.
	if _, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "free", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("free ConfigMap: %v, want NotFound", err)
	}
	if _, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Fatalf("namespace went while content was held: %v", err)
	}

	if _, err := c.CoreV1().ConfigMaps(ns).Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, ns)
}

// TestPodsGoFirst: a pod on a node terminates gracefully, and until it is
// gone the controller leaves the namespace's other content alone.
func TestPodsGoFirst(t *testing.T) {
	c := runController(t)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, c, "ns-pods-first")
	grace := int64(10)

	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Bound to a node, so deletion is graceful and waits for a kubelet.
	if _, err := c.CoreV1().Pods(ns).Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: v1.PodSpec{NodeName: "no-such-node", TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "the pod to be terminating", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.DeletionTimestamp != nil, nil
	})
	forcePass(t, c, ns)
	if p, err := c.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{}); err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("pod should still be terminating after the controller's look: %v", err)
	}
	if _, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{}); err != nil {
		t.Fatalf("ConfigMap deleted while a pod was still terminating: %v", err)
	}

	// Play the kubelet: the pod has stopped.
	zero := int64(0)
	if err := c.CoreV1().Pods(ns).Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	waitGone(t, c, ns)
}

// forcePass makes the controller take another full look at a namespace
// whose pods are still terminating, and waits until it did: a bogus
// content-failure condition makes it sync again (it watches the namespace)
// and is rewritten by that pass, which runs the pods step and returns
// before touching anything else. A stopped controller never resets the
// condition, so the wait would fail.
func forcePass(t *testing.T, c clientset.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		sentinel := v1.NamespaceCondition{Type: v1.NamespaceDeletionContentFailure, Status: v1.ConditionTrue,
			LastTransitionTime: metav1.Now(), Reason: "TestSentinel", Message: "set by the test"}
		replaced := false
		for i := range got.Status.Conditions {
			if got.Status.Conditions[i].Type == sentinel.Type {
				got.Status.Conditions[i] = sentinel
				replaced = true
			}
		}
		if !replaced {
			got.Status.Conditions = append(got.Status.Conditions, sentinel)
		}
		_, err = c.CoreV1().Namespaces().UpdateStatus(ctx, got, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "the controller to reset the sentinel condition", func(ctx context.Context) (bool, error) {
		got, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == v1.NamespaceDeletionContentFailure {
				// Healthy, or failing because a pod outlived its grace
				// period; either way the controller rewrote it.
				return cond.Reason != "TestSentinel", nil
			}
		}
		return false, nil
	})
}

// Pods being deleted gracefully are left as they are by another delete
// without a grace period, even once finished, so passes made while every
// pod left terminates send none; a pod whose deletion a delete would retry
// gets one.
func TestTerminatingPodsAreNotDeletedAgain(t *testing.T) {
	var podDeletes atomic.Int32
	c := runControllerRecording(t, func(req *http.Request) {
		if req.Method == http.MethodDelete && strings.HasSuffix(strings.TrimSuffix(req.URL.Path, "/"), "/pods") {
			podDeletes.Add(1)
		}
	})
	ctx := context.Background()
	ns := framework.CreateNamespace(t, c, "ns-terminating-pods")
	grace := int64(300)
	newPod := func(name string) *v1.Pod {
		// Bound to a node, so deletion is graceful and waits for a kubelet.
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.PodSpec{NodeName: "no-such-node", TerminationGracePeriodSeconds: &grace,
				Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	}
	held := newPod("held")
	held.Finalizers = []string{"example.com/hold"}
	for _, pod := range []*v1.Pod{newPod("a"), newPod("b"), held} {
		if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "the pods to be terminating", func(ctx context.Context) (bool, error) {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				return false, nil
			}
		}
		return len(pods.Items) == 3, nil
	})
	// One finishes meanwhile, as a kubelet would report it.
	b, err := c.CoreV1().Pods(ns).Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Status.Phase = v1.PodSucceeded
	if b, err = c.CoreV1().Pods(ns).UpdateStatus(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The premise, on the real server: deleting it again without a grace
	// period changes nothing.
	if err := c.CoreV1().Pods(ns).Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if again, err := c.CoreV1().Pods(ns).Get(ctx, "b", metav1.GetOptions{}); err != nil || again.ResourceVersion != b.ResourceVersion {
		t.Fatalf("a second delete changed the terminating pod: %v", err)
	}

	before := podDeletes.Load()
	if before == 0 {
		t.Fatal("the controller never deleted the pods")
	}
	forcePass(t, c, ns)
	forcePass(t, c, ns)
	if n := podDeletes.Load() - before; n != 0 {
		t.Errorf("%d pod deletes sent while every pod left was terminating, want 0", n)
	}

	// Positive control: a pod whose deletion grace period is cut to zero
	// while a finalizer holds it is deleted again by the next pass (the
	// server retries such a deletion at once).
	zero := int64(0)
	if err := c.CoreV1().Pods(ns).Delete(ctx, "held", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	forcePass(t, c, ns)
	if podDeletes.Load() == before {
		t.Error("no pod delete sent for a pod whose deletion a delete would retry")
	}

	// Play the kubelet and the finalizer's owner.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		held, err := c.CoreV1().Pods(ns).Get(ctx, "held", metav1.GetOptions{})
		if err != nil {
			return err
		}
		held.Finalizers = nil
		_, err = c.CoreV1().Pods(ns).Update(ctx, held, metav1.UpdateOptions{})
		return err
	}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if err := c.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	waitGone(t, c, ns)
}

// Custom resources of a CRD made after the controller started are found by
// its discovery and deleted with their namespace.
func TestCustomResourcesOfNewCRDAreDeleted(t *testing.T) {
	c := runController(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(framework.Shared(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	crd := framework.CreateCRD(t, dyn, "Sprocket")
	ns := framework.CreateNamespace(t, c, "ns-crd")
	for i := range 3 {
		if _, err := dyn.Resource(crd.GVR).Namespace(ns).Create(ctx, crd.NewObject(fmt.Sprintf("s-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, ns)
	list, err := dyn.Resource(crd.GVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Fatalf("custom resources left behind: %v, %d", err, len(list.Items))
	}
}

// A namespace with hundreds of pods on several nodes and hundreds of events
// is emptied in parts the real server accepts: pods by field selector,
// events by pages (limit and continue token); no request for the whole
// collection follows them, and the namespace goes away.
func TestLargeNamespaceIsEmptiedInShards(t *testing.T) {
	var mu sync.Mutex
	var deletes []string // "resource?query" of each deletecollection
	c := runControllerRecording(t, func(req *http.Request) {
		if req.Method != http.MethodDelete || !strings.HasPrefix(req.URL.Path, "/api/v1/") {
			return // events.k8s.io's events follow the core ones, unsplit
		}
		parts := strings.Split(strings.TrimSuffix(req.URL.Path, "/"), "/")
		resource := parts[len(parts)-1]
		if resource != "pods" && resource != "events" {
			return // single deletes name an object; these name a collection
		}
		mu.Lock()
		defer mu.Unlock()
		q := req.URL.Query()
		part := q.Get("fieldSelector")
		if q.Get("limit") != "" {
			part = "limit=" + q.Get("limit")
			if q.Get("continue") != "" {
				part += "&continue"
			}
		}
		deletes = append(deletes, resource+"?"+part)
	})
	ctx := context.Background()
	ns := framework.CreateNamespace(t, c, "ns-shards")
	zero := int64(0)
	const pods, events = 250, 600
	for i := range pods {
		// On a node, so the pods can be split by node; no grace period, so
		// they go without a kubelet.
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%03d", i)},
			Spec: v1.PodSpec{NodeName: fmt.Sprintf("node-%d", i%3), TerminationGracePeriodSeconds: &zero,
				Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
		if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kinds := []string{"Pod", "ReplicaSet", "Deployment", "Service"}
	reasons := []string{"Scheduled", "SuccessfulCreate", "ScalingReplicaSet", "Odd"}
	for i := range events {
		ev := &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ev-%03d", i)},
			InvolvedObject: v1.ObjectReference{Kind: kinds[i%len(kinds)], Namespace: ns, Name: fmt.Sprintf("obj-%d", i)},
			Reason:         reasons[(i/len(kinds))%len(reasons)], Message: "m", Type: v1.EventTypeNormal,
			Source: v1.EventSource{Component: "test"}, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1}
		if _, err := c.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, ns)

	mu.Lock()
	defer mu.Unlock()
	var podShards, firstPages, nextPages int
	for _, d := range deletes {
		switch {
		case d == "events?" && firstPages > 0:
			t.Errorf("events deleted whole after their pages (the server refused a page?): %q", deletes)
		case strings.HasPrefix(d, "pods?spec.nodeName"):
			podShards++
		case d == "events?limit=250":
			firstPages++
		case d == "events?limit=250&continue":
			nextPages++
		}
	}
	if podShards < 3 || firstPages != 1 || nextPages != 2 {
		t.Errorf("%d pod shards, %d first and %d next event pages, want one pod shard per node and the %d events in 3 pages: %q",
			podShards, firstPages, nextPages, events, deletes)
	}
}

// The pod shard of the nodes not named carries one term per named node
// (the namespace controller names at most 512): the API server takes a
// selector that long and applies every term.
func TestLongestPodShardSelectorIsAccepted(t *testing.T) {
	c := runController(t)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, c, "ns-long-selector")
	node := func(i int) string { return fmt.Sprintf("a-node-with-a-rather-long-name-%03d", i) }
	for i := range 3 {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i)},
			Spec: v1.PodSpec{NodeName: node(i * 300), Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
		if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	terms := make([]string, 512)
	for i := range terms {
		terms[i] = "spec.nodeName!=" + node(i)
	}
	list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: strings.Join(terms, ",")})
	if err != nil {
		t.Fatalf("a %d-term selector refused: %v", len(terms), err)
	}
	// Nodes 0 and 300 are named; 600 is not.
	if len(list.Items) != 1 || list.Items[0].Name != "p-2" {
		t.Errorf("the selector matched %d pods, want only p-2: %v", len(list.Items), list.Items)
	}
}
