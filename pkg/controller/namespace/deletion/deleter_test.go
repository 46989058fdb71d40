package deletion

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
)

const nsName = "doomed"

var (
	configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	widgets    = schema.GroupVersionResource{Group: "example.io", Version: "v1", Resource: "widgets"}
)

// resources is discovery output: core pods and configmaps (all verbs) and
// example.io widgets, which lack deletecollection.
func resources() []*metav1.APIResourceList {
	all := []string{"get", "list", "watch", "create", "update", "delete", "deletecollection"}
	return []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: all},
			{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: all},
			// no delete verb: never touched
			{Name: "bindings", Namespaced: true, Kind: "Binding", Verbs: []string{"create"}},
		}},
		{GroupVersion: "example.io/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: []string{"get", "list", "delete"}},
		}},
	}
}

func deletingNamespace(deletedAt time.Time) *v1.Namespace {
	ts := metav1.NewTime(deletedAt)
	return &v1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: nsName, UID: "uid-1", DeletionTimestamp: &ts},
		Spec:       v1.NamespaceSpec{Finalizers: []v1.FinalizerName{v1.FinalizerKubernetes}},
		Status:     v1.NamespaceStatus{Phase: v1.NamespaceActive},
	}
}

func partial(apiVersion, kind, name string, finalizers ...string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: name, Finalizers: finalizers},
	}
}

// newMetadataClient makes deletecollection really delete (the fake tracker
// ignores it) except objects with finalizers, which stay as on a server.
func newMetadataClient(objs ...runtime.Object) *metadatafake.FakeMetadataClient {
	return newMetadataClientWithFields(nil, objs...)
}

// newMetadataClientWithFields is newMetadataClient whose deletecollection
// honours a field selector against fieldsOf(resource, name), as a server
// does (fieldsOf nil: every object matches).
func newMetadataClientWithFields(fieldsOf func(resource, name string) fields.Set, objs ...runtime.Object) *metadatafake.FakeMetadataClient {
	c := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	tracker := c.Tracker()
	for _, o := range objs {
		p := o.(*metav1.PartialObjectMetadata)
		gvr, _ := meta.UnsafeGuessKindToResource(p.GroupVersionKind())
		if err := tracker.Create(gvr, p, p.Namespace); err != nil {
			panic(err)
		}
	}
	deleteUnlessFinalized := func(gvr schema.GroupVersionResource, ns, name string) error {
		obj, err := tracker.Get(gvr, ns, name)
		if err != nil {
			return err
		}
		if len(obj.(*metav1.PartialObjectMetadata).Finalizers) > 0 {
			return nil
		}
		return tracker.Delete(gvr, ns, name)
	}
	c.PrependReactor("delete-collection", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		gvr := a.GetResource()
		sel, err := fields.ParseSelector(a.(clienttesting.DeleteCollectionAction).GetListRestrictions().Fields.String())
		if err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		list, err := tracker.List(gvr, schema.GroupVersionKind{Group: "fake-metadata-client-group", Version: "v1"}, a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		var matching []runtime.Object
		for _, item := range list.(*metav1.List).Items {
			name := item.Object.(*metav1.PartialObjectMetadata).Name
			if fieldsOf == nil || sel.Matches(fieldsOf(gvr.Resource, name)) {
				matching = append(matching, item.Object)
			}
		}
		// Limit and continue token cut the listing to one page, which
		// alone is deleted, as on a server.
		page := &metav1.List{}
		if err := meta.SetList(page, matching); err != nil {
			return true, nil, err
		}
		if err := toPage(page, a.(clienttesting.DeleteCollectionActionImpl).GetListOptions()); err != nil {
			return true, nil, err
		}
		for _, item := range page.Items {
			_ = deleteUnlessFinalized(gvr, a.GetNamespace(), item.Object.(*metav1.PartialObjectMetadata).Name)
		}
		return true, nil, nil
	})
	c.PrependReactor("delete", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.DeleteAction)
		return true, nil, deleteUnlessFinalized(d.GetResource(), d.GetNamespace(), d.GetName())
	})
	return c
}

func newDeleter(t *testing.T, kube *fake.Clientset, md *metadatafake.FakeMetadataClient, discover func() ([]*metav1.APIResourceList, error)) *namespacedResourcesDeleter {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	return NewNamespacedResourcesDeleter(ctx, kube.CoreV1().Namespaces(), md, kube.CoreV1(), discover, v1.FinalizerKubernetes).(*namespacedResourcesDeleter)
}

