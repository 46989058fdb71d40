package deployment

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"sort"
	"strconv"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

// syncPass is one reconcile of one Deployment.
//
// Upstream writes the Deployment's status as soon as any step changes it, so
// one pass often writes twice and the second write, sent with a stale
// resourceVersion, fails with a conflict and costs another pass. Here a step
// only marks the status pending; the pass writes it once, at the point where
// upstream writes its last status (or on the way out if it stops early).
type syncPass struct {
	dc *Controller
	// d is a private copy of the Deployment, changed as the pass goes.
	d *apps.Deployment
	// rsList holds the ReplicaSets d owns; our own ReplicaSet updates
	// replace their entries so a later lookup in the pass sees them.
	rsList []*apps.ReplicaSet
	// statusPending: d's status or annotations changed and are not written.
	statusPending bool
	// intermediate: the status about to be written is an intermediate
	// state of the rollout (see statusHold).
	intermediate bool
	// key is d's queue key.
	key string
}

// syncDeployment reconciles the Deployment named by key.
func (dc *Controller) syncDeployment(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		logger.Error(err, "Failed to split meta namespace cache key", "cacheKey", key)
		return err
	}
	start := time.Now()
	logger.V(4).Info("Started syncing deployment", "deployment", klog.KRef(namespace, name), "startTime", start)
	defer func() {
		logger.V(4).Info("Finished syncing deployment", "deployment", klog.KRef(namespace, name), "duration", time.Since(start))
	}()

	cached, err := dc.dLister.Deployments(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(2).Info("Deployment has been deleted", "deployment", klog.KRef(namespace, name))
		dc.forgetWrite(key)
		return nil
	}
	if err != nil {
		return err
	}
	if dc.cacheBehindOurWrite(key, cached) {
		// The watch event of our write requeues the key.
		logger.V(4).Info("Cache has not seen our last status write yet", "deployment", klog.KObj(cached))
		return nil
	}
	if controller.NamespaceTerminating(dc.nsLister, namespace) {
		// Everything in it is being deleted and nothing can be created.
		logger.V(4).Info("Namespace is being deleted, nothing to do", "deployment", klog.KObj(cached))
		return nil
	}
	d := cached.DeepCopy()

	// A selector of {} would claim every pod in the namespace: refuse.
	if reflect.DeepEqual(d.Spec.Selector, &metav1.LabelSelector{}) {
		dc.eventRecorder.Eventf(d, v1.EventTypeWarning, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			// Best effort, as upstream: nothing else would be done anyway.
			_, _ = dc.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		}
		return nil
	}

	rsList, err := dc.getReplicaSetsForDeployment(ctx, d)
	if err != nil {
		return err
	}
	if wait := dc.awaitCreated(key, d, rsList, dc.clock.Now()); wait > 0 {
		logger.V(4).Info("Cache has not seen the ReplicaSet we created yet", "deployment", klog.KObj(d))
		dc.queue.AddAfter(key, wait)
		return nil
	}
	p := &syncPass{dc: dc, d: d, rsList: rsList, key: key}
	err = p.reconcile(ctx)
	if p.statusPending {
		// The pass stopped before its final status write; upstream would
		// already have written these changes.
		if werr := p.writeStatus(ctx); err == nil {
			err = werr
		}
	}
	return err
}

func (p *syncPass) reconcile(ctx context.Context) error {
	d := p.d
	if d.DeletionTimestamp != nil {
		return p.syncStatusOnly(ctx)
	}
	// Mark pauses and resumes so a resumed rollout is not judged against
	// time spent paused.
	if err := p.checkPausedConditions(ctx); err != nil {
		return err
	}
	if d.Spec.Paused {
		return p.syncScale(ctx)
	}
	// A rollback rewrites the template; finish it (and clear the request)
	// before touching ReplicaSets.
	if getRollbackTo(d) != nil {
		return p.rollback(ctx)
	}
	scaling, err := p.isScalingEvent(ctx)
	if err != nil {
		return err
	}
	if scaling {
		return p.syncScale(ctx)
	}
	switch d.Spec.Strategy.Type {
	case apps.RecreateDeploymentStrategyType:
		// Recreate must see every old pod gone before scaling up.
		podMap, err := p.dc.getPodMapForDeployment(p.rsList)
		if err != nil {
			return err
		}
		return p.rolloutRecreate(ctx, podMap)
	case apps.RollingUpdateDeploymentStrategyType:
		return p.rolloutRolling(ctx)
	}
	return fmt.Errorf("unexpected deployment strategy type: %s", d.Spec.Strategy.Type)
}

