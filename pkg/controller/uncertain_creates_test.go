package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

func TestCreateMayHaveHappened(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("connection reset by peer"), true},
		{fmt.Errorf("creating: %w", errors.New("EOF")), true},
		{apierrors.NewTimeoutError("too slow", 1), true},
		{apierrors.NewServerTimeout(pods, "create", 1), true},
		{apierrors.NewInternalError(errors.New("etcd")), true},
		{apierrors.NewForbidden(pods, "", errors.New("quota")), false},
		{apierrors.NewAlreadyExists(pods, "p"), false},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil), false},
		{apierrors.NewTooManyRequests("slow down", 1), false},
	} {
		if got := CreateMayHaveHappened(tc.err); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestUncertainCreatesRecordAndTake(t *testing.T) {
	u := NewUncertainCreates()
	u.Record("ns/a", nil)
	u.Record("ns/b", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("quota")))
	u.Record("ns/c", errors.New("EOF"))
	if u.Take("ns/a") || u.Take("ns/b") {
		t.Error("a success or a refusal was marked uncertain")
	}
	if !u.Take("ns/c") {
		t.Fatal("a create with no answer was not marked")
	}
	if u.Take("ns/c") {
		t.Error("Take did not clear the mark")
	}
}

// recordingStore records what AwaitUncertainPods asks it to wait for.
type recordingStore struct{ wrote string }

func (s *recordingStore) WroteAt(_ types.NamespacedName, _ types.UID, _ schema.GroupResource, rv string) {
	s.wrote = rv
}
func (s *recordingStore) Clear(types.NamespacedName, types.UID) {}
func (s *recordingStore) EnsureReady(types.NamespacedName) error {
	if s.wrote == "" {
		return nil
	}
	return &ConsistencyError{WroteRV: s.wrote}
}

func TestAwaitUncertainPodsWaitsForTheNewest(t *testing.T) {
	owner := types.NamespacedName{Namespace: "ns", Name: "web"}
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	client := fake.NewClientset(
		newPodRV("a", "web", "12"), newPodRV("b", "web", "9"), newPodRV("c", "other", "30"))
	store := &recordingStore{}
	u := NewUncertainCreates()
	err := u.AwaitUncertainPods(context.Background(), client, store, "ns/web", owner, "uid", sel)
	var stale *ConsistencyError
	if !errors.As(err, &stale) || store.wrote != "12" {
		t.Fatalf("err %v, waiting for %q; want a wait for the newest selected pod, 12", err, store.wrote)
	}

	// No pod: nothing to wait for.
	empty := &recordingStore{}
	if err := u.AwaitUncertainPods(context.Background(), fake.NewClientset(), empty, "ns/web", owner, "uid", sel); err != nil || empty.wrote != "" {
		t.Fatalf("no pods: err %v, waiting for %q", err, empty.wrote)
	}

	// A failed list keeps the owner marked for the next sync.
	failing := fake.NewClientset()
	failing.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if err := u.AwaitUncertainPods(context.Background(), failing, &recordingStore{}, "ns/web", owner, "uid", sel); err == nil {
		t.Fatal("a failed list was not reported")
	}
	if !u.Take("ns/web") {
		t.Error("after a failed list the owner is no longer marked")
	}
}

func newPodRV(name, app, rv string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": app}, ResourceVersion: rv}}
}
