package approver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	capi "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	certificatesinformers "k8s.io/client-go/informers/certificates/v1"
	clientset "k8s.io/client-go/kubernetes"
	certificateslisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// queueName labels the workqueue metrics; upstream's CSR controllers all
// share it.
const queueName = "certificate"

// Controller approves kubelet client CSRs after a
// SubjectAccessReview of their requester.
type Controller struct {
	*csrController
	client      clientset.Interface
	recognizers []recognizer
}

// NewController wires the approver to the CSR informer.
func NewController(ctx context.Context, client clientset.Interface, csrInformer certificatesinformers.CertificateSigningRequestInformer) *Controller {
	a := &Controller{client: client, recognizers: recognizers()}
	a.csrController = newCSRController(ctx, "csrapproving", csrInformer, a.handle)
	return a
}

// csrController queues CSR names and hands a private copy of every CSR
// without a certificate to handler. It is upstream's generic certificate
// controller, kept private to this package.
type csrController struct {
	name       string
	csrLister  certificateslisters.CertificateSigningRequestLister
	csrsSynced cache.InformerSynced
	handler    func(context.Context, *capi.CertificateSigningRequest) error
	queue      workqueue.TypedRateLimitingInterface[string]
}

func newCSRController(ctx context.Context, name string, csrInformer certificatesinformers.CertificateSigningRequestInformer, handler func(context.Context, *capi.CertificateSigningRequest) error) *csrController {
	c := &csrController{
		name:    name,
		handler: handler,
		// Per-item backoff from 200ms to 1000s, overall 10 qps with a
		// burst of 100, as upstream.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter[string](
				workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 1000*time.Second),
				&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
			),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: queueName},
		),
	}
	logger := klog.FromContext(ctx)
	_, _ = csrInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			logger.V(4).Info("Adding certificate request", "csr", klog.KObj(objectMeta(obj)))
			c.enqueue(obj)
		},
		UpdateFunc: func(_, newObj interface{}) {
			logger.V(4).Info("Updating certificate request", "csr", klog.KObj(objectMeta(newObj)))
			c.enqueue(newObj)
		},
		DeleteFunc: func(obj interface{}) {
			c.enqueue(obj)
		},
	})
	c.csrLister = csrInformer.Lister()
	c.csrsSynced = csrInformer.Informer().HasSynced
	return c
}

func objectMeta(obj interface{}) *capi.CertificateSigningRequest {
	switch o := obj.(type) {
	case *capi.CertificateSigningRequest:
		return o
	case cache.DeletedFinalStateUnknown:
		if csr, ok := o.Obj.(*capi.CertificateSigningRequest); ok {
			return csr
		}
	}
	return nil
}

func (c *csrController) enqueue(obj interface{}) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %+v: %w", obj, err))
		return
	}
	c.queue.Add(key)
}

// Run waits for the CSR cache and runs workers until ctx is cancelled.
func (c *csrController) Run(ctx context.Context, workers int) {
	loop := controller.WorkLoop[string]{Name: queueName, Queue: c.queue, Sync: c.syncQuietly}
	loop.Run(ctx, workers, c.csrsSynced)
}

// syncQuietly is sync with an ignorableError (an expected, user-caused
// failure) retried with backoff like any error but logged only at V(4).
func (c *csrController) syncQuietly(ctx context.Context, key string) error {
	err := c.sync(ctx, key)
	var ignorable ignorableError
	if errors.As(err, &ignorable) {
		return controller.Quietly(err)
	}
	return err
}

func (c *csrController) sync(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	start := time.Now()
	defer func() {
		logger.V(4).Info("Finished syncing certificate request", "csr", key, "elapsedTime", time.Since(start))
	}()
	csr, err := c.csrLister.Get(key)
	if apierrors.IsNotFound(err) {
		logger.V(3).Info("csr has been deleted", "csr", key)
		return nil
	}
	if err != nil {
		return err
	}
	if len(csr.Status.Certificate) > 0 {
		return nil
	}
	// The handler may mutate its argument; never hand it the cached object.
	return c.handler(ctx, csr.DeepCopy())
}

// ignorableError is retried like any error but is not worth an error log:
// it is usually the requester's doing.
type ignorableError string

func (e ignorableError) Error() string { return string(e) }

func newIgnorableError(format string, args ...interface{}) error {
	return ignorableError(fmt.Sprintf(format, args...))
}