// writeStatus sends d's status (and annotations, which the status
// subresource also takes) and keeps d's resourceVersion current.
func (p *syncPass) writeStatus(ctx context.Context) error {
	p.statusPending = false
	sent := p.d.ResourceVersion
	updated, err := p.dc.client.AppsV1().Deployments(p.d.Namespace).UpdateStatus(ctx, p.d, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	p.d.ResourceVersion = updated.ResourceVersion
	p.dc.noteWrite(p.key, p.d.UID, sent, updated.ResourceVersion, p.now(), p.intermediate)
	p.intermediate = false
	return nil
}

// writeCountsStatus writes newStatus, unless it is an intermediate state of
// the rollout that can wait (see DefaultStatusMinInterval): then the key
// comes back when the interval is over.
func (p *syncPass) writeCountsStatus(ctx context.Context, newStatus apps.DeploymentStatus) error {
	wait, intermediate := p.dc.statusHold(p.key, p.d, newStatus, p.statusPending, p.now())
	if wait > 0 {
		klog.FromContext(ctx).V(4).Info("Holding back intermediate status", "deployment", klog.KObj(p.d), "for", wait)
		p.dc.queue.AddAfter(p.key, wait)
		return nil
	}
	p.intermediate = intermediate
	p.d.Status = newStatus
	return p.writeStatus(ctx)
}

func (p *syncPass) now() time.Time { return p.dc.clock.Now() }

func (p *syncPass) setCondition(condType apps.DeploymentConditionType, status v1.ConditionStatus, reason, msg string) {
	util.SetDeploymentCondition(&p.d.Status, *util.NewDeploymentCondition(p.now(), condType, status, reason, msg))
}

// syncStatusOnly only reports status: used while the Deployment is deleted.
func (p *syncPass) syncStatusOnly(ctx context.Context) error {
	newRS, oldRSs, err := p.getAllReplicaSetsAndSyncRevision(ctx, false)
	if err != nil {
		return err
	}
	return p.syncDeploymentStatus(ctx, append(oldRSs, newRS), newRS)
}

// syncScale handles scaling events and paused Deployments: resize without
// rolling anything out.
func (p *syncPass) syncScale(ctx context.Context) error {
	newRS, oldRSs, err := p.getAllReplicaSetsAndSyncRevision(ctx, false)
	if err != nil {
		return err
	}
	if err := p.scale(ctx, newRS, oldRSs); err != nil {
		return err
	}
	if p.d.Spec.Paused && getRollbackTo(p.d) == nil {
		if err := p.cleanupDeployment(ctx, oldRSs); err != nil {
			return err
		}
	}
	return p.syncDeploymentStatus(ctx, append(oldRSs, newRS), newRS)
}

// checkPausedConditions sets Progressing=Unknown DeploymentPaused or
// DeploymentResumed when spec.paused flips, unless the deadline already
// passed. The condition is written at once, as upstream does, so watchers
// see the pause or resume itself and not only what the rest of the pass
// replaces it with.
func (p *syncPass) checkPausedConditions(ctx context.Context) error {
	d := p.d
	if !util.HasProgressDeadline(d) {
		return nil
	}
	cond := util.GetDeploymentCondition(d.Status, apps.DeploymentProgressing)
	if cond != nil && cond.Reason == util.TimedOutReason {
		return nil
	}
	pausedMarked := cond != nil && cond.Reason == util.PausedDeployReason
	switch {
	case d.Spec.Paused && !pausedMarked:
		p.setCondition(apps.DeploymentProgressing, v1.ConditionUnknown, util.PausedDeployReason, "Deployment is paused")
	case !d.Spec.Paused && pausedMarked:
		p.setCondition(apps.DeploymentProgressing, v1.ConditionUnknown, util.ResumedDeployReason, "Deployment is resumed")
	default:
		return nil
	}
	return p.writeStatus(ctx)
}

// getAllReplicaSetsAndSyncRevision returns the new ReplicaSet (created when
// create is set and it is missing) and all old ones, bringing the revision
// of the new ReplicaSet and of the Deployment up to date.
func (p *syncPass) getAllReplicaSetsAndSyncRevision(ctx context.Context, create bool) (*apps.ReplicaSet, []*apps.ReplicaSet, error) {
	_, allOldRSs := p.dc.templates.FindOldReplicaSets(p.d, p.rsList)
	newRS, err := p.getNewReplicaSet(ctx, allOldRSs, create)
	if err != nil {
		return nil, nil, err
	}
	return newRS, allOldRSs, nil
}

// getNewReplicaSet finds the ReplicaSet whose template is the Deployment's
// and syncs its annotations (revision = max old revision + 1, never lowered)
// and minReadySeconds; or creates it, named <deployment>-<hash>.
func (p *syncPass) getNewReplicaSet(ctx context.Context, oldRSs []*apps.ReplicaSet, create bool) (*apps.ReplicaSet, error) {
	logger := klog.FromContext(ctx)
	d := p.d
	existing := p.dc.templates.FindNewReplicaSet(d, p.rsList)
	newRevision := strconv.FormatInt(util.MaxRevision(logger, oldRSs)+1, 10)

	if existing != nil {
		// The annotations are worked out on a copy of their map only: most
		// syncs change nothing, and copying the whole ReplicaSet each time
		// was the controller's largest allocation at 5,000 pods.
		probe := *existing
		probe.Annotations = maps.Clone(existing.Annotations)
		annotationsChanged := util.SetNewReplicaSetAnnotations(ctx, d, &probe, newRevision, true, util.MaxRevHistoryLengthInChars)
		if annotationsChanged || existing.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
			rsCopy := existing.DeepCopy()
			rsCopy.Annotations = probe.Annotations
			rsCopy.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			updated, err := p.dc.client.AppsV1().ReplicaSets(rsCopy.Namespace).Update(ctx, rsCopy, metav1.UpdateOptions{})
			if err != nil {
				return nil, err
			}
			p.replaceReplicaSet(updated)
			// The Deployment's revision follows on the next pass, as upstream.
			return updated, nil
		}
		// The ReplicaSet's revision is the reliable one: copy it.
		changed := util.SetDeploymentRevision(d, existing.Annotations[util.RevisionAnnotation])
		// A Deployment that just got a deadline starts counting from now.
		if util.HasProgressDeadline(d) && util.GetDeploymentCondition(d.Status, apps.DeploymentProgressing) == nil {
			p.setCondition(apps.DeploymentProgressing, v1.ConditionTrue, util.FoundNewRSReason, fmt.Sprintf("Found new replica set %q", existing.Name))
			changed = true
		}
		if changed {
			p.statusPending = true
		}
		// Unchanged: the cached object, read-only like the old ReplicaSets.
		return existing, nil
	}

	if !create {
		return nil, nil
	}
	return p.createNewReplicaSet(ctx, oldRSs, newRevision)
}

