package app

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/component-base/featuregate"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/daemon"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/replicaset"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/statefulset"
	"github.com/kcmclone/kube-controller-manager/pkg/features"
)

// The client names below are the ServiceAccounts upstream's bootstrap RBAC
// binds (system:controller:<name>), used with --use-service-account-credentials.

func newDeploymentController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("deployment-controller")
	if err != nil {
		return nil, err
	}
	dc, err := deployment.NewController(ctx,
		cc.InformerFactory.Apps().V1().Deployments(),
		cc.InformerFactory.Apps().V1().ReplicaSets(),
		cc.InformerFactory.Core().V1().Pods(),
		client, deploymentFeatures(defaultFeatureGate()))
	if err != nil {
		return nil, err
	}
	dc.WithNamespaceInformer(cc.InformerFactory.Core().V1().Namespaces())
	workers := int(cc.ComponentConfig.DeploymentController.ConcurrentDeploymentSyncs)
	return newControllerLoop(name, func(ctx context.Context) { dc.Run(ctx, workers) }), nil
}

func newReplicaSetController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("replicaset-controller")
	if err != nil {
		return nil, err
	}
	rsc := replicaset.NewController(ctx,
		cc.InformerFactory.Apps().V1().ReplicaSets(),
		cc.InformerFactory.Core().V1().Pods(),
		client, replicaset.BurstReplicas, replicaSetFeatures(defaultFeatureGate()))
	rsc.WithNamespaceInformer(cc.InformerFactory.Core().V1().Namespaces())
	workers := int(cc.ComponentConfig.ReplicaSetController.ConcurrentRSSyncs)
	return newControllerLoop(name, func(ctx context.Context) { rsc.Run(ctx, workers) }), nil
}

func newStatefulSetController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("statefulset-controller")
	if err != nil {
		return nil, err
	}
	ssc := statefulset.NewController(ctx,
		cc.InformerFactory.Core().V1().Pods(),
		cc.InformerFactory.Apps().V1().StatefulSets(),
		cc.InformerFactory.Core().V1().PersistentVolumeClaims(),
		cc.InformerFactory.Apps().V1().ControllerRevisions(),
		client, statefulSetFeatures(defaultFeatureGate()))
	workers := int(cc.ComponentConfig.StatefulSetController.ConcurrentStatefulSetSyncs)
	return newControllerLoop(name, func(ctx context.Context) { ssc.Run(ctx, workers) }), nil
}

func newDaemonSetController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("daemon-set-controller")
	if err != nil {
		return nil, err
	}
	dsc, err := daemon.NewController(ctx,
		cc.InformerFactory.Apps().V1().DaemonSets(),
		cc.InformerFactory.Apps().V1().ControllerRevisions(),
		cc.InformerFactory.Core().V1().Pods(),
		cc.InformerFactory.Core().V1().Nodes(),
		client,
		flowcontrol.NewBackOff(1*time.Second, 15*time.Minute),
		daemonSetFeatures(defaultFeatureGate()))
	if err != nil {
		return nil, fmt.Errorf("error creating DaemonSets controller: %w", err)
	}
	workers := int(cc.ComponentConfig.DaemonSetController.ConcurrentDaemonSetSyncs)
	return newControllerLoop(name, func(ctx context.Context) { dsc.Run(ctx, workers) }), nil
}

func deploymentFeatures(fg featuregate.FeatureGate) deployment.Features {
	return deployment.Features{TerminatingReplicas: fg.Enabled(features.DeploymentReplicaSetTerminatingReplicas)}
}

func replicaSetFeatures(fg featuregate.FeatureGate) replicaset.Features {
	return replicaset.Features{
		TerminatingReplicas:        fg.Enabled(features.DeploymentReplicaSetTerminatingReplicas),
		StaleControllerConsistency: fg.Enabled(features.StaleControllerConsistencyReplicaSet),
		PodDeletionCost:            fg.Enabled(features.PodDeletionCost),
	}
}

func statefulSetFeatures(fg featuregate.FeatureGate) statefulset.Features {
	return statefulset.Features{
		MaxUnavailableStatefulSet:             fg.Enabled(features.MaxUnavailableStatefulSet),
		StatefulSetRecreateStrategy:           fg.Enabled(features.StatefulSetRecreateStrategy),
		StatefulSetSemanticRevisionComparison: fg.Enabled(features.StatefulSetSemanticRevisionComparison),
		StaleControllerConsistency:            fg.Enabled(features.StaleControllerConsistencyStatefulSet),
	}
}

func daemonSetFeatures(fg featuregate.FeatureGate) daemon.Features {
	return daemon.Features{
		StaleControllerConsistency:         fg.Enabled(features.StaleControllerConsistencyDaemonSet),
		TaintTolerationComparisonOperators: fg.Enabled(features.TaintTolerationComparisonOperators),
	}
}
