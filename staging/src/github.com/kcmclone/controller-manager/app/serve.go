// Package app holds the serving pieces shared by controller managers.
package app

import (
	"context"
	"fmt"
	"net/http"
	goruntime "runtime"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/apiserver/pkg/server/routes"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/component-base/configz"
	"k8s.io/component-base/logs"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// BuildHandlerChain puts delegated authentication and authorization, request
// info, no-cache headers, logging and panic recovery in front of handler.
func BuildHandlerChain(handler http.Handler, authz *server.AuthorizationInfo, authn *server.AuthenticationInfo) http.Handler {
	resolver := &apirequest.RequestInfoFactory{}
	if authz != nil && authz.Authorizer != nil {
		handler = genericapifilters.WithAuthorization(handler, authz.Authorizer, scheme.Codecs)
	}
	if authn != nil && authn.Authenticator != nil {
		handler = genericapifilters.WithAuthentication(handler, authn.Authenticator, genericapifilters.Unauthorized(scheme.Codecs), nil, nil)
	}
	handler = genericapifilters.WithRequestInfo(handler, resolver)
	handler = genericapifilters.WithCacheControl(handler)
	handler = genericfilters.WithHTTPLogging(handler)
	return genericfilters.WithPanicRecovery(handler, resolver)
}

// Debugging selects the optional debug endpoints.
type Debugging struct {
	EnableProfiling           bool
	EnableContentionProfiling bool
}

// NewBaseHandler serves the health endpoints, /metrics, /configz and, when
// profiling is on, /debug/pprof and /debug/flags/v.
func NewBaseHandler(d Debugging, health map[string]http.Handler) *mux.PathRecorderMux {
	m := mux.NewPathRecorderMux("controller-manager")
	for path, h := range health {
		m.Handle(path, h)
		m.HandlePrefix(path+"/", h)
	}
	if d.EnableProfiling {
		routes.Profiling{}.Install(m)
		if d.EnableContentionProfiling {
			goruntime.SetBlockProfileRate(1)
		}
		routes.DebugFlags{}.Install(m, "v", routes.StringFlagPutHandler(logs.GlogSetter))
	}
	configz.InstallHandler(m)
	m.Handle("/metrics", legacyregistry.Handler())
	return m
}

// WaitForAPIServer polls the apiserver's /healthz once a second until it
// answers ok or timeout passes, so a manager started alongside its apiserver
// does not fail at once.
func WaitForAPIServer(ctx context.Context, client clientset.Interface, timeout time.Duration) error {
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		status := 0
		result := client.Discovery().RESTClient().Get().AbsPath("/healthz").Do(ctx).StatusCode(&status)
		if result.Error() != nil {
			lastErr = fmt.Errorf("failed to get apiserver /healthz status: %w", result.Error())
			return false, nil
		}
		if status != http.StatusOK {
			body, _ := result.Raw()
			lastErr = fmt.Errorf("apiserver isn't healthy: %s", body)
			klog.FromContext(ctx).Info("Waiting for a healthy apiserver", "status", status)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", err, lastErr)
	}
	return nil
}
