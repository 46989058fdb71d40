package replicaset

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

func errUnexpected(what string, obj interface{}) error {
	return fmt.Errorf("unexpected %s object %T: %#v", what, obj, obj)
}

// sync reconciles one owner: claim its pods, create or delete pods unless
// earlier creations/deletions are still unobserved, then write the status.
// The work loop never runs it concurrently for one key.
func (c *BaseController) sync(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	start := c.clock.Now()
	defer func() {
		logger.V(4).Info("Finished syncing", "kind", c.gvk.Kind, "key", key, "duration", c.clock.Since(start))
	}()

	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	nsName := types.NamespacedName{Namespace: namespace, Name: name}
	if err := c.consistency.EnsureReady(nsName); err != nil {
		var stale *controller.ConsistencyError
		if errors.As(err, &stale) {
			staleSyncSkips.WithLabelValues(stale.GroupResource.Group, stale.GroupResource.Resource).Inc()
		}
		return err
	}

	owner, err := c.adapter.Get(namespace, name)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("Deleted", "kind", c.gvk.Kind, "key", key)
		c.consistency.Clear(nsName, "")
		c.expectations.DeleteExpectations(logger, key)
		c.forgetStatusWrite(key)
		c.uncertainCreates.Forget(key)
		return nil
	}
	if err != nil {
		return err
	}

	if controller.NamespaceTerminating(c.nsLister, namespace) {
		// The namespace's deletion removes the pods and then the owner:
		// nothing to adopt or create (creates would be refused), and no
		// status worth writing while the pods go.
		return nil
	}

	needsManage := c.expectations.SatisfiedExpectations(logger, key)
	selector, err := metav1.LabelSelectorAsSelector(owner.Selector)
	if err != nil {
		// Retrying can't fix a bad selector; the next update will.
		utilruntime.HandleError(fmt.Errorf("error converting pod selector to selector for %v %v: %v", c.gvk.Kind, key, err))
		return nil
	}
	if c.uncertainCreates.Take(key) {
		if err := c.uncertainCreates.AwaitUncertainPods(ctx, c.kubeClient, c.consistency, key, nsName, owner.Object.GetUID(), selector); err != nil {
			return err
		}
	}

	allPods, err := controller.FilterPodsByOwner(c.podIndexer, owner.Object, c.gvk.Kind, true)
	if err != nil {
		return err
	}
	// Pods from the cache: copy before modifying.
	activePods, err := c.claimPods(ctx, owner, selector, controller.FilterActivePods(allPods))
	if err != nil {
		return err
	}
	var terminatingPods []*v1.Pod
	if c.opts.TerminatingReplicas {
		terminatingPods = controller.FilterClaimedPods(owner.Object, selector, controller.FilterTerminatingPods(allPods))
	}

	var manageErr error
	if needsManage && owner.Object.GetDeletionTimestamp() == nil {
		manageErr = c.manageReplicas(ctx, activePods, owner)
	}

	// One instant for both the status and the next availability check.
	now := c.clock.Now()
	newStatus := c.calculateStatus(owner, activePods, terminatingPods, manageErr, now)
	updated := owner
	if wait := c.statusHold(key, owner, newStatus, now); wait > 0 {
		// An intermediate state shortly after the last write: the sync
		// after wait writes whatever the pods then show.
		logger.V(4).Info("Holding back intermediate status", "kind", c.gvk.Kind, "key", key, "for", wait)
		c.queue.AddAfter(key, wait)
	} else {
		updated, err = c.updateStatus(ctx, owner, newStatus)
		if err != nil {
			return err
		}
		if updated != owner {
			c.noteStatusWrite(key, now)
		} else {
			c.endStepHold(key)
		}
		c.consistency.WroteAt(nsName, owner.Object.GetUID(), c.opts.Resource, updated.Object.GetResourceVersion())
	}
	if manageErr != nil {
		return manageErr
	}

	// Pods that are ready but not yet available produce no event when they
	// become available: sync again then.
	if updated.MinReadySeconds > 0 && updated.Status.ReadyReplicas != updated.Status.AvailableReplicas {
		next := time.Duration(updated.MinReadySeconds) * time.Second
		if d := controller.FindMinNextPodAvailabilityCheck(activePods, updated.MinReadySeconds, now, c.clock); d != nil {
			next = *d
		}
		c.queue.AddAfter(key, next)
	}
	return nil
}

// claimPods adopts matching orphans and releases owned pods that stopped
// matching, returning the pods the owner now controls.
func (c *BaseController) claimPods(ctx context.Context, owner *Owner, selector labels.Selector, pods []*v1.Pod) ([]*v1.Pod, error) {
	ns, name, uid := owner.Object.GetNamespace(), owner.Object.GetName(), owner.Object.GetUID()
	// Before the first adoption, make sure with a live read that the owner
	// is not being deleted (the cache may lag).
	canAdopt := controller.RecheckDeletionTimestamp(func(ctx context.Context) (metav1.Object, error) {
		fresh, err := c.adapter.GetLive(ctx, ns, name)
		if err != nil {
			return nil, err
		}
		if fresh.Object.GetUID() != uid {
			return nil, fmt.Errorf("original %v %v/%v is gone: got uid %v, wanted %v", c.gvk.Kind, ns, name, fresh.Object.GetUID(), uid)
		}
		return fresh.Object, nil
	})
	m := controller.NewPodControllerRefManager(c.podControl, owner.Object, selector, c.gvk, canAdopt)
	return m.ClaimPods(ctx, pods)
}

