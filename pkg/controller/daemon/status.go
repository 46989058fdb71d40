package daemon

import (
	"context"
	"fmt"
	"sort"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsclient "k8s.io/client-go/kubernetes/typed/apps/v1"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/daemon/util"
)

// daemonSetCounts are the counters of DaemonSetStatus this controller owns.
type daemonSetCounts struct {
	desiredNumberScheduled int32
	currentNumberScheduled int32
	numberMisscheduled     int32
	numberReady            int32
	updatedNumberScheduled int32
	numberAvailable        int32
	numberUnavailable      int32
}

// calculateStatus counts, node by node: nodes that should run the pod
// (desired), those of them that have one (current), whose oldest pod is
// ready, available and of the current revision; and nodes that have a pod
// but should not (misscheduled).
func (dsc *Controller) calculateStatus(logger klog.Logger, ds *apps.DaemonSet, nodes []*v1.Node, nodeToDaemonPods map[string][]*v1.Pod, hash string) daemonSetCounts {
	var c daemonSetCounts
	now := metav1.NewTime(dsc.now())
	p := newPlacement(ds, dsc.comparisonOperators)
	generation, err := util.GetTemplateGeneration(ds)
	if err != nil {
		generation = nil
	}
	for _, node := range nodes {
		shouldRun, _ := p.check(logger, node)
		pods := nodeToDaemonPods[node.Name]
		if !shouldRun {
			if len(pods) > 0 {
				c.numberMisscheduled++
			}
			continue
		}
		c.desiredNumberScheduled++
		if len(pods) == 0 {
			continue
		}
		c.currentNumberScheduled++
		sort.Sort(podByCreationTimestampAndPhase(pods))
		pod := pods[0]
		if controller.IsPodReady(pod) {
			c.numberReady++
			if controller.IsPodAvailable(pod, ds.Spec.MinReadySeconds, now) {
				c.numberAvailable++
			}
		}
		if util.IsPodUpdated(pod, hash, generation) {
			c.updatedNumberScheduled++
		}
	}
	c.numberUnavailable = c.desiredNumberScheduled - c.numberAvailable
	return c
}

// updateDaemonSetStatus recomputes the counters and writes them if they
// (or, with updateObservedGen, the observed generation) changed.
func (dsc *Controller) updateDaemonSetStatus(ctx context.Context, ds *apps.DaemonSet, nodes []*v1.Node, hash string, updateObservedGen bool) error {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Updating daemon set status")
	nodeToDaemonPods, err := dsc.getNodesToDaemonPods(ctx, ds, false)
	if err != nil {
		return fmt.Errorf("couldn't get node to daemon pod mapping for daemon set %q: %w", ds.Name, err)
	}
	c := dsc.calculateStatus(logger, ds, nodes, nodeToDaemonPods, hash)

	updated, err := storeDaemonSetStatus(ctx, dsc.kubeClient.AppsV1().DaemonSets(ds.Namespace), ds, c, updateObservedGen)
	if err != nil {
		return fmt.Errorf("error storing status for daemon set %#v: %w", ds, err)
	}
	if updated != nil {
		dsc.consistency.WroteAt(types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}, updated.UID, daemonSetResource, updated.ResourceVersion)
	}
	// Ready pods become available without an event; come back then (the
	// pod update handler does too, this guards against clock skew).
	if ds.Spec.MinReadySeconds > 0 && c.numberReady != c.numberAvailable {
		dsc.enqueueAfter(ds, time.Duration(ds.Spec.MinReadySeconds)*time.Second)
	}
	return nil
}

// storeDaemonSetStatus writes the counters unless they and the observed
// generation are already current, retrying once on a fresh copy. It returns
// the written DaemonSet, or nil when nothing was written.
func storeDaemonSetStatus(ctx context.Context, client appsclient.DaemonSetInterface, ds *apps.DaemonSet, c daemonSetCounts, updateObservedGen bool) (*apps.DaemonSet, error) {
	s := ds.Status
	if s.DesiredNumberScheduled == c.desiredNumberScheduled &&
		s.CurrentNumberScheduled == c.currentNumberScheduled &&
		s.NumberMisscheduled == c.numberMisscheduled &&
		s.NumberReady == c.numberReady &&
		s.UpdatedNumberScheduled == c.updatedNumberScheduled &&
		s.NumberAvailable == c.numberAvailable &&
		s.NumberUnavailable == c.numberUnavailable &&
		s.ObservedGeneration >= ds.Generation {
		return nil, nil
	}
	toUpdate := ds.DeepCopy()
	for i := 0; ; i++ {
		if updateObservedGen {
			toUpdate.Status.ObservedGeneration = ds.Generation
		}
		toUpdate.Status.DesiredNumberScheduled = c.desiredNumberScheduled
		toUpdate.Status.CurrentNumberScheduled = c.currentNumberScheduled
		toUpdate.Status.NumberMisscheduled = c.numberMisscheduled
		toUpdate.Status.NumberReady = c.numberReady
		toUpdate.Status.UpdatedNumberScheduled = c.updatedNumberScheduled
		toUpdate.Status.NumberAvailable = c.numberAvailable
		toUpdate.Status.NumberUnavailable = c.numberUnavailable

		result, updateErr := client.UpdateStatus(ctx, toUpdate, metav1.UpdateOptions{})
		if updateErr == nil {
			return result, nil
		}
		if i >= StatusUpdateRetries {
			return nil, updateErr
		}
		var getErr error
		if toUpdate, getErr = client.Get(ctx, ds.Name, metav1.GetOptions{}); getErr != nil {
			// Without a fresh copy the counts can't be trusted; this error
			// says more than the failed update.
			return nil, getErr
		}
	}
}
