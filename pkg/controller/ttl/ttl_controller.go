// Package ttl implements the ttl-controller. It annotates every Node with
// node.alpha.kubernetes.io/ttl, a suggestion (in seconds, derived from the
// cluster size) of how long the kubelet may cache Secrets and ConfigMaps
// before fetching them again.
package ttl

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// queueName labels the workqueue metrics, as upstream names it.
const queueName = "ttlcontroller"

// boundary is one cluster-size bucket. The buckets overlap so that the TTL
// does not flap around a border: the step goes up once the node count
// exceeds the current bucket's maxSize and down once it drops below the
// current bucket's minSize.
type boundary struct {
	minSize    int
	maxSize    int
	ttlSeconds int
}

var boundaries = []boundary{
	{minSize: 0, maxSize: 100, ttlSeconds: 0},
	{minSize: 90, maxSize: 500, ttlSeconds: 15},
	{minSize: 450, maxSize: 1000, ttlSeconds: 30},
	{minSize: 900, maxSize: 2000, ttlSeconds: 60},
	{minSize: 1800, maxSize: math.MaxInt32, ttlSeconds: 300},
}

// Controller keeps the TTL annotation of every Node at the value the
// current cluster size calls for. Its queue holds Node names.
type Controller struct {
	kubeClient  clientset.Interface
	nodeLister  corelisters.NodeLister
	nodesSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]

	mu sync.RWMutex
	// nodeCount is the number of Nodes seen by the informer.
	nodeCount int
	// step indexes boundaries; ttlSeconds is boundaries[step].ttlSeconds.
	step       int
	ttlSeconds int
}

// NewController wires the controller to the Node informer.
func NewController(ctx context.Context, nodeInformer coreinformers.NodeInformer, kubeClient clientset.Interface) *Controller {
	c := &Controller{
		kubeClient: kubeClient,
		queue:      controller.NewNamedQueue(queueName),
	}
	c.loop = controller.WorkLoop[string]{Name: queueName, Queue: c.queue, Sync: c.syncNode}

	logger := klog.FromContext(ctx)
	_, _ = nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.addNode(logger, obj) },
		UpdateFunc: func(_, newObj interface{}) { c.updateNode(logger, newObj) },
		DeleteFunc: func(obj interface{}) { c.deleteNode(logger, obj) },
	})
	c.nodeLister = nodeInformer.Lister()
	c.nodesSynced = nodeInformer.Informer().HasSynced
	return c
}

// Run waits for the Node cache and syncs Nodes with workers goroutines
// until ctx is cancelled. The controller manager runs five workers.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	c.loop.Run(ctx, workers, c.nodesSynced)
}

func (c *Controller) addNode(logger klog.Logger, obj interface{}) {
	node, ok := obj.(*v1.Node)
	if !ok {
		utilruntime.HandleErrorWithLogger(logger, nil, "Unexpected object type passed to addNode", "type", fmt.Sprintf("%T", obj))
		return
	}
	c.mu.Lock()
	c.nodeCount++
	if c.nodeCount > boundaries[c.step].maxSize {
		c.step++
		c.ttlSeconds = boundaries[c.step].ttlSeconds
	}
	c.mu.Unlock()
	c.queue.Add(node.Name)
}

// updateNode enqueues on every update: kubelets update their Node status
// every few seconds, which is how a change of the desired TTL reaches
// every Node without a resync.
func (c *Controller) updateNode(logger klog.Logger, newObj interface{}) {
	node, ok := newObj.(*v1.Node)
	if !ok {
		utilruntime.HandleErrorWithLogger(logger, nil, "Unexpected object type passed to updateNode", "type", fmt.Sprintf("%T", newObj))
		return
	}
	c.queue.Add(node.Name)
}

// deleteNode only adjusts the count; a deleted Node needs no annotation.
func (c *Controller) deleteNode(logger klog.Logger, obj interface{}) {
	if _, ok := obj.(*v1.Node); !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			utilruntime.HandleErrorWithLogger(logger, nil, "Unexpected object type passed to deleteNode", "type", fmt.Sprintf("%T", obj))
			return
		}
		if _, ok := tombstone.Obj.(*v1.Node); !ok {
			utilruntime.HandleErrorWithLogger(logger, nil, "Unexpected object type in tombstone", "type", fmt.Sprintf("%T", tombstone.Obj))
			return
		}
	}
	c.mu.Lock()
	c.nodeCount--
	if c.nodeCount < boundaries[c.step].minSize {
		c.step--
		c.ttlSeconds = boundaries[c.step].ttlSeconds
	}
	c.mu.Unlock()
}

func (c *Controller) desiredTTLSeconds() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ttlSeconds
}

// syncNode patches the Node's TTL annotation when it is missing, not an
// integer, or not the desired value.
func (c *Controller) syncNode(ctx context.Context, name string) error {
	node, err := c.nodeLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	desired := c.desiredTTLSeconds()
	if current, ok := annotationInt(ctx, node, v1.ObjectTTLAnnotationKey); ok && current == desired {
		return nil
	}
	return c.patchTTL(ctx, node, desired)
}

func annotationInt(ctx context.Context, node *v1.Node, key string) (int, bool) {
	value, ok := node.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(value)
	if err != nil {
		klog.FromContext(ctx).Info("Could not convert the value with annotation key for the node",
			"annotationValue", value, "annotationKey", key, "node", klog.KObj(node))
		return 0, false
	}
	return n, true
}

// patchTTL sets only the annotation, with a strategic merge patch, so the
// write never conflicts with the kubelet's status updates.
func (c *Controller) patchTTL(ctx context.Context, node *v1.Node, ttlSeconds int) error {
	patch, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{
			"annotations": map[string]string{v1.ObjectTTLAnnotationKey: strconv.Itoa(ttlSeconds)},
		},
	})
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	if _, err := c.kubeClient.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		logger.V(2).Info("Failed to change ttl annotation for node", "node", klog.KObj(node), "err", err)
		return err
	}
	logger.V(2).Info("Changed ttl annotation", "node", klog.KObj(node), "TTL", time.Duration(ttlSeconds)*time.Second)
	return nil
}
