package app

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"github.com/kcmclone/controller-manager/clientbuilder"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/serviceaccount"
)

// newServiceAccountTokenController mints legacy token Secrets. It uses the
// root credentials (the others may depend on the tokens it mints) and is
// skipped without a signing key, as upstream.
func newServiceAccountTokenController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	cfg := cc.ComponentConfig.SAController
	if cfg.ServiceAccountKeyFile == "" {
		klog.FromContext(ctx).Info("Controller is disabled because there is no private key", "controller", name)
		return nil, nil
	}
	key, err := serviceaccount.PrivateKeyFromFile(cfg.ServiceAccountKeyFile)
	if err != nil {
		return nil, fmt.Errorf("error reading key for service account token controller: %w", err)
	}
	rootCA, err := rootCAFor(cfg.RootCAFile, cc.rootClientBuilder, "tokens-controller")
	if err != nil {
		return nil, err
	}
	gen, err := serviceaccount.JWTTokenGenerator(serviceaccount.LegacyIssuer, key)
	if err != nil {
		return nil, fmt.Errorf("failed to build token generator: %w", err)
	}
	client, err := cc.rootClientBuilder.Client("tokens-controller")
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
