package garbagecollector

import (
	"context"
	"encoding/json"
	"fmt"
	"k8s.io/utils/ptr"
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// apiResource maps apiVersion/kind to its resource and scope.
func (gc *GarbageCollector) apiResource(apiVersion, kind string) (schema.GroupVersionResource, bool, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	mapping, err := gc.restMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, &restMappingError{kind: kind, version: apiVersion}
	}
	return mapping.Resource, mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func namespaceFor(namespaced bool, ns string) string {
	if namespaced {
		return ns
	}
	return ""
}

// deleteObject deletes item with a UID precondition and, when known, the
// resourceVersion at which its owners were classified, so a dependent that
// changed meanwhile is not deleted on stale grounds.
func (gc *GarbageCollector) deleteObject(ctx context.Context, item objectReference, resourceVersion string, ownersAtResourceVersion []metav1.OwnerReference, policy *metav1.DeletionPropagation) error {
	resource, namespaced, err := gc.apiResource(item.APIVersion, item.Kind)
	if err != nil {
		return err
	}
	uid := item.UID
	pre := metav1.Preconditions{UID: &uid}
	if resourceVersion != "" {
		pre.ResourceVersion = &resourceVersion
	}
	client := gc.metadataClient.Resource(resource).Namespace(namespaceFor(namespaced, item.Namespace))
	err = client.Delete(ctx, item.Name, metav1.DeleteOptions{Preconditions: &pre, PropagationPolicy: policy})
	if apierrors.IsConflict(err) && resourceVersion != "" {
		// Only the resourceVersion moved on and the owners are unchanged:
		// the decision still holds, delete with the UID precondition alone.
		live, liveErr := client.Get(ctx, item.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(liveErr) {
			return liveErr
		}
		if liveErr == nil && live.UID == item.UID && live.ResourceVersion != resourceVersion &&
			reflect.DeepEqual(live.OwnerReferences, ownersAtResourceVersion) {
			return gc.deleteObject(ctx, item, "", nil, policy)
		}
	}
	return err
}

func (gc *GarbageCollector) getObject(ctx context.Context, item objectReference) (*metav1.PartialObjectMetadata, error) {
	resource, namespaced, err := gc.apiResource(item.APIVersion, item.Kind)
	if err != nil {
		return nil, err
	}
	ns := namespaceFor(namespaced, item.Namespace)
	if namespaced && ns == "" {
		return nil, errNamespacedOwnerOfClusterScopedObject
	}
	return gc.metadataClient.Resource(resource).Namespace(ns).Get(ctx, item.Name, metav1.GetOptions{})
}

func (gc *GarbageCollector) patchObject(ctx context.Context, item objectReference, patch []byte, pt types.PatchType) (*metav1.PartialObjectMetadata, error) {
	resource, namespaced, err := gc.apiResource(item.APIVersion, item.Kind)
	if err != nil {
		return nil, err
	}
	return gc.metadataClient.Resource(resource).Namespace(namespaceFor(namespaced, item.Namespace)).
		Patch(ctx, item.Name, pt, patch, metav1.PatchOptions{})
}

type finalizersPatch struct {
	Metadata finalizersPatchMeta `json:"metadata"`
}

type finalizersPatchMeta struct {
	ResourceVersion string   `json:"resourceVersion"`
	Finalizers      []string `json:"finalizers"`
}

type ownerRefsPatch struct {
	Metadata ownerRefsPatchMeta `json:"metadata"`
}

type ownerRefsPatchMeta struct {
	ResourceVersion string                  `json:"resourceVersion"`
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
}

// removeFinalizer drops finalizer from owner with a JSON merge patch pinned
// to the resourceVersion read, retrying on conflicts. The first attempt
// patches known, when the caller has just read owner (the pin makes a
// stale copy fail with a conflict, and the retry reads it again).
func (gc *GarbageCollector) removeFinalizer(ctx context.Context, owner *node, finalizer string, known *metav1.PartialObjectMetadata) error {
	logger := klog.FromContext(ctx)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		obj, err := known, error(nil)
		known = nil
		if obj == nil {
			obj, err = gc.getObject(ctx, owner.identity)
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cannot finalize owner %s, because cannot get it: %w. The garbage collector will retry later", owner.identity, err)
		}
		var kept []string
		found := false
		for _, f := range obj.GetFinalizers() {
			if f == finalizer {
				found = true
				continue
			}
			kept = append(kept, f)
		}
		if !found {
			logger.V(5).Info("finalizer already removed from object", "finalizer", finalizer, "object", owner.identity)
			return nil
		}
		patch, err := json.Marshal(finalizersPatch{finalizersPatchMeta{ResourceVersion: obj.GetResourceVersion(), Finalizers: kept}})
		if err != nil {
			return fmt.Errorf("unable to finalize %s due to an error serializing patch: %w", owner.identity, err)
		}
		_, err = gc.patchObject(ctx, owner.identity, patch, types.MergePatchType)
		return err
	})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("updateMaxRetries(%d) has reached. The garbage collector will retry later for owner %v", retry.DefaultBackoff.Steps, owner.identity)
	}
	return err
}

// getMetadata reads an object's metadata from its monitor's cache, falling
// back to the API server.
func (gc *GarbageCollector) getMetadata(ctx context.Context, ref objectReference) (metav1.Object, error) {
	cached, err := gc.cachedObject(ref)
	if err != nil {
		return nil, err
	}
	if cached != nil {
		return cached, nil
	}
	resource, namespaced, err := gc.apiResource(ref.APIVersion, ref.Kind)
	if err != nil {
		return nil, err
	}
	return gc.metadataClient.Resource(resource).Namespace(namespaceFor(namespaced, ref.Namespace)).Get(ctx, ref.Name, metav1.GetOptions{})
}

