package statefulset

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/lru"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/history"
)

// maxBatchSize caps how many pod operations a Parallel set runs at once.
const maxBatchSize = 500

// setControl is the reconcile logic for one StatefulSet, given its pods:
// revisions, pod creation/update/deletion in the order the policies ask
// for, status, and history cleanup.
type setControl struct {
	pods          *podControl
	status        statusWriter
	history       history.Interface
	recorder      record.EventRecorder
	equalityCache *lru.Cache
	features      Features
}

func newSetControl(pods *podControl, status statusWriter, h history.Interface, recorder record.EventRecorder, features Features) *setControl {
	return &setControl{pods: pods, status: status, history: h, recorder: recorder, equalityCache: lru.New(equalityCacheSize), features: features}
}

// sync moves set's pods one step towards the spec and returns the status
// it wrote (or found already written). An error means "try again later".
func (c *setControl) sync(ctx context.Context, set *apps.StatefulSet, pods []*v1.Pod, now time.Time) (*apps.StatefulSetStatus, error) {
	// A new revision modifies set; never modify the cache's copy.
	set = set.DeepCopy()
	revisions, err := c.listRevisions(set)
	if err != nil {
		return nil, err
	}
	history.SortControllerRevisions(revisions)

	current, update, status, err := c.update(ctx, set, pods, revisions, metav1.NewTime(now))
	truncErr := c.truncateHistory(ctx, set, pods, revisions, current, update)
	if err != nil {
		return nil, utilerrors.Flatten(utilerrors.NewAggregate([]error{err, truncErr}))
	}
	return status, truncErr
}

// update finds the revisions, reconciles the pods and writes the status,
// even when reconciling failed half-way.
func (c *setControl) update(ctx context.Context, set *apps.StatefulSet, pods []*v1.Pod, revisions []*apps.ControllerRevision, now metav1.Time) (current, update *apps.ControllerRevision, status *apps.StatefulSetStatus, err error) {
	logger := klog.FromContext(ctx)
	current, update, collisionCount, err := c.revisionsFor(ctx, set, revisions)
	if err != nil {
		return current, update, nil, err
	}
	status, err = c.reconcile(ctx, set, current, update, collisionCount, pods, now)
	if status == nil {
		return current, update, nil, err
	}
	statusErr := c.writeStatus(ctx, set, status, now)
	if statusErr == nil {
		logger.V(4).Info("Updated status", "statefulSet", klog.KObj(set),
			"replicas", status.Replicas, "readyReplicas", status.ReadyReplicas,
			"currentReplicas", status.CurrentReplicas, "updatedReplicas", status.UpdatedReplicas)
	}
	switch {
	case err != nil:
		if statusErr != nil {
			logger.Error(statusErr, "Could not update status", "statefulSet", klog.KObj(set))
		}
		return current, update, status, err
	case statusErr != nil:
		return current, update, status, statusErr
	}
	logger.V(4).Info("StatefulSet revisions", "statefulSet", klog.KObj(set),
		"currentRevision", status.CurrentRevision, "updateRevision", status.UpdateRevision)
	return current, update, status, nil
}

// round holds what one reconcile pass works on.
type round struct {
	set       *apps.StatefulSet
	updateSet *apps.StatefulSet // set with the update revision's template
	current   *apps.ControllerRevision
	update    *apps.ControllerRevision
	// replicas[i] is the pod of ordinal start+i (built, not yet created,
	// when missing); condemned are pods beyond the range, highest first.
	replicas  []*v1.Pod
	condemned []*v1.Pod
	monotonic bool
	now       metav1.Time
}

func (r *round) minReady() int32 { return r.set.Spec.MinReadySeconds }

// refreshStatus recounts the pods of the round into status.
func (r *round) refreshStatus(status *apps.StatefulSetStatus) {
	countPods(status, r.minReady(), r.current, r.update, r.now, r.replicas, r.condemned)
}