func actionsOf(actions []clienttesting.Action, verb, resource, subresource string) []clienttesting.Action {
	var out []clienttesting.Action
	for _, a := range actions {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == subresource {
			out = append(out, a)
		}
	}
	return out
}

func lastStatus(t *testing.T, kube *fake.Clientset) *v1.Namespace {
	t.Helper()
	updates := actionsOf(kube.Actions(), "update", "namespaces", "status")
	if len(updates) == 0 {
		t.Fatal("no status update")
	}
	return updates[len(updates)-1].(clienttesting.UpdateAction).GetObject().(*v1.Namespace)
}

func wantCondition(t *testing.T, ns *v1.Namespace, typ v1.NamespaceConditionType, status v1.ConditionStatus, reason, message string) {
	t.Helper()
	c := findCondition(ns.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("no %s condition in %+v", typ, ns.Status.Conditions)
	}
	if c.Status != status || c.Reason != reason || c.Message != message {
		t.Errorf("%s = %s/%q/%q, want %s/%q/%q", typ, c.Status, c.Reason, c.Message, status, reason, message)
	}
}

func TestDeleteEmptyNamespaceRemovesFinalizer(t *testing.T) {
	ns := deletingNamespace(time.Now())
	ns.Spec.Finalizers = append(ns.Spec.Finalizers, "example.io/other")
	kube := fake.NewClientset(ns)
	d := newDeleter(t, kube, newMetadataClient(), func() ([]*metav1.APIResourceList, error) { return resources(), nil })

	if err := d.Delete(context.Background(), nsName); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	phase := actionsOf(kube.Actions(), "update", "namespaces", "status")
	if len(phase) == 0 || phase[0].(clienttesting.UpdateAction).GetObject().(*v1.Namespace).Status.Phase != v1.NamespaceTerminating {
		t.Errorf("phase not set to Terminating first: %v", phase)
	}
	final := actionsOf(kube.Actions(), "create", "namespaces", "finalize")
	if len(final) != 1 {
		t.Fatalf("want 1 finalize call, got %d", len(final))
	}
	got := final[0].(clienttesting.CreateAction).GetObject().(*v1.Namespace).Spec.Finalizers
	if len(got) != 1 || got[0] != "example.io/other" {
		t.Errorf("finalizers after finalize = %v, want only the foreign one", got)
	}
	st := lastStatus(t, kube)
	wantCondition(t, st, v1.NamespaceDeletionDiscoveryFailure, v1.ConditionFalse, "ResourcesDiscovered", "All resources successfully discovered")
	wantCondition(t, st, v1.NamespaceDeletionGVParsingFailure, v1.ConditionFalse, "ParsedGroupVersions", "All legacy kube types successfully parsed")
	wantCondition(t, st, v1.NamespaceDeletionContentFailure, v1.ConditionFalse, "ContentDeleted", "All content successfully deleted, may be waiting on finalization")
	wantCondition(t, st, v1.NamespaceContentRemaining, v1.ConditionFalse, "ContentRemoved", "All content successfully removed")
	wantCondition(t, st, v1.NamespaceFinalizersRemaining, v1.ConditionFalse, "ContentHasNoFinalizers", "All content-preserving finalizers finished")
}

