package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/sets"
	clientset "k8s.io/client-go/kubernetes"
)

// CreateMayHaveHappened: the create failed without the API server saying
// it was refused (the connection broke, or the server timed out or failed
// inside), so the object may exist even though the create returned an
// error.
func CreateMayHaveHappened(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsInternalError(err) ||
		apierrors.IsUnexpectedServerError(err)
}

// UncertainCreates remembers the owners (by key) a pod create of which
// failed with CreateMayHaveHappened. Expectations are lowered after any
// failed create, so the owner's next sync, from a cache that has not seen
// such a pod, would create it a second time; AwaitUncertainPods prevents
// that. Safe for concurrent use.
type UncertainCreates struct {
	mu   sync.Mutex
	keys sets.Set[string]
}

// NewUncertainCreates returns an empty set.
func NewUncertainCreates() *UncertainCreates {
	return &UncertainCreates{keys: sets.New[string]()}
}

// Record marks key if err leaves the create's outcome unknown.
func (u *UncertainCreates) Record(key string, err error) {
	if err == nil || !CreateMayHaveHappened(err) {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.keys.Insert(key)
}

// Take clears key and reports whether it was marked.
func (u *UncertainCreates) Take(key string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	was := u.keys.Has(key)
	u.keys.Delete(key)
	return was
}

// Forget clears key (its owner is gone).
func (u *UncertainCreates) Forget(key string) { u.Take(key) }

var podsResource = schema.GroupResource{Resource: "pods"}

// AwaitUncertainPods runs at the start of a sync after Take(key) reported
// a create with no answer: one live list of the owner's pods says what
// exists, and the sync then waits, as after its own writes, until the pod
// cache is as new as the newest of them (EnsureReady's error). If the list
// fails, key is marked again and the error returned.
func (u *UncertainCreates) AwaitUncertainPods(ctx context.Context, client clientset.Interface, store ConsistencyStore,
	key string, owner types.NamespacedName, ownerUID types.UID, selector labels.Selector) error {
	pods, err := client.CoreV1().Pods(owner.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		u.mu.Lock()
		u.keys.Insert(key)
		u.mu.Unlock()
		return fmt.Errorf("listing the pods of %s after a create with no answer: %w", owner, err)
	}
	newest := ""
	for i := range pods.Items {
		rv := pods.Items[i].ResourceVersion
		if newest == "" {
			newest = rv
		} else if cmp, err := resourceversion.CompareResourceVersion(rv, newest); err == nil && cmp > 0 {
			newest = rv
		}
	}
	if newest == "" {
		return nil
	}
	store.WroteAt(owner, ownerUID, podsResource, newest)
	return store.EnsureReady(owner)
}
