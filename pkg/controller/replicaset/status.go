package replicaset

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

// ReplicaFailure is the condition type set while creating or deleting pods
// fails (same string for ReplicaSets and ReplicationControllers).
const ReplicaFailure = "ReplicaFailure"

// calculateStatus derives the status from the owner's active pods (before
// this sync's creations and deletions) and the outcome of managing them.
func (c *BaseController) calculateStatus(owner *Owner, activePods, terminatingPods []*v1.Pod, manageErr error, now time.Time) Status {
	st := owner.Status
	st.Conditions = append([]Condition(nil), owner.Status.Conditions...)

	// Pods may carry more labels than the template, never fewer, to count
	// as fully labeled.
	template := labels.Set(owner.Template.Labels).AsSelectorPreValidated()
	var fullyLabeled, ready, available int32
	for _, p := range activePods {
		if template.Matches(labels.Set(p.Labels)) {
			fullyLabeled++
		}
		if controller.IsPodReady(p) {
			ready++
			if controller.IsPodAvailable(p, owner.MinReadySeconds, metav1.NewTime(now)) {
				available++
			}
		}
	}

	failure := getCondition(st.Conditions, ReplicaFailure)
	switch {
	case manageErr != nil && failure == nil:
		reason := ""
		if diff := len(activePods) - int(owner.Replicas); diff < 0 {
			reason = controller.FailedCreatePodReason
		} else if diff > 0 {
			reason = controller.FailedDeletePodReason
		}
		st.Conditions = setCondition(st.Conditions, Condition{
			Type:               ReplicaFailure,
			Status:             v1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now),
			Reason:             reason,
			Message:            manageErr.Error(),
		})
	case manageErr == nil && failure != nil:
		st.Conditions = removeCondition(st.Conditions, ReplicaFailure)
	}

	st.Replicas = int32(len(activePods))
	st.FullyLabeledReplicas = fullyLabeled
	st.ReadyReplicas = ready
	st.AvailableReplicas = available
	st.TerminatingReplicas = nil
	if c.opts.TerminatingReplicas {
		st.TerminatingReplicas = ptr.To(int32(len(terminatingPods)))
	}
	return st
}

// updateStatus writes newStatus unless the owner already has it and has
// observed its current generation. A failed write is retried once against a
// fresh read; then the error goes back to the queue (with backoff).
func (c *BaseController) updateStatus(ctx context.Context, owner *Owner, newStatus Status) (*Owner, error) {
	gen := owner.Object.GetGeneration()
	if gen == owner.Status.ObservedGeneration && statusCountsEqual(owner.Status, newStatus) {
		return owner, nil
	}
	// Record the generation this status was computed from, even if the
	// retry below reads a newer one.
	newStatus.ObservedGeneration = gen

	logger := klog.FromContext(ctx)
	for attempt := 0; ; attempt++ {
		logger.V(4).Info(fmt.Sprintf("Updating status for %v: %s/%s, ", c.gvk.Kind, owner.Object.GetNamespace(), owner.Object.GetName()) +
			fmt.Sprintf("replicas %d->%d (need %d), ", owner.Status.Replicas, newStatus.Replicas, owner.Replicas) +
			fmt.Sprintf("fullyLabeledReplicas %d->%d, ", owner.Status.FullyLabeledReplicas, newStatus.FullyLabeledReplicas) +
			fmt.Sprintf("readyReplicas %d->%d, ", owner.Status.ReadyReplicas, newStatus.ReadyReplicas) +
			fmt.Sprintf("availableReplicas %d->%d, ", owner.Status.AvailableReplicas, newStatus.AvailableReplicas) +
			terminatingChange(c.opts.TerminatingReplicas, owner.Status, newStatus) +
			fmt.Sprintf("sequence No: %v->%v", owner.Status.ObservedGeneration, newStatus.ObservedGeneration))
		updated, err := c.adapter.UpdateStatus(ctx, owner, newStatus)
		if err == nil {
			return updated, nil
		}
		if attempt >= statusUpdateRetries {
			return nil, err
		}
		fresh, getErr := c.adapter.GetLive(ctx, owner.Object.GetNamespace(), owner.Object.GetName())
		if getErr != nil {
			// Without a fresh object the computed status can't be trusted.
			return nil, getErr
		}
		if fresh.Status.ObservedGeneration == newStatus.ObservedGeneration && statusCountsEqual(fresh.Status, newStatus) {
			// Someone (an earlier attempt) already wrote it.
			return fresh, nil
		}
		owner = fresh
	}
}

