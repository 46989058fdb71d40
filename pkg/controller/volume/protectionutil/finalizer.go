// Package protectionutil holds the finalizer handling the PV, PVC and
// VolumeAttributesClass protection controllers share.
package protectionutil

import (
	"context"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Object is a protected API object; DeepCopy returns its own type.
type Object[T any] interface {
	metav1.Object
	DeepCopy() T
}

// IsDeletionCandidate: being deleted and still held by finalizer.
func IsDeletionCandidate(obj metav1.Object, finalizer string) bool {
	return obj.GetDeletionTimestamp() != nil && slices.Contains(obj.GetFinalizers(), finalizer)
}

// NeedsFinalizer: alive and not yet holding finalizer.
func NeedsFinalizer(obj metav1.Object, finalizer string) bool {
	return obj.GetDeletionTimestamp() == nil && !slices.Contains(obj.GetFinalizers(), finalizer)
}

// NeedsWrite: a sync would add or remove finalizer, so the object is worth
// queueing.
func NeedsWrite(obj metav1.Object, finalizer string) bool {
	return NeedsFinalizer(obj, finalizer) || IsDeletionCandidate(obj, finalizer)
}

// Finalizer adds and removes one protection finalizer.
type Finalizer[T Object[T]] struct {
	Name string
	// Kind names the object in logs ("PV", "PVC", "VAC").
	Kind string
	// Update writes the object. An Update (not a patch) carries the cached
	// resourceVersion, so a decision taken on a stale object fails with a
	// conflict and is retried on fresh data.
	Update func(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	// ErrorLogs logs failed writes as errors instead of at V(3).
	ErrorLogs bool
}

// Add writes obj with the finalizer appended.
func (f Finalizer[T]) Add(ctx context.Context, obj T) error {
	err := f.write(ctx, obj, append(slices.Clone(obj.GetFinalizers()), f.Name))
	f.log(ctx, obj, err, "Error adding protection finalizer to ", "Added protection finalizer to ")
	return err
}

// Remove writes obj without the finalizer.
func (f Finalizer[T]) Remove(ctx context.Context, obj T) error {
	kept := slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(s string) bool { return s == f.Name })
	err := f.write(ctx, obj, kept)
	f.log(ctx, obj, err, "Error removing protection finalizer from ", "Removed protection finalizer from ")
	return err
}

func (f Finalizer[T]) write(ctx context.Context, obj T, finalizers []string) error {
	clone := obj.DeepCopy()
	clone.SetFinalizers(finalizers)
	_, err := f.Update(ctx, clone, metav1.UpdateOptions{})
	return err
}

func (f Finalizer[T]) log(ctx context.Context, obj T, err error, failMsg, okMsg string) {
	logger := klog.FromContext(ctx)
	switch {
	case err != nil && f.ErrorLogs:
		logger.Error(err, failMsg+f.Kind, f.Kind, klog.KObj(obj))
	case err != nil:
		logger.V(3).Info(failMsg+f.Kind, f.Kind, klog.KObj(obj), "err", err)
	default:
		logger.V(3).Info(okMsg+f.Kind, f.Kind, klog.KObj(obj))
	}
}

// Reconcile adds the finalizer to a live object and removes it from a
// deleted one once inUse says nothing needs it any more.
func (f Finalizer[T]) Reconcile(ctx context.Context, obj T, inUse func() (bool, error), keepLogLevel int) error {
	switch {
	case IsDeletionCandidate(obj, f.Name):
		used, err := inUse()
		if err != nil {
			return err
		}
		if used {
			klog.FromContext(ctx).V(keepLogLevel).Info("Keeping "+f.Kind+" because it is being used", f.Kind, klog.KObj(obj))
			return nil
		}
		return f.Remove(ctx, obj)
	case NeedsFinalizer(obj, f.Name):
		return f.Add(ctx, obj)
	}
	return nil
}

// SyncClusterScoped is one sync of a cluster-scoped object (PV, VAC): read
// it from get (a lister) and reconcile its finalizer.
func (f Finalizer[T]) SyncClusterScoped(ctx context.Context, name string, get func(string) (T, error), inUse func(T) bool) error {
	logger := klog.FromContext(ctx)
	ref := klog.KRef("", name)
	logger.V(4).Info("Processing "+f.Kind, f.Kind, ref)
	start := time.Now()
	defer func() {
		logger.V(4).Info("Finished processing "+f.Kind, f.Kind, ref, "cost", time.Since(start))
	}()

	obj, err := get(name)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info(f.Kind+" not found, ignoring", f.Kind, ref)
		return nil
	}
	if err != nil {
		return err
	}
	return f.Reconcile(ctx, obj, func() (bool, error) { return inUse(obj), nil }, 4)
}
