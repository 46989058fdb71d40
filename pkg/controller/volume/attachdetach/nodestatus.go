package attachdetach

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/cache"
)

// nodeStatusUpdater writes the actual state's volumesAttached lists into
// node status, with a strategic merge patch of the status subresource.
type nodeStatusUpdater struct {
	client     clientset.Interface
	nodeLister corelisters.NodeLister
	asw        *cache.ActualStateOfWorld
}

// UpdateNodeStatuses patches every node whose list changed.
func (u *nodeStatusUpdater) UpdateNodeStatuses(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	failed := 0
	for node, volumes := range u.asw.GetVolumesToReportAttached(logger) {
		if err := u.process(ctx, node, volumes); err != nil {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("unable to update %d nodes", failed)
	}
	return nil
}

// UpdateNodeStatusForNode patches one node if its list changed.
func (u *nodeStatusUpdater) UpdateNodeStatusForNode(ctx context.Context, node types.NodeName) error {
	needed, volumes := u.asw.GetVolumesToReportAttachedForNode(klog.FromContext(ctx), node)
	if !needed {
		return nil
	}
	return u.process(ctx, node, volumes)
}

// process patches the node; on failure the node is marked for another try.
// A node that does not exist is skipped until it is (re)created.
func (u *nodeStatusUpdater) process(ctx context.Context, name types.NodeName, volumes []v1.AttachedVolume) error {
	logger := klog.FromContext(ctx)
	node, err := u.nodeLister.Get(string(name))
	if apierrors.IsNotFound(err) {
		logger.V(2).Info("Could not update node status. Failed to find node in NodeInformer cache", "node", klog.KRef("", string(name)), "err", err)
		return nil
	}
	if err != nil {
		logger.V(2).Info("Error retrieving nodes from node lister", "err", err)
		u.asw.SetNodeStatusUpdateNeeded(logger, name)
		return err
	}
	patch, err := u.patch(ctx, node, volumes)
	if apierrors.IsNotFound(err) {
		logger.V(2).Info("Could not update node status, node does not exist - skipping", "node", klog.KObj(node))
		return nil
	}
	if err != nil {
		u.asw.SetNodeStatusUpdateNeeded(logger, name)
		logger.V(2).Info("Could not update node status; re-marking for update", "node", klog.KObj(node), "err", err)
		return err
	}
	logger.V(4).Info("Updating status for node succeeded", "node", klog.KObj(node), "patchBytes", string(patch), "attachedVolumes", volumes)
	return nil
}

// patch sends the two-way strategic merge patch from the cached node to
// the node with volumes as its volumesAttached.
func (u *nodeStatusUpdater) patch(ctx context.Context, node *v1.Node, volumes []v1.AttachedVolume) ([]byte, error) {
	oldData, err := json.Marshal(node)
	if err != nil {
		return nil, fmt.Errorf("failed to Marshal oldData for node %q: %v", node.Name, err)
	}
	updated := node.DeepCopy()
	updated.Status.VolumesAttached = volumes
	newData, err := json.Marshal(updated)
	if err != nil {
		return nil, fmt.Errorf("failed to Marshal newData for node %q: %v", node.Name, err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("failed to CreateTwoWayMergePatch for node %q: %v", node.Name, err)
	}
	if _, err := u.client.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("failed to patch status %q for node %q: %v", patch, node.Name, err)
	}
	return patch, nil
}