// statusHold says how long to hold back newStatus: non-zero only when its
// conditions are the owner's, its counts are not the settled ones, and
// either
//   - the owner has observed its generation, only counts changed, and the
//     last write of this owner's status was less than StatusMinInterval ago
//     (for availability a rollout steps on: RolloutStepStatusInterval since
//     the last write and, for a gain, since the sync that first saw it,
//     unless the owner is at its rollout's size (see gainHold); for the
//     terminating count alone: TerminatingStatusInterval), or
//   - a rollout step has just scaled the owner (see stepHold).
//
// One exception to "settled": during a rollout, pods a step deleted going
// away from an owner the rollout will step down again (replicas left) is
// held TerminatingStatusInterval even when it settles the owner. Nothing
// steps on that count (the Deployment sums it into its own, coalesced,
// status), and the owner's next step writes it anyway.
func (c *BaseController) statusHold(key string, owner *Owner, newStatus Status, now time.Time) time.Duration {
	interval := c.opts.StatusMinInterval
	if interval <= 0 || owner.Object.GetDeletionTimestamp() != nil ||
		!reflect.DeepEqual(owner.Status.Conditions, newStatus.Conditions) {
		return 0
	}
	generationSeen := owner.Object.GetGeneration() == owner.Status.ObservedGeneration
	podsGoneOnly := generationSeen && onlyTerminatingChanged(owner.Status, newStatus)
	stepPodsGone := podsGoneOnly && owner.Replicas > 0 && c.rolloutInProgress(owner)
	if !stepPodsGone && (settled(owner.Replicas, newStatus) ||
		(fullyAvailable(owner.Replicas, newStatus) && !fullyAvailable(owner.Replicas, owner.Status))) {
		return 0
	}
	if !generationSeen {
		return c.stepHold(key, owner, newStatus, now)
	}
	if statusCountsEqual(owner.Status, newStatus) {
		return 0
	}
	var batch time.Duration
	switch {
	case podsGoneOnly:
		interval = max(interval, TerminatingStatusInterval)
	case owner.Status.AvailableReplicas != newStatus.AvailableReplicas && c.rolloutInProgress(owner):
		// availableReplicas is what a Deployment's rollout steps wait on: a
		// change in it waits only long enough to take in the pods that
		// become available together (they are created in batches), or
		// every step would wait the full interval.
		// A loss of availability is not held longer: the Deployment sums
		// availability to bound what it may scale down. A gain at the
		// rollout's size keeps the full interval (see gainHold).
		gain := newStatus.AvailableReplicas > owner.Status.AvailableReplicas
		if gain {
			batch = c.gainHold(key, owner, now)
		}
		if !gain || !atRolloutSize(owner) {
			interval = min(interval, RolloutStepStatusInterval)
		}
	}
	c.statusMu.Lock()
	last, ok := c.lastStatusWrite[key]
	c.statusMu.Unlock()
	if !ok {
		return batch
	}
	if elapsed := now.Sub(last); elapsed >= 0 && elapsed < interval {
		return max(batch, interval-elapsed)
	}
	return batch
}

// stepHold: a rollout step changed spec.replicas and nothing a reader
// steps on has changed yet: readiness and availability are as written.
//   - Scaled up above the pod count the status shows: the Deployment waits
//     on the new pods' availability, not on the observed generation or the
//     pod count, so those wait for the pods to become available, and the
//     step costs one status write instead of three (generation observed,
//     pods created, pods available).
//   - Scaled down below the pods the cache still shows: the sync that
//     deleted them would write the new generation with the old counts, and
//     the deletions showing up would be a second write; the first waits
//     for the second.
//
// A new owner (no status written yet) creating its first pods is held like
// a scale-up, rollout or not: its first write, the observed generation
// with no pods in the cache yet, would otherwise be followed at once by the
// pods' count and then their availability.
//
// Either hold lasts at most StatusMinInterval from its first sync. Once
// some of a scale-up's pods are available, the write waits only for the
// rest of their batch (gainHold); a loss of availability ends it.
func (c *BaseController) stepHold(key string, owner *Owner, newStatus Status, now time.Time) time.Duration {
	scaledUp := owner.Replicas > owner.Status.Replicas
	scaledDown := owner.Replicas < owner.Status.Replicas && newStatus.Replicas > owner.Replicas
	firstPods := scaledUp && owner.Status.ObservedGeneration == 0
	if !scaledUp && !scaledDown {
		return 0
	}
	if !firstPods && !c.rolloutInProgress(owner) {
		return 0
	}
	if owner.Status.AvailableReplicas != newStatus.AvailableReplicas || owner.Status.ReadyReplicas != newStatus.ReadyReplicas {
		if !scaledUp || newStatus.AvailableReplicas < owner.Status.AvailableReplicas {
			return 0
		}
		return c.gainHold(key, owner, now)
	}
	return c.heldFor(c.stepHeldSince, key, now, c.opts.StatusMinInterval)
}