// latestObject is the item as the monitor's cache holds it, else as the
// API server does. A cached copy may be behind; every write decided on it
// is pinned to its resourceVersion (deleteObject, removeFinalizer) or
// idempotent (the owner-reference patches), so a stale copy costs a
// conflict and a retry, never a wrong write. Upstream reads every item
// live; the cache saves that read for each object collected. fromCache
// tells which source answered.
func (gc *GarbageCollector) latestObject(ctx context.Context, item objectReference) (latest *metav1.PartialObjectMetadata, fromCache bool, err error) {
	cached, err := gc.cachedObject(item)
	if err != nil {
		return nil, false, err
	}
	if cached != nil {
		return cached, true, nil
	}
	latest, err = gc.getObject(ctx, item)
	return latest, false, err
}

// cachedObject returns a copy of ref's metadata from its monitor's cache,
// or nil when there is no monitor or the cache does not hold the object.
func (gc *GarbageCollector) cachedObject(ref objectReference) (*metav1.PartialObjectMetadata, error) {
	resource, namespaced, err := gc.apiResource(ref.APIVersion, ref.Kind)
	if err != nil {
		return nil, err
	}
	ns := namespaceFor(namespaced, ref.Namespace)
	if namespaced && ns == "" {
		return nil, nil // not a key the cache holds; the live read says why
	}
	gc.dependencyGraphBuilder.monitorLock.RLock()
	m := gc.dependencyGraphBuilder.monitors[resource]
	gc.dependencyGraphBuilder.monitorLock.RUnlock()
	if m == nil {
		return nil, nil
	}
	key := ref.Name
	if ns != "" {
		key = ns + "/" + ref.Name
	}
	raw, exists, err := m.store.GetByKey(key)
	if err != nil || !exists {
		return nil, err
	}
	acc, err := meta.Accessor(raw)
	if err != nil {
		return nil, err
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: ref.APIVersion, Kind: ref.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name:              acc.GetName(),
			Namespace:         acc.GetNamespace(),
			UID:               acc.GetUID(),
			ResourceVersion:   acc.GetResourceVersion(),
			DeletionTimestamp: acc.GetDeletionTimestamp().DeepCopy(),
			Finalizers:        slices.Clone(acc.GetFinalizers()),
			OwnerReferences:   slices.Clone(acc.GetOwnerReferences()),
		},
	}, nil
}

// patch applies a strategic merge patch and, for resources that do not
// support it (custom resources answer 415), the JSON merge patch jmp builds.
func (gc *GarbageCollector) patch(ctx context.Context, item *node, smp []byte, jmp func(context.Context, *node) ([]byte, error)) (*metav1.PartialObjectMetadata, error) {
	out, err := gc.patchObject(ctx, item.identity, smp, types.StrategicMergePatchType)
	if err == nil || !apierrors.IsUnsupportedMediaType(err) {
		return out, err
	}
	p, err := jmp(ctx, item)
	if err != nil {
		return nil, err
	}
	return gc.patchObject(ctx, item.identity, p, types.MergePatchType)
}

// deleteOwnerRefJSONMergePatch rewrites the whole ownerReferences list
// without ownerUIDs; the resourceVersion makes it fail on a concurrent edit.
func (gc *GarbageCollector) deleteOwnerRefJSONMergePatch(ctx context.Context, item *node, ownerUIDs ...types.UID) ([]byte, error) {
	obj, err := gc.getMetadata(ctx, item.identity)
	if err != nil {
		return nil, err
	}
	m := ownerRefsPatchMeta{ResourceVersion: obj.GetResourceVersion()}
	for _, ref := range obj.GetOwnerReferences() {
		if !slices.Contains(ownerUIDs, ref.UID) {
			m.OwnerReferences = append(m.OwnerReferences, ref)
		}
	}
	return json.Marshal(ownerRefsPatch{m})
}

// unblockedOwnerReferences returns refs' blocking references with
// blockOwnerDeletion set to false, or nothing when none blocks.
func unblockedOwnerReferences(refs []metav1.OwnerReference) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, ref := range refs {
		if ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
			ref.BlockOwnerDeletion = ptr.To(false)
			out = append(out, ref)
		}
	}
	return out
}

// unblockOwnerReferencesStrategicMergePatch sets blockOwnerDeletion=false
// on the given references (merged by UID), preconditioned on n's UID.
func (n *node) unblockOwnerReferencesStrategicMergePatch(unblocked []metav1.OwnerReference) ([]byte, error) {
	return json.Marshal(uidOwnerRefsPatch{uidOwnerRefsPatchMeta{UID: n.identity.UID, OwnerReferences: unblocked}})
}

type uidOwnerRefsPatch struct {
	Metadata uidOwnerRefsPatchMeta `json:"metadata"`
}

type uidOwnerRefsPatchMeta struct {
	UID types.UID `json:"uid"`
	// omitempty: a null list in a strategic merge patch deletes every
	// owner reference, which would orphan the object.
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences,omitempty"`
}

func (gc *GarbageCollector) unblockOwnerReferencesJSONMergePatch(ctx context.Context, n *node) ([]byte, error) {
	obj, err := gc.getMetadata(ctx, n.identity)
	if err != nil {
		return nil, err
	}
	m := ownerRefsPatchMeta{ResourceVersion: obj.GetResourceVersion()}
	for _, ref := range obj.GetOwnerReferences() {
		ref.BlockOwnerDeletion = ptr.To(false)
		m.OwnerReferences = append(m.OwnerReferences, ref)
	}
	return json.Marshal(ownerRefsPatch{m})
}