func (p *syncPass) createNewReplicaSet(ctx context.Context, oldRSs []*apps.ReplicaSet, newRevision string) (*apps.ReplicaSet, error) {
	logger := klog.FromContext(ctx)
	d := p.d
	template := *d.Spec.Template.DeepCopy()
	hash := util.ComputeHash(&template, d.Status.CollisionCount)
	template.Labels = withLabel(d.Spec.Template.Labels, apps.DefaultDeploymentUniqueLabelKey, hash)

	newRS := &apps.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			// Deterministic, so a retried create cannot make a second one.
			Name:            generateReplicaSetName(d.Name, hash),
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, controllerKind)},
			Labels:          template.Labels,
		},
		Spec: apps.ReplicaSetSpec{
			Replicas:        new(int32),
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        selectorWithLabel(d.Spec.Selector, apps.DefaultDeploymentUniqueLabelKey, hash),
			Template:        template,
		},
	}
	allRSs := append(append([]*apps.ReplicaSet{}, oldRSs...), newRS)
	replicas, err := util.NewRSNewReplicas(d, allRSs, newRS)
	if err != nil {
		return nil, err
	}
	*newRS.Spec.Replicas = replicas
	util.SetNewReplicaSetAnnotations(ctx, d, newRS, newRevision, false, util.MaxRevHistoryLengthInChars)

	alreadyExists := false
	created, err := p.dc.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, newRS, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		// A slow cache or fast resync, or a hash collision.
		alreadyExists = true
		rs, rsErr := p.dc.rsLister.ReplicaSets(newRS.Namespace).Get(newRS.Name)
		if rsErr != nil {
			return nil, rsErr
		}
		if ref := metav1.GetControllerOf(rs); ref != nil && ref.UID == d.UID && util.EqualIgnoreHash(&d.Spec.Template, &rs.Spec.Template) {
			created = rs
			break
		}
		// A different template owns the name: bump collisionCount so the
		// next pass hashes to another name, and retry via the error.
		if d.Status.CollisionCount == nil {
			d.Status.CollisionCount = new(int32)
		}
		before := *d.Status.CollisionCount
		*d.Status.CollisionCount++
		if dErr := p.writeStatus(ctx); dErr == nil {
			logger.V(2).Info("Found a hash collision for deployment - bumping collisionCount to resolve it", "deployment", klog.KObj(d), "oldCollisionCount", before, "newCollisionCount", *d.Status.CollisionCount)
		}
		return nil, err
	case apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause):
		return nil, err
	case err != nil:
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", newRS.Name, err)
		if util.HasProgressDeadline(d) {
			p.setCondition(apps.DeploymentProgressing, v1.ConditionFalse, util.FailedRSCreateReason, msg)
			// The create error is the one worth returning.
			_ = p.writeStatus(ctx)
		}
		p.dc.eventRecorder.Eventf(d, v1.EventTypeWarning, util.FailedRSCreateReason, "%s", msg)
		return nil, err
	}
	if !alreadyExists {
		p.dc.noteCreated(p.key, d.UID, created.Name, p.now())
		p.rsList = append(p.rsList, created)
		if replicas > 0 {
			p.dc.eventRecorder.Eventf(d, v1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", created.Name, replicas)
		}
	}

	changed := util.SetDeploymentRevision(d, newRevision)
	if !alreadyExists && util.HasProgressDeadline(d) {
		p.setCondition(apps.DeploymentProgressing, v1.ConditionTrue, util.NewReplicaSetReason, fmt.Sprintf("Created new replica set %q", created.Name))
		changed = true
	}
	if changed {
		p.statusPending = true
	}
	return created, nil
}