// reconcile creates, fixes and deletes pods as the set's policies allow
// and returns the resulting status. A nil status means nothing may be
// written (the revisions could not be applied).
func (c *setControl) reconcile(ctx context.Context, set *apps.StatefulSet, current, update *apps.ControllerRevision, collisionCount int32, pods []*v1.Pod, now metav1.Time) (*apps.StatefulSetStatus, error) {
	logger := klog.FromContext(ctx)
	currentSet, err := applyRevision(set, current)
	if err != nil {
		return nil, err
	}
	updateSet, err := applyRevision(set, update)
	if err != nil {
		return nil, err
	}
	recreate := set.Spec.UpdateStrategy.Type == apps.RecreateStatefulSetStrategyType
	if recreate && !c.features.StatefulSetRecreateStrategy {
		err := fmt.Errorf("statefulset %s/%s uses Recreate strategy but feature gate %s is disabled", set.Namespace, set.Name, "StatefulSetRecreateStrategy")
		c.recorder.Event(set, v1.EventTypeWarning, "UnknownStrategy", err.Error())
		return nil, err
	}

	status := &apps.StatefulSetStatus{
		ObservedGeneration: set.Generation,
		CurrentRevision:    current.Name,
		UpdateRevision:     update.Name,
		CollisionCount:     &collisionCount,
		Conditions:         append([]apps.StatefulSetCondition(nil), set.Status.Conditions...),
	}
	countPods(status, set.Spec.MinReadySeconds, current, update, now, pods)

	r := &round{set: set, updateSet: updateSet, current: current, update: update, monotonic: !allowsBurst(set), now: now}
	r.replicas = make([]*v1.Pod, specReplicas(set))
	start := startOrdinal(set)
	for _, pod := range pods {
		switch {
		case inOrdinalRange(pod, set):
			r.replicas[getOrdinal(pod)-start] = pod
		case getOrdinal(pod) >= 0:
			r.condemned = append(r.condemned, pod)
		}
		// Pods whose name has no ordinal are not ours to manage.
	}
	for i := range r.replicas {
		if r.replicas[i] == nil {
			r.replicas[i] = newVersionedPod(currentSet, updateSet, current.Name, update.Name, start+i)
		}
	}
	sort.SliceStable(r.condemned, func(i, j int) bool { return getOrdinal(r.condemned[i]) > getOrdinal(r.condemned[j]) })

	// The first unavailable pod: lowest wanted ordinal, else the lowest
	// condemned one. Scale-down may delete it even while it is unhealthy.
	var firstUnavailable *v1.Pod
	unavailable := 0
	for _, pod := range r.replicas {
		if isUnavailable(pod, set.Spec.MinReadySeconds, now) {
			unavailable++
			if firstUnavailable == nil {
				firstUnavailable = pod
			}
		}
	}
	for i := len(r.condemned) - 1; i >= 0; i-- {
		if isUnavailable(r.condemned[i], set.Spec.MinReadySeconds, now) {
			unavailable++
			if firstUnavailable == nil {
				firstUnavailable = r.condemned[i]
			}
		}
	}
	if unavailable > 0 {
		logger.V(4).Info("StatefulSet has unavailable Pods", "statefulSet", klog.KObj(set), "unavailableReplicas", unavailable, "pod", klog.KObj(firstUnavailable))
	}

	// A set being deleted only gets its status reported.
	if set.DeletionTimestamp != nil {
		return status, nil
	}

	if recreate {
		done, err := c.recreateOldPods(ctx, r, status)
		if err != nil || !done {
			r.refreshStatus(status)
			return status, err
		}
		if current.Name != update.Name {
			setProgressing(status, v1.ConditionTrue, RecreateInProgressReason, "Waiting for new-revision pods to be created", now)
		}
	}

	// Wanted pods first: create, replace failed ones, fix identity.
	if exit, err := runForAll(len(r.replicas), r.monotonic, func(i int) (bool, error) {
		return c.processReplica(ctx, r, i)
	}); exit || err != nil {
		r.refreshStatus(status)
		return status, err
	}

	// Condemned pods' claims get their retention owners before the pods go.
	if exit, err := runForAll(len(r.condemned), r.monotonic, func(i int) (bool, error) {
		pod := r.condemned[i]
		match, err := c.pods.claimsMatchPolicy(ctx, updateSet, pod)
		if err != nil {
			return true, err
		}
		if !match {
			if err := c.pods.fixClaimOwners(ctx, updateSet, pod); err != nil {
				return true, err
			}
		}
		return false, nil
	}); exit || err != nil {
		r.refreshStatus(status)
		return status, err
	}

	// Scale down, highest ordinal first. In OrderedReady mode every wanted
	// pod is now running and available.
	if exit, err := runForAll(len(r.condemned), r.monotonic, func(i int) (bool, error) {
		return c.processCondemned(ctx, r, firstUnavailable, i)
	}); exit || err != nil {
		r.refreshStatus(status)
		return status, err
	}

	r.refreshStatus(status)

	if set.Spec.UpdateStrategy.Type == apps.OnDeleteStatefulSetStrategyType || recreate {
		// Pods move to the update revision when something deletes them.
		return status, nil
	}
	if c.features.MaxUnavailableStatefulSet {
		return c.rollWithMaxUnavailable(ctx, r, status)
	}
	return c.rollOneAtATime(ctx, r, status)
}