func TestDeleteContentUsesDeleteCollectionOrListAndDelete(t *testing.T) {
	kube := fake.NewClientset(deletingNamespace(time.Now()))
	md := newMetadataClient(
		partial("v1", "ConfigMap", "cm1"), partial("v1", "ConfigMap", "cm2"),
		partial("example.io/v1", "Widget", "w1"), partial("example.io/v1", "Widget", "w2"),
	)
	d := newDeleter(t, kube, md, func() ([]*metav1.APIResourceList, error) { return resources(), nil })

	if err := d.Delete(context.Background(), nsName); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	acts := md.Actions()
	if n := len(actionsOf(acts, "delete-collection", "configmaps", "")); n != 1 {
		t.Errorf("configmaps: %d deletecollection calls, want 1", n)
	}
	if n := len(actionsOf(acts, "delete", "configmaps", "")); n != 0 {
		t.Errorf("configmaps: %d single deletes, want 0", n)
	}
	if n := len(actionsOf(acts, "delete-collection", "widgets", "")); n != 0 {
		t.Errorf("widgets: %d deletecollection calls, want 0 (verb not discovered)", n)
	}
	dels := actionsOf(acts, "delete", "widgets", "")
	if len(dels) != 2 {
		t.Fatalf("widgets: %d single deletes, want 2", len(dels))
	}
	for _, a := range dels {
		opts := a.(clienttesting.DeleteActionImpl).DeleteOptions
		if opts.PropagationPolicy == nil || *opts.PropagationPolicy != metav1.DeletePropagationBackground {
			t.Errorf("delete without background propagation: %+v", opts)
		}
	}
	if n := len(actionsOf(acts, "delete-collection", "bindings", "")) + len(actionsOf(acts, "list", "bindings", "")); n != 0 {
		t.Errorf("bindings (no delete verb) were touched")
	}
	for _, gvr := range []schema.GroupVersionResource{configMaps, widgets} {
		l, _ := md.Resource(gvr).Namespace(nsName).List(context.Background(), metav1.ListOptions{})
		if len(l.Items) != 0 {
			t.Errorf("%v left: %d", gvr, len(l.Items))
		}
	}
	if len(actionsOf(kube.Actions(), "create", "namespaces", "finalize")) != 1 {
		t.Error("namespace not finalized after its content went")
	}
}

func TestMethodNotAllowedFallsBackToListAndDelete(t *testing.T) {
	kube := fake.NewClientset(deletingNamespace(time.Now()))
	md := newMetadataClient(partial("v1", "ConfigMap", "cm1"))
	md.PrependReactor("delete-collection", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrorsMethodNotSupported()
	})
	d := newDeleter(t, kube, md, func() ([]*metav1.APIResourceList, error) { return resources(), nil })
	if err := d.Delete(context.Background(), nsName); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if n := len(actionsOf(md.Actions(), "delete", "configmaps", "")); n != 1 {
		t.Errorf("want 1 single delete after 405, got %d", n)
	}
}

func TestDiscoveryFailureIsReportedButContentStillDeleted(t *testing.T) {
	kube := fake.NewClientset(deletingNamespace(time.Now()))
	md := newMetadataClient(partial("v1", "ConfigMap", "cm1"))
	failing := &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{
		{Group: "broken.io", Version: "v1"}: errors.New("boom"),
	}}
	calls := 0
	d := newDeleter(t, kube, md, func() ([]*metav1.APIResourceList, error) {
		calls++
		return resources(), failing
	})
	err := d.Delete(context.Background(), nsName)
	if err == nil || !strings.Contains(err.Error(), "broken.io/v1") {
		t.Fatalf("Delete error = %v, want the discovery failure", err)
	}
	if len(actionsOf(md.Actions(), "delete-collection", "configmaps", "")) != 1 {
		t.Error("discovered content not deleted despite partial discovery")
	}
	if len(actionsOf(kube.Actions(), "create", "namespaces", "finalize")) != 0 {
		t.Error("namespace finalized although discovery was incomplete")
	}
	wantCondition(t, lastStatus(t, kube), v1.NamespaceDeletionDiscoveryFailure, v1.ConditionTrue, "DiscoveryFailed",
		fmt.Sprintf("Discovery failed for some groups, 1 failing: %v", failing))
}

func TestGroupVersionParsingFailure(t *testing.T) {
	kube := fake.NewClientset(deletingNamespace(time.Now()))
	d := newDeleter(t, kube, newMetadataClient(), func() ([]*metav1.APIResourceList, error) {
		return append(resources(), &metav1.APIResourceList{GroupVersion: "a/b/c", APIResources: []metav1.APIResource{
			{Name: "things", Namespaced: true, Verbs: []string{"delete"}},
		}}), nil
	})
	if err := d.Delete(context.Background(), nsName); err == nil {
		t.Fatal("want an error for an unparsable group version")
	}
	c := findCondition(lastStatus(t, kube).Status.Conditions, v1.NamespaceDeletionGVParsingFailure)
	if c == nil || c.Status != v1.ConditionTrue || c.Reason != "GroupVersionParsingFailed" {
		t.Errorf("condition = %+v", c)
	}
}

