package config

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// topLevelKeys returns an object's keys in document order.
func topLevelKeys(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %v %v", tok, err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// The order of upstream's v1alpha1 type, which /configz follows.
var upstreamKeyOrder = []string{
	"kind", "apiVersion", "Generic", "KubeCloudShared", "AttachDetachController", "CSRSigningController",
	"DaemonSetController", "DeploymentController", "DisruptionController", "StatefulSetController",
	"DeprecatedController", "EndpointController", "EndpointSliceController", "EndpointSliceMirroringController",
	"EphemeralVolumeController", "GarbageCollectorController", "HPAController", "JobController",
	"CronJobController", "LegacySATokenCleaner", "NamespaceController", "NodeIPAMController",
	"NodeLifecycleController", "PersistentVolumeBinderController", "PodGCController", "ReplicaSetController",
	"ReplicationController", "ResourceQuotaController", "SAController", "ServiceController",
	"TTLAfterFinishedController", "ValidatingAdmissionPolicyStatusController", "DeviceTaintEvictionController",
	"ResourceClaimController",
}

func TestJSONShape(t *testing.T) {
	c := NewDefaultKubeControllerManagerConfiguration()
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := topLevelKeys(t, data); !reflect.DeepEqual(got, upstreamKeyOrder) {
		t.Errorf("keys\n got %v\nwant %v", got, upstreamKeyOrder)
	}
	s := string(data)
	for _, want := range []string{
		`"kind":"KubeControllerManagerConfiguration","apiVersion":"kubecontrollermanager.config.k8s.io/v1alpha1"`,
		`"ClientConnection":{"kubeconfig":"","acceptContentTypes":"","contentType":"application/vnd.kubernetes.protobuf","qps":20,"burst":30}`,
		`"LeaderElection":{"leaderElect":true,"leaseDuration":"15s","renewDeadline":"10s","retryPeriod":"2s","resourceLock":"leases","resourceName":"kube-controller-manager","resourceNamespace":"kube-system"}`,
		`"AttachDetachController":{"DisableAttachDetachReconcilerSync":false,"ReconcilerSyncLoopPeriod":"1m0s","disableForceDetachOnTimeout":false}`,
		`"DeploymentController":{"ConcurrentDeploymentSyncs":5}`,
		`"GCIgnoredResources":[{"Group":"","Resource":"events"},{"Group":"events.k8s.io","Resource":"events"}]`,
		`"PodEvictionTimeout":"0s"`,
		`"DeprecatedController":{}`,
		`"KubeCloudShared":{"CloudProvider":{"Name":"","CloudConfigFile":""},"ExternalCloudVolumePlugin":"","UseServiceAccountCredentials":false,"AllowUntaggedCloud":false,"RouteReconciliationPeriod":"10s","ClusterName":"kubernetes","ClusterCIDR":"","AllocateNodeCIDRs":false,"CIDRAllocatorType":"RangeAllocator","ConfigureCloudRoutes":true,"NodeSyncPeriod":"0s"}`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("JSON lacks %s\n%s", want, s)
		}
	}

	var back KubeControllerManagerConfiguration
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip changed the config:\n got %+v\nwant %+v", back, c)
	}
}

func TestDefaults(t *testing.T) {
	c := NewDefaultKubeControllerManagerConfiguration()
	checks := map[string]bool{
		"controllers":      reflect.DeepEqual(c.Generic.Controllers, []string{"*"}),
		"qps/burst":        c.Generic.ClientConnection.QPS == 20 && c.Generic.ClientConnection.Burst == 30,
		"min resync":       c.Generic.MinResyncPeriod.Duration == 12*time.Hour,
		"profiling":        c.Generic.Debugging.EnableProfiling,
		"deployment":       c.DeploymentController.ConcurrentDeploymentSyncs == 5,
		"replicaset":       c.ReplicaSetController.ConcurrentRSSyncs == 5,
		"rc":               c.ReplicationController.ConcurrentRCSyncs == 5,
		"daemonset":        c.DaemonSetController.ConcurrentDaemonSetSyncs == 2,
		"gc":               c.GarbageCollectorController.EnableGarbageCollector && c.GarbageCollectorController.ConcurrentGCSyncs == 20,
		"namespace":        c.NamespaceController.ConcurrentNamespaceSyncs == 10,
		"podgc":            c.PodGCController.TerminatedPodGCThreshold == 12500,
		"csr duration":     c.CSRSigningController.ClusterSigningDuration.Duration == 8760*time.Hour,
		"node lifecycle":   c.NodeLifecycleController.NodeMonitorGracePeriod.Duration == 50*time.Second && c.NodeLifecycleController.UnhealthyZoneThreshold == 0.55,
		"pv recycler":      c.PersistentVolumeBinderController.VolumeConfiguration.PersistentVolumeRecyclerConfiguration.MaximumRetry == 3,
		"resourceclaim":    c.ResourceClaimController.ConcurrentSyncs == 50,
		"device taint":     c.DeviceTaintEvictionController.ConcurrentSyncs == 8,
		"endpoint slice":   c.EndpointSliceController.MaxEndpointsPerSlice == 100,
		"mirroring":        c.EndpointSliceMirroringController.MirroringMaxEndpointsPerSubset == 1000,
		"hpa tolerance":    c.HPAController.HorizontalPodAutoscalerTolerance == 0.1,
		"service":          c.ServiceController.ConcurrentServiceSyncs == 1,
		"cidr allocator":   c.KubeCloudShared.CIDRAllocatorType == "RangeAllocator",
		"leader migration": !c.Generic.LeaderMigrationEnabled,
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("default %s wrong", name)
		}
	}
}

func TestDeepCopy(t *testing.T) {
	c := NewDefaultKubeControllerManagerConfiguration()
	cp := c.DeepCopy()
	cp.Generic.Controllers[0] = "-x"
	cp.GarbageCollectorController.GCIgnoredResources[0].Resource = "x"
	if c.Generic.Controllers[0] != "*" || c.GarbageCollectorController.GCIgnoredResources[0].Resource != "events" {
		t.Errorf("DeepCopy shares memory")
	}
	fresh := NewDefaultKubeControllerManagerConfiguration()
	if !reflect.DeepEqual(*fresh.DeepCopy(), fresh) {
		t.Errorf("DeepCopy differs")
	}
}
