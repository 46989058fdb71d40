package controller

import (
	"sync"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
)

// Kubernetes feature gates the shared code and the replica controllers
// consult, with their v1.37 defaults.
const (
	// PodDeletionCost (beta, on): honour the pod-deletion-cost annotation.
	PodDeletionCost featuregate.Feature = "PodDeletionCost"
	// DeploymentReplicaSetTerminatingReplicas (beta, on): report
	// .status.terminatingReplicas on ReplicaSets.
	DeploymentReplicaSetTerminatingReplicas featuregate.Feature = "DeploymentReplicaSetTerminatingReplicas"
	// StaleControllerConsistencyReplicaSet (beta, on): skip ReplicaSet syncs
	// until the informers have caught up with the controller's own writes.
	StaleControllerConsistencyReplicaSet featuregate.Feature = "StaleControllerConsistencyReplicaSet"
)

var knownGates sync.Map // featuregate.Feature -> bool (registered in DefaultFeatureGate)

// FeatureEnabled returns the gate's value from utilfeature.DefaultFeatureGate
// when the app registered it there, and def (the v1.37 default) otherwise.
// Whether a gate is registered is remembered after the first call, so the
// app must register its gates before controllers start (as upstream does).
func FeatureEnabled(name featuregate.Feature, def bool) bool {
	known, ok := knownGates.Load(name)
	if !ok {
		_, registered := utilfeature.DefaultMutableFeatureGate.GetAll()[name]
		known, _ = knownGates.LoadOrStore(name, registered)
	}
	if known.(bool) {
		return utilfeature.DefaultFeatureGate.Enabled(name)
	}
	return def
}
