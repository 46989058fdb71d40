// Package nodeipam implements the node-ipam-controller with upstream's
// RangeAllocator: it gives every node a pod CIDR (one per IP family) cut
// from the cluster CIDR(s), keeps the service range(s) out of them, and
// takes a node's CIDRs back when the node is deleted.
package nodeipam

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/nodeipam/ipam/cidrset"
)

const (
	// queueName labels the workqueue metrics, as upstream names it.
	queueName = "cidrallocator_node"
	// eventComponent is the source of the events, as upstream's allocator
	// reports them.
	eventComponent = "cidrAllocator"
	// workers is how many nodes are synced at once; upstream's fixed value.
	workers = 30
	// apiserverStartupGracePeriod bounds how long the constructor waits to
	// list the nodes whose CIDRs it must occupy before allocating any.
	apiserverStartupGracePeriod = 10 * time.Minute
	// nodePollInterval is how often a failed initial node list is retried.
	nodePollInterval = 10 * time.Second
)

// Controller allocates node pod CIDRs. Its queue holds node names.
type Controller struct {
	client      clientset.Interface
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	clusterCIDRs []*net.IPNet
	// cidrSets[i] tracks the node CIDRs of clusterCIDRs[i]; a node's
	// podCIDRs[i] belongs to cidrSets[i].
	cidrSets []*cidrset.CidrSet

	nodeLister  corelisters.NodeLister
	nodesSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]
}

// NewController checks cfg, lists the nodes and occupies the CIDRs
// they already have, so no CIDR in use is handed out again. It fails if a
// node holds a CIDR outside the cluster CIDRs: upstream treats that as
// fatal since node CIDRs cannot change.
func NewController(ctx context.Context, nodeInformer coreinformers.NodeInformer, kubeClient clientset.Interface, cfg Config) (*Controller, error) {
	logger := klog.FromContext(ctx)
	if kubeClient == nil {
		return nil, errors.New("kubeClient is nil when starting Controller")
	}
	if cfg.AllocatorType != CloudAllocatorType {
		if len(cfg.ClusterCIDRs) == 0 {
			return nil, errors.New("Controller: Must specify --cluster-cidr if --allocate-node-cidrs is set")
		}
		if len(cfg.NodeCIDRMaskSizes) != len(cfg.ClusterCIDRs) {
			return nil, fmt.Errorf("Controller: got %d node CIDR mask sizes for %d cluster CIDRs", len(cfg.NodeCIDRMaskSizes), len(cfg.ClusterCIDRs))
		}
		for i, cidr := range cfg.ClusterCIDRs {
			if ones, _ := cidr.Mask.Size(); ones > cfg.NodeCIDRMaskSizes[i] {
				return nil, errors.New("Controller: Invalid --cluster-cidr, mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size configured for CIDR family")
			}
		}
	}
	if cfg.AllocatorType == IPAMFromClusterAllocatorType || cfg.AllocatorType == IPAMFromCloudAllocatorType {
		return nil, errors.New("Error trying to Init(): legacy cloud provider support disabled at build time") //nolint:staticcheck // upstream's text
	}
	// Upstream lists the nodes before it looks at the allocator type.
	nodes, err := listNodes(ctx, kubeClient)
	if err != nil {
		return nil, err
	}
	if cfg.AllocatorType != RangeAllocatorType {
		return nil, fmt.Errorf("invalid CIDR allocator type: %v", cfg.AllocatorType)
	}

	c := &Controller{
		client:       kubeClient,
		clusterCIDRs: cfg.ClusterCIDRs,
		cidrSets:     make([]*cidrset.CidrSet, len(cfg.ClusterCIDRs)),
		nodeLister:   nodeInformer.Lister(),
		nodesSynced:  nodeInformer.Informer().HasSynced,
		queue:        controller.NewNamedQueue(queueName),
	}
	c.broadcaster, c.recorder = controller.NewEventRecorder(ctx, eventComponent)
	c.loop = controller.WorkLoop[string]{Name: queueName, Queue: c.queue, Sync: c.syncNode}
	for i, cidr := range cfg.ClusterCIDRs {
		if c.cidrSets[i], err = cidrset.NewCIDRSet(cidr, cfg.NodeCIDRMaskSizes[i]); err != nil {
			return nil, err
		}
	}

	if cfg.ServiceCIDR != nil {
		c.filterOutServiceRange(logger, cfg.ServiceCIDR)
	} else {
		logger.Info("No Service CIDR provided. Skipping filtering out service addresses")
	}
	if cfg.SecondaryServiceCIDR != nil {
		c.filterOutServiceRange(logger, cfg.SecondaryServiceCIDR)
	} else {
		logger.Info("No Secondary Service CIDR provided. Skipping filtering out secondary service addresses")
	}

	for i := range nodes.Items {
		node := &nodes.Items[i]
		if len(node.Spec.PodCIDRs) == 0 {
			logger.V(4).Info("Node has no CIDR, ignoring", "node", klog.KObj(node))
			continue
		}
		logger.V(4).Info("Node has CIDR, occupying it in CIDR map", "node", klog.KObj(node), "podCIDR", node.Spec.PodCIDR)
		if err := c.occupyCIDRs(node); err != nil {
			return nil, err
		}
	}

	_, _ = nodeInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueNode,
		// Every update, resyncs included, is another chance for a node
		// whose allocation failed.
		UpdateFunc: func(_, cur interface{}) { c.enqueueNode(cur) },
		DeleteFunc: func(obj interface{}) { c.nodeDeleted(ctx, obj) },
	}, cache.HandlerOptions{Logger: &logger})
	return c, nil
}

