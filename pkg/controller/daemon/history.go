package daemon

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"sort"

	apps "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

// defaultRevisionHistoryLimit is the API default of
// spec.revisionHistoryLimit, used if a DaemonSet somehow lacks it.
const defaultRevisionHistoryLimit = 10

// A DaemonSet's template history is kept as ControllerRevisions named
// <ds>-<hash>, labelled with the template's labels plus
// controller-revision-hash=<hash>, holding a strategic merge patch that
// restores spec.template (what `kubectl rollout undo` applies). The hash is
// the pod-template hash of spec.template and status.collisionCount.

// constructHistory claims ds's revisions, returns the one matching the
// current template (creating it, or collapsing duplicates, as needed) and
// the others. The current revision is renumbered above all old ones, so a
// rollback to an old template makes it the newest again.
func (dsc *Controller) constructHistory(ctx context.Context, ds *apps.DaemonSet) (cur *apps.ControllerRevision, old []*apps.ControllerRevision, err error) {
	histories, err := dsc.controlledHistories(ctx, ds)
	if err != nil {
		return nil, nil, err
	}
	var current []*apps.ControllerRevision
	for _, h := range histories {
		// Revisions written by old controllers lack the hash label; the
		// name is unique, so it serves as the hash.
		if _, ok := h.Labels[apps.DefaultDaemonSetUniqueLabelKey]; !ok {
			toUpdate := h.DeepCopy()
			if toUpdate.Labels == nil {
				toUpdate.Labels = map[string]string{}
			}
			toUpdate.Labels[apps.DefaultDaemonSetUniqueLabelKey] = toUpdate.Name
			if h, err = dsc.kubeClient.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, toUpdate, metav1.UpdateOptions{}); err != nil {
				return nil, nil, err
			}
		}
		match, err := Match(ds, h)
		if err != nil {
			return nil, nil, err
		}
		if match {
			current = append(current, h)
		} else {
			old = append(old, h)
		}
	}

	next := maxRevision(old) + 1
	if len(current) == 0 {
		cur, err = dsc.snapshot(ctx, ds, next)
		if err != nil {
			return nil, nil, err
		}
		return cur, old, nil
	}
	cur, err = dsc.dedupCurHistories(ctx, ds, current)
	if err != nil {
		return nil, nil, err
	}
	if cur.Revision < next {
		toUpdate := cur.DeepCopy()
		toUpdate.Revision = next
		if _, err = dsc.kubeClient.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, toUpdate, metav1.UpdateOptions{}); err != nil {
			return nil, nil, err
		}
	}
	return cur, old, nil
}

// controlledHistories returns the revisions ds owns, adopting matching
// orphans and releasing owned ones that no longer match. All revisions of
// the namespace are considered so owned ones that stopped matching are
// released. The revisions are cache objects.
func (dsc *Controller) controlledHistories(ctx context.Context, ds *apps.DaemonSet) ([]*apps.ControllerRevision, error) {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, err
	}
	histories, err := dsc.historyLister.ControllerRevisions(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	cm := controller.NewControllerRevisionControllerRefManager(dsc.crControl, ds, selector, controllerKind, dsc.canAdopt(ds))
	return cm.ClaimControllerRevisions(ctx, histories)
}

// cleanupHistory deletes the oldest old revisions beyond
// revisionHistoryLimit, sparing any that a pod (even a terminated one
// awaiting deletion) still runs.
func (dsc *Controller) cleanupHistory(ctx context.Context, ds *apps.DaemonSet, old []*apps.ControllerRevision) error {
	nodeToDaemonPods, err := dsc.getNodesToDaemonPods(ctx, ds, true)
	if err != nil {
		return fmt.Errorf("couldn't get node to daemon pod mapping for daemon set %q: %w", ds.Name, err)
	}
	limit := defaultRevisionHistoryLimit
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = int(*ds.Spec.RevisionHistoryLimit)
	}
	toKill := len(old) - limit
	if toKill <= 0 {
		return nil
	}
	live := map[string]bool{}
	for _, pods := range nodeToDaemonPods {
		for _, pod := range pods {
			if h := pod.Labels[apps.DefaultDaemonSetUniqueLabelKey]; h != "" {
				live[h] = true
			}
		}
	}
	sorted := append([]*apps.ControllerRevision(nil), old...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Revision < sorted[j].Revision })
	for _, h := range sorted {
		if toKill <= 0 {
			break
		}
		if live[h.Labels[apps.DefaultDaemonSetUniqueLabelKey]] {
			continue
		}
		if err := dsc.kubeClient.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, h.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		toKill--
	}
	return nil
}

func maxRevision(histories []*apps.ControllerRevision) int64 {
	var m int64
	for _, h := range histories {
		m = max(m, h.Revision)
	}
	return m
}

