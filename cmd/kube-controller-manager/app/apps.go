package app

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/util/flowcontrol"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/names"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/daemon"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/replicaset"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/replication"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/statefulset"
)

// initFuncs maps the implemented controllers to their constructors.
func initFuncs() map[string]InitFunc {
	return map[string]InitFunc{
		names.DeploymentController:                                      newDeploymentController,
		names.ReplicaSetController:                                      newReplicaSetController,
		names.ReplicationControllerController:                           newReplicationController,
		names.ServiceAccountController:                                  newServiceAccountController,
		names.RootCACertificatePublisherController:                      newRootCACertificatePublisherController,
		names.NamespaceController:                                       newNamespaceController,
		names.NodeLifecycleController:                                   newNodeLifecycleController,
		names.TaintEvictionController:                                   newTaintEvictionController,
		names.GarbageCollectorController:                                newGarbageCollectorController,
		names.JobController:                                             newJobController,
		names.CronJobController:                                         newCronJobController,
		names.EndpointSliceController:                                   newEndpointSliceController,
		names.EndpointsController:                                       newEndpointsController,
		names.CertificateSigningRequestApprovingController:              newCSRApprovingController,
		names.CertificateSigningRequestCleanerController:                newCSRCleanerController,
		names.ClusterRoleAggregationController:                          newClusterRoleAggregationController,
		names.TTLController:                                             newTTLController,
		names.TTLAfterFinishedController:                                newTTLAfterFinishedController,
		names.PodGarbageCollectorController:                             newPodGarbageCollectorController,
		names.StatefulSetController:                                     newStatefulSetController,
		names.DisruptionController:                                      newDisruptionController,
		names.ResourceQuotaController:                                   newResourceQuotaController,
		names.DaemonSetController:                                       newDaemonSetController,
		names.EndpointSliceMirroringController:                          newEndpointSliceMirroringController,
		names.PersistentVolumeClaimProtectionController:                 newPVCProtectionController,
		names.PersistentVolumeProtectionController:                      newPVProtectionController,
		names.EphemeralVolumeController:                                 newEphemeralVolumeController,
		names.NodeIPAMController:                                        newNodeIPAMController,
		names.ServiceCIDRController:                                     newServiceCIDRController,
		names.VolumeAttributesClassProtectionController:                 newVACProtectionController,
		names.HorizontalPodAutoscalerController:                         newHorizontalPodAutoscalerController,
		names.PersistentVolumeExpanderController:                        newPersistentVolumeExpanderController,
		names.PersistentVolumeAttachDetachController:                    newAttachDetachController,
		names.PersistentVolumeBinderController:                          newPersistentVolumeBinderController,
		names.ResourceClaimController:                                   newResourceClaimController,
		names.DeviceTaintEvictionController:                             newDeviceTaintEvictionController,
		names.ValidatingAdmissionPolicyStatusController:                 newValidatingAdmissionPolicyStatusController,
		names.StorageVersionMigratorController:                          newStorageVersionMigratorController,
		names.KubeAPIServerServingClusterTrustBundlePublisherController: newKubeAPIServerServingCTBPublisher,
		names.PodCertificateRequestCleanerController:                    newPodCertificateRequestCleanerController,
		names.CertificateSigningRequestSigningController:                newCSRSigningController,
		names.BootstrapSignerController:                                 newBootstrapSignerController,
		names.TokenCleanerController:                                    newTokenCleanerController,
		names.LegacyServiceAccountTokenCleanerController:                newLegacySATokenCleanerController,
		// The ServiceAccount token controller needs the root client
		// builder, so Run installs its init func.
	}
}

// The client names below are the ServiceAccounts upstream's bootstrap RBAC
// binds (system:controller:<name>), used with --use-service-account-credentials.

func newDeploymentController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("deployment-controller")
	if err != nil {
		return nil, err
	}
	dc, err := deployment.NewDeploymentController(ctx,
		cc.InformerFactory.Apps().V1().Deployments(),
		cc.InformerFactory.Apps().V1().ReplicaSets(),
		cc.InformerFactory.Core().V1().Pods(),
		client)
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
	rsc := replicaset.NewReplicaSetController(ctx,
		cc.InformerFactory.Apps().V1().ReplicaSets(),
		cc.InformerFactory.Core().V1().Pods(),
		client, replicaset.BurstReplicas)
	rsc.WithNamespaceInformer(cc.InformerFactory.Core().V1().Namespaces())
	workers := int(cc.ComponentConfig.ReplicaSetController.ConcurrentRSSyncs)
	return newControllerLoop(name, func(ctx context.Context) { rsc.Run(ctx, workers) }), nil
}

func newReplicationController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("replication-controller")
	if err != nil {
		return nil, err
	}
	rm := replication.NewReplicationManager(ctx,
		cc.InformerFactory.Core().V1().Pods(),
		cc.InformerFactory.Core().V1().ReplicationControllers(),
		client, replicaset.BurstReplicas)
	rm.WithNamespaceInformer(cc.InformerFactory.Core().V1().Namespaces())
	workers := int(cc.ComponentConfig.ReplicationController.ConcurrentRCSyncs)
	return newControllerLoop(name, func(ctx context.Context) { rm.Run(ctx, workers) }), nil
}

func newStatefulSetController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("statefulset-controller")
	if err != nil {
		return nil, err
	}
	ssc := statefulset.NewStatefulSetController(ctx,
		cc.InformerFactory.Core().V1().Pods(),
		cc.InformerFactory.Apps().V1().StatefulSets(),
		cc.InformerFactory.Core().V1().PersistentVolumeClaims(),
		cc.InformerFactory.Apps().V1().ControllerRevisions(),
		client)
	workers := int(cc.ComponentConfig.StatefulSetController.ConcurrentStatefulSetSyncs)
	return newControllerLoop(name, func(ctx context.Context) { ssc.Run(ctx, workers) }), nil
}

func newDaemonSetController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("daemon-set-controller")
	if err != nil {
		return nil, err
	}
	dsc, err := daemon.NewDaemonSetsController(ctx,
		cc.InformerFactory.Apps().V1().DaemonSets(),
		cc.InformerFactory.Apps().V1().ControllerRevisions(),
		cc.InformerFactory.Core().V1().Pods(),
		cc.InformerFactory.Core().V1().Nodes(),
		client,
		flowcontrol.NewBackOff(1*time.Second, 15*time.Minute))
	if err != nil {
		return nil, fmt.Errorf("error creating DaemonSets controller: %w", err)
	}
	workers := int(cc.ComponentConfig.DaemonSetController.ConcurrentDaemonSetSyncs)
	return newControllerLoop(name, func(ctx context.Context) { dsc.Run(ctx, workers) }), nil
}
