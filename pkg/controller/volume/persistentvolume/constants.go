package persistentvolume

import "time"

// Names users see on objects, events and in the API: all are upstream's.
const (
	// EventComponent is the source component of every event the controller
	// emits (upstream's recorder name, not the controller name).
	EventComponent = "persistentvolume-controller"

	// AnnBindCompleted marks a claim whose binding finished once; from then
	// on a missing volume means the claim is Lost, not Pending.
	AnnBindCompleted = "pv.kubernetes.io/bind-completed"
	// AnnBoundByController marks a PV or PVC binding made by this controller
	// (rather than pre-bound by the user).
	AnnBoundByController = "pv.kubernetes.io/bound-by-controller"
	// AnnSelectedNode is set on a claim by the scheduler to start delayed
	// (WaitForFirstConsumer) provisioning on that node.
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnDynamicallyProvisioned names, on a PV, the plugin or external
	// provisioner that created it.
	AnnDynamicallyProvisioned = "pv.kubernetes.io/provisioned-by"
	// AnnMigratedTo names the CSI driver that handles a PV or PVC of an
	// in-tree plugin migrated to CSI.
	AnnMigratedTo = "pv.kubernetes.io/migrated-to"
	// AnnStorageProvisioner names, on a claim, the provisioner that should
	// create its volume. AnnBetaStorageProvisioner is the deprecated twin
	// that is still written.
	AnnStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	AnnBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"

	// PVDeletionProtectionFinalizer is the external-provisioner's finalizer.
	PVDeletionProtectionFinalizer = "external-provisioner.volume.kubernetes.io/finalizer"
	// PVDeletionInTreeProtectionFinalizer protects PVs provisioned by an
	// in-tree plugin until the plugin deleted the storage asset.
	PVDeletionInTreeProtectionFinalizer = "kubernetes.io/pv-controller"

	// annPreResizeCapacity carries, on a PV, the claim capacity from before
	// an offline file system expansion.
	annPreResizeCapacity = "volume.alpha.kubernetes.io/pre-resize-capacity"
	// Default StorageClass markers.
	annIsDefaultStorageClass     = "storageclass.kubernetes.io/is-default-class"
	annBetaIsDefaultStorageClass = "storageclass.beta.kubernetes.io/is-default-class"
	// annCreatedBy is written by the hostPath provisioner on its PVs.
	annCreatedBy = "kubernetes.io/createdby"
)

// Event reasons.
const (
	EventFailedBinding              = "FailedBinding"
	EventVolumeMismatch             = "VolumeMismatch"
	EventVolumeFailedRecycle        = "VolumeFailedRecycle"
	EventVolumeRecycled             = "VolumeRecycled"
	EventRecyclerPod                = "RecyclerPod"
	EventVolumeDelete               = "VolumeDelete"
	EventVolumeFailedDelete         = "VolumeFailedDelete"
	EventExternalProvisioning       = "ExternalProvisioning"
	EventProvisioningFailed         = "ProvisioningFailed"
	EventProvisioningCleanupFailed  = "ProvisioningCleanupFailed"
	EventProvisioningSucceeded      = "ProvisioningSucceeded"
	EventWaitForFirstConsumer       = "WaitForFirstConsumer"
	EventWaitForPodScheduled        = "WaitForPodScheduled"
	EventClaimLost                  = "ClaimLost"
	EventClaimMisbound              = "ClaimMisbound"
	EventVolumeUnknownReclaimPolicy = "VolumeUnknownReclaimPolicy"
)

const (
	// Attempts and pause between them when saving the PV object of a volume
	// an in-tree plugin has just provisioned.
	createProvisionedPVRetryCount = 5
	createProvisionedPVInterval   = 10 * time.Second

	// Work queue names (the "name" label of the workqueue_* metrics).
	claimQueueName  = "claims"
	volumeQueueName = "volumes"
)
