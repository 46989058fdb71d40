// Package storageversiongc implements the
// storageversion-garbage-collector-controller. Every kube-apiserver records
// the version it encodes each resource in as an entry of a StorageVersion
// object, keyed by its identity Lease (kube-system, labelled
// apiserver.kubernetes.io/identity=kube-apiserver). When a server's Lease
// goes, its entries are stale: this controller drops them, and deletes a
// StorageVersion left with none.
package storageversiongc

import (
	"context"
	"fmt"

	apiserverinternalv1alpha1 "k8s.io/api/apiserverinternal/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/storageversion"
	apiserverinternalinformers "k8s.io/client-go/informers/apiserverinternal/v1alpha1"
	coordinformers "k8s.io/client-go/informers/coordination/v1"
	clientset "k8s.io/client-go/kubernetes"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// IdentityLeaseComponentLabelKey labels the apiservers' identity Leases.
	IdentityLeaseComponentLabelKey = "apiserver.kubernetes.io/identity"
	// KubeAPIServer is the label's value on kube-apiserver's Leases.
	KubeAPIServer = "kube-apiserver"

	// Queue names, as upstream labels the workqueue metrics.
	leaseQueueName          = "storage_version_garbage_collector_leases"
	storageVersionQueueName = "storage_version_garbage_collector_storageversions"
)

// Controller has two queues: names of deleted identity Leases, and names
// of StorageVersions that name a server without a Lease.
type Controller struct {
	client clientset.Interface

	leaseLister  coordlisters.LeaseLister
	leasesSynced cache.InformerSynced
	svSynced     cache.InformerSynced

	leaseQueue workqueue.TypedRateLimitingInterface[string]
	svQueue    workqueue.TypedRateLimitingInterface[string]
	leaseLoop  controller.WorkLoop[string]
	svLoop     controller.WorkLoop[string]
}

// NewController wires the controller to its informers.
func NewController(ctx context.Context, client clientset.Interface,
	leaseInformer coordinformers.LeaseInformer,
	svInformer apiserverinternalinformers.StorageVersionInformer) (*Controller, error) {
	c := &Controller{
		client:       client,
		leaseLister:  leaseInformer.Lister(),
		leasesSynced: leaseInformer.Informer().HasSynced,
		svSynced:     svInformer.Informer().HasSynced,
		leaseQueue:   controller.NewNamedQueue(leaseQueueName),
		svQueue:      controller.NewNamedQueue(storageVersionQueueName),
	}
	c.leaseLoop = controller.WorkLoop[string]{Name: leaseQueueName, Queue: c.leaseQueue, Sync: c.syncDeletedLease}
	c.svLoop = controller.WorkLoop[string]{Name: storageVersionQueueName, Queue: c.svQueue, Sync: c.syncStorageVersion}

	logger := klog.FromContext(ctx)
	opts := cache.HandlerOptions{Logger: &logger}
	if _, err := leaseInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj interface{}) { c.leaseDeleted(logger, obj) },
	}, opts); err != nil {
		return nil, fmt.Errorf("failed to add event handler to Lease informer: %w", err)
	}
	if _, err := svInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.storageVersionChanged(logger, obj) },
		UpdateFunc: func(_, cur interface{}) { c.storageVersionChanged(logger, cur) },
	}, opts); err != nil {
		return nil, fmt.Errorf("failed to add event handler to StorageVersion informer: %w", err)
	}
	return c, nil
}

// Run waits for the caches, then runs one worker per queue until ctx is
// cancelled. Both kinds of event are rare; the two workers may race on one
// StorageVersion, and a conflict just retries.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting storage version garbage collector")
	defer logger.Info("Shutting down storage version garbage collector")
	if !controller.WaitForCacheSync(ctx, "storage version garbage collector", c.leasesSynced, c.svSynced) {
		c.leaseQueue.ShutDown()
		c.svQueue.ShutDown()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.svLoop.RunWorkers(ctx, 1)
	}()
	c.leaseLoop.RunWorkers(ctx, 1)
	<-done
}

// isAPIServerLease reports whether l is a kube-apiserver identity Lease.
func isAPIServerLease(l *coordinationv1.Lease) bool {
	return l != nil && l.Labels[IdentityLeaseComponentLabelKey] == KubeAPIServer
}

