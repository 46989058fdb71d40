package nodelifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// updateTaintBackoff is how often a taint patch is retried on conflict
// (upstream's UpdateTaintBackoff).
var updateTaintBackoff = wait.Backoff{Steps: 5, Duration: 100 * time.Millisecond, Jitter: 1.0}

// getNodeCondition returns the condition of type t (a pointer into status).
func getNodeCondition(status *v1.NodeStatus, t v1.NodeConditionType) *v1.NodeCondition {
	if status == nil {
		return nil
	}
	for i := range status.Conditions {
		if status.Conditions[i].Type == t {
			return &status.Conditions[i]
		}
	}
	return nil
}

// taintExists matches on key and effect, as v1.Taint.MatchTaint does.
func taintExists(taints []v1.Taint, t *v1.Taint) bool {
	for i := range taints {
		if taints[i].MatchTaint(t) {
			return true
		}
	}
	return false
}

// taintSetDiff returns what to add to old to reach want and what to remove.
func taintSetDiff(want, old []v1.Taint) (add, remove []*v1.Taint) {
	for i := range want {
		if !taintExists(old, &want[i]) {
			t := want[i]
			add = append(add, &t)
		}
	}
	for i := range old {
		if !taintExists(want, &old[i]) {
			t := old[i]
			remove = append(remove, &t)
		}
	}
	return add, remove
}

// addOrUpdateTaints makes sure node carries taints (replacing ones with the
// same key and effect), patching only when something changed.
func addOrUpdateTaints(ctx context.Context, c clientset.Interface, nodeName string, taints ...*v1.Taint) error {
	if len(taints) == 0 {
		return nil
	}
	return editNodeTaints(ctx, c, nodeName, func(cur []v1.Taint) ([]v1.Taint, bool) {
		changed := false
		for _, t := range taints {
			found := false
			for i := range cur {
				if cur[i].MatchTaint(t) {
					found = true
					if !apiequality.Semantic.DeepEqual(cur[i], *t) {
						cur[i] = *t
						changed = true
					}
				}
			}
			if !found {
				cur = append(cur, *t)
				changed = true
			}
		}
		return cur, changed
	})
}

// removeTaints drops taints from the node. When node (a cached copy) is
// given and carries none of them, no request is made.
func removeTaints(ctx context.Context, c clientset.Interface, nodeName string, node *v1.Node, taints ...*v1.Taint) error {
	if len(taints) == 0 {
		return nil
	}
	if node != nil {
		any := false
		for _, t := range taints {
			if taintExists(node.Spec.Taints, t) {
				any = true
				break
			}
		}
		if !any {
			return nil
		}
	}
	return editNodeTaints(ctx, c, nodeName, func(cur []v1.Taint) ([]v1.Taint, bool) {
		out := make([]v1.Taint, 0, len(cur))
		for i := range cur {
			drop := false
			for _, t := range taints {
				if cur[i].MatchTaint(t) {
					drop = true
					break
				}
			}
			if !drop {
				out = append(out, cur[i])
			}
		}
		return out, len(out) != len(cur)
	})
}

// editNodeTaints reads the node (first from the watch cache, as upstream
// does, then from etcd after a conflict) and sends a strategic merge patch
// of spec.taints when edit changed them.
func editNodeTaints(ctx context.Context, c clientset.Interface, nodeName string, edit func([]v1.Taint) ([]v1.Taint, bool)) error {
	first := true
	return retry.RetryOnConflict(updateTaintBackoff, func() error {
		opts := metav1.GetOptions{}
		if first {
			opts.ResourceVersion = "0"
			first = false
		}
		old, err := c.CoreV1().Nodes().Get(ctx, nodeName, opts)
		if err != nil {
			return err
		}
		taints, changed := edit(append([]v1.Taint(nil), old.Spec.Taints...))
		if !changed {
			return nil
		}
		return patchNodeTaints(ctx, c, old, taints)
	})
}

// patchNodeTaints sends old→new taints as a strategic merge patch.
// spec.taints has no merge key, so the patch replaces the whole list; it
// carries no resourceVersion, as upstream's, so it is computed from a
// fresh read each attempt.
func patchNodeTaints(ctx context.Context, c clientset.Interface, old *v1.Node, taints []v1.Taint) error {
	oldNoRV := old.DeepCopy()
	oldNoRV.ResourceVersion = ""
	oldData, err := json.Marshal(oldNoRV)
	if err != nil {
		return fmt.Errorf("failed to marshal old node %q: %w", old.Name, err)
	}
	newNode := old.DeepCopy()
	newNode.Spec.Taints = taints
	newData, err := json.Marshal(newNode)
	if err != nil {
		return fmt.Errorf("failed to marshal new node %q: %w", old.Name, err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Node{})
	if err != nil {
		return fmt.Errorf("failed to create patch for node %q: %w", old.Name, err)
	}
	_, err = c.CoreV1().Nodes().Patch(ctx, old.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	return err
}

// swapNodeControllerTaint adds toAdd (stamped with the current time) and
// removes toRemove; it logs and reports false on failure, to be retried on
// a later pass.
func (nc *Controller) swapNodeControllerTaint(ctx context.Context, toAdd, toRemove []*v1.Taint, node *v1.Node) bool {
	logger := klog.FromContext(ctx)
	now := nc.now()
	for _, t := range toAdd {
		t.TimeAdded = &now
	}
	if err := addOrUpdateTaints(ctx, nc.kubeClient, node.Name, toAdd...); err != nil {
		logger.Error(err, "Unable to taint node", "taints", toAdd, "node", klog.KObj(node))
		return false
	}
	logger.V(4).Info("Added taint to node", "taint", toAdd, "node", klog.KObj(node))
	if err := removeTaints(ctx, nc.kubeClient, node.Name, node, toRemove...); err != nil {
		logger.Error(err, "Unable to remove unneeded taint from node", "taints", toRemove, "node", klog.KObj(node))
		return false
	}
	logger.V(4).Info("Made sure that node has no taint", "node", klog.KObj(node), "taint", toRemove)
	return true
}

// recordNodeEvent records "Node <name> event: <msg>" on the node, as
// upstream's RecordNodeEvent.
func recordNodeEvent(logger klog.Logger, recorder record.EventRecorder, nodeName string, uid types.UID, eventType, reason, msg string) {
	ref := &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: nodeName, UID: uid}
	logger.V(2).Info("Recording event message for node", "event", msg, "node", klog.KRef("", nodeName))
	recorder.Eventf(ref, eventType, reason, "Node %s event: %s", nodeName, msg)
}

// recordNodeStatusChange records "Node <name> status is now: <status>".
func recordNodeStatusChange(logger klog.Logger, recorder record.EventRecorder, node *v1.Node, status string) {
	ref := &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	logger.V(2).Info("Recording status change event message for node", "status", status, "node", node.Name)
	recorder.Eventf(ref, v1.EventTypeNormal, status, "Node %s status is now: %s", node.Name, status)
}

// addOrUpdateLabels merges labels into the node's metadata.
func (nc *Controller) addOrUpdateLabels(ctx context.Context, nodeName string, labels map[string]string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	if _, err := nc.kubeClient.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("unable to update labels %v for node %q: %w", labels, nodeName, err)
	}
	klog.FromContext(ctx).V(4).Info("Updated labels to node", "label", labels, "node", klog.KRef("", nodeName))
	return nil
}