// wantConfigMapsHeld runs a deletion pass and checks it reports held
// ConfigMaps, held by example.com/hold, as what remains.
func wantConfigMapsHeld(t *testing.T, d *namespacedResourcesDeleter, kube *fake.Clientset, held int) *v1.Namespace {
	t.Helper()
	err := d.Delete(context.Background(), nsName)
	var rr *ResourcesRemainingError
	if !errors.As(err, &rr) || rr.Estimate != finalizerWaitSeconds {
		t.Fatalf("Delete = %v, want ResourcesRemainingError{15}", err)
	}
	st := lastStatus(t, kube)
	wantCondition(t, st, v1.NamespaceContentRemaining, v1.ConditionTrue, "SomeResourcesRemain",
		fmt.Sprintf("Some resources are remaining: configmaps. has %d resource instances", held))
	wantCondition(t, st, v1.NamespaceFinalizersRemaining, v1.ConditionTrue, "SomeFinalizersRemain",
		fmt.Sprintf("Some content in the namespace has finalizers remaining: example.com/hold in %d resource instances", held))
	return st
}

func TestContentRemainingWithFinalizers(t *testing.T) {
	kube := fake.NewClientset(deletingNamespace(time.Now()))
	md := newMetadataClient(partial("v1", "ConfigMap", "held", "example.com/hold"), partial("v1", "ConfigMap", "free"))
	d := newDeleter(t, kube, md, func() ([]*metav1.APIResourceList, error) { return resources(), nil })

	st := wantConfigMapsHeld(t, d, kube, 1)
	wantCondition(t, st, v1.NamespaceDeletionContentFailure, v1.ConditionFalse, "ContentDeleted",
		"All content successfully deleted, may be waiting on finalization")
	if len(actionsOf(kube.Actions(), "create", "namespaces", "finalize")) != 0 {
		t.Error("finalized while content remains")
	}
}

func TestLeftoversWithoutFinalizersAreAnError(t *testing.T) {
	kube := fake.NewClientset(deletingNamespace(time.Now()))
	md := newMetadataClient(partial("v1", "ConfigMap", "stuck"))
	// deletecollection "succeeds" but deletes nothing.
	md.PrependReactor("delete-collection", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, nil })
	d := newDeleter(t, kube, md, func() ([]*metav1.APIResourceList, error) { return resources(), nil })

	err := d.Delete(context.Background(), nsName)
	if err == nil || !strings.Contains(err.Error(), "unexpected items still remain in namespace: doomed") {
		t.Fatalf("Delete = %v", err)
	}
	c := findCondition(lastStatus(t, kube).Status.Conditions, v1.NamespaceDeletionContentFailure)
	if c == nil || c.Status != v1.ConditionTrue || c.Reason != "ContentDeletionFailed" ||
		!strings.HasPrefix(c.Message, "Failed to delete all resource types, 1 remaining: unexpected items still remain") {
		t.Errorf("content failure condition = %+v", c)
	}
}

func TestPodGracePeriodEstimate(t *testing.T) {
	grace := func(s int64) *int64 { return &s }
	pods := []runtime.Object{
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: "slow"}, Spec: v1.PodSpec{TerminationGracePeriodSeconds: grace(120)}},
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: "done"}, Spec: v1.PodSpec{TerminationGracePeriodSeconds: grace(600)},
			Status: v1.PodStatus{Phase: v1.PodSucceeded}},
	}
	cases := []struct {
		name      string
		deletedAt time.Time
		want      int64 // 0: an error without estimate (pods left, no finalizers)
	}{
		{"within the grace period", time.Now(), 120},
		{"grace period over", time.Now().Add(-5 * time.Minute), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset(append([]runtime.Object{deletingNamespace(tc.deletedAt)}, pods...)...)
			// The pods are still terminating on the server.
			md := newMetadataClient(partial("v1", "Pod", "slow"), partial("v1", "ConfigMap", "cm"))
			md.PrependReactor("delete-collection", "pods", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, nil })
			d := newDeleter(t, kube, md, func() ([]*metav1.APIResourceList, error) { return resources(), nil })

			err := d.Delete(context.Background(), nsName)
			var rr *ResourcesRemainingError
			if tc.want > 0 {
				if !errors.As(err, &rr) || rr.Estimate != tc.want {
					t.Fatalf("Delete = %v, want estimate %d", err, tc.want)
				}
			} else if err == nil || errors.As(err, &rr) {
				t.Fatalf("Delete = %v, want a plain error", err)
			}
			if n := len(actionsOf(md.Actions(), "delete-collection", "configmaps", "")); n != 0 {
				t.Error("configmaps deleted while pods remain")
			}
		})
	}
}