// listNodes retries until the apiserver answers, as the controller manager
// may start first.
func listNodes(ctx context.Context, kubeClient clientset.Interface) (*v1.NodeList, error) {
	logger := klog.FromContext(ctx)
	var nodes *v1.NodeList
	err := wait.PollUntilContextTimeout(ctx, nodePollInterval, apiserverStartupGracePeriod, true, func(ctx context.Context) (bool, error) {
		var err error
		nodes, err = kubeClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{
			FieldSelector: fields.Everything().String(),
			LabelSelector: labels.Everything().String(),
		})
		if err != nil {
			logger.Error(err, "Failed to list all nodes")
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to list all nodes in %v, cannot proceed without updating CIDR map", apiserverStartupGracePeriod)
	}
	return nodes, nil
}

// Run sends events, waits for the node cache and allocates with upstream's
// 30 workers until ctx is cancelled.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting ipam controller")
	defer logger.Info("Shutting down ipam controller")

	logger.Info("Sending events to api server")
	stopEvents := controller.StartEventSink(c.broadcaster, c.client)
	defer stopEvents()

	logger.Info("Starting range CIDR allocator")
	defer logger.Info("Shutting down range CIDR allocator")
	if !controller.WaitForCacheSync(ctx, "node-ipam", c.nodesSynced) {
		c.queue.ShutDown()
		return
	}
	c.loop.RunWorkers(ctx, workers)
}

func (c *Controller) enqueueNode(obj interface{}) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// nodeDeleted releases a deleted node's CIDRs at once: the node is gone
// from the cache by the time a sync could run, and nodes carry no
// finalizer that would show their deletion earlier.
func (c *Controller) nodeDeleted(ctx context.Context, obj interface{}) {
	node, ok := obj.(*v1.Node)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			utilruntime.HandleErrorWithContext(ctx, nil, "Could not get object from tombstone", "obj", obj)
			return
		}
		if node, ok = tombstone.Obj.(*v1.Node); !ok {
			utilruntime.HandleErrorWithContext(ctx, nil, "Tombstone contained object that is not a node", "type", fmt.Sprintf("%T", tombstone.Obj))
			return
		}
	}
	if err := c.ReleaseCIDR(klog.FromContext(ctx), node); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Error while processing CIDR Release")
	}
}

// filterOutServiceRange marks the service range as used in every cluster
// CIDR it overlaps, so no node gets pod addresses that are Service IPs.
func (c *Controller) filterOutServiceRange(logger klog.Logger, serviceCIDR *net.IPNet) {
	for i, cidr := range c.clusterCIDRs {
		if !cidr.Contains(serviceCIDR.IP.Mask(cidr.Mask)) && !serviceCIDR.Contains(cidr.IP.Mask(serviceCIDR.Mask)) {
			continue
		}
		if err := c.cidrSets[i].Occupy(serviceCIDR); err != nil {
			logger.Error(err, "Error filtering out service cidr out cluster cidr", "CIDR", cidr, "index", i, "serviceCIDR", serviceCIDR)
		}
	}
}