// replaceReplicaSet swaps our freshly written copy of rs into rsList.
func (p *syncPass) replaceReplicaSet(rs *apps.ReplicaSet) {
	for i := range p.rsList {
		if p.rsList[i].UID == rs.UID {
			p.rsList[i] = rs
			return
		}
	}
}

// scale resizes ReplicaSets on a scaling event or while paused, spreading
// the change over all active ReplicaSets in proportion to their size so a
// scale during a rollout neither speeds it up nor adds unavailability.
func (p *syncPass) scale(ctx context.Context, newRS *apps.ReplicaSet, oldRSs []*apps.ReplicaSet) error {
	d := p.d
	want := *d.Spec.Replicas
	// At most one active ReplicaSet: it (or the newest) takes everything.
	if target := util.FindActiveOrLatest(newRS, oldRSs); target != nil {
		if *target.Spec.Replicas == want {
			return nil
		}
		_, _, err := p.scaleReplicaSet(ctx, target, want, false)
		return err
	}
	// A saturated new ReplicaSet (e.g. after adoption) leaves old ones nothing.
	if util.IsSaturated(d, newRS) {
		for _, old := range util.FilterActiveReplicaSets(oldRSs) {
			if _, _, err := p.scaleReplicaSet(ctx, old, 0, false); err != nil {
				return err
			}
		}
		return nil
	}
	if !util.IsRollingUpdate(d) {
		return nil
	}

	active := util.FilterActiveReplicaSets(append(oldRSs, newRS))
	allowed := int32(0)
	if want > 0 {
		allowed = want + util.MaxSurge(*d)
	}
	toAdd := allowed - util.GetReplicaCountForReplicaSets(active)
	// Largest first; on ties newer ones grow first and older ones shrink first.
	switch {
	case toAdd > 0:
		sort.Sort(util.ReplicaSetsBySizeNewer(active))
	case toAdd < 0:
		sort.Sort(util.ReplicaSetsBySizeOlder(active))
	}

	logger := klog.FromContext(ctx)
	added := int32(0)
	sizes := make(map[string]int32, len(active))
	for _, rs := range active {
		sizes[rs.Name] = *rs.Spec.Replicas
		if toAdd != 0 {
			share := util.GetReplicaSetProportion(logger, rs, *d, toAdd, added)
			sizes[rs.Name] += share
			added += share
		}
	}
	for i, rs := range active {
		// Rounding leftovers go to the largest ReplicaSet.
		if i == 0 && toAdd != 0 {
			sizes[rs.Name] = max(sizes[rs.Name]+toAdd-added, 0)
		}
		if _, _, err := p.scaleReplicaSet(ctx, rs, sizes[rs.Name], true); err != nil {
			return err
		}
	}
	return nil
}