// A pod already deleted gracefully is left as it is by a second delete
// without a grace period, so a pass sends none while every pod left is
// such a pod; one pod that a delete would still change gets it sent.
func TestPodDeletesAreNotResentWhileEveryPodTerminates(t *testing.T) {
	grace := func(s int64) *int64 { return &s }
	deleted := metav1.NewTime(time.Now())
	terminating := func(name string, deletionGrace int64) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: name,
			DeletionTimestamp: &deleted, DeletionGracePeriodSeconds: grace(deletionGrace)},
			Spec: v1.PodSpec{NodeName: "node-a", TerminationGracePeriodSeconds: grace(30)}}
	}
	live := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: "live"},
		Spec: v1.PodSpec{NodeName: "node-a", TerminationGracePeriodSeconds: grace(30)}}
	finished := terminating("finished", 30)
	finished.Status.Phase = v1.PodSucceeded
	cases := []struct {
		name     string
		pods     []*v1.Pod
		wantSent bool
	}{
		{"every pod terminating", []*v1.Pod{terminating("a", 30), terminating("b", 1), finished}, false},
		{"one pod not deleted yet", []*v1.Pod{terminating("a", 30), live}, true},
		{"one pod with a deletion grace period of zero", []*v1.Pod{terminating("a", 30), terminating("stuck", 0)}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{deletingNamespace(time.Now())}
			var left []runtime.Object
			for _, p := range tc.pods {
				objs = append(objs, p)
				left = append(left, partial("v1", "Pod", p.Name))
			}
			kube := fake.NewClientset(objs...)
			// The pods are still terminating on the server.
			md := newMetadataClient(append(left, partial("v1", "ConfigMap", "cm"))...)
			md.PrependReactor("delete-collection", "pods", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, nil })
			d := newDeleter(t, kube, md, func() ([]*metav1.APIResourceList, error) { return resources(), nil })

			err := d.Delete(context.Background(), nsName)
			var rr *ResourcesRemainingError
			if !errors.As(err, &rr) || rr.Estimate != 30 {
				t.Fatalf("Delete = %v, want pods remaining with estimate 30", err)
			}
			sent := len(actionsOf(md.Actions(), "delete-collection", "pods", "")) > 0
			if sent != tc.wantSent {
				t.Errorf("pods deleted again: %v, want %v", sent, tc.wantSent)
			}
			if n := len(actionsOf(md.Actions(), "delete-collection", "configmaps", "")); n != 0 {
				t.Error("configmaps deleted while pods remain")
			}
		})
	}
}

func TestNamespaceNotBeingDeletedIsLeftAlone(t *testing.T) {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}, Spec: v1.NamespaceSpec{Finalizers: []v1.FinalizerName{v1.FinalizerKubernetes}}}
	kube := fake.NewClientset(ns)
	md := newMetadataClient(partial("v1", "ConfigMap", "cm"))
	d := newDeleter(t, kube, md, func() ([]*metav1.APIResourceList, error) { return resources(), nil })
	kube.ClearActions()
	if err := d.Delete(context.Background(), nsName); err != nil {
		t.Fatal(err)
	}
	if a := kube.Actions(); len(a) != 1 || a[0].GetVerb() != "get" {
		t.Errorf("want a single get, got %v", a)
	}
	if len(md.Actions()) != 0 {
		t.Errorf("content touched: %v", md.Actions())
	}
	// A namespace that no longer exists is done too.
	if err := d.Delete(context.Background(), "gone"); err != nil {
		t.Errorf("Delete(gone) = %v", err)
	}
}

func TestConditionsOnlyChangeWhenDifferent(t *testing.T) {
	st := v1.NamespaceStatus{}
	if !mergeConditions(&st, nil) || len(st.Conditions) != 5 {
		t.Fatalf("first merge: %+v", st.Conditions)
	}
	if mergeConditions(&st, nil) {
		t.Error("unchanged conditions reported as changed")
	}
	failed := []v1.NamespaceCondition{trueCondition(v1.NamespaceDeletionDiscoveryFailure, "DiscoveryFailed", "x")}
	if !mergeConditions(&st, failed) {
		t.Error("failure not reported as a change")
	}
	c := findCondition(st.Conditions, v1.NamespaceDeletionDiscoveryFailure)
	if c.Status != v1.ConditionTrue || c.Message != "x" {
		t.Errorf("condition = %+v", c)
	}
}