// processReplica handles the wanted pod replicas[i]. The bool asks an
// OrderedReady pass to stop at this pod.
func (c *setControl) processReplica(ctx context.Context, r *round, i int) (bool, error) {
	logger := klog.FromContext(ctx)
	set, pod := r.set, r.replicas[i]

	// A pod that ended, whether Failed or Succeeded (an evicted pod's
	// phase follows its exit code), is deleted and created anew on a
	// later sync, once the API server no longer has it.
	if isTerminal(pod) {
		if pod.DeletionTimestamp == nil {
			if err := c.pods.deletePod(ctx, set, pod); err != nil {
				return true, err
			}
		}
		return true, nil
	}

	if !isCreated(pod) {
		stale, err := c.pods.claimIsStale(set, pod)
		if err != nil || stale {
			// A claim still owned by the previous pod of this name must
			// be garbage collected first.
			return true, err
		}
		if err := c.pods.createPod(ctx, set, pod); err != nil {
			return true, err
		}
		if r.monotonic {
			return true, nil
		}
	}

	// A pending pod may be waiting for a claim that was deleted meanwhile.
	if isPending(pod) {
		logger.V(4).Info("StatefulSet is triggering PVC creation for pending Pod", "statefulSet", klog.KObj(set), "pod", klog.KObj(pod))
		if err := c.pods.createMissingClaims(ctx, set, pod); err != nil {
			return true, err
		}
	}

	if r.monotonic {
		switch {
		case isTerminating(pod):
			logger.V(4).Info("StatefulSet is waiting for Pod to Terminate", "statefulSet", klog.KObj(set), "pod", klog.KObj(pod))
			return true, nil
		case !isRunningAndReady(pod):
			logger.V(4).Info("StatefulSet is waiting for Pod to be Running and Ready", "statefulSet", klog.KObj(set), "pod", klog.KObj(pod))
			return true, nil
		case !isAvailable(pod, r.minReady(), r.now):
			logger.V(4).Info("StatefulSet is waiting for Pod to be Available", "statefulSet", klog.KObj(set), "pod", klog.KObj(pod))
			return true, nil
		}
	}

	// Pods not fully set up yet make the check fail; treat that as a match.
	match, err := c.pods.claimsMatchPolicy(ctx, r.updateSet, pod)
	if err != nil {
		match = true
	}
	if identityMatches(set, pod) && storageMatches(set, pod) && match {
		return false, nil
	}
	if err := c.pods.updatePod(ctx, r.updateSet, pod.DeepCopy()); err != nil {
		return true, err
	}
	return false, nil
}

// processCondemned deletes condemned[i] when the policy allows. In
// OrderedReady mode it waits for terminations in progress and for the pod
// to be healthy, unless it is the first unhealthy pod (which would block
// forever otherwise).
func (c *setControl) processCondemned(ctx context.Context, r *round, firstUnavailable *v1.Pod, i int) (bool, error) {
	logger := klog.FromContext(ctx)
	set, pod := r.set, r.condemned[i]
	if isTerminating(pod) {
		if r.monotonic {
			logger.V(4).Info("StatefulSet is waiting for Pod to Terminate prior to scale down", "statefulSet", klog.KObj(set), "pod", klog.KObj(pod))
			return true, nil
		}
		return false, nil
	}
	if r.monotonic && pod != firstUnavailable {
		if !isRunningAndReady(pod) {
			logger.V(4).Info("StatefulSet is waiting for Pod to be Running and Ready prior to scale down", "statefulSet", klog.KObj(set), "pod", klog.KObj(firstUnavailable))
			return true, nil
		}
		if !isAvailable(pod, r.minReady(), r.now) {
			logger.V(4).Info("StatefulSet is waiting for Pod to be Available prior to scale down", "statefulSet", klog.KObj(set), "pod", klog.KObj(firstUnavailable))
			return true, nil
		}
	}
	logger.V(2).Info("Pod of StatefulSet is terminating for scale down", "statefulSet", klog.KObj(set), "pod", klog.KObj(pod))
	return true, c.pods.deletePod(ctx, set, pod)
}

