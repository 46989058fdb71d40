package statefulset

import (
	"context"
	"encoding/json"
	"fmt"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/lru"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/history"
)

// A StatefulSet revision stores a strategic-merge patch that, applied to
// the set, restores its pod template:
//
//	{"spec":{"template":{"$patch":"replace", ...the template...}}}
//
// The bytes are produced exactly as upstream produces them (the set
// encoded as apps/v1 JSON, decoded into maps, re-marshalled with sorted
// keys), so revision names match upstream's and switching controllers
// does not roll any pod.

// setCodec encodes StatefulSets as apps/v1 JSON, apiVersion and kind
// included.
var setCodec = scheme.Codecs.LegacyCodec(apps.SchemeGroupVersion)

// revisionPatch returns the revision data for set's current template.
func revisionPatch(set *apps.StatefulSet) ([]byte, error) {
	encoded, err := runtime.Encode(setCodec, set)
	if err != nil {
		return nil, err
	}
	var obj map[string]interface{}
	if err := json.Unmarshal(encoded, &obj); err != nil {
		return nil, err
	}
	spec, ok := obj["spec"].(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("encoded StatefulSet %s/%s has no spec", set.Namespace, set.Name)
	}
	template, ok := spec["template"].(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("encoded StatefulSet %s/%s has no template", set.Namespace, set.Name)
	}
	template["$patch"] = "replace"
	return json.Marshal(map[string]interface{}{
		"spec": map[string]interface{}{"template": template},
	})
}

// newRevision builds (without creating) the revision for set's template,
// numbered revision. It carries the template's labels and the set's
// annotations.
func newRevision(set *apps.StatefulSet, revision int64, collisionCount *int32) (*apps.ControllerRevision, error) {
	patch, err := revisionPatch(set)
	if err != nil {
		return nil, err
	}
	cr, err := history.NewControllerRevision(set, controllerKind, set.Spec.Template.Labels, runtime.RawExtension{Raw: patch}, revision, collisionCount)
	if err != nil {
		return nil, err
	}
	cr.Annotations = make(map[string]string, len(set.Annotations))
	for k, v := range set.Annotations {
		cr.Annotations[k] = v
	}
	return cr, nil
}

// applyRevision returns a copy of set whose spec is restored from revision
// (in practice: its pod template).
func applyRevision(set *apps.StatefulSet, revision *apps.ControllerRevision) (*apps.StatefulSet, error) {
	clone := set.DeepCopy()
	original, err := runtime.Encode(setCodec, clone)
	if err != nil {
		return nil, err
	}
	patched, err := strategicpatch.StrategicMergePatch(original, revision.Data.Raw, clone)
	if err != nil {
		return nil, err
	}
	restored := &apps.StatefulSet{}
	if err := json.Unmarshal(patched, restored); err != nil {
		return nil, err
	}
	clone.Spec = restored.Spec
	return clone, nil
}

// nextRevision is one more than the newest revision's number (1 for an
// empty history); revisions must be sorted.
func nextRevision(revisions []*apps.ControllerRevision) int64 {
	if len(revisions) == 0 {
		return 1
	}
	return revisions[len(revisions)-1].Revision + 1
}

// equalityCacheSize bounds the memory of semantic comparisons (~1MB).
const equalityCacheSize = 10_000

// equalityKey remembers that a revision (at a resource version) matched a
// set (at a generation), so steady-state syncs skip the comparison.
type equalityKey struct {
	setUID     types.UID
	generation int64
	revisionRV string
}

// sameAsLatest reports whether the latest revision, although its bytes
// differ from proposed, describes the same template: re-encoding the
// template it restores gives proposed's bytes. This absorbs encoding
// changes between versions (e.g. the null creationTimestamp older
// releases wrote) that would otherwise roll every pod.
// The restored template gets today's API defaults first, as upstream
// does, so a revision written before a field was defaulted still matches.
func sameAsLatest(set *apps.StatefulSet, proposed, latest *apps.ControllerRevision, cache *lru.Cache) bool {
	key := equalityKey{setUID: set.UID, generation: set.Generation, revisionRV: latest.ResourceVersion}
	if _, ok := cache.Get(key); ok {
		return true
	}
	restored, err := applyRevision(set, latest)
	if err != nil {
		return false
	}
	defaultTemplate(&restored.Spec.Template)
	rebuilt, err := newRevision(restored, -1, nil)
	if err != nil {
		return false
	}
	if history.EqualRevision(proposed, rebuilt) {
		cache.Add(key, struct{}{})
		return true
	}
	return false
}

