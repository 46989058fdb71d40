package deployment

import (
	"time"

	apps "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// statusHold says how long newStatus may wait: non-zero only when d has
// observed its generation, nothing else is pending, the conditions keep
// their types, statuses and reasons, the rollout is not complete nor
// becoming fully available, and our last status write of d was less than
// statusMinInterval ago.
func (dc *Controller) statusHold(key string, d *apps.Deployment, newStatus apps.DeploymentStatus, pending bool, now time.Time) time.Duration {
	interval := dc.statusMinInterval
	if interval <= 0 || pending || d.DeletionTimestamp != nil ||
		d.Generation != d.Status.ObservedGeneration || newStatus.ObservedGeneration != d.Status.ObservedGeneration ||
		!sameConditions(d.Status.Conditions, newStatus.Conditions) || settled(d, newStatus) ||
		(fullyAvailable(d, newStatus) && !fullyAvailable(d, d.Status)) {
		return 0
	}
	dc.writesMu.Lock()
	w, ok := dc.writes[key]
	dc.writesMu.Unlock()
	if !ok || w.uid != d.UID {
		return 0
	}
	if elapsed := now.Sub(w.at); elapsed >= 0 && elapsed < interval {
		return interval - elapsed
	}
	return 0
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
func sameConditions(a, b []apps.DeploymentCondition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Type != b[i].Type || a[i].Status != b[i].Status || a[i].Reason != b[i].Reason {
			return false
		}
	}
	return true
}

func (dc *Controller) noteWrite(key string, uid types.UID, sentRV, newRV string, now time.Time) {
	w := statusWrite{at: now, uid: uid}
	if newRV != sentRV {
		// Only a version the server replaced can show the cache is behind.
		w.replacedRV = sentRV
	}
	dc.writesMu.Lock()
	dc.writes[key] = w
	dc.writesMu.Unlock()
}

func (dc *Controller) forgetWrite(key string) {
	dc.writesMu.Lock()
	delete(dc.writes, key)
	dc.writesMu.Unlock()
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
