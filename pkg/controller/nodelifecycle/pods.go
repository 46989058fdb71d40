package nodelifecycle

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
)

// podUpdated queues pods newly bound to a node, so a pod landing on a node
// already known to be unhealthy is marked NotReady without waiting for the
// node's next transition.
func (nc *Controller) podUpdated(old, cur *v1.Pod) {
	if cur == nil || cur.Spec.NodeName == "" {
		return
	}
	if old == nil || old.Spec.NodeName != cur.Spec.NodeName {
		nc.podUpdateQueue.Add(podKey{namespace: cur.Namespace, name: cur.Name})
	}
}

// processPod marks one pod NotReady when its node's last seen Ready
// condition is not True.
func (nc *Controller) processPod(ctx context.Context, key podKey) {
	defer nc.podUpdateQueue.Done(key)
	logger := klog.FromContext(ctx)
	pod, err := nc.podLister.Pods(key.namespace).Get(key.name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return
		}
		logger.Info("Failed to read pod", "pod", klog.KRef(key.namespace, key.name), "err", err)
		nc.podUpdateQueue.AddRateLimited(key)
		return
	}
	nodeName := pod.Spec.NodeName
	health := nc.nodeHealthMap.get(nodeName)
	if health == nil {
		// Not monitored yet; the node's first pass handles the pod.
		return
	}
	if _, err := nc.nodeLister.Get(nodeName); err != nil {
		logger.Info("Failed to read node", "node", klog.KRef("", nodeName), "err", err)
		nc.podUpdateQueue.AddRateLimited(key)
		return
	}
	ready := getNodeCondition(health.status, v1.NodeReady)
	if ready == nil || ready.Status == v1.ConditionTrue {
		return
	}
	if err := nc.markPodsNotReady(ctx, []*v1.Pod{pod}, nodeName); err != nil {
		logger.Info("Unable to mark pod NotReady on node", "pod", klog.KObj(pod), "node", klog.KRef("", nodeName), "err", err)
		nc.podUpdateQueue.AddRateLimited(key)
		return
	}
	nc.podUpdateQueue.Forget(key)
}

// markPodsNotReady sets the Ready condition of the node's pods to False
// (pods without a Ready condition are left alone) and records a
// NodeNotReady warning on each pod it changed.
func (nc *Controller) markPodsNotReady(ctx context.Context, pods []*v1.Pod, nodeName string) error {
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Update ready status of pods on node", "node", klog.KRef("", nodeName))
	var errs []error
	for _, p := range pods {
		if p.Spec.NodeName != nodeName {
			continue
		}
		pod := p.DeepCopy()
		var cond *v1.PodCondition
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == v1.PodReady {
				cond = &pod.Status.Conditions[i]
				break
			}
		}
		if cond == nil || cond.Status == v1.ConditionFalse {
			continue
		}
		cond.Status = v1.ConditionFalse
		cond.LastTransitionTime = metav1.NewTime(nc.clock.Now())
		logger.V(2).Info("Updating ready status of pod to false", "pod", klog.KObj(pod))
		if _, err := nc.kubeClient.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			logger.Info("Failed to update status for pod", "pod", klog.KObj(pod), "err", err)
			errs = append(errs, err)
		}
		// Recorded after the update so the pod is known to still exist.
		nc.recorder.Event(pod, v1.EventTypeWarning, "NodeNotReady", "Node is not ready")
	}
	return utilerrors.NewAggregate(errs)
}
