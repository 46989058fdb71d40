package serviceaccount

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// ServiceAccountsControllerOptions configures a ServiceAccountsController.
type ServiceAccountsControllerOptions struct {
	// ServiceAccounts are created in every active namespace that lacks them.
	// Only name and content matter; the namespace is filled in per namespace.
	ServiceAccounts []v1.ServiceAccount

	// ServiceAccountResync and NamespaceResync are the resync periods of the
	// controller's event handlers; zero means no periodic resync.
	ServiceAccountResync time.Duration
	NamespaceResync      time.Duration
}

// DefaultServiceAccountsControllerOptions ensures the "default"
// ServiceAccount, as the controller manager runs it.
func DefaultServiceAccountsControllerOptions() ServiceAccountsControllerOptions {
	return ServiceAccountsControllerOptions{
		ServiceAccounts: []v1.ServiceAccount{
			{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		},
	}
}

// ServiceAccountsController keeps the configured ServiceAccounts present in
// every active namespace. Its queue holds namespace names.
type ServiceAccountsController struct {
	client                  clientset.Interface
	serviceAccountsToEnsure []v1.ServiceAccount

	saLister       corelisters.ServiceAccountLister
	saListerSynced cache.InformerSynced
	nsLister       corelisters.NamespaceLister
	nsListerSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]

	// syncHandler is syncNamespace; tests replace it.
	syncHandler func(ctx context.Context, key string) error
}

// NewServiceAccountsController wires the controller to its informers.
func NewServiceAccountsController(saInformer coreinformers.ServiceAccountInformer, nsInformer coreinformers.NamespaceInformer, cl clientset.Interface, options ServiceAccountsControllerOptions) (*ServiceAccountsController, error) {
	c := &ServiceAccountsController{
		client:                  cl,
		serviceAccountsToEnsure: options.ServiceAccounts,
		saLister:                saInformer.Lister(),
		nsLister:                nsInformer.Lister(),
		queue:                   controller.NewNamedQueue("serviceaccount"),
	}
	c.syncHandler = c.syncNamespace
	c.loop = controller.WorkLoop[string]{
		Name:  "serviceaccount",
		Queue: c.queue,
		Sync:  func(ctx context.Context, key string) error { return c.syncHandler(ctx, key) },
	}

	// Only deletions matter for ServiceAccounts: a missing one is recreated.
	saReg, err := saInformer.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		DeleteFunc: c.serviceAccountDeleted,
	}, options.ServiceAccountResync)
	if err != nil {
		return nil, fmt.Errorf("adding ServiceAccount event handler: %w", err)
	}
	c.saListerSynced = saReg.HasSynced

	// Updates (and resyncs) are enqueued too: that is how a namespace whose
	// creates failed, or that turned active, gets another try.
	nsReg, err := nsInformer.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.namespaceAdded,
		UpdateFunc: c.namespaceUpdated,
	}, options.NamespaceResync)
	if err != nil {
		return nil, fmt.Errorf("adding Namespace event handler: %w", err)
	}
	c.nsListerSynced = nsReg.HasSynced
	return c, nil
}

// Run waits for the caches and syncs namespaces with workers goroutines
// until ctx is cancelled. The controller manager runs one worker.
func (c *ServiceAccountsController) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	c.loop.Run(ctx, workers, c.saListerSynced, c.nsListerSynced)
}

func (c *ServiceAccountsController) serviceAccountDeleted(obj interface{}) {
	sa, ok := obj.(*v1.ServiceAccount)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("couldn't get object from tombstone %#v", obj))
			return
		}
		sa, ok = tombstone.Obj.(*v1.ServiceAccount)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("tombstone contained object that is not a ServiceAccount: %T", tombstone.Obj))
			return
		}
	}
	c.queue.Add(sa.Namespace)
}

func (c *ServiceAccountsController) namespaceAdded(obj interface{}) {
	if ns, ok := obj.(*v1.Namespace); ok {
		c.queue.Add(ns.Name)
	}
}

func (c *ServiceAccountsController) namespaceUpdated(_, newObj interface{}) {
	if ns, ok := newObj.(*v1.Namespace); ok {
		c.queue.Add(ns.Name)
	}
}

// syncNamespace creates whichever ensured ServiceAccounts the namespace lacks.
func (c *ServiceAccountsController) syncNamespace(ctx context.Context, key string) error {
	start := time.Now()
	defer func() {
		klog.FromContext(ctx).V(4).Info("Finished syncing namespace", "namespace", key, "duration", time.Since(start))
	}()

	ns, err := c.nsLister.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// A terminating namespace refuses creates; nothing to do until it is gone.
	if ns.Status.Phase != v1.NamespaceActive {
		return nil
	}

	var failures []error
	for i := range c.serviceAccountsToEnsure {
		_, err := c.saLister.ServiceAccounts(ns.Name).Get(c.serviceAccountsToEnsure[i].Name)
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		// Copy so the template shared by every namespace is never mutated.
		sa := c.serviceAccountsToEnsure[i].DeepCopy()
		sa.Namespace = ns.Name
		_, err = c.client.CoreV1().ServiceAccounts(ns.Name).Create(ctx, sa, metav1.CreateOptions{})
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
		case apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause):
			// The namespace started terminating after our cache saw it active.
		default:
			failures = append(failures, err)
		}
	}
	return utilerrors.Flatten(utilerrors.NewAggregate(failures))
}
