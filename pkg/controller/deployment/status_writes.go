package deployment

import (
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

// statusHold says how long newStatus may wait, and whether it is an
// intermediate state at all: one only when d has observed its generation,
// nothing else is pending, the conditions keep their types, statuses and
// reasons, and the rollout is neither complete nor becoming fully
// available. An intermediate state waits until holdInterval has passed
// since our last status write of d, or TerminatingStatusInterval if only
// the terminating count changed (the last terminating pod gone settles d
// and is written at once).
func (dc *Controller) statusHold(key string, d *apps.Deployment, newStatus apps.DeploymentStatus, pending bool, now time.Time) (wait time.Duration, intermediate bool) {
	if dc.statusMinInterval <= 0 || pending || d.DeletionTimestamp != nil ||
		d.Generation != d.Status.ObservedGeneration || newStatus.ObservedGeneration != d.Status.ObservedGeneration ||
		!sameConditions(d.Status.Conditions, newStatus.Conditions) || settled(d, newStatus) ||
		(fullyAvailable(d, newStatus) && !fullyAvailable(d, d.Status)) {
		return 0, false
	}
	dc.writesMu.Lock()
	w, ok := dc.writes[key]
	dc.writesMu.Unlock()
	if !ok || w.uid != d.UID {
		return 0, true
	}
	interval := dc.holdInterval(d, w.intermediates)
	if onlyTerminatingChanged(d.Status, newStatus) {
		interval = max(interval, TerminatingStatusInterval)
	}
	if elapsed := now.Sub(w.at); elapsed >= 0 && elapsed < interval {
		return interval - elapsed, true
	}
	return 0, true
}

// onlyTerminatingChanged: b's counts differ from a's in terminatingReplicas
// alone (pods going away after the rollout's steps took them out).
func onlyTerminatingChanged(a, b apps.DeploymentStatus) bool {
	return !ptr.Equal(a.TerminatingReplicas, b.TerminatingReplicas) &&
		a.Replicas == b.Replicas && a.UpdatedReplicas == b.UpdatedReplicas &&
		a.ReadyReplicas == b.ReadyReplicas && a.AvailableReplicas == b.AvailableReplicas &&
		a.UnavailableReplicas == b.UnavailableReplicas && ptr.Equal(a.CollisionCount, b.CollisionCount)
}

// holdInterval doubles statusMinInterval with each intermediate write made
// since the last one that could not wait, up to MaxStatusInterval and a
// tenth of d's progress deadline: a rollout's intermediate writes then grow
// with the logarithm of its duration, not in proportion to it (a rollout
// on a busy cluster lasts longer, and would otherwise write more). Progress
// held back is progress the deadline has not seen yet, so the cap keeps a
// timeout from being reported much later than upstream reports it.
func (dc *Controller) holdInterval(d *apps.Deployment, intermediates int) time.Duration {
	limit := MaxStatusInterval
	if d.Spec.ProgressDeadlineSeconds != nil {
		limit = min(limit, time.Duration(*d.Spec.ProgressDeadlineSeconds)*time.Second/10)
	}
	interval := dc.statusMinInterval
	for i := 0; i < intermediates && interval < limit; i++ {
		interval *= 2
	}
	return max(dc.statusMinInterval, min(interval, limit))
}

// settled: every replica is updated and available, none terminating.
func settled(d *apps.Deployment, st apps.DeploymentStatus) bool {
	return fullyAvailable(d, st) && ptr.Deref(st.TerminatingReplicas, 0) == 0
}

// fullyAvailable: every replica is updated and available, whatever still
// terminates (pods evicted from an unreachable node terminate until it
// comes back; becoming available again must not wait on them).
func fullyAvailable(d *apps.Deployment, st apps.DeploymentStatus) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	return st.Replicas == want && st.UpdatedReplicas == want && st.ReadyReplicas == want &&
		st.AvailableReplicas == want && st.UnavailableReplicas == 0
}