// manageReplicas creates or deletes pods to move towards spec.replicas, at
// most burstReplicas per call, recording expectations first so the sync
// waits for the informer to show the result.
func (c *BaseController) manageReplicas(ctx context.Context, activePods []*v1.Pod, owner *Owner) error {
	logger := klog.FromContext(ctx)
	key, err := controller.KeyFunc(owner.Object)
	if err != nil {
		utilruntime.HandleError(err)
		return nil
	}
	diff := len(activePods) - int(owner.Replicas)
	switch {
	case diff < 0:
		return c.createPods(ctx, key, owner, min(-diff, c.burstReplicas))
	case diff > 0:
		n := min(diff, c.burstReplicas)
		logger.V(2).Info("Too many replicas", "kind", c.gvk.Kind, "object", klog.KObj(owner.Object), "need", owner.Replicas, "deleting", n)
		return c.deletePods(ctx, key, owner, activePods, n)
	}
	return nil
}

// createPods creates n pods in slow-start batches (1, 2, 4, ...) so that a
// persistent failure such as exhausted quota costs one call, not n.
func (c *BaseController) createPods(ctx context.Context, key string, owner *Owner, n int) error {
	logger := klog.FromContext(ctx)
	// Creations are expected by count: a pod's name (and UID) is unknown
	// until the API server answers.
	_ = c.expectations.ExpectCreations(logger, key, n)
	logger.V(2).Info("Too few replicas", "kind", c.gvk.Kind, "object", klog.KObj(owner.Object), "need", owner.Replicas, "creating", n)
	ref := metav1.NewControllerRef(owner.Object, c.gvk)
	ok, err := controller.SlowStartBatch(n, controller.SlowStartInitialBatchSize, func() error {
		err := c.podControl.CreatePods(ctx, owner.Object.GetNamespace(), owner.Template, owner.Object, ref)
		if err != nil && apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			// Nothing can be created in a namespace being deleted.
			return nil
		}
		c.uncertainCreates.Record(key, err)
		return err
	})
	if skipped := n - ok; skipped > 0 {
		// Pods never created will never be observed.
		logger.V(2).Info("Slow-start failure. Skipping creation of pods, decrementing expectations", "podsSkipped", skipped, "kind", c.gvk.Kind, "object", klog.KObj(owner.Object))
		for i := 0; i < skipped; i++ {
			c.expectations.CreationObserved(logger, key)
		}
	}
	return err
}

// deletePods deletes the n pods ranked first for deletion, in parallel.
func (c *BaseController) deletePods(ctx context.Context, key string, owner *Owner, activePods []*v1.Pod, n int) error {
	logger := klog.FromContext(ctx)
	victims := c.getPodsToDelete(activePods, c.relatedPods(logger, owner), n)
	// Expect these exact pods, so each is counted once whether seen first
	// with a deletionTimestamp or as a delete.
	_ = c.expectations.ExpectDeletions(logger, key, podKeys(victims))

	errs := make(chan error, len(victims))
	var wg sync.WaitGroup
	for _, pod := range victims {
		wg.Go(func() {
			err := c.podControl.DeletePod(ctx, owner.Object.GetNamespace(), pod.Name, owner.Object)
			if err == nil {
				return
			}
			// The informer won't report a deletion that didn't happen.
			c.expectations.DeletionObserved(logger, key, controller.PodKey(pod))
			if !apierrors.IsNotFound(err) {
				logger.V(2).Info("Failed to delete pod, decremented expectations", "pod", klog.KObj(pod), "kind", c.gvk.Kind, "object", klog.KObj(owner.Object))
				errs <- err
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		// Failures tend to share a cause; one is enough to requeue.
		return err
	default:
		return nil
	}
}

// relatedPods returns the pods selected by the owner and by its siblings
// (other owners under the same controller, e.g. a Deployment's older
// ReplicaSets), each once. They decide which nodes are crowded.
func (c *BaseController) relatedPods(logger klog.Logger, owner *Owner) []*v1.Pod {
	var related []*v1.Pod
	seen := map[types.UID]bool{}
	for _, sib := range c.adapter.Siblings(owner) {
		sel, err := metav1.LabelSelectorAsSelector(sib.Selector)
		if err != nil {
			continue
		}
		pods, err := controller.ListPodsBySelector(c.podIndexer, sib.Object.GetNamespace(), sel)
		if err != nil {
			utilruntime.HandleError(err)
			return nil
		}
		for _, p := range pods {
			if !seen[p.UID] {
				seen[p.UID] = true
				related = append(related, p)
			}
		}
	}
	logger.V(4).Info("Found related pods", "kind", c.gvk.Kind, "object", klog.KObj(owner.Object), "pods", klog.KObjSlice(related))
	return related
}

func podKeys(pods []*v1.Pod) []string {
	keys := make([]string, 0, len(pods))
	for _, p := range pods {
		keys = append(keys, controller.PodKey(p))
	}
	return keys
}
