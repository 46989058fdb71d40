package nodeipam

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"
)

// Reasons of the events recorded on a node, upstream's.
const (
	reasonCIDRNotAvailable     = "CIDRNotAvailable"
	reasonCIDRAssignmentFailed = "CIDRAssignmentFailed"
)

// cidrUpdateRetries is how many times the podCIDRs patch is sent before
// the allocation is given up (and the node requeued).
const cidrUpdateRetries = 3

func (c *Controller) syncNode(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx)
	start := time.Now()
	defer func() {
		logger.V(4).Info("Finished syncing Node request", "node", name, "elapsed", time.Since(start))
	}()

	node, err := c.nodeLister.Get(name)
	if apierrors.IsNotFound(err) {
		// The delete handler already released its CIDRs.
		logger.V(3).Info("node has been deleted", "node", name)
		return nil
	}
	if err != nil {
		return err
	}
	if node.DeletionTimestamp != nil {
		logger.V(3).Info("node is being deleted", "node", name)
		return nil
	}
	return c.AllocateOrOccupyCIDR(ctx, node)
}

// AllocateOrOccupyCIDR marks the node's CIDRs as used, or gives a node
// without any one CIDR from each cluster CIDR.
func (c *Controller) AllocateOrOccupyCIDR(ctx context.Context, node *v1.Node) error {
	if node == nil {
		return nil
	}
	if len(node.Spec.PodCIDRs) > 0 {
		return c.occupyCIDRs(node)
	}

	logger := klog.FromContext(ctx)
	allocated := make([]*net.IPNet, len(c.cidrSets))
	for i, set := range c.cidrSets {
		cidr, err := set.AllocateNext()
		if err != nil {
			// Give back what the other families already handed out, or a
			// retry would take another block each time.
			c.release(logger, allocated[:i])
			c.recordNodeEvent(logger, node, reasonCIDRNotAvailable)
			return fmt.Errorf("failed to allocate cidr from cluster cidr at idx:%v: %v", i, err)
		}
		allocated[i] = cidr
	}
	logger.V(4).Info("Putting node with CIDR into the work queue", "node", klog.KObj(node), "CIDRs", cidrStrings(allocated))
	return c.updateCIDRsAllocation(ctx, node.Name, allocated)
}

// occupyCIDRs marks the node's podCIDRs as used in the set of the same
// index.
func (c *Controller) occupyCIDRs(node *v1.Node) error {
	for i, cidr := range node.Spec.PodCIDRs {
		_, podCIDR, err := netutils.ParseCIDRSloppy(cidr)
		if err != nil {
			return fmt.Errorf("failed to parse node %s, CIDR %s", node.Name, node.Spec.PodCIDR)
		}
		// A node can hold more CIDRs than the cluster has after a switch
		// from dual to single stack; there is no set to lock it in.
		if i >= len(c.cidrSets) {
			return fmt.Errorf("node:%s has an allocated cidr: %v at index:%v that does not exist in cluster cidrs configuration", node.Name, cidr, i)
		}
		if err := c.cidrSets[i].Occupy(podCIDR); err != nil {
			return fmt.Errorf("failed to mark cidr[%v] at idx [%v] as occupied for node: %v: %v", podCIDR, i, node.Name, err)
		}
	}
	return nil
}

// ReleaseCIDR marks the node's podCIDRs as free.
func (c *Controller) ReleaseCIDR(logger klog.Logger, node *v1.Node) error {
	if node == nil {
		return nil
	}
	for i, cidr := range node.Spec.PodCIDRs {
		_, podCIDR, err := netutils.ParseCIDRSloppy(cidr)
		if err != nil {
			return fmt.Errorf("failed to parse CIDR %s on Node %v: %v", cidr, node.Name, err)
		}
		if i >= len(c.cidrSets) {
			return fmt.Errorf("node:%s has an allocated cidr: %v at index:%v that does not exist in cluster cidrs configuration", node.Name, cidr, i)
		}
		logger.V(4).Info("Release CIDR for node", "CIDR", cidr, "node", klog.KObj(node))
		if err := c.cidrSets[i].Release(podCIDR); err != nil {
			return fmt.Errorf("error when releasing CIDR %v: %v", cidr, err)
		}
	}
	return nil
}

