// Package rootcacertpublisher is the root-ca-certificate-publisher-controller:
// it keeps a ConfigMap named kube-root-ca.crt, holding the CA bundle that
// verifies the kube-apiserver, in every namespace.
package rootcacertpublisher

import (
	"context"
	"fmt"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// RootCACertConfigMapName is the ConfigMap published in every namespace.
	RootCACertConfigMapName = "kube-root-ca.crt"
	// RootCACertKey is its one data key.
	RootCACertKey = "ca.crt"
	// DescriptionAnnotation and Description tell readers what the bundle is for.
	DescriptionAnnotation = "kubernetes.io/description"
	Description           = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. " +
		"No other usage is guaranteed across distributions of Kubernetes clusters."

	queueName = "root_ca_cert_publisher"
)

// Controller keeps kube-root-ca.crt correct in every namespace. Its queue
// holds namespace names.
type Controller struct {
	client clientset.Interface
	rootCA []byte

	cmLister       corelisters.ConfigMapLister
	cmListerSynced cache.InformerSynced
	nsListerSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]

	// syncHandler is syncNamespace; tests replace it.
	syncHandler func(ctx context.Context, key string) error
}

// NewController wires the controller to its informers; rootCA is the
// PEM bundle to publish.
func NewController(cmInformer coreinformers.ConfigMapInformer, nsInformer coreinformers.NamespaceInformer, cl clientset.Interface, rootCA []byte) (*Controller, error) {
	registerMetrics()
	c := &Controller{
		client:   cl,
		rootCA:   rootCA,
		cmLister: cmInformer.Lister(),
		queue:    controller.NewNamedQueue(queueName),
	}
	c.syncHandler = c.syncNamespace
	c.loop = controller.WorkLoop[string]{
		Name:  queueName,
		Queue: c.queue,
		Sync:  func(ctx context.Context, key string) error { return c.syncHandler(ctx, key) },
	}

	// Creation is driven by namespaces; the ConfigMap's own events only
	// bring back one that was edited or deleted.
	if _, err := cmInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, newObj interface{}) { c.configMapChanged(newObj) },
		DeleteFunc: c.configMapChanged,
	}); err != nil {
		return nil, fmt.Errorf("adding ConfigMap event handler: %w", err)
	}
	c.cmListerSynced = cmInformer.Informer().HasSynced

	if _, err := nsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.namespaceAdded,
		UpdateFunc: c.namespaceUpdated,
	}); err != nil {
		return nil, fmt.Errorf("adding Namespace event handler: %w", err)
	}
	c.nsListerSynced = nsInformer.Informer().HasSynced
	return c, nil
}

// Run waits for the caches and syncs namespaces with workers goroutines
// until ctx is cancelled. The controller manager runs one worker.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	c.loop.Run(ctx, workers, c.cmListerSynced, c.nsListerSynced)
}

func (c *Controller) configMapChanged(obj interface{}) {
	obj = controller.Untombstone(obj)
	cm, ok := obj.(*v1.ConfigMap)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("expected a ConfigMap, got %T", obj))
		return
	}
	if cm.Name == RootCACertConfigMapName {
		c.queue.Add(cm.Namespace)
	}
}

func (c *Controller) namespaceAdded(obj interface{}) {
	if ns, ok := obj.(*v1.Namespace); ok {
		c.queue.Add(ns.Name)
	}
}

// namespaceUpdated skips namespaces that are not active: a terminating
// namespace refuses creates, and its ConfigMap is about to go anyway.
func (c *Controller) namespaceUpdated(_, newObj interface{}) {
	ns, ok := newObj.(*v1.Namespace)
	if !ok || ns.Status.Phase != v1.NamespaceActive {
		return
	}
	c.queue.Add(ns.Name)
}

// syncNamespace creates the ConfigMap or repairs its data and annotation.
func (c *Controller) syncNamespace(ctx context.Context, ns string) (err error) {
	start := time.Now()
	defer func() {
		recordMetrics(start, err)
		klog.FromContext(ctx).V(4).Info("Finished syncing namespace", "namespace", ns, "elapsedTime", time.Since(start))
	}()

	want := map[string]string{RootCACertKey: string(c.rootCA)}
	cm, err := c.cmLister.ConfigMaps(ns).Get(RootCACertConfigMapName)
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.client.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name:        RootCACertConfigMapName,
				Annotations: map[string]string{DescriptionAnnotation: Description},
			},
			Data: want,
		}, metav1.CreateOptions{})
		// A namespace that is gone or terminating will never take it.
		if apierrors.IsNotFound(err) || apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			return nil
		}
		return err
	case err != nil:
		return err
	}

	// Any description counts: a distribution may word it its own way.
	if maps.Equal(cm.Data, want) && cm.Annotations[DescriptionAnnotation] != "" {
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = want
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[DescriptionAnnotation] = Description
	_, err = c.client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	return err
}