func apierrorsMethodNotSupported() error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "configmaps"}, "deletecollection")
}

func TestStatusConflictIsRetriedOnFreshCopy(t *testing.T) {
	kube := fake.NewClientset(deletingNamespace(time.Now()))
	conflicts := 1
	kube.PrependReactor("update", "namespaces", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "namespaces"}, nsName, errors.New("stale"))
		}
		return false, nil, nil
	})
	d := newDeleter(t, kube, newMetadataClient(), func() ([]*metav1.APIResourceList, error) { return resources(), nil })
	if err := d.Delete(context.Background(), nsName); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if n := len(actionsOf(kube.Actions(), "get", "namespaces", "")); n != 2 {
		t.Errorf("want 2 gets (initial + after conflict), got %d", n)
	}
	if len(actionsOf(kube.Actions(), "create", "namespaces", "finalize")) != 1 {
		t.Error("not finalized after a retried conflict")
	}
}

func TestFinalizeNotFoundIsSuccess(t *testing.T) {
	kube := fake.NewClientset(deletingNamespace(time.Now()))
	kube.PrependReactor("create", "namespaces", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return a.GetSubresource() == "finalize", nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, nsName)
	})
	d := newDeleter(t, kube, newMetadataClient(), func() ([]*metav1.APIResourceList, error) { return resources(), nil })
	if err := d.Delete(context.Background(), nsName); err != nil {
		t.Fatalf("Delete = %v, want nil when another controller finished first", err)
	}
}

func TestStatusWrittenOnlyWhenChanged(t *testing.T) {
	ns := deletingNamespace(time.Now())
	ns.Status.Phase = v1.NamespaceTerminating
	mergeConditions(&ns.Status, nil) // already all healthy
	kube := fake.NewClientset(ns)
	d := newDeleter(t, kube, newMetadataClient(), func() ([]*metav1.APIResourceList, error) { return resources(), nil })
	if err := d.Delete(context.Background(), nsName); err != nil {
		t.Fatal(err)
	}
	if n := len(actionsOf(kube.Actions(), "update", "namespaces", "status")); n != 0 {
		t.Errorf("%d status writes for unchanged status, want 0", n)
	}
}

// limitRecorder keeps the limit of every list call, by resource.
type limitRecorder struct {
	mu     sync.Mutex
	limits map[string][]int64
}

func (r *limitRecorder) record(resource string, limit int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.limits == nil {
		r.limits = map[string][]int64{}
	}
	r.limits[resource] = append(r.limits[resource], limit)
}

func (r *limitRecorder) of(resource string) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.limits[resource]
}

// toPage cuts a full list down to what a server answers for opts: at most
// opts.Limit items in name order after the continue token (the last name
// of the page before), and a token while more are left.
func toPage(list runtime.Object, opts metav1.ListOptions) error {
	if opts.Limit == 0 {
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	name := func(o runtime.Object) string { m, _ := meta.Accessor(o); return m.GetName() }
	sort.Slice(items, func(i, j int) bool { return name(items[i]) < name(items[j]) })
	start := sort.Search(len(items), func(i int) bool { return name(items[i]) > opts.Continue })
	end := min(start+int(opts.Limit), len(items))
	if err := meta.SetList(list, items[start:end]); err != nil {
		return err
	}
	listMeta, err := meta.ListAccessor(list)
	if err != nil {
		return err
	}
	if end < len(items) {
		listMeta.SetContinue(name(items[end-1]))
	}
	return nil
}

// servePodPages makes kube answer pod lists in pages.
func servePodPages(kube *fake.Clientset, limits *limitRecorder) {
	listAll := clienttesting.ObjectReaction(kube.Tracker())
	kube.PrependReactor("list", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		opts := a.(clienttesting.ListActionImpl).GetListOptions()
		limits.record("pods", opts.Limit)
		_, list, err := listAll(a)
		if err != nil {
			return true, nil, err
		}
		return true, list, toPage(list, opts)
	})
}

// pagedMetadata answers lists in pages (the fake metadata client drops a
// list's limit and continue token before its reactors see them).
type pagedMetadata struct {
	metadata.Interface
	limits *limitRecorder
}

func (p pagedMetadata) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return pagedGetter{Getter: p.Interface.Resource(gvr), resource: gvr.Resource, limits: p.limits}
}

