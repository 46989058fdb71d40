// Package history records the versions of a workload's template as
// ControllerRevisions, the way DaemonSets and StatefulSets keep the history
// they roll forward and back through. Names and hashes are bit-identical to
// upstream's, so revisions written by either controller are recognised by
// the other.
package history

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash"
	"hash/fnv"
	"sort"
	"strconv"

	apps "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/dump"

	appsinformers "k8s.io/client-go/informers/apps/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// ControllerRevisionHashLabel carries the hash of a revision's data.
const ControllerRevisionHashLabel = "controller.kubernetes.io/hash"

// maxPrefixLen keeps "<prefix>-<hash>" within the 253 characters of a DNS
// subdomain: a hash is at most 10 characters (a uint32 in decimal).
const maxPrefixLen = 223

// ControllerRevisionName is "<prefix>-<hash>", with prefix cut to 223 bytes.
func ControllerRevisionName(prefix, hash string) string {
	if len(prefix) > maxPrefixLen {
		prefix = prefix[:maxPrefixLen]
	}
	return prefix + "-" + hash
}

// NewControllerRevision builds (without creating it) a revision controlled by
// parent, labelled with templateLabels plus its hash, holding data. Its name
// is derived from the hash of data and collisionCount.
func NewControllerRevision(parent metav1.Object, parentKind schema.GroupVersionKind, templateLabels map[string]string, data runtime.RawExtension, revision int64, collisionCount *int32) (*apps.ControllerRevision, error) {
	lbls := make(map[string]string, len(templateLabels)+1)
	for k, v := range templateLabels {
		lbls[k] = v
	}
	cr := &apps.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Labels:          lbls,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(parent, parentKind)},
		},
		Data:     data,
		Revision: revision,
	}
	h := HashControllerRevision(cr, collisionCount)
	cr.Name = ControllerRevisionName(parent.GetName(), h)
	cr.Labels[ControllerRevisionHashLabel] = h
	return cr, nil
}

