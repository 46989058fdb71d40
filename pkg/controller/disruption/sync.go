package disruption

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// sync recomputes one budget's status. When that fails for any reason but
// a write conflict, it falls back to failSafe so evictions stop.
func (dc *Controller) sync(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	start := dc.clock.Now()
	defer func() {
		logger.V(4).Info("Finished syncing PodDisruptionBudget", "key", key, "duration", dc.clock.Since(start))
	}()

	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	pdb, err := dc.pdbLister.PodDisruptionBudgets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("PodDisruptionBudget has been deleted", "key", key)
		return nil
	}
	if err != nil {
		return err
	}

	err = dc.trySync(ctx, pdb)
	if apierrors.IsConflict(err) {
		// Someone (usually the eviction handler) wrote first; recompute from
		// the newer object rather than zeroing the budget.
		return err
	}
	if err != nil {
		logger.Error(err, "Failed to sync PDB", "podDisruptionBudget", klog.KRef(namespace, name))
		return dc.failSafe(ctx, pdb, err)
	}
	return nil
}

func (dc *Controller) trySync(ctx context.Context, pdb *policy.PodDisruptionBudget) error {
	logger := klog.FromContext(ctx)
	pods, err := dc.getPodsForPDB(pdb)
	if err != nil {
		dc.recorder.Eventf(pdb, v1.EventTypeWarning, "NoPods", "Failed to get pods: %v", err)
		return err
	}
	if len(pods) == 0 {
		dc.recorder.Eventf(pdb, v1.EventTypeNormal, "NoPods", "No matching pods found")
	}

	expectedCount, desiredHealthy, unmanagedPods, err := dc.getExpectedPodCount(ctx, pdb, pods)
	if err != nil {
		dc.recorder.Eventf(pdb, v1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", err)
		return err
	}
	// Pods without a controller are not an error (that would only make the
	// budget hot-loop); the user is told and the count goes on without them.
	if len(unmanagedPods) > 0 {
		logger.V(4).Info("Found unmanaged pods associated with this PDB", "pods", unmanagedPods)
		dc.recorder.Eventf(pdb, v1.EventTypeWarning, "UnmanagedPods", "Pods selected by this PodDisruptionBudget (selector: %v) were found "+
			"to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. "+
			"To account for these pods please set \".spec.minAvailable\" "+
			"field of the PDB to an integer value.", pdb.Spec.Selector)
	}

	now := dc.clock.Now()
	disruptedPods, recheckAt := dc.buildDisruptedPodMap(logger, pods, pdb, now)
	currentHealthy := countHealthyPods(pods, disruptedPods, now)
	err = dc.updatePDBStatus(ctx, pdb, currentHealthy, desiredHealthy, expectedCount, disruptedPods)
	if err == nil && recheckAt != nil {
		// Come back when the oldest pending disruption expires, so the pod
		// counts as healthy again if it was never deleted.
		dc.enqueuePDBForRecheck(logger, pdb, recheckAt.Sub(now))
	}
	return err
}

// getPodsForPDB lists the pods the budget selects. In policy/v1 an empty
// selector selects every pod of the namespace, a missing one none. The
// returned pods are the cache's and must not be modified.
func (dc *Controller) getPodsForPDB(pdb *policy.PodDisruptionBudget) ([]*v1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return nil, err
	}
	return dc.podLister.Pods(pdb.Namespace).List(sel)
}

// getExpectedPodCount returns how many pods the budget covers and how many
// of them must be healthy. An integer minAvailable counts the selected pods
// as they are; a percentage or any maxUnavailable counts the replicas the
// pods' controllers want (pods without one are returned as unmanaged).
// Percentages round up.
func (dc *Controller) getExpectedPodCount(ctx context.Context, pdb *policy.PodDisruptionBudget, pods []*v1.Pod) (expectedCount, desiredHealthy int32, unmanagedPods []string, err error) {
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		expectedCount, unmanagedPods, err = dc.getExpectedScale(ctx, pods)
		if err != nil {
			return 0, 0, nil, err
		}
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expectedCount), true)
		if err != nil {
			return 0, 0, nil, err
		}
		desiredHealthy = max(expectedCount-int32(maxUnavailable), 0)
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		desiredHealthy = pdb.Spec.MinAvailable.IntVal
		expectedCount = int32(len(pods))
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.String:
		expectedCount, unmanagedPods, err = dc.getExpectedScale(ctx, pods)
		if err != nil {
			return 0, 0, nil, err
		}
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expectedCount), true)
		if err != nil {
			return 0, 0, nil, err
		}
		desiredHealthy = int32(minAvailable)
	}
	return expectedCount, desiredHealthy, unmanagedPods, nil
}

// getExpectedScale sums the desired replicas of every distinct controller
// of the pods. Pods without a controller are skipped and their names
// returned; a controller no finder resolves is an error.
func (dc *Controller) getExpectedScale(ctx context.Context, pods []*v1.Pod) (int32, []string, error) {
	scales := map[types.UID]int32{}
	var unmanaged []string
	for _, pod := range pods {
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil {
			unmanaged = append(unmanaged, pod.Name)
			continue
		}
		if _, seen := scales[ref.UID]; seen {
			continue
		}
		found := false
		for _, find := range dc.finders() {
			cs, err := find(ctx, ref, pod.Namespace)
			if err != nil {
				return 0, nil, err
			}
			if cs != nil {
				// Keyed by what was found: all ReplicaSets of a Deployment
				// land on the Deployment, counted once.
				scales[cs.UID] = cs.scale
				found = true
				break
			}
		}
		if !found {
			return 0, nil, fmt.Errorf("found no controllers for pod %q", pod.Name)
		}
	}
	var total int32
	for _, n := range scales {
		total += n
	}
	return total, unmanaged, nil
}