// syncDeletedLease drops the entries of a server whose Lease is gone from
// every StorageVersion. It reads the Lease and the list from the
// apiserver, not the cache: a Lease re-created meanwhile must win.
func (c *Controller) syncDeletedLease(ctx context.Context, name string) error {
	_, err := c.client.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	list, err := c.client.InternalV1alpha1().StorageVersions().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		sv := &list.Items[i]
		kept, dropped := filterEntries(sv, func(e apiserverinternalv1alpha1.ServerStorageVersion) bool { return e.APIServerID != name })
		if !dropped {
			continue
		}
		if err := c.updateOrDelete(ctx, sv, kept); err != nil {
			errs = append(errs, err)
		}
	}
	return utilerrors.NewAggregate(errs)
}

// syncStorageVersion drops the entries of servers that have no identity
// Lease, checked against the apiserver.
func (c *Controller) syncStorageVersion(ctx context.Context, name string) error {
	sv, err := c.client.InternalV1alpha1().StorageVersions().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	kept, dropped := filterEntries(sv, func(e apiserverinternalv1alpha1.ServerStorageVersion) bool {
		// Any error, not only NotFound, drops the entry, as upstream.
		l, err := c.client.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, e.APIServerID, metav1.GetOptions{})
		return err == nil && isAPIServerLease(l)
	})
	if !dropped {
		return nil
	}
	return c.updateOrDelete(ctx, sv, kept)
}

// filterEntries returns the entries keep accepts and whether any was dropped.
func filterEntries(sv *apiserverinternalv1alpha1.StorageVersion, keep func(apiserverinternalv1alpha1.ServerStorageVersion) bool) ([]apiserverinternalv1alpha1.ServerStorageVersion, bool) {
	var kept []apiserverinternalv1alpha1.ServerStorageVersion
	dropped := false
	for _, e := range sv.Status.StorageVersions {
		if keep(e) {
			kept = append(kept, e)
		} else {
			dropped = true
		}
	}
	return kept, dropped
}

// updateOrDelete writes the remaining entries (recomputing the common
// encoding version and its condition) or deletes an empty StorageVersion.
func (c *Controller) updateOrDelete(ctx context.Context, sv *apiserverinternalv1alpha1.StorageVersion, kept []apiserverinternalv1alpha1.ServerStorageVersion) error {
	if len(kept) == 0 {
		return c.client.InternalV1alpha1().StorageVersions().Delete(ctx, sv.Name, metav1.DeleteOptions{})
	}
	sv = sv.DeepCopy()
	sv.Status.StorageVersions = kept
	storageversion.SetCommonEncodingVersion(sv)
	_, err := c.client.InternalV1alpha1().StorageVersions().UpdateStatus(ctx, sv, metav1.UpdateOptions{})
	return err
}

// storageVersionChanged queues a StorageVersion naming a server the cache
// has no identity Lease for.
func (c *Controller) storageVersionChanged(logger klog.Logger, obj interface{}) {
	sv, ok := obj.(*apiserverinternalv1alpha1.StorageVersion)
	if !ok {
		return
	}
	for _, e := range sv.Status.StorageVersions {
		l, err := c.leaseLister.Leases(metav1.NamespaceSystem).Get(e.APIServerID)
		if err != nil || !isAPIServerLease(l) {
			logger.V(4).Info("Observed storage version with invalid apiserver entry", "objName", sv.Name)
			c.svQueue.Add(sv.Name)
			return
		}
	}
}

// leaseDeleted queues a deleted kube-apiserver identity Lease.
func (c *Controller) leaseDeleted(logger klog.Logger, obj interface{}) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("couldn't get object from tombstone %#v", obj))
			return
		}
		if l, ok = tombstone.Obj.(*coordinationv1.Lease); !ok {
			utilruntime.HandleError(fmt.Errorf("tombstone contained object that is not a Lease %#v", obj))
			return
		}
	}
	if l.Namespace == metav1.NamespaceSystem && isAPIServerLease(l) {
		logger.V(4).Info("Observed lease deleted", "castObjName", l.Name)
		c.leaseQueue.Add(l.Name)
	}
}