type pagedGetter struct {
	metadata.Getter
	resource string
	limits   *limitRecorder
}

func (g pagedGetter) Namespace(ns string) metadata.ResourceInterface {
	return pagedResource{ResourceInterface: g.Getter.Namespace(ns), resource: g.resource, limits: g.limits}
}

type pagedResource struct {
	metadata.ResourceInterface
	resource string
	limits   *limitRecorder
}

func (r pagedResource) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	r.limits.record(r.resource, opts.Limit)
	list, err := r.ResourceInterface.List(ctx, metav1.ListOptions{LabelSelector: opts.LabelSelector})
	if err != nil {
		return nil, err
	}
	return list, toPage(list, opts)
}

func wantPagedLists(t *testing.T, what string, limits []int64, pages int) {
	t.Helper()
	if len(limits) < pages {
		t.Errorf("%s: %d list calls, want at least %d pages", what, len(limits), pages)
	}
	for _, l := range limits {
		if l != listPageSize {
			t.Errorf("%s listed with limit %d, want %d (one page at a time)", what, l, listPageSize)
		}
	}
}

// A namespace's content is read a page at a time (one response holding a
// mass delete's every pod is the controller's largest allocation), and
// the pages add up to what one list would say: the longest grace period
// among the pods, however late it comes.
func TestPodsAreListedInPages(t *testing.T) {
	n := 2*listPageSize + 1
	objs := []runtime.Object{deletingNamespace(time.Now())}
	var partials []runtime.Object
	for i := range n {
		grace := int64(30)
		if i == n-1 {
			grace = 90 // on the last page
		}
		name := fmt.Sprintf("pod-%04d", i)
		objs = append(objs, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: name},
			Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace}})
		partials = append(partials, partial("v1", "Pod", name))
	}
	kube := fake.NewClientset(objs...)
	md := newMetadataClient(partials...)
	// The pods are still terminating on the server.
	md.PrependReactor("delete-collection", "pods", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, nil })
	podLimits, leftLimits := &limitRecorder{}, &limitRecorder{}
	servePodPages(kube, podLimits)
	d := newDeleter(t, kube, md, func() ([]*metav1.APIResourceList, error) { return resources(), nil })
	d.metadataClient = pagedMetadata{Interface: md, limits: leftLimits}

	err := d.Delete(context.Background(), nsName)
	var rr *ResourcesRemainingError
	if !errors.As(err, &rr) || rr.Estimate != 90 {
		t.Fatalf("Delete = %v, want the last page's grace period, 90", err)
	}
	wantPagedLists(t, "pods (grace periods)", podLimits.of("pods"), 3)
	wantPagedLists(t, "pods (what is left)", leftLimits.of("pods"), 3)
}

// What is left of other resources is counted over every page, and
// resources without deletecollection have every item deleted.
func TestRemainingContentIsCountedOverPages(t *testing.T) {
	n := 2*listPageSize + 1
	var objs []runtime.Object
	for i := range n {
		objs = append(objs, partial("v1", "ConfigMap", fmt.Sprintf("cm-%04d", i), "example.com/hold"),
			partial("example.io/v1", "Widget", fmt.Sprintf("w-%04d", i)))
	}
	kube := fake.NewClientset(deletingNamespace(time.Now()))
	md := newMetadataClient(objs...)
	limits := &limitRecorder{}
	d := newDeleter(t, kube, md, func() ([]*metav1.APIResourceList, error) { return resources(), nil })
	d.metadataClient = pagedMetadata{Interface: md, limits: limits}

	wantConfigMapsHeld(t, d, kube, n)
	if dels := len(actionsOf(md.Actions(), "delete", "widgets", "")); dels != n {
		t.Errorf("widgets: %d single deletes, want %d", dels, n)
	}
	// The deletes come after the listing, not between its pages: a run of
	// single deletes can outlive the snapshot the pages are read from.
	var deleting, listedAfter bool
	for _, a := range md.Actions() {
		if a.GetResource().Resource != "widgets" {
			continue
		}
		switch a.GetVerb() {
		case "delete":
			if listedAfter {
				t.Fatal("widgets: a page was listed between single deletes")
			}
			deleting = true
		case "list":
			listedAfter = deleting
		}
	}
	wantPagedLists(t, "configmaps", limits.of("configmaps"), 3)
	wantPagedLists(t, "widgets", limits.of("widgets"), 3)
}