// gainHold: an availability gain a rollout steps on waits
// RolloutStepStatusInterval from the first sync that saw it, so that the
// pods of one batch, becoming available a few moments apart, make one
// write and one rollout step rather than one each. Once the owner has all
// the replicas its Deployment wants (atRolloutSize), no step waits on the
// gain to create pods, only to shrink the older ReplicaSets: it waits up to
// StatusMinInterval, so the last pods make one step, not one each (and no
// run of near-identical ScalingReplicaSet events the event recorder would
// aggregate into count patches). Every replica available ends either hold.
func (c *BaseController) gainHold(key string, owner *Owner, now time.Time) time.Duration {
	limit := RolloutStepStatusInterval
	if atRolloutSize(owner) {
		limit = max(limit, c.opts.StatusMinInterval)
	}
	return c.heldFor(c.batchHeldSince, key, now, limit)
}

// atRolloutSize: the owner is a Deployment's ReplicaSet that has as many
// replicas as the Deployment wants (its desired-replicas annotation).
func atRolloutSize(owner *Owner) bool {
	desired, err := strconv.ParseInt(owner.Object.GetAnnotations()[util.DesiredReplicasAnnotation], 10, 32)
	return err == nil && owner.Replicas > 0 && int64(owner.Replicas) >= desired
}

// heldFor: what is left of limit since the hold of key in since began
// (now, on its first call).
func (c *BaseController) heldFor(since map[string]time.Time, key string, now time.Time, limit time.Duration) time.Duration {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	start, ok := since[key]
	if !ok {
		start = now
		since[key] = now
	}
	if elapsed := now.Sub(start); elapsed >= 0 && elapsed < limit {
		return limit - elapsed
	}
	return 0
}

// rolloutInProgress: another object under the same controller (an older
// ReplicaSet of a Deployment) still has replicas, so the controller steps
// on this one's availability.
func (c *BaseController) rolloutInProgress(owner *Owner) bool {
	for _, sib := range c.adapter.Siblings(owner) {
		if sib.Object.GetUID() != owner.Object.GetUID() && (sib.Replicas > 0 || sib.Status.Replicas > 0) {
			return true
		}
	}
	return false
}

// settled: every wanted replica exists, carries the template's labels and
// is available, and none is terminating.
func settled(want int32, st Status) bool {
	return fullyAvailable(want, st) && ptr.Deref(st.TerminatingReplicas, 0) == 0
}

// fullyAvailable: every wanted replica exists, carries the template's
// labels and is available, whatever still terminates (pods evicted from an
// unreachable node terminate until it comes back).
func fullyAvailable(want int32, st Status) bool {
	return st.Replicas == want && st.FullyLabeledReplicas == want && st.ReadyReplicas == want &&
		st.AvailableReplicas == want
}

func (c *BaseController) noteStatusWrite(key string, now time.Time) {
	if c.opts.StatusMinInterval <= 0 {
		return
	}
	c.statusMu.Lock()
	c.lastStatusWrite[key] = now
	delete(c.stepHeldSince, key)
	delete(c.batchHeldSince, key)
	c.statusMu.Unlock()
}

func (c *BaseController) endStepHold(key string) {
	c.statusMu.Lock()
	delete(c.stepHeldSince, key)
	delete(c.batchHeldSince, key)
	c.statusMu.Unlock()
}

func (c *BaseController) forgetStatusWrite(key string) {
	c.statusMu.Lock()
	delete(c.lastStatusWrite, key)
	delete(c.stepHeldSince, key)
	delete(c.batchHeldSince, key)
	c.statusMu.Unlock()
}

func terminatingChange(enabled bool, old, cur Status) string {
	if !enabled {
		return ""
	}
	return fmt.Sprintf("terminatingReplicas %s->%s, ", int32PtrString(old.TerminatingReplicas), int32PtrString(cur.TerminatingReplicas))
}

func int32PtrString(p *int32) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// statusCountsEqual compares everything but observedGeneration.
// onlyTerminatingChanged: b differs from a in terminatingReplicas alone.
func onlyTerminatingChanged(a, b Status) bool {
	b.TerminatingReplicas = a.TerminatingReplicas
	return statusCountsEqual(a, b)
}

func statusCountsEqual(a, b Status) bool {
	return a.Replicas == b.Replicas &&
		a.FullyLabeledReplicas == b.FullyLabeledReplicas &&
		a.ReadyReplicas == b.ReadyReplicas &&
		a.AvailableReplicas == b.AvailableReplicas &&
		ptr.Equal(a.TerminatingReplicas, b.TerminatingReplicas) &&
		reflect.DeepEqual(a.Conditions, b.Conditions)
}

func getCondition(conds []Condition, t string) *Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// setCondition replaces the condition of cond's type, keeping the existing
// one (and its transition time) when status and reason are unchanged.
func setCondition(conds []Condition, cond Condition) []Condition {
	if cur := getCondition(conds, cond.Type); cur != nil && cur.Status == cond.Status && cur.Reason == cond.Reason {
		return conds
	}
	return append(removeCondition(conds, cond.Type), cond)
}

// removeCondition returns conds without conditions of type t (nil if none remain).
func removeCondition(conds []Condition, t string) []Condition {
	var out []Condition
	for _, c := range conds {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}
