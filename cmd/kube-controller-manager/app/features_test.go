package app

import (
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/daemon"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/job"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/nodelifecycle"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/podautoscaler"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/replicaset"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/replication"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcepoolstatusrequest"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcequota/evaluator"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/statefulset"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/pvcprotection"
	"github.com/kcmclone/kube-controller-manager/pkg/features"
)

// With no --feature-gates the controllers get upstream v1.37's defaults.
func TestControllerFeaturesDefaults(t *testing.T) {
	fg := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	for name, c := range map[string]struct{ got, want any }{
		"deployment":    {deploymentFeatures(fg), deployment.Features{TerminatingReplicas: true}},
		"replicaset":    {replicaSetFeatures(fg), replicaset.Features{TerminatingReplicas: true, StaleControllerConsistency: true, PodDeletionCost: true}},
		"replication":   {replicationFeatures(fg), replication.Features{PodDeletionCost: true}},
		"statefulset":   {statefulSetFeatures(fg), statefulset.Features{MaxUnavailableStatefulSet: true, StatefulSetSemanticRevisionComparison: true, StaleControllerConsistency: true}},
		"daemonset":     {daemonSetFeatures(fg), daemon.Features{StaleControllerConsistency: true}},
		"job":           {jobFeatures(fg), job.Features{StaleControllerConsistency: true, MutableSchedulingDirectivesForSuspendedJobs: true}},
		"nodelifecycle": {nodeLifecycleFeatures(fg), nodelifecycle.Features{LeaseCircuitBreaker: true}},
		"hpa": {hpaFeatures(fg), podautoscaler.Features{HPAGeneration: true, HPAConfigurableTolerance: true, HPAScaleToZero: true,
			PodLevelResources: true, HPAOptimizedSelectorStore: true, StaleControllerConsistency: true}},
		"resourcequota":             {quotaFeatures(fg), evaluator.Features{PodLevelResources: true, PodLevelResourcesFixKubeletQOSClass: true}},
		"pvcprotection":             {pvcProtectionFeatures(fg), pvcprotection.Features{UnusedSinceTime: true}},
		"resourcepoolstatusrequest": {resourcePoolStatusRequestFeatures(fg), resourcepoolstatusrequest.Features{DeviceTaintRules: true}},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %+v, want %+v", name, c.got, c.want)
		}
	}
}

// --feature-gates reaches the controllers: the off-by-default gates, and
// a default-on one turned off.
func TestControllerFeaturesFollowGates(t *testing.T) {
	fg := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	if err := fg.SetFromMap(map[string]bool{
		string(features.TaintTolerationComparisonOperators):   true,
		string(features.StatefulSetRecreateStrategy):          true,
		string(features.PodDeletionCost):                      false,
		string(features.PersistentVolumeClaimUnusedSinceTime): false,
		string(features.DRADeviceTaintRules):                  false,
	}); err != nil {
		t.Fatal(err)
	}
	if !daemonSetFeatures(fg).TaintTolerationComparisonOperators {
		t.Error("daemonset: TaintTolerationComparisonOperators not passed on")
	}
	if !statefulSetFeatures(fg).StatefulSetRecreateStrategy {
		t.Error("statefulset: StatefulSetRecreateStrategy not passed on")
	}
	if replicaSetFeatures(fg).PodDeletionCost || replicationFeatures(fg).PodDeletionCost {
		t.Error("PodDeletionCost=false not passed on")
	}
	if pvcProtectionFeatures(fg).UnusedSinceTime {
		t.Error("pvcprotection: PersistentVolumeClaimUnusedSinceTime=false not passed on")
	}
	if resourcePoolStatusRequestFeatures(fg).DeviceTaintRules {
		t.Error("resourcepoolstatusrequest: DRADeviceTaintRules=false not passed on")
	}
}