// countHealthyPods counts the ready pods that are neither terminating nor
// promised to an eviction that has not expired yet.
func countHealthyPods(pods []*v1.Pod, disruptedPods map[string]metav1.Time, now time.Time) int32 {
	var n int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if t, ok := disruptedPods[pod.Name]; ok && t.Add(DeletionTimeout).After(now) {
			continue
		}
		if controller.IsPodReady(pod) {
			n++
		}
	}
	return n
}

// buildDisruptedPodMap keeps the status.disruptedPods entries that are still
// pending: the pod exists, is not terminating yet and its entry has not
// expired. It also returns when the earliest kept entry expires, if any.
func (dc *Controller) buildDisruptedPodMap(logger klog.Logger, pods []*v1.Pod, pdb *policy.PodDisruptionBudget, now time.Time) (map[string]metav1.Time, *time.Time) {
	result := map[string]metav1.Time{}
	old := pdb.Status.DisruptedPods
	if old == nil {
		return result, nil
	}
	var recheckAt *time.Time
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			// The eviction went through.
			continue
		}
		since, ok := old[pod.Name]
		if !ok {
			continue
		}
		expiresAt := since.Add(DeletionTimeout)
		if expiresAt.Before(now) {
			logger.V(1).Info("Pod was expected to be deleted but it wasn't, updating PDB",
				"pod", klog.KObj(pod), "deletionTime", since, "podDisruptionBudget", klog.KObj(pdb))
			// Upstream prints the budget's namespace twice; kept as is.
			dc.recorder.Eventf(pod, v1.EventTypeWarning, "NotDeleted", "Pod was expected by PDB %s/%s to be deleted but it wasn't",
				pdb.Namespace, pdb.Namespace)
			continue
		}
		if recheckAt == nil || expiresAt.Before(*recheckAt) {
			recheckAt = &expiresAt
		}
		result[pod.Name] = since
	}
	return result, recheckAt
}

// failSafe sets disruptionsAllowed to 0 with a SyncFailed condition when the
// status could not be computed: failing closed keeps the eviction handler
// from granting a disruption that might not be safe.
func (dc *Controller) failSafe(ctx context.Context, pdb *policy.PodDisruptionBudget, cause error) error {
	newPDB := pdb.DeepCopy()
	newPDB.Status.DisruptionsAllowed = 0
	if newPDB.Status.Conditions == nil {
		newPDB.Status.Conditions = []metav1.Condition{}
	}
	apimeta.SetStatusCondition(&newPDB.Status.Conditions, metav1.Condition{
		Type:               policy.DisruptionAllowedCondition,
		Status:             metav1.ConditionFalse,
		Reason:             policy.SyncFailedReason,
		Message:            cause.Error(),
		ObservedGeneration: newPDB.Status.ObservedGeneration,
	})
	return dc.writeStatus(ctx, newPDB)
}

// updatePDBStatus writes the computed status unless the budget already has
// it. Other controllers' conditions are kept.
func (dc *Controller) updatePDBStatus(ctx context.Context, pdb *policy.PodDisruptionBudget, currentHealthy, desiredHealthy, expectedCount int32, disruptedPods map[string]metav1.Time) error {
	// With no expected pods nothing is allowed: a budget whose first pods
	// just appeared must be safe before this controller has seen them.
	disruptionsAllowed := currentHealthy - desiredHealthy
	if expectedCount <= 0 || disruptionsAllowed <= 0 {
		disruptionsAllowed = 0
	}

	st := pdb.Status
	if st.CurrentHealthy == currentHealthy &&
		st.DesiredHealthy == desiredHealthy &&
		st.ExpectedPods == expectedCount &&
		st.DisruptionsAllowed == disruptionsAllowed &&
		apiequality.Semantic.DeepEqual(st.DisruptedPods, disruptedPods) &&
		st.ObservedGeneration == pdb.Generation &&
		pdbhelper.ConditionsAreUpToDate(pdb) {
		return nil
	}

	newPDB := pdb.DeepCopy()
	newPDB.Status = policy.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation,
		DisruptedPods:      disruptedPods,
		DisruptionsAllowed: disruptionsAllowed,
		CurrentHealthy:     currentHealthy,
		DesiredHealthy:     desiredHealthy,
		ExpectedPods:       expectedCount,
		Conditions:         newPDB.Status.Conditions,
	}
	pdbhelper.UpdateDisruptionAllowedCondition(newPDB)
	return dc.writeStatus(ctx, newPDB)
}

// updateStatus writes the status once; a failure is retried by the queue
// from fresh cache data, never by re-sending this (possibly stale) object.
func (dc *Controller) updateStatus(ctx context.Context, pdb *policy.PodDisruptionBudget) error {
	_, err := dc.kubeClient.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
	return err
}
