// Package signer implements the certificatesigningrequest-signing-controller:
// one loop per built-in signer (kubernetes.io/kube-apiserver-client,
// kube-apiserver-client-kubelet, kubelet-serving and legacy-unknown), each
// issuing certificates for approved CSRs of its signer from a CA kept in
// files on disk. A request its signer's rules refuse is marked Failed.
package signer

import (
	"context"
	"encoding/pem"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	capi "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	certificatesinformers "k8s.io/client-go/informers/certificates/v1"
	clientset "k8s.io/client-go/kubernetes"
	certificateslisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// queueName labels the workqueue metrics; upstream's CSR controllers
	// all share it.
	queueName = "certificate"

	// failedReason is the reason of the Failed condition set on a CSR its
	// signer refuses.
	failedReason = "SignerValidationFailure"
)

// Controller signs the approved CSRs of one signer.
type Controller struct {
	signerName string
	client     clientset.Interface
	ca         *caProvider
	validate   validateFunc
	// certTTL is the longest lifetime issued; a CSR may ask for less
	// through spec.expirationSeconds.
	certTTL time.Duration
	clock   clock.PassiveClock

	csrLister  certificateslisters.CertificateSigningRequestLister
	csrsSynced cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]
	loop       controller.WorkLoop[string]
}

// NewController builds the loop for signerName, which must be one
// of the four built-in signers, with the CA in caFile/caKeyFile. It fails
// if the CA files cannot be loaded.
func NewController(
	ctx context.Context,
	controllerName string,
	signerName string,
	client clientset.Interface,
	csrInformer certificatesinformers.CertificateSigningRequestInformer,
	caFile, caKeyFile string,
	certTTL time.Duration,
) (*Controller, error) {
	validate, err := validatorFor(signerName)
	if err != nil {
		return nil, err
	}
	ca, err := newCAProvider(caFile, caKeyFile)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		signerName: signerName,
		client:     client,
		ca:         ca,
		validate:   validate,
		certTTL:    certTTL,
		clock:      clock.RealClock{},
		csrLister:  csrInformer.Lister(),
		csrsSynced: csrInformer.Informer().HasSynced,
		// Per-item backoff from 200ms to 1000s, overall 10 qps with a
		// burst of 100, as upstream's certificate controllers.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter[string](
				workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 1000*time.Second),
				&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
			),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: queueName},
		),
	}
	c.loop = controller.WorkLoop[string]{Name: controllerName, Queue: c.queue, Sync: c.sync}

	logger := klog.FromContext(ctx)
	if _, err := csrInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			logger.V(4).Info("Adding certificate request", "csr", klog.KObj(asCSR(obj)))
			c.enqueue(obj)
		},
		UpdateFunc: func(_, newObj interface{}) {
			logger.V(4).Info("Updating certificate request", "csr", klog.KObj(asCSR(newObj)))
			c.enqueue(newObj)
		},
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("adding CSR event handler: %w", err)
	}
	return c, nil
}

// Run waits for the CSR cache and signs with workers goroutines until ctx
// is cancelled. The controller manager runs five workers per signer.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	c.loop.Run(ctx, workers, c.csrsSynced)
}

func asCSR(obj interface{}) *capi.CertificateSigningRequest {
	obj = controller.Untombstone(obj)
	csr, _ := obj.(*capi.CertificateSigningRequest)
	return csr
}

func (c *Controller) enqueue(obj interface{}) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %+v: %w", obj, err))
		return
	}
	c.queue.Add(key)
}

// sync hands a private copy of a CSR that has no certificate yet to handle.
func (c *Controller) sync(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	start := time.Now()
	defer func() {
		logger.V(4).Info("Finished syncing certificate request", "csr", key, "elapsedTime", time.Since(start))
	}()
	cached, err := c.csrLister.Get(key)
	if apierrors.IsNotFound(err) {
		logger.V(3).Info("csr has been deleted", "csr", key)
		return nil
	}
	if err != nil {
		return err
	}
	if len(cached.Status.Certificate) > 0 {
		return nil
	}
	return c.handle(ctx, cached.DeepCopy())
}

// handle issues a certificate for an approved request of this signer, or
// marks it Failed when the signer's rules refuse it. Both are written
// through the status subresource.
func (c *Controller) handle(ctx context.Context, req *capi.CertificateSigningRequest) error {
	if !isApproved(req) || hasTrueCondition(req, capi.CertificateFailed) {
		return nil
	}
	if req.Spec.SignerName != c.signerName {
		return nil
	}
	x509cr, err := parseCSR(req.Spec.Request)
	if err != nil {
		return fmt.Errorf("unable to parse csr %q: %w", req.Name, err)
	}
	if err := c.validate(x509cr, req.Spec.Usages); err != nil {
		req.Status.Conditions = append(req.Status.Conditions, capi.CertificateSigningRequestCondition{
			Type:           capi.CertificateFailed,
			Status:         v1.ConditionTrue,
			Reason:         failedReason,
			Message:        err.Error(),
			LastUpdateTime: metav1.NewTime(c.clock.Now()),
		})
		if _, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, req, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("error adding failure condition for csr: %w", err)
		}
		return nil
	}
	certPEM, err := c.sign(ctx, x509cr.Raw, req.Spec.Usages, req.Spec.ExpirationSeconds)
	if err != nil {
		return fmt.Errorf("error auto signing csr: %w", err)
	}
	req.Status.Certificate = certPEM
	if _, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, req, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("error updating signature for csr: %w", err)
	}
	return nil
}

// sign issues a PEM certificate from the current CA.
func (c *Controller) sign(ctx context.Context, crDER []byte, usages []capi.KeyUsage, expirationSeconds *int32) ([]byte, error) {
	ca, err := c.ca.current(klog.FromContext(ctx))
	if err != nil {
		return nil, err
	}
	der, err := issue(ca, crDER, usages, c.duration(expirationSeconds), c.clock.Now())
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// duration is the lifetime to issue: the requested one, capped at certTTL
// and raised to minDuration (twice the backdate, so the certificate is
// valid for a while once issued).
func (c *Controller) duration(expirationSeconds *int32) time.Duration {
	if expirationSeconds == nil {
		return c.certTTL
	}
	switch requested := csr.ExpirationSecondsToDuration(*expirationSeconds); {
	case requested > c.certTTL:
		return c.certTTL
	case requested < minDuration:
		return minDuration
	default:
		return requested
	}
}
