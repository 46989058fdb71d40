// Package clientbuilder hands each controller its own client: either the
// manager's own credentials with a per-controller user agent, or (with
// --use-service-account-credentials) a ServiceAccount token per controller.
package clientbuilder

import (
	"fmt"

	"k8s.io/client-go/discovery"
	clientset "k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
)

// ControllerClientBuilder builds clients named after the controller using them.
type ControllerClientBuilder interface {
	Config(name string) (*restclient.Config, error)
	Client(name string) (clientset.Interface, error)
	DiscoveryClient(name string) (discovery.DiscoveryInterface, error)
}

// Simple uses one rest.Config for everyone; the name only goes into the
// user agent, "<base user agent>/<name>".
type Simple struct {
	ClientConfig *restclient.Config
}

var _ ControllerClientBuilder = Simple{}

func (b Simple) Config(name string) (*restclient.Config, error) {
	cfg := restclient.CopyConfig(b.ClientConfig)
	return restclient.AddUserAgent(cfg, name), nil
}

func (b Simple) Client(name string) (clientset.Interface, error) {
	cfg, err := b.Config(name)
	if err != nil {
		return nil, err
	}
	return clientset.NewForConfig(cfg)
}

func (b Simple) DiscoveryClient(name string) (discovery.DiscoveryInterface, error) {
	cfg, err := b.Config(name)
	if err != nil {
		return nil, err
	}
	c, err := clientset.NewForConfig(withDiscoveryLimits(cfg))
	if err != nil {
		return nil, fmt.Errorf("discovery client for %s: %w", name, err)
	}
	return c.Discovery(), nil
}

// withDiscoveryLimits sets upstream's discovery rate limits: discovery
// makes many requests at once, rarely, so a large burst refilled in a few
// seconds.
func withDiscoveryLimits(cfg *restclient.Config) *restclient.Config {
	cfg.Burst = 200
	cfg.QPS = 20
	return cfg
}
