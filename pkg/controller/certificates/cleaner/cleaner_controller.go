// Package cleaner implements the certificatesigningrequest-cleaner-controller.
// CSRs are created and approved automatically (every kubelet bootstrap and
// rotation makes one), so without garbage collection they pile up. Once an
// hour the cleaner deletes every CSR that is:
//   - issued, and approved more than an hour ago;
//   - denied or failed more than an hour ago;
//   - pending (no conditions) and created more than 24 hours ago;
//   - issued with a certificate that has expired;
//   - approved more than 24 hours ago yet still not issued.
package cleaner

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sync"
	"time"

	capi "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	certificatesinformers "k8s.io/client-go/informers/certificates/v1"
	csrclient "k8s.io/client-go/kubernetes/typed/certificates/v1"
	certificateslisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// pollingInterval is how often every CSR is checked.
	pollingInterval = time.Hour

	approvedExpiration = time.Hour
	deniedExpiration   = time.Hour
	pendingExpiration  = 24 * time.Hour
)

// Controller deletes finished or abandoned CSRs.
type Controller struct {
	csrClient  csrclient.CertificateSigningRequestInterface
	csrLister  certificateslisters.CertificateSigningRequestLister
	csrsSynced cache.InformerSynced
	clock      clock.PassiveClock
}

// NewController wires the cleaner to the CSR informer.
func NewController(csrClient csrclient.CertificateSigningRequestInterface, csrInformer certificatesinformers.CertificateSigningRequestInformer) *Controller {
	return &Controller{
		csrClient:  csrClient,
		csrLister:  csrInformer.Lister(),
		csrsSynced: csrInformer.Informer().HasSynced,
		clock:      clock.RealClock{},
	}
}

// Run sweeps all CSRs at once and then every pollingInterval, from each of
// workers goroutines, until ctx is cancelled. The controller manager runs
// one worker. Unlike upstream, the first sweep waits for the CSR cache, so
// it is not wasted on an empty lister.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting CSR cleaner controller")
	defer logger.Info("Shutting down CSR cleaner controller")

	if !controller.WaitForCacheSync(ctx, "csrcleaner", c.csrsSynced) {
		return
	}
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Go(func() {
			wait.UntilWithContext(ctx, c.sweep, pollingInterval)
		})
	}
	<-ctx.Done()
	wg.Wait()
}

// sweep checks every cached CSR once.
func (c *Controller) sweep(ctx context.Context) {
	logger := klog.FromContext(ctx)
	csrs, err := c.csrLister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Unable to list CSRs")
		return
	}
	for _, csr := range csrs {
		if err := c.handle(ctx, csr); err != nil {
			logger.Error(err, "Error while attempting to clean CSR", "csr", csr.Name)
		}
	}
}

func (c *Controller) handle(ctx context.Context, csr *capi.CertificateSigningRequest) error {
	if !c.shouldDelete(klog.FromContext(ctx), csr) {
		return nil
	}
	if err := c.csrClient.Delete(ctx, csr.Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("unable to delete CSR %q: %w", csr.Name, err)
	}
	return nil
}

// shouldDelete applies the rules in upstream's order, logging the first
// that matches.
func (c *Controller) shouldDelete(logger klog.Logger, csr *capi.CertificateSigningRequest) bool {
	issued := len(csr.Status.Certificate) > 0
	conds := csr.Status.Conditions

	if issued {
		for _, cond := range conds {
			if cond.Type == capi.CertificateApproved && c.olderThan(cond.LastUpdateTime, approvedExpiration) {
				logger.Info("Cleaning CSR as it is more than approvedExpiration duration old and approved.", "csr", csr.Name, "approvedExpiration", approvedExpiration)
				return true
			}
		}
	}
	for _, cond := range conds {
		if cond.Type == capi.CertificateDenied && c.olderThan(cond.LastUpdateTime, deniedExpiration) {
			logger.Info("Cleaning CSR as it is more than deniedExpiration duration old and denied.", "csr", csr.Name, "deniedExpiration", deniedExpiration)
			return true
		}
	}
	for _, cond := range conds {
		if cond.Type == capi.CertificateFailed && c.olderThan(cond.LastUpdateTime, deniedExpiration) {
			logger.Info("Cleaning CSR as it is more than deniedExpiration duration old and failed.", "csr", csr.Name, "deniedExpiration", deniedExpiration)
			return true
		}
	}
	if len(conds) == 0 && c.olderThan(csr.CreationTimestamp, pendingExpiration) {
		logger.Info("Cleaning CSR as it is more than pendingExpiration duration old and unhandled.", "csr", csr.Name, "pendingExpiration", pendingExpiration)
		return true
	}
	if issued && c.certificateExpired(csr.Status.Certificate) {
		for _, cond := range conds {
			if cond.Type == capi.CertificateApproved {
				logger.Info("Cleaning CSR as the associated certificate is expired.", "csr", csr.Name)
				return true
			}
		}
	}
	if !issued {
		for _, cond := range conds {
			if cond.Type == capi.CertificateApproved && c.olderThan(cond.LastUpdateTime, pendingExpiration) {
				logger.Info("Cleaning CSR as it is approved but unissued for more than pendingExpiration duration.", "csr", csr.Name, "pendingExpiration", pendingExpiration)
				return true
			}
		}
	}
	return false
}

// olderThan: t is set and more than d ago. A condition without a
// lastUpdateTime therefore never ages out.
func (c *Controller) olderThan(t metav1.Time, d time.Duration) bool {
	return !t.IsZero() && c.clock.Since(t.Time) > d
}

// certificateExpired reports whether the first certificate of the first
// PEM block has passed its NotAfter; anything unparseable is not expired.
func (c *Controller) certificateExpired(pemBytes []byte) bool {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return false
	}
	certs, err := x509.ParseCertificates(block.Bytes)
	if err != nil || len(certs) == 0 {
		return false
	}
	return c.clock.Now().After(certs[0].NotAfter)
}
