package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Recommended client settings; each controller manager may override them.
const (
	DefaultContentType = "application/vnd.kubernetes.protobuf"
	DefaultQPS         = 50
	DefaultBurst       = 100
)

// NewRecommendedGenericControllerManagerConfiguration returns the generic
// configuration with the values upstream's defaulting produces.
func NewRecommendedGenericControllerManagerConfiguration() GenericControllerManagerConfiguration {
	var c GenericControllerManagerConfiguration
	c.Address = "0.0.0.0"
	c.MinResyncPeriod = metav1.Duration{Duration: 12 * time.Hour}
	c.Controllers = []string{"*"}

	c.ClientConnection.ContentType = DefaultContentType
	c.ClientConnection.QPS = DefaultQPS
	c.ClientConnection.Burst = DefaultBurst

	c.LeaderElection.LeaderElect = true
	c.LeaderElection.LeaseDuration = metav1.Duration{Duration: 15 * time.Second}
	c.LeaderElection.RenewDeadline = metav1.Duration{Duration: 10 * time.Second}
	c.LeaderElection.RetryPeriod = metav1.Duration{Duration: 2 * time.Second}
	// Leases are the only lock kind still supported.
	c.LeaderElection.ResourceLock = ResourceLockLeases

	// Profiling is cheap to expose and on in every kube binary.
	c.Debugging.EnableProfiling = true
	return c
}