// revisionsFor returns the current and update revisions of set, creating
// the update revision, or renumbering an older equal one (a rollback), when
// the template changed. revisions must be sorted. The returned count is the
// collision count to record in the status.
func (c *setControl) revisionsFor(ctx context.Context, set *apps.StatefulSet, revisions []*apps.ControllerRevision) (current, update *apps.ControllerRevision, collisionCount int32, err error) {
	if set.Status.CollisionCount != nil {
		collisionCount = *set.Status.CollisionCount
	}
	proposed, err := newRevision(set, nextRevision(revisions), &collisionCount)
	if err != nil {
		return nil, nil, collisionCount, err
	}

	equal := history.FindEqualRevisions(revisions, proposed)
	n := len(revisions)
	switch {
	case len(equal) > 0 && history.EqualRevision(revisions[n-1], equal[len(equal)-1]):
		// The template is the one of the newest revision: nothing changed.
		update = revisions[n-1]
	case len(equal) > 0:
		// Back to an older template: bring that revision to the front
		// rather than storing a duplicate.
		update, err = c.history.UpdateControllerRevision(ctx, equal[len(equal)-1], proposed.Revision)
		if err != nil {
			return nil, nil, collisionCount, err
		}
	case n > 0 && c.features.StatefulSetSemanticRevisionComparison && sameAsLatest(set, proposed, revisions[n-1], c.equalityCache):
		update = revisions[n-1]
	default:
		update, err = c.history.CreateControllerRevision(ctx, set, proposed, &collisionCount)
		if err != nil {
			return nil, nil, collisionCount, err
		}
	}

	for _, r := range revisions {
		if r.Name == set.Status.CurrentRevision {
			current = r
			break
		}
	}
	if current == nil {
		// A new set, or its current revision is gone: start from update.
		current = update
	}
	return current, update, collisionCount, nil
}

// truncateHistory deletes the oldest revisions nothing uses until at most
// revisionHistoryLimit of them are left. In use are the current and update
// revisions (as computed and as recorded in the status) and every
// revision a pod is labelled with. revisions must be sorted.
func (c *setControl) truncateHistory(ctx context.Context, set *apps.StatefulSet, pods []*v1.Pod, revisions []*apps.ControllerRevision, current, update *apps.ControllerRevision) error {
	live := map[string]bool{
		set.Status.CurrentRevision: true,
		set.Status.UpdateRevision:  true,
	}
	if current != nil {
		live[current.Name] = true
	}
	if update != nil {
		live[update.Name] = true
	}
	for _, pod := range pods {
		live[getPodRevision(pod)] = true
	}
	var old []*apps.ControllerRevision
	for _, r := range revisions {
		if !live[r.Name] {
			old = append(old, r)
		}
	}
	limit := 10 // the API default
	if set.Spec.RevisionHistoryLimit != nil {
		limit = int(*set.Spec.RevisionHistoryLimit)
	}
	if limit < 0 || len(old) <= limit {
		return nil
	}
	for _, r := range old[:len(old)-limit] {
		if err := c.history.DeleteControllerRevision(ctx, r); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// adoptOrphanRevisions makes set the controller of the orphan revisions
// its selector matches, after a live check that set is not being deleted.
func (c *setControl) adoptOrphanRevisions(ctx context.Context, set *apps.StatefulSet, canAdopt func(context.Context) error) error {
	revisions, err := c.listRevisions(set)
	if err != nil {
		return err
	}
	var orphans []*apps.ControllerRevision
	for _, r := range revisions {
		if metav1.GetControllerOfNoCopy(r) == nil {
			orphans = append(orphans, r)
		}
	}
	if len(orphans) == 0 {
		return nil
	}
	if err := canAdopt(ctx); err != nil {
		return fmt.Errorf("can't adopt ControllerRevisions: %v", err)
	}
	for _, r := range orphans {
		if _, err := c.history.AdoptControllerRevision(ctx, set, controllerKind, r); err != nil {
			return err
		}
	}
	return nil
}

func (c *setControl) listRevisions(set *apps.StatefulSet) ([]*apps.ControllerRevision, error) {
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return nil, err
	}
	return c.history.ListControllerRevisions(set, selector)
}