// dedupCurHistories keeps the highest-numbered of several revisions
// matching the current template: pods labelled with the others are
// relabelled first, then the others are deleted.
func (dsc *Controller) dedupCurHistories(ctx context.Context, ds *apps.DaemonSet, current []*apps.ControllerRevision) (*apps.ControllerRevision, error) {
	if len(current) == 1 {
		return current[0], nil
	}
	var keep *apps.ControllerRevision
	var maxRev int64
	for _, h := range current {
		if h.Revision >= maxRev {
			keep, maxRev = h, h.Revision
		}
	}
	keepHash := keep.Labels[apps.DefaultDaemonSetUniqueLabelKey]
	pods, err := dsc.getDaemonPods(ctx, ds)
	if err != nil {
		return nil, err
	}
	for _, pod := range pods {
		if pod.Labels[apps.DefaultDaemonSetUniqueLabelKey] == keepHash {
			continue
		}
		patch, err := json.Marshal(map[string]interface{}{
			"metadata": map[string]interface{}{
				"labels": map[string]interface{}{apps.DefaultDaemonSetUniqueLabelKey: keepHash},
			},
		})
		if err != nil {
			return nil, err
		}
		if _, err := dsc.kubeClient.CoreV1().Pods(ds.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return nil, err
		}
	}
	for _, h := range current {
		if h.Name == keep.Name {
			continue
		}
		if err := dsc.kubeClient.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, h.Name, metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
	}
	return keep, nil
}

// Match reports whether history records ds's current template.
func Match(ds *apps.DaemonSet, history *apps.ControllerRevision) (bool, error) {
	patch, err := getPatch(ds)
	if err != nil {
		return false, err
	}
	return bytes.Equal(patch, history.Data.Raw), nil
}

// getPatch returns the revision data for ds: the strategic merge patch
// {"spec":{"template":{...,"$patch":"replace"}}} that puts its current
// template back. It goes through a generic map so the bytes are exactly
// what upstream stores (sorted keys), and revisions written by either
// controller compare equal.
func getPatch(ds *apps.DaemonSet) ([]byte, error) {
	raw, err := json.Marshal(ds)
	if err != nil {
		return nil, err
	}
	var obj map[string]interface{}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	spec, _ := obj["spec"].(map[string]interface{})
	template, _ := spec["template"].(map[string]interface{})
	if template == nil {
		return nil, fmt.Errorf("daemon set %s/%s has no spec.template", ds.Namespace, ds.Name)
	}
	template["$patch"] = "replace"
	return json.Marshal(map[string]interface{}{
		"spec": map[string]interface{}{"template": template},
	})
}

// snapshot creates the revision for ds's current template. A different
// revision under the same name is a hash collision: collisionCount is
// bumped (which changes the hash) and an error returned so the next sync
// retries with the new name.
func (dsc *Controller) snapshot(ctx context.Context, ds *apps.DaemonSet, revision int64) (*apps.ControllerRevision, error) {
	patch, err := getPatch(ds)
	if err != nil {
		return nil, err
	}
	hash := util.ComputeHash(&ds.Spec.Template, ds.Status.CollisionCount)
	name := ds.Name + "-" + hash
	lbls := make(map[string]string, len(ds.Spec.Template.Labels)+1)
	for k, v := range ds.Spec.Template.Labels {
		lbls[k] = v
	}
	lbls[apps.DefaultDaemonSetUniqueLabelKey] = hash
	history := &apps.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       ds.Namespace,
			Labels:          lbls,
			Annotations:     ds.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)},
		},
		Data:     runtime.RawExtension{Raw: patch},
		Revision: revision,
	}
	created, err := dsc.kubeClient.AppsV1().ControllerRevisions(ds.Namespace).Create(ctx, history, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return created, err
	}
	createErr := err

	existing, err := dsc.kubeClient.AppsV1().ControllerRevisions(ds.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if ok, err := Match(ds, existing); err != nil {
		return nil, err
	} else if ok {
		// Ours, from an earlier sync the cache has not shown yet.
		return existing, nil
	}
	// A real collision. Bump the count on the live object, unless the
	// count we hashed with is already stale (then just retry).
	live, err := dsc.kubeClient.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if !reflect.DeepEqual(live.Status.CollisionCount, ds.Status.CollisionCount) {
		return nil, fmt.Errorf("found a stale collision count (%s, expected %s) of DaemonSet %q while processing; will retry until it is updated", countString(ds.Status.CollisionCount), countString(live.Status.CollisionCount), ds.Name)
	}
	if live.Status.CollisionCount == nil {
		live.Status.CollisionCount = new(int32)
	}
	*live.Status.CollisionCount++
	if _, err := dsc.kubeClient.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, live, metav1.UpdateOptions{}); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("Found a hash collision for DaemonSet - bumping collisionCount to resolve it", "daemonset", klog.KObj(ds), "collisionCount", *live.Status.CollisionCount)
	return nil, createErr
}

func countString(c *int32) string {
	if c == nil {
		return "<nil>"
	}
	return fmt.Sprint(*c)
}