// HashControllerRevision is the FNV-32 hash of the revision's data (and of
// probe in decimal, when given), spelled with the "safe" alphabet that keeps
// words out of names.
//
// It reproduces upstream exactly, including a quirk: when Data.Object is
// set, hashing it resets the hash, so Data.Raw then does not count.
func HashControllerRevision(revision *apps.ControllerRevision, probe *int32) string {
	h := fnv.New32()
	if len(revision.Data.Raw) > 0 {
		_, _ = h.Write(revision.Data.Raw)
	}
	if revision.Data.Object != nil {
		deepHashObject(h, revision.Data.Object)
	}
	if probe != nil {
		_, _ = h.Write([]byte(strconv.FormatInt(int64(*probe), 10)))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// deepHashObject writes obj's spew dump, the form hashes have always used.
func deepHashObject(h hash.Hash, obj interface{}) {
	h.Reset()
	_, _ = fmt.Fprintf(h, "%v", dump.ForHash(obj))
}

// SortControllerRevisions orders revisions by Revision, then creation time,
// then name, so the newest revision is last.
func SortControllerRevisions(revisions []*apps.ControllerRevision) {
	sort.SliceStable(revisions, func(i, j int) bool {
		a, b := revisions[i], revisions[j]
		if a.Revision != b.Revision {
			return a.Revision < b.Revision
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// EqualRevision reports whether both are nil, or both hold the same data
// (byte-equal Raw and semantically equal Object).
func EqualRevision(lhs, rhs *apps.ControllerRevision) bool {
	if lhs == nil || rhs == nil {
		return lhs == rhs
	}
	return bytes.Equal(lhs.Data.Raw, rhs.Data.Raw) && apiequality.Semantic.DeepEqual(lhs.Data.Object, rhs.Data.Object)
}

// FindEqualRevisions returns, in their order, the revisions equal to needle.
func FindEqualRevisions(revisions []*apps.ControllerRevision, needle *apps.ControllerRevision) []*apps.ControllerRevision {
	var out []*apps.ControllerRevision
	for _, r := range revisions {
		if EqualRevision(r, needle) {
			out = append(out, r)
		}
	}
	return out
}

// Interface manages a controller's history. Arguments are never modified;
// returned revisions are new objects (or, for List, shared cache objects
// the caller must not modify).
type Interface interface {
	// ListControllerRevisions returns the revisions in parent's namespace
	// matching selector that parent controls or that nobody controls (so
	// the caller can adopt them).
	ListControllerRevisions(parent metav1.Object, selector labels.Selector) ([]*apps.ControllerRevision, error)
	// CreateControllerRevision creates revision named after its hash and
	// *collisionCount. When that name holds different data, *collisionCount
	// is incremented and the create retried; when it holds the same data,
	// the existing revision is returned. collisionCount must not be nil.
	CreateControllerRevision(ctx context.Context, parent metav1.Object, revision *apps.ControllerRevision, collisionCount *int32) (*apps.ControllerRevision, error)
	// DeleteControllerRevision deletes revision.
	DeleteControllerRevision(ctx context.Context, revision *apps.ControllerRevision) error
	// UpdateControllerRevision sets revision's Revision to newRevision,
	// retrying on conflicts.
	UpdateControllerRevision(ctx context.Context, revision *apps.ControllerRevision, newRevision int64) (*apps.ControllerRevision, error)
	// AdoptControllerRevision makes parent the controller of an orphan
	// revision; it fails if the revision already has a controller.
	AdoptControllerRevision(ctx context.Context, parent metav1.Object, parentKind schema.GroupVersionKind, revision *apps.ControllerRevision) (*apps.ControllerRevision, error)
	// ReleaseControllerRevision removes parent from revision's owners. A
	// revision that is gone or no longer owned by parent gives (nil, nil).
	ReleaseControllerRevision(ctx context.Context, parent metav1.Object, revision *apps.ControllerRevision) (*apps.ControllerRevision, error)
}

// ownedOrOrphan keeps the revisions parent controls or nobody controls.
func ownedOrOrphan(parent metav1.Object, revisions []*apps.ControllerRevision) []*apps.ControllerRevision {
	var out []*apps.ControllerRevision
	for _, r := range revisions {
		if ref := metav1.GetControllerOfNoCopy(r); ref == nil || ref.UID == parent.GetUID() {
			out = append(out, r)
		}
	}
	return out
}

// createWithCollisions runs the naming loop shared by both implementations:
// create returns the object stored under the name on AlreadyExists.
func createWithCollisions(parent metav1.Object, revision *apps.ControllerRevision, collisionCount *int32, create func(*apps.ControllerRevision) (*apps.ControllerRevision, error)) (*apps.ControllerRevision, error) {
	if collisionCount == nil {
		return nil, fmt.Errorf("collisionCount should not be nil")
	}
	clone := revision.DeepCopy()
	clone.Namespace = parent.GetNamespace()
	for {
		clone.Name = ControllerRevisionName(parent.GetName(), HashControllerRevision(revision, collisionCount))
		created, err := create(clone)
		if !apierrors.IsAlreadyExists(err) {
			return created, err
		}
		if created != nil && bytes.Equal(created.Data.Raw, clone.Data.Raw) {
			// Our own earlier create, seen again: nothing collided.
			return created, nil
		}
		*collisionCount++
	}
}

type ownerRefPatch struct {
	Metadata ownerRefPatchMeta `json:"metadata"`
}

type ownerRefPatchMeta struct {
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
	// UID makes the server reject the patch if the revision was recreated.
	UID types.UID `json:"uid"`
}

func adoptPatch(parent metav1.Object, parentKind schema.GroupVersionKind, revision *apps.ControllerRevision) ([]byte, error) {
	return json.Marshal(ownerRefPatch{Metadata: ownerRefPatchMeta{
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(parent, parentKind)},
		UID:             revision.UID,
	}})
}

// NewHistory returns the Interface used in production: reads from lister,
// writes through client.
func NewHistory(client clientset.Interface, lister appslisters.ControllerRevisionLister) Interface {
	return &realHistory{client: client, lister: lister}
}

type realHistory struct {
	client clientset.Interface
	lister appslisters.ControllerRevisionLister
}

func (h *realHistory) ListControllerRevisions(parent metav1.Object, selector labels.Selector) ([]*apps.ControllerRevision, error) {
	all, err := h.lister.ControllerRevisions(parent.GetNamespace()).List(selector)
	if err != nil {
		return nil, err
	}
	return ownedOrOrphan(parent, all), nil
}

func (h *realHistory) CreateControllerRevision(ctx context.Context, parent metav1.Object, revision *apps.ControllerRevision, collisionCount *int32) (*apps.ControllerRevision, error) {
	revs := h.client.AppsV1().ControllerRevisions(parent.GetNamespace())
	return createWithCollisions(parent, revision, collisionCount, func(cr *apps.ControllerRevision) (*apps.ControllerRevision, error) {
		created, err := revs.Create(ctx, cr, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return created, err
		}
		existing, getErr := revs.Get(ctx, cr.Name, metav1.GetOptions{})
		if getErr != nil {
			return nil, getErr
		}
		return existing, err
	})
}

func (h *realHistory) DeleteControllerRevision(ctx context.Context, revision *apps.ControllerRevision) error {
	return h.client.AppsV1().ControllerRevisions(revision.Namespace).Delete(ctx, revision.Name, metav1.DeleteOptions{})
}

func (h *realHistory) UpdateControllerRevision(ctx context.Context, revision *apps.ControllerRevision, newRevision int64) (*apps.ControllerRevision, error) {
	revs := h.client.AppsV1().ControllerRevisions(revision.Namespace)
	current := revision.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if current.Revision == newRevision {
			return nil
		}
		current.Revision = newRevision
		updated, err := revs.Update(ctx, current, metav1.UpdateOptions{})
		if err == nil {
			current = updated
			return nil
		}
		// Conflict or not, start the next try from the cache's copy.
		if cached, getErr := h.lister.ControllerRevisions(current.Namespace).Get(current.Name); getErr == nil {
			current = cached.DeepCopy()
		}
		return err
	})
	return current, err
}

func (h *realHistory) AdoptControllerRevision(ctx context.Context, parent metav1.Object, parentKind schema.GroupVersionKind, revision *apps.ControllerRevision) (*apps.ControllerRevision, error) {
	if owner := metav1.GetControllerOfNoCopy(revision); owner != nil {
		return nil, fmt.Errorf("attempt to adopt revision owned by %v", owner)
	}
	patch, err := adoptPatch(parent, parentKind, revision)
	if err != nil {
		return nil, err
	}
	return h.client.AppsV1().ControllerRevisions(parent.GetNamespace()).Patch(ctx, revision.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
}

func (h *realHistory) ReleaseControllerRevision(ctx context.Context, parent metav1.Object, revision *apps.ControllerRevision) (*apps.ControllerRevision, error) {
	patch, err := controller.GenerateDeleteOwnerRefStrategicMergeBytes(revision.UID, []types.UID{parent.GetUID()})
	if err != nil {
		return nil, err
	}
	released, err := h.client.AppsV1().ControllerRevisions(revision.Namespace).Patch(ctx, revision.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	// Gone, or no longer ours to release (Invalid: the UID precondition
	// failed or no owner references were left): nothing to do.
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil, nil
	}
	return released, err
}

// NewFakeHistory returns an Interface for unit tests whose writes go
// straight to informer's indexer, so a following List sees them.
func NewFakeHistory(informer appsinformers.ControllerRevisionInformer) Interface {
	return &fakeHistory{indexer: informer.Informer().GetIndexer(), lister: informer.Lister()}
}

type fakeHistory struct {
	indexer cache.Indexer
	lister  appslisters.ControllerRevisionLister
}

var revisionsResource = apps.Resource("controllerrevisions")

func (h *fakeHistory) get(namespace, name string) (*apps.ControllerRevision, error) {
	obj, found, err := h.indexer.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, apierrors.NewNotFound(revisionsResource, name)
	}
	return obj.(*apps.ControllerRevision), nil
}

func (h *fakeHistory) ListControllerRevisions(parent metav1.Object, selector labels.Selector) ([]*apps.ControllerRevision, error) {
	all, err := h.lister.ControllerRevisions(parent.GetNamespace()).List(selector)
	if err != nil {
		return nil, err
	}
	return ownedOrOrphan(parent, all), nil
}

func (h *fakeHistory) CreateControllerRevision(_ context.Context, parent metav1.Object, revision *apps.ControllerRevision, collisionCount *int32) (*apps.ControllerRevision, error) {
	return createWithCollisions(parent, revision, collisionCount, func(cr *apps.ControllerRevision) (*apps.ControllerRevision, error) {
		if existing, err := h.get(cr.Namespace, cr.Name); err == nil {
			return existing, apierrors.NewAlreadyExists(revisionsResource, cr.Name)
		}
		stored := cr.DeepCopy()
		return stored, h.indexer.Add(stored)
	})
}

func (h *fakeHistory) DeleteControllerRevision(_ context.Context, revision *apps.ControllerRevision) error {
	existing, err := h.get(revision.Namespace, revision.Name)
	if err != nil {
		return err
	}
	return h.indexer.Delete(existing)
}

func (h *fakeHistory) UpdateControllerRevision(_ context.Context, revision *apps.ControllerRevision, newRevision int64) (*apps.ControllerRevision, error) {
	clone := revision.DeepCopy()
	clone.Revision = newRevision
	return clone, h.indexer.Update(clone)
}

func (h *fakeHistory) AdoptControllerRevision(_ context.Context, parent metav1.Object, parentKind schema.GroupVersionKind, revision *apps.ControllerRevision) (*apps.ControllerRevision, error) {
	if owner := metav1.GetControllerOfNoCopy(revision); owner != nil {
		return nil, fmt.Errorf("attempt to adopt revision owned by %v", owner)
	}
	if _, err := h.get(revision.Namespace, revision.Name); err != nil {
		return nil, err
	}
	clone := revision.DeepCopy()
	clone.OwnerReferences = append(clone.OwnerReferences, *metav1.NewControllerRef(parent, parentKind))
	return clone, h.indexer.Update(clone)
}

func (h *fakeHistory) ReleaseControllerRevision(_ context.Context, parent metav1.Object, revision *apps.ControllerRevision) (*apps.ControllerRevision, error) {
	if _, err := h.get(revision.Namespace, revision.Name); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	clone := revision.DeepCopy()
	clone.OwnerReferences = nil
	for _, ref := range revision.OwnerReferences {
		if ref.UID != parent.GetUID() {
			clone.OwnerReferences = append(clone.OwnerReferences, ref)
		}
	}
	return clone, h.indexer.Update(clone)
}
