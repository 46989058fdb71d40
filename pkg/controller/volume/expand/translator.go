package expand

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// In-tree volume plugins whose PVs are handled by a CSI driver (CSI
// migration, complete and always on for all of them).
const (
	gcePDPluginName       = "kubernetes.io/gce-pd"
	awsEBSPluginName      = "kubernetes.io/aws-ebs"
	cinderPluginName      = "kubernetes.io/cinder"
	azureDiskPluginName   = "kubernetes.io/azure-disk"
	azureFilePluginName   = "kubernetes.io/azure-file"
	vSpherePluginName     = "kubernetes.io/vsphere-volume"
	portworxPluginName    = "kubernetes.io/portworx-volume"
	gcePDDriverName       = "pd.csi.storage.gke.io"
	awsEBSDriverName      = "ebs.csi.aws.com"
	cinderDriverName      = "cinder.csi.openstack.org"
	azureDiskDriverName   = "disk.csi.azure.com"
	azureFileDriverName   = "file.csi.azure.com"
	vSphereDriverName     = "csi.vsphere.vmware.com"
	portworxCSIDriverName = "pxd.portworx.com"
)

var csiDriverForPlugin = map[string]string{
	gcePDPluginName:     gcePDDriverName,
	awsEBSPluginName:    awsEBSDriverName,
	cinderPluginName:    cinderDriverName,
	azureDiskPluginName: azureDiskDriverName,
	azureFilePluginName: azureFileDriverName,
	vSpherePluginName:   vSphereDriverName,
	portworxPluginName:  portworxCSIDriverName,
}

// inTreePluginNameForPV names the migrated in-tree plugin of pv's volume
// source, or "" when its source is not one of them.
func inTreePluginNameForPV(pv *v1.PersistentVolume) string {
	s := pv.Spec.PersistentVolumeSource
	switch {
	case s.GCEPersistentDisk != nil:
		return gcePDPluginName
	case s.AWSElasticBlockStore != nil:
		return awsEBSPluginName
	case s.Cinder != nil:
		return cinderPluginName
	case s.AzureDisk != nil:
		return azureDiskPluginName
	case s.AzureFile != nil:
		return azureFilePluginName
	case s.VsphereVolume != nil:
		return vSpherePluginName
	case s.PortworxVolume != nil:
		return portworxPluginName
	}
	return ""
}

// inTreeTranslator is the CSINameTranslator for the migrated plugins.
type inTreeTranslator struct{}

func (inTreeTranslator) GetCSINameFromInTreeName(pluginName string) (string, error) {
	if d, ok := csiDriverForPlugin[pluginName]; ok {
		return d, nil
	}
	return "", fmt.Errorf("could not find CSI Driver name for plugin %s", pluginName)
}