// release frees CIDRs this controller allocated but could not assign.
func (c *Controller) release(logger klog.Logger, cidrs []*net.IPNet) {
	for i, cidr := range cidrs {
		if err := c.cidrSets[i].Release(cidr); err != nil {
			logger.Error(err, "Error when releasing CIDR", "index", i, "CIDR", cidr)
		}
	}
}

// updateCIDRsAllocation writes the allocated CIDRs to the node, unless the
// node got CIDRs meanwhile.
func (c *Controller) updateCIDRsAllocation(ctx context.Context, name string, allocated []*net.IPNet) error {
	logger := klog.FromContext(ctx)
	cidrs := cidrStrings(allocated)
	node, err := c.nodeLister.Get(name)
	if err != nil {
		logger.Error(err, "Failed while getting node for updating Node.Spec.PodCIDRs", "node", klog.KRef("", name))
		// The CIDRs are not recorded anywhere: free them for the retry.
		c.release(logger, allocated)
		return err
	}
	if slices.Equal(node.Spec.PodCIDRs, cidrs) {
		// An earlier write went through but its success was lost.
		logger.V(4).Info("Node already has allocated CIDR. It matches the proposed one", "node", klog.KObj(node), "CIDRs", cidrs)
		return nil
	}
	if len(node.Spec.PodCIDRs) != 0 {
		logger.Error(nil, "Node already has a CIDR allocated. Releasing the new one", "node", klog.KObj(node), "podCIDRs", node.Spec.PodCIDRs)
		c.release(logger, allocated)
		return nil
	}

	for range cidrUpdateRetries {
		if err = patchNodeCIDRs(ctx, c.client, node.Name, cidrs); err == nil {
			logger.Info("Set node PodCIDR", "node", klog.KObj(node), "podCIDRs", cidrs)
			return nil
		}
	}
	logger.Error(err, "Failed to update node PodCIDR after multiple attempts", "node", klog.KObj(node), "podCIDRs", cidrs)
	c.recordNodeEvent(logger, node, reasonCIDRAssignmentFailed)
	// After a timeout the write may still land: keeping the CIDRs used
	// leaks them until a restart, which is safer than handing them out
	// twice.
	if !apierrors.IsServerTimeout(err) {
		logger.Error(err, "CIDR assignment for node failed. Releasing allocated CIDR", "node", klog.KObj(node))
		c.release(logger, allocated)
	}
	return err
}

func cidrStrings(cidrs []*net.IPNet) []string {
	out := make([]string, len(cidrs))
	for i, cidr := range cidrs {
		out[i] = cidr.String()
	}
	return out
}

// patchNodeCIDRs sets spec.podCIDR to the first CIDR and spec.podCIDRs to
// all of them with a strategic merge patch, as the kubelet expects both.
func patchNodeCIDRs(ctx context.Context, client clientset.Interface, name string, cidrs []string) error {
	patch := map[string]interface{}{
		"spec": map[string]interface{}{
			"podCIDR":  cidrs[0],
			"podCIDRs": cidrs,
		},
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("failed to json.Marshal CIDR: %w", err)
	}
	klog.FromContext(ctx).V(4).Info("cidrs patch bytes", "patchBytes", string(data))
	if _, err := client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("failed to patch node CIDR: %w", err)
	}
	return nil
}

// recordNodeEvent records a Normal event named after the node's new
// status, the way upstream's node controllers report them.
func (c *Controller) recordNodeEvent(logger klog.Logger, node *v1.Node, status string) {
	ref := &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	logger.V(2).Info("Recording status change event message for node", "status", status, "node", node.Name)
	c.recorder.Eventf(ref, v1.EventTypeNormal, status, "Node %s status is now: %s", node.Name, status)
}
