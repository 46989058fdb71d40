// Package healthz serves /healthz with checks that can be added after the
// server started (controllers register theirs once built).
package healthz

import (
	"net/http"
	"sync"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/mux"
)

// MutableHandler rebuilds its mux whenever checks are added.
type MutableHandler struct {
	mu      sync.RWMutex
	path    string
	checks  []healthz.HealthChecker
	handler http.Handler
}

// NewMutableHandler serves checks under path ("/healthz", "/livez", "/readyz").
func NewMutableHandler(path string, checks ...healthz.HealthChecker) *MutableHandler {
	h := &MutableHandler{path: path}
	h.AddHealthChecker(checks...)
	return h
}

func (h *MutableHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.RLock()
	handler := h.handler
	h.mu.RUnlock()
	handler.ServeHTTP(w, r)
}

// AddHealthChecker adds checks; each is served at <path>/<name> too.
func (h *MutableHandler) AddHealthChecker(checks ...healthz.HealthChecker) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks = append(h.checks, checks...)
	m := mux.NewPathRecorderMux("healthz")
	healthz.InstallPathHandler(m, h.path, h.checks...)
	h.handler = m
}

// NamedPingChecker always passes: the controller was started.
func NamedPingChecker(name string) healthz.HealthChecker {
	return healthz.NamedCheck(name, func(*http.Request) error { return nil })
}

// NamedHealthChecker serves check under name.
func NamedHealthChecker(name string, check healthz.HealthChecker) healthz.HealthChecker {
	return healthz.NamedCheck(name, check.Check)
}
