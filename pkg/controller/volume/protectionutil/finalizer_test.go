package protectionutil

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestAddRemoveUseUpdate(t *testing.T) {
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Finalizers: []string{"other"}}}
	client := fake.NewClientset(pv)
	f := Finalizer[*v1.PersistentVolume]{Name: "kubernetes.io/pv-protection", Kind: "PV", Update: client.CoreV1().PersistentVolumes().Update}
	ctx := context.Background()

	if !NeedsFinalizer(pv, f.Name) || IsDeletionCandidate(pv, f.Name) {
		t.Fatal("fresh PV should need the finalizer")
	}
	if err := f.Add(ctx, pv); err != nil {
		t.Fatal(err)
	}
	got, _ := client.CoreV1().PersistentVolumes().Get(ctx, "pv", metav1.GetOptions{})
	if !slices.Equal(got.Finalizers, []string{"other", f.Name}) {
		t.Fatalf("after Add: %v", got.Finalizers)
	}
	if len(pv.Finalizers) != 1 {
		t.Fatalf("Add modified the cached object: %v", pv.Finalizers)
	}
	if err := f.Remove(ctx, got); err != nil {
		t.Fatal(err)
	}
	got, _ = client.CoreV1().PersistentVolumes().Get(ctx, "pv", metav1.GetOptions{})
	if !slices.Equal(got.Finalizers, []string{"other"}) {
		t.Fatalf("after Remove: %v", got.Finalizers)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			t.Fatalf("unexpected patch: %v", a)
		}
	}
}

func TestReconcileKeepsFinalizerWhileInUse(t *testing.T) {
	now := metav1.Now()
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", DeletionTimestamp: &now, Finalizers: []string{"p"}}}
	client := fake.NewClientset(pv)
	f := Finalizer[*v1.PersistentVolume]{Name: "p", Kind: "PV", Update: client.CoreV1().PersistentVolumes().Update}
	ctx := context.Background()

	if err := f.Reconcile(ctx, pv, func() (bool, error) { return true, nil }, 4); err != nil {
		t.Fatal(err)
	}
	if n := len(client.Actions()); n != 0 {
		t.Fatalf("in-use object was written: %d actions", n)
	}
	if err := f.Reconcile(ctx, pv, func() (bool, error) { return false, nil }, 4); err != nil {
		t.Fatal(err)
	}
	got, _ := client.CoreV1().PersistentVolumes().Get(ctx, "pv", metav1.GetOptions{})
	if len(got.Finalizers) != 0 {
		t.Fatalf("finalizer not removed: %v", got.Finalizers)
	}
}

func TestNeedsWrite(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		meta metav1.ObjectMeta
		want bool
	}{
		{"alive without finalizer", metav1.ObjectMeta{}, true},
		{"alive with finalizer", metav1.ObjectMeta{Finalizers: []string{"p"}}, false},
		{"deleted with finalizer", metav1.ObjectMeta{DeletionTimestamp: &now, Finalizers: []string{"p"}}, true},
		{"deleted without finalizer", metav1.ObjectMeta{DeletionTimestamp: &now, Finalizers: []string{"x"}}, false},
	} {
		if got := NeedsWrite(&v1.PersistentVolume{ObjectMeta: tc.meta}, "p"); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