// rollOneAtATime is the rolling update without the MaxUnavailableStatefulSet
// feature: from the highest ordinal down to the partition, delete one pod
// not on the update revision, and wait for each updated pod to become
// available before going lower.
func (c *setControl) rollOneAtATime(ctx context.Context, r *round, status *apps.StatefulSetStatus) (*apps.StatefulSetStatus, error) {
	logger := klog.FromContext(ctx)
	for target := len(r.replicas) - 1; target >= partition(r.set); target-- {
		pod := r.replicas[target]
		if getPodRevision(pod) != r.update.Name && !isTerminating(pod) {
			logger.V(2).Info("Pod of StatefulSet is terminating for update", "statefulSet", klog.KObj(r.set), "pod", klog.KObj(pod))
			if err := c.pods.deletePod(ctx, r.set, pod); err != nil {
				return status, err
			}
			status.CurrentReplicas--
			return status, nil
		}
		if isUnavailable(pod, r.minReady(), r.now) {
			logger.V(4).Info("StatefulSet is waiting for Pod to update", "statefulSet", klog.KObj(r.set), "pod", klog.KObj(pod))
			return status, nil
		}
	}
	return status, nil
}

// rollWithMaxUnavailable is the rolling update with maxUnavailable: keep at
// most maxUnavailable wanted pods unavailable, deleting old-revision pods
// from the highest ordinal down to the partition.
func (c *setControl) rollWithMaxUnavailable(ctx context.Context, r *round, status *apps.StatefulSetStatus) (*apps.StatefulSetStatus, error) {
	logger := klog.FromContext(ctx)
	set := r.set
	maxUnavailable, err := effectiveMaxUnavailable(set)
	if err != nil {
		return status, err
	}
	parallel := set.Spec.PodManagementPolicy == apps.ParallelPodManagement
	needsUpdate := func(pod *v1.Pod) bool { return getPodRevision(pod) != r.update.Name }

	unavailable := 0
	// Parallel sets may also replace old pods that are unavailable anyway:
	// that costs no availability.
	unavailableOld := 0
	for _, pod := range r.replicas {
		if isUnavailable(pod, r.minReady(), r.now) {
			unavailable++
			if parallel && needsUpdate(pod) && !isTerminating(pod) {
				unavailableOld++
			}
		}
	}
	unavailableReplicasGauge.WithLabelValues(set.Namespace, set.Name, string(set.Spec.PodManagementPolicy)).Set(float64(unavailable))

	if unavailable >= maxUnavailable && unavailableOld == 0 {
		if unavailable > maxUnavailable {
			logger.V(4).Info("StatefulSet found unavailablePods, more than the allowed maxUnavailable", "statefulSet", klog.KObj(set),
				"unavailablePods", unavailable, "unavailablePodsNeedingUpdate", unavailableOld, "maxUnavailable", maxUnavailable)
		}
		return status, nil
	}

	lowest := partition(set)
	deleteForUpdate := func(pod *v1.Pod, msg string) error {
		logger.V(2).Info(msg, "statefulSet", klog.KObj(set), "pod", klog.KObj(pod))
		if err := c.pods.deletePod(ctx, set, pod); err != nil {
			return err
		}
		status.CurrentReplicas--
		return nil
	}

	if parallel {
		// First the old pods that are down anyway, so the budget is not
		// spent on healthy pods while broken ones wait at low ordinals.
		for target := len(r.replicas) - 1; target >= lowest; target-- {
			pod := r.replicas[target]
			if needsUpdate(pod) && !isAvailable(pod, r.minReady(), r.now) && !isTerminating(pod) {
				if err := deleteForUpdate(pod, "StatefulSet terminating unavailable Pod for update"); err != nil {
					return status, err
				}
			}
		}
		// Then healthy old pods, within what is left of the budget.
		budget := maxUnavailable - unavailable
		for target := len(r.replicas) - 1; target >= lowest && budget > 0; target-- {
			pod := r.replicas[target]
			if needsUpdate(pod) && !isUnavailable(pod, r.minReady(), r.now) {
				if err := deleteForUpdate(pod, "StatefulSet terminating Pod for update"); err != nil {
					return status, err
				}
				budget--
			}
		}
		return status, nil
	}

	toDelete := maxUnavailable - unavailable
	for target := len(r.replicas) - 1; target >= lowest && toDelete > 0; target-- {
		pod := r.replicas[target]
		if needsUpdate(pod) && !isTerminating(pod) {
			if err := deleteForUpdate(pod, "StatefulSet terminating Pod for update"); err != nil {
				return status, err
			}
			toDelete--
		}
	}
	return status, nil
}