// scaleReplicaSet sets rs to newScale, also refreshing its desired/max
// replicas annotations when force is set (proportional scaling relies on
// them). It reports whether the size changed, with the written ReplicaSet.
func (p *syncPass) scaleReplicaSet(ctx context.Context, rs *apps.ReplicaSet, newScale int32, force bool) (bool, *apps.ReplicaSet, error) {
	d := p.d
	oldScale := *rs.Spec.Replicas
	if !force && oldScale == newScale {
		return false, rs, nil
	}
	desired, maxReplicas := *d.Spec.Replicas, *d.Spec.Replicas+util.MaxSurge(*d)
	sizeChanged := oldScale != newScale
	if !sizeChanged && !util.ReplicasAnnotationsNeedUpdate(rs, desired, maxReplicas) {
		return false, rs, nil
	}
	rsCopy := rs.DeepCopy()
	*rsCopy.Spec.Replicas = newScale
	util.SetReplicasAnnotations(rsCopy, desired, maxReplicas)
	updated, err := p.dc.client.AppsV1().ReplicaSets(rsCopy.Namespace).Update(ctx, rsCopy, metav1.UpdateOptions{})
	if err != nil {
		return false, nil, err
	}
	if !sizeChanged {
		return false, updated, nil
	}
	direction := "down"
	if oldScale < newScale {
		direction = "up"
	}
	p.dc.eventRecorder.Eventf(d, v1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", direction, updated.Name, oldScale, newScale)
	return true, updated, nil
}

// cleanupDeployment deletes the oldest fully scaled-down old ReplicaSets
// beyond revisionHistoryLimit.
func (p *syncPass) cleanupDeployment(ctx context.Context, oldRSs []*apps.ReplicaSet) error {
	logger := klog.FromContext(ctx)
	d := p.d
	if !util.HasRevisionHistoryLimit(d) {
		return nil
	}
	alive := util.FilterReplicaSets(oldRSs, func(rs *apps.ReplicaSet) bool {
		return rs != nil && rs.DeletionTimestamp == nil
	})
	excess := int32(len(alive)) - *d.Spec.RevisionHistoryLimit
	if excess <= 0 {
		return nil
	}
	sort.Sort(util.ReplicaSetsByRevision(alive))
	logger.V(4).Info("Looking to cleanup old replica sets for deployment", "deployment", klog.KObj(d))
	for _, rs := range alive[:excess] {
		// Only ReplicaSets that are down to zero and whose controller has
		// seen that are safe to delete.
		if rs.Status.Replicas != 0 || *rs.Spec.Replicas != 0 || rs.Generation > rs.Status.ObservedGeneration || rs.DeletionTimestamp != nil {
			continue
		}
		logger.V(4).Info("Trying to cleanup replica set for deployment", "replicaSet", klog.KObj(rs), "deployment", klog.KObj(d))
		if err := p.dc.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			// Stop at the first failure rather than hammer the apiserver.
			return err
		}
	}
	return nil
}

