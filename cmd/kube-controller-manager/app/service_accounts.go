package app

import (
	"context"
	"fmt"
	v1 "k8s.io/api/core/v1"
	"os"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"github.com/kcmclone/controller-manager/clientbuilder"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/rootcacertpublisher"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/serviceaccount"
)

// newServiceAccountTokenController mints legacy token Secrets. It uses the
// root credentials (the others may depend on the tokens it mints) and is
// skipped without a signing key, as upstream.
func newServiceAccountTokenController(rootClientBuilder clientbuilder.ControllerClientBuilder) InitFunc {
	return func(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
		cfg := cc.ComponentConfig.SAController
		if cfg.ServiceAccountKeyFile == "" {
			klog.FromContext(ctx).Info("Controller is disabled because there is no private key", "controller", name)
			return nil, nil
		}
		key, err := serviceaccount.PrivateKeyFromFile(cfg.ServiceAccountKeyFile)
		if err != nil {
			return nil, fmt.Errorf("error reading key for service account token controller: %w", err)
		}
		rootCA, err := rootCAFor(cfg.RootCAFile, rootClientBuilder, "tokens-controller")
		if err != nil {
			return nil, err
		}
		gen, err := serviceaccount.JWTTokenGenerator(serviceaccount.LegacyIssuer, key)
		if err != nil {
			return nil, fmt.Errorf("failed to build token generator: %w", err)
		}
		client, err := rootClientBuilder.Client("tokens-controller")
		if err != nil {
			return nil, err
		}
		// Only token Secrets matter; the shared factory would cache them all.
		tokens := cc.FilteredInformerFactory("", "type="+string(v1.SecretTypeServiceAccountToken)).Core().V1().Secrets()
		tc, err := serviceaccount.NewTokensController(klog.FromContext(ctx),
			cc.InformerFactory.Core().V1().ServiceAccounts(), tokens, client,
			serviceaccount.TokensControllerOptions{TokenGenerator: gen, RootCA: rootCA})
		if err != nil {
			return nil, fmt.Errorf("error creating Tokens controller: %w", err)
		}
		workers := int(cfg.ConcurrentSATokenSyncs)
		return newControllerLoop(name, func(ctx context.Context) { tc.Run(ctx, workers) }), nil
	}
}

func newServiceAccountController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("service-account-controller")
	if err != nil {
		return nil, err
	}
	sac, err := serviceaccount.NewServiceAccountsController(
		cc.InformerFactory.Core().V1().ServiceAccounts(), cc.InformerFactory.Core().V1().Namespaces(),
		client, serviceaccount.DefaultServiceAccountsControllerOptions())
	if err != nil {
		return nil, fmt.Errorf("error creating ServiceAccount controller: %w", err)
	}
	return newControllerLoop(name, func(ctx context.Context) { sac.Run(ctx, 1) }), nil
}

func newRootCACertificatePublisherController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	rootCA, err := rootCAFor(cc.ComponentConfig.SAController.RootCAFile, cc.ClientBuilder, "root-ca-cert-publisher")
	if err != nil {
		return nil, err
	}
	client, err := cc.NewClient("root-ca-cert-publisher")
	if err != nil {
		return nil, err
	}
	// Only kube-root-ca.crt matters; the shared factory would cache every
	// ConfigMap's body.
	cms := cc.FilteredInformerFactory("", "metadata.name="+rootcacertpublisher.RootCACertConfigMapName).Core().V1().ConfigMaps()
	pub, err := rootcacertpublisher.NewPublisher(cms, cc.InformerFactory.Core().V1().Namespaces(), client, rootCA)
	if err != nil {
		return nil, fmt.Errorf("error creating root CA certificate publisher: %w", err)
	}
	return newControllerLoop(name, func(ctx context.Context) { pub.Run(ctx, 1) }), nil
}

// rootCAFor reads --root-ca-file, or falls back to the CA the client
// trusts the apiserver with.
func rootCAFor(file string, b clientbuilder.ControllerClientBuilder, clientName string) ([]byte, error) {
	if file != "" {
		ca, err := readCA(file)
		if err != nil {
			return nil, fmt.Errorf("error parsing root-ca-file at %s: %w", file, err)
		}
		return ca, nil
	}
	cfg, err := b.Config(clientName)
	if err != nil {
		return nil, err
	}
	return cfg.CAData, nil
}

func readCA(file string) ([]byte, error) {
	ca, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if _, err := certutil.ParseCertsPEM(ca); err != nil {
		return nil, err
	}
	return ca, nil
}
