package app

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/bootstrap"
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
