// Package podcertificaterequestcleaner implements the
// podcertificaterequest-cleaner-controller. PodCertificateRequests
// (certificates.k8s.io/v1) are short-lived: the kubelet creates one per
// certificate it wants for a pod and reads the result straight away. Every
// pollingInterval the cleaner deletes each request created more than
// threshold ago, whatever its state (pending, issued, denied, failed).
// The controller manager uses a 15 minute threshold and a 5 minute interval.
package podcertificaterequestcleaner

import (
	"context"
	"fmt"
	"time"

	certsv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	certinformersv1 "k8s.io/client-go/informers/certificates/v1"
	"k8s.io/client-go/kubernetes"
	certlistersv1 "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

const (
	// DefaultThreshold is the age past which the controller manager deletes
	// a PodCertificateRequest: every flow is expected to finish sooner.
	DefaultThreshold = 15 * time.Minute
	// DefaultPollingInterval is how often the controller manager sweeps.
	DefaultPollingInterval = 5 * time.Minute
)

// Controller deletes PodCertificateRequests older than threshold.
type Controller struct {
	client          kubernetes.Interface
	pcrLister       certlistersv1.PodCertificateRequestLister
	clock           clock.PassiveClock
	threshold       time.Duration
	pollingInterval time.Duration
}

// NewController creates a Controller. The controller
// manager passes the "podcertificaterequestcleaner" client, the shared
// certificates/v1 PodCertificateRequest informer, a real clock,
// DefaultThreshold and DefaultPollingInterval.
func NewController(
	client kubernetes.Interface,
	pcrInformer certinformersv1.PodCertificateRequestInformer,
	clock clock.PassiveClock,
	threshold time.Duration,
	pollingInterval time.Duration,
) *Controller {
	return &Controller{
		client:          client,
		pcrLister:       pcrInformer.Lister(),
		clock:           clock,
		threshold:       threshold,
		pollingInterval: pollingInterval,
	}
}

// Run sweeps at once and then every pollingInterval until ctx is cancelled.
// As upstream, workers is ignored (one sweep loop runs) and the first sweep
// does not wait for the informer cache: it may see nothing, in which case
// the next sweep catches up.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)

	logger := klog.FromContext(ctx)
	logger.Info("Starting PodCertificateRequest cleaner controller")
	defer logger.Info("Shutting down PodCertificateRequest cleaner controller")

	wait.UntilWithContext(ctx, c.sweep, c.pollingInterval)
}

// sweep checks every cached PodCertificateRequest once.
func (c *Controller) sweep(ctx context.Context) {
	pcrs, err := c.pcrLister.List(labels.Everything())
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Unable to list PodCertificateRequests")
		return
	}
	for _, pcr := range pcrs {
		if err := c.handle(ctx, pcr); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Error while attempting to clean PodCertificateRequest", "pcr", pcr.Namespace+"/"+pcr.Name)
		}
	}
}

// handle deletes pcr once it is threshold old (exactly threshold counts),
// guarded by a UID precondition so a recreated namesake survives. A request
// someone else already deleted is not an error.
func (c *Controller) handle(ctx context.Context, pcr *certsv1.PodCertificateRequest) error {
	if c.clock.Now().Before(pcr.CreationTimestamp.Add(c.threshold)) {
		return nil
	}
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(pcr.UID)}}
	err := c.client.CertificatesV1().PodCertificateRequests(pcr.Namespace).Delete(ctx, pcr.Name, opts)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unable to delete PodCertificateRequest %q: %w", pcr.Namespace+"/"+pcr.Name, err)
	}
	return nil
}
