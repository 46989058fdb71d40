// Package config holds the runtime configuration kube-controller-manager's
// command builds from its options.
package config

import (
	"time"

	"k8s.io/apiserver/pkg/server/flagz"
	basecompatibility "k8s.io/component-base/compatibility"

	apiserver "k8s.io/apiserver/pkg/server"
	clientset "k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	kubectrlmgrconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// Config is everything the controller manager needs to run.
type Config struct {
	// ComponentConfig is served on /configz and read by controllers.
	ComponentConfig kubectrlmgrconfig.KubeControllerManagerConfiguration

	// SecureServing is nil when --secure-port=0.
	SecureServing *apiserver.SecureServingInfo
	// LoopbackClientConfig reaches the secure server from inside the
	// process; nil when there is no secure server.
	LoopbackClientConfig *restclient.Config

	Authentication apiserver.AuthenticationInfo
	Authorization  apiserver.AuthorizationInfo

	// Client is the general client, with the binary's user agent.
	Client *clientset.Clientset

	// Kubeconfig reaches the API server; it carries no user agent so each
	// controller's client can set its own.
	Kubeconfig *restclient.Config

	EventBroadcaster record.EventBroadcaster
	EventRecorder    record.EventRecorder

	// ControllerShutdownTimeout bounds how long controllers get to stop.
	ControllerShutdownTimeout time.Duration

	// LeaderElectSharded shares controllers among replicas, a Lease each.
	LeaderElectSharded bool
	// ShardedWarmStandby fills every enabled controller's caches at start.
	ShardedWarmStandby bool
	// Flagz reads the parsed flags for /flagz; nil without a command.
	Flagz flagz.Reader
	// ComponentGlobalsRegistry holds the effective version /statusz and the
	// version metrics report.
	ComponentGlobalsRegistry basecompatibility.ComponentGlobalsRegistry
}

// CompletedConfig is a Config that Complete has filled in.
type CompletedConfig struct {
	*Config
}

// Complete fills fields that need defaults; none do today.
func (c *Config) Complete() *CompletedConfig {
	return &CompletedConfig{c}
}