// recreateOldPods is the first half of the Recreate strategy: delete every
// created pod not on the update revision, and report whether all of them
// are gone (only then may new pods be created).
func (c *setControl) recreateOldPods(ctx context.Context, r *round, status *apps.StatefulSetStatus) (bool, error) {
	logger := klog.FromContext(ctx)
	all := append(append([]*v1.Pod(nil), r.replicas...), r.condemned...)
	var inProgress atomic.Bool
	_, err := runForAll(len(all), false, func(i int) (bool, error) {
		pod := all[i]
		if !isCreated(pod) || getPodRevision(pod) == r.update.Name {
			return false, nil
		}
		inProgress.Store(true)
		if isTerminating(pod) {
			return false, nil
		}
		logger.V(4).Info("Recreate: deleting old revision pod", "statefulSet", klog.KObj(r.set), "pod", klog.KObj(pod))
		if err := c.pods.deletePod(ctx, r.set, pod); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		return false, err
	}
	if inProgress.Load() {
		setProgressing(status, v1.ConditionTrue, RecreateInProgressReason, "Deleting old revision pods", r.now)
		return false, nil
	}
	return true, nil
}

// partition is the lowest index into replicas a rolling update touches.
func partition(set *apps.StatefulSet) int {
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		return int(*ru.Partition)
	}
	return 0
}

// effectiveMaxUnavailable resolves maxUnavailable against spec.replicas:
// 1 when unset, percentages rounded down, and never less than 1.
func effectiveMaxUnavailable(set *apps.StatefulSet) (int, error) {
	value := intstr.FromInt32(1)
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		value = *ru.MaxUnavailable
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&value, int(specReplicas(set)), false)
	if err != nil {
		return 0, err
	}
	return max(n, 1), nil
}

// runForAll calls fn for indexes 0..n-1: in order, stopping when fn asks
// to or fails, for OrderedReady sets; concurrently in growing batches for
// Parallel ones, stopping after a batch with a failure. The bool reports
// whether the caller should stop too.
func runForAll(n int, monotonic bool, fn func(i int) (bool, error)) (bool, error) {
	if monotonic {
		for i := 0; i < n; i++ {
			if exit, err := fn(i); exit || err != nil {
				return true, err
			}
		}
		return false, nil
	}
	if err := slowStart(n, fn); err != nil {
		return true, err
	}
	return false, nil
}

// slowStart runs fn over 0..n-1 in concurrent batches of 1, 2, 4, ... (at
// most maxBatchSize), so a systematic failure costs few calls.
func slowStart(n int, fn func(i int) (bool, error)) error {
	next := 0
	for batch := min(n, 1); batch > 0; batch = min(2*batch, n-next, maxBatchSize) {
		var wg sync.WaitGroup
		errs := make([]error, batch)
		for k := 0; k < batch; k++ {
			i := next + k
			wg.Go(func() {
				_, errs[k] = fn(i)
			})
		}
		wg.Wait()
		next += batch
		if err := utilerrors.NewAggregate(errs); err != nil {
			return err
		}
	}
	return nil
}
