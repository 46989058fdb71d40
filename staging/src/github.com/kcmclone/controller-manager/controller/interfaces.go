// Package controller holds the contract between the controller manager and
// the controllers it runs.
package controller

import (
	"context"
	"net/http"

	"k8s.io/apiserver/pkg/server/healthz"
)

// Interface is a started controller: the manager runs it once informers
// start, and it returns when ctx is cancelled and its workers have stopped.
type Interface interface {
	// Name is the controller's canonical name, e.g. "deployment-controller".
	Name() string
	Run(ctx context.Context)
}

// HealthCheckable controllers contribute their own /healthz/<name> check;
// others get a check that only reports they were started.
type HealthCheckable interface {
	HealthChecker() healthz.HealthChecker
}

// Debuggable controllers serve /debug/controllers/<name>.
type Debuggable interface {
	DebuggingHandler() http.Handler
}