// syncDeploymentStatus writes the status computed from the ReplicaSets if it
// (or anything pending) changed.
func (p *syncPass) syncDeploymentStatus(ctx context.Context, allRSs []*apps.ReplicaSet, newRS *apps.ReplicaSet) error {
	newStatus := p.calculateStatus(allRSs, newRS)
	if reflect.DeepEqual(p.d.Status, newStatus) && !p.statusPending {
		return nil
	}
	return p.writeCountsStatus(ctx, newStatus)
}

// calculateStatus derives the Deployment status from its ReplicaSets and sets
// the Available condition.
func (p *syncPass) calculateStatus(allRSs []*apps.ReplicaSet, newRS *apps.ReplicaSet) apps.DeploymentStatus {
	d := p.d
	available := util.GetAvailableReplicaCountForReplicaSets(allRSs)
	total := util.GetReplicaCountForReplicaSets(allRSs)
	// More available than wanted (e.g. while scaling down) is not negative unavailability.
	unavailable := max(total-available, 0)

	status := apps.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            util.GetActualReplicaCountForReplicaSets(allRSs),
		UpdatedReplicas:     util.GetActualReplicaCountForReplicaSets([]*apps.ReplicaSet{newRS}),
		ReadyReplicas:       util.GetReadyReplicaCountForReplicaSets(allRSs),
		AvailableReplicas:   available,
		UnavailableReplicas: unavailable,
		CollisionCount:      d.Status.CollisionCount,
	}
	if p.dc.terminatingReplicas() {
		status.TerminatingReplicas = util.GetTerminatingReplicaCountForReplicaSets(allRSs)
	}
	// Copy, so d.Status stays what the server has.
	status.Conditions = append(status.Conditions, d.Status.Conditions...)
	if available >= *d.Spec.Replicas-util.MaxUnavailable(*d) {
		util.SetDeploymentCondition(&status, *util.NewDeploymentCondition(p.now(), apps.DeploymentAvailable, v1.ConditionTrue, util.MinimumReplicasAvailable, "Deployment has minimum availability."))
	} else {
		util.SetDeploymentCondition(&status, *util.NewDeploymentCondition(p.now(), apps.DeploymentAvailable, v1.ConditionFalse, util.MinimumReplicasUnavailable, "Deployment does not have minimum availability."))
	}
	return status
}

// isScalingEvent reports whether spec.replicas differs from the
// desired-replicas annotation of any active ReplicaSet.
func (p *syncPass) isScalingEvent(ctx context.Context) (bool, error) {
	newRS, oldRSs, err := p.getAllReplicaSetsAndSyncRevision(ctx, false)
	if err != nil {
		return false, err
	}
	logger := klog.FromContext(ctx)
	for _, rs := range util.FilterActiveReplicaSets(append(oldRSs, newRS)) {
		if desired, ok := util.GetDesiredReplicasAnnotation(logger, rs); ok && desired != *p.d.Spec.Replicas {
			return true, nil
		}
	}
	return false, nil
}

// generateReplicaSetName joins name and hash, cutting name so the result is
// a valid object name.
func generateReplicaSetName(name, hash string) string {
	maxName := validation.DNS1123SubdomainMaxLength - len("-") - len(hash)
	if len(name) > maxName && maxName > 0 {
		name = name[:maxName]
	}
	return name + "-" + hash
}

// withLabel returns a copy of lbls with key=value set.
func withLabel(lbls map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(lbls)+1)
	for k, v := range lbls {
		out[k] = v
	}
	out[key] = value
	return out
}

// selectorWithLabel returns a copy of sel that also requires key=value.
func selectorWithLabel(sel *metav1.LabelSelector, key, value string) *metav1.LabelSelector {
	out := &metav1.LabelSelector{MatchLabels: withLabel(sel.MatchLabels, key, value)}
	if sel.MatchExpressions != nil {
		out.MatchExpressions = make([]metav1.LabelSelectorRequirement, len(sel.MatchExpressions))
		for i, req := range sel.MatchExpressions {
			req.DeepCopyInto(&out.MatchExpressions[i])
		}
	}
	return out
}