// sameConditions compares type, status and reason: a condition's times and
// message alone (e.g. Progressing's lastUpdateTime as pods come up) may wait.
// So may Progressing turning from "new ReplicaSet created" (or found) to
// "ReplicaSet progressing": both say the rollout is under way (setting a
// condition moves it to the end of the list, so types are matched, not
// positions).
func sameConditions(a, b []apps.DeploymentCondition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		other := util.GetDeploymentCondition(apps.DeploymentStatus{Conditions: b}, a[i].Type)
		if other == nil || other.Status != a[i].Status {
			return false
		}
		bothUnderWay := a[i].Type == apps.DeploymentProgressing && rolloutUnderWay(a[i]) && rolloutUnderWay(*other)
		if other.Reason != a[i].Reason && !bothUnderWay {
			return false
		}
	}
	return true
}

// rolloutUnderWay: a Progressing condition saying a rollout has started or
// goes on (not complete, timed out, paused or failed).
func rolloutUnderWay(c apps.DeploymentCondition) bool {
	if c.Status != v1.ConditionTrue {
		return false
	}
	switch c.Reason {
	case util.NewReplicaSetReason, util.FoundNewRSReason, util.ReplicaSetUpdatedReason:
		return true
	}
	return false
}

// noteWrite records our status write of key; intermediate says it was an
// intermediate state, written once its hold was over.
func (dc *Controller) noteWrite(key string, uid types.UID, sentRV, newRV string, now time.Time, intermediate bool) {
	w := statusWrite{at: now, uid: uid}
	if newRV != sentRV {
		// Only a version the server replaced can show the cache is behind.
		w.replacedRV = sentRV
	}
	dc.writesMu.Lock()
	if prev, ok := dc.writes[key]; ok && intermediate && prev.uid == uid {
		w.intermediates = prev.intermediates + 1
	}
	dc.writes[key] = w
	dc.writesMu.Unlock()
}

func (dc *Controller) forgetWrite(key string) {
	dc.writesMu.Lock()
	delete(dc.writes, key)
	delete(dc.created, key)
	dc.writesMu.Unlock()
}

// CreatedCacheWait bounds how long a Deployment's syncs wait for the cache
// to show a ReplicaSet it created (it may have been deleted at once, and
// its add event never come).
const CreatedCacheWait = 5 * time.Second

type createdReplicaSet struct {
	name string
	// owner is the Deployment's UID (a Deployment recreated under the same
	// name starts afresh).
	owner types.UID
	at    time.Time
}

func (dc *Controller) noteCreated(key string, owner types.UID, name string, now time.Time) {
	dc.writesMu.Lock()
	dc.created[key] = createdReplicaSet{name: name, owner: owner, at: now}
	dc.writesMu.Unlock()
}

// awaitCreated says how long d's sync should wait for the ReplicaSet cache
// to show the ReplicaSet we last created for it: 0 once rsList has it (or
// the wait is over). Its add event brings the key back sooner.
func (dc *Controller) awaitCreated(key string, d *apps.Deployment, rsList []*apps.ReplicaSet, now time.Time) time.Duration {
	dc.writesMu.Lock()
	defer dc.writesMu.Unlock()
	c, ok := dc.created[key]
	if !ok {
		return 0
	}
	if c.owner == d.UID {
		for _, rs := range rsList {
			if rs.Name == c.name {
				delete(dc.created, key)
				return 0
			}
		}
		if elapsed := now.Sub(c.at); elapsed >= 0 && elapsed < CreatedCacheWait {
			return CreatedCacheWait - elapsed
		}
	}
	delete(dc.created, key)
	return 0
}

// cacheBehindOurWrite: the cached Deployment is the very version our last
// status write replaced, so the informer has not delivered that write yet.
func (dc *Controller) cacheBehindOurWrite(key string, cached *apps.Deployment) bool {
	dc.writesMu.Lock()
	defer dc.writesMu.Unlock()
	w, ok := dc.writes[key]
	if !ok || w.replacedRV == "" {
		return false
	}
	if w.uid == cached.UID && w.replacedRV == cached.ResourceVersion {
		return true
	}
	if w.uid != cached.UID {
		delete(dc.writes, key)
		return false
	}
	// Caught up: keep the time for statusHold, drop the version.
	w.replacedRV = ""
	dc.writes[key] = w
	return false
}
