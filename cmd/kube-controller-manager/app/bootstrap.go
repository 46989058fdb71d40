package app

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/bootstrap"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/signer"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/serviceaccount/legacytokencleaner"
)

// Bootstrap tokens are Secrets of this type in kube-system; the bootstrap
// controllers watch only those, not every Secret of the cluster.
const bootstrapTokenSelector = "type=" + string(v1.SecretTypeBootstrapToken)

func newBootstrapSignerController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("bootstrap-signer")
	if err != nil {
		return nil, err
	}
	opts := bootstrap.DefaultSignerOptions()
	secrets := cc.FilteredInformerFactory(opts.TokenSecretNamespace, bootstrapTokenSelector).Core().V1().Secrets()
	configMaps := cc.FilteredInformerFactory(opts.ConfigMapNamespace, "metadata.name="+opts.ConfigMapName).Core().V1().ConfigMaps()
	s, err := bootstrap.NewSigner(client, secrets, configMaps, opts)
	if err != nil {
		return nil, fmt.Errorf("error creating BootstrapSigner controller: %w", err)
	}
	return newControllerLoop(name, s.Run), nil
}

func newTokenCleanerController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("token-cleaner")
	if err != nil {
		return nil, err
	}
	opts := bootstrap.DefaultTokenCleanerOptions()
	secrets := cc.FilteredInformerFactory(opts.TokenSecretNamespace, bootstrapTokenSelector).Core().V1().Secrets()
	tc, err := bootstrap.NewTokenCleaner(client, secrets, opts)
	if err != nil {
		return nil, fmt.Errorf("error creating TokenCleaner controller: %w", err)
	}
	return newControllerLoop(name, tc.Run), nil
}

func newLegacySATokenCleanerController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("legacy-service-account-token-cleaner")
	if err != nil {
		return nil, err
	}
	tokens := cc.FilteredInformerFactory("", "type="+string(v1.SecretTypeServiceAccountToken)).Core().V1().Secrets()
	c, err := legacytokencleaner.NewLegacySATokenCleaner(
		cc.InformerFactory.Core().V1().ServiceAccounts(), tokens, cc.InformerFactory.Core().V1().Pods(),
		client, clock.RealClock{}, legacytokencleaner.LegacySATokenCleanerOptions{
			CleanUpPeriod: cc.ComponentConfig.LegacySATokenCleaner.CleanUpPeriod.Duration,
			SyncInterval:  legacytokencleaner.DefaultCleanerSyncInterval,
		})
	if err != nil {
		return nil, fmt.Errorf("failed to init the legacy service account token cleaner: %w", err)
	}
	return newControllerLoop(name, c.Run), nil
}

// newCSRSigningController runs one signing loop per built-in signer whose
// CA files are configured; none configured skips the controller.
func newCSRSigningController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	cfg := cc.ComponentConfig.CSRSigningController
	files, err := signer.SignersToStart(klog.FromContext(ctx), cfg)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, nil
	}
	client, err := cc.NewClient("certificate-controller")
	if err != nil {
		return nil, err
	}
	csrs := cc.InformerFactory.Certificates().V1().CertificateSigningRequests()
	var loops []*signer.CSRSigningController
	for _, f := range files {
		c, err := signer.NewCSRSigningController(ctx, f.ControllerName, f.SignerName, client, csrs, f.CertFile, f.KeyFile, cfg.ClusterSigningDuration.Duration)
		if err != nil {
			return nil, fmt.Errorf("failed to init %s certificate controller: %w", f.SignerName, err)
		}
		loops = append(loops, c)
	}
	return newControllerLoop(name, func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, c := range loops {
			wg.Go(func() { c.Run(ctx, 5) })
		}
		wg.Wait()
	}), nil
}
