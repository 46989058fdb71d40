package metrics

import (
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/operationmetrics"
)

type list []interface{}

func (l list) List() []interface{} { return l }

func gatherText(t *testing.T, g metrics.Gatherer, names ...string) string {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range families {
		if slices.Contains(names, f.GetName()) {
			if _, err := testutil.MetricFamilyToText(&b, f); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.String()
}

func TestCountCollector(t *testing.T) {
	pv := func(name, class string, phase v1.PersistentVolumePhase, mode v1.PersistentVolumeMode, src v1.PersistentVolumeSource) *v1.PersistentVolume {
		return &v1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1.PersistentVolumeSpec{StorageClassName: class, VolumeMode: ptr.To(mode), PersistentVolumeSource: src},
			Status:     v1.PersistentVolumeStatus{Phase: phase},
		}
	}
	pvc := func(ns, class, vac string, phase v1.PersistentVolumeClaimPhase) *v1.PersistentVolumeClaim {
		c := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}, Status: v1.PersistentVolumeClaimStatus{Phase: phase}}
		c.Spec.StorageClassName = ptr.To(class)
		if vac != "" {
			c.Spec.VolumeAttributesClassName = ptr.To(vac)
		}
		return c
	}
	hostPath := v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp/x"}}
	csi := v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h"}}
	pvs := list{
		pv("a", "fast", v1.VolumeBound, v1.PersistentVolumeFilesystem, hostPath),
		pv("b", "fast", v1.VolumeAvailable, v1.PersistentVolumeFilesystem, hostPath),
		pv("c", "", v1.VolumeReleased, v1.PersistentVolumeBlock, csi),
	}
	beta := pvc("ns2", "ignored", "", v1.ClaimPending)
	beta.Annotations = map[string]string{v1.BetaStorageClassAnnotation: "old"}
	pvcs := list{pvc("ns1", "fast", "gold", v1.ClaimBound), pvc("ns1", "fast", "gold", v1.ClaimBound), pvc("ns1", "fast", "", v1.ClaimLost), beta}
	namer := func(pv *v1.PersistentVolume) string {
		if pv.Spec.HostPath != nil {
			return "kubernetes.io/host-path"
		}
		return PluginNameNotAvailable
	}

	reg := metrics.NewKubeRegistry()
	reg.CustomMustRegister(&countCollector{pvs: pvs, pvcs: pvcs, pluginName: namer})
	got := gatherText(t, reg, "pv_collector_total_pv_count", "pv_collector_bound_pv_count", "pv_collector_unbound_pv_count",
		"pv_collector_bound_pvc_count", "pv_collector_unbound_pvc_count")
	want := `# HELP pv_collector_bound_pv_count [ALPHA] Gauge measuring number of persistent volume currently bound
# TYPE pv_collector_bound_pv_count gauge
pv_collector_bound_pv_count{storage_class="fast"} 1
# HELP pv_collector_bound_pvc_count [ALPHA] Gauge measuring number of persistent volume claim currently bound
# TYPE pv_collector_bound_pvc_count gauge
pv_collector_bound_pvc_count{namespace="ns1",storage_class="fast",volume_attributes_class="gold"} 2
# HELP pv_collector_total_pv_count [ALPHA] Gauge measuring total number of persistent volumes
# TYPE pv_collector_total_pv_count gauge
pv_collector_total_pv_count{plugin_name="N/A",volume_mode="Block"} 1
pv_collector_total_pv_count{plugin_name="kubernetes.io/host-path",volume_mode="Filesystem"} 2
# HELP pv_collector_unbound_pv_count [ALPHA] Gauge measuring number of persistent volume currently unbound
# TYPE pv_collector_unbound_pv_count gauge
pv_collector_unbound_pv_count{storage_class=""} 1
pv_collector_unbound_pv_count{storage_class="fast"} 1
# HELP pv_collector_unbound_pvc_count [ALPHA] Gauge measuring number of persistent volume claim currently unbound
# TYPE pv_collector_unbound_pvc_count gauge
pv_collector_unbound_pvc_count{namespace="ns1",storage_class="fast",volume_attributes_class=""} 1
pv_collector_unbound_pvc_count{namespace="ns2",storage_class="old",volume_attributes_class=""} 1
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestOperationMetrics(t *testing.T) {
	reg := metrics.NewKubeRegistry()
	reg.MustRegister(volumeOperationErrors, operationmetrics.VolumeOperationTotalSeconds, retroactiveStorageClass, retroactiveStorageClassErrors, operationmetrics.StorageOperationDuration)
	for _, r := range []interface{ Reset() }{volumeOperationErrors, operationmetrics.VolumeOperationTotalSeconds, retroactiveStorageClass, retroactiveStorageClassErrors, operationmetrics.StorageOperationDuration} {
		r.Reset()
	}

	c := NewOperationStartTimeCache()
	RecordMetric("missing", c, nil) // nothing recorded, nothing observed
	c.AddIfNotExist("ns/claim", "example.com/p", "provision")
	c.AddIfNotExist("ns/claim", "other", "other") // first one stays
	RecordMetric("ns/claim", c, errors.New("boom"))
	if !c.Has("ns/claim") {
		t.Fatal("failed operation forgotten")
	}
	RecordMetric("ns/claim", c, nil)
	if c.Has("ns/claim") {
		t.Fatal("finished operation kept")
	}
	RecordVolumeOperationErrorMetric("", "delete")
	RecordRetroactiveStorageClassMetric(true)
	RecordRetroactiveStorageClassMetric(false)
	OperationCompleteHook("kubernetes.io/host-path", "volume_delete")(errors.New("x"))

	got := gatherText(t, reg, "volume_operation_errors_total", "retroactive_storageclass_total", "retroactive_storageclass_errors_total")
	want := `# HELP retroactive_storageclass_errors_total [ALPHA] Total number of failed retroactive StorageClass assignments to persistent volume claim
# TYPE retroactive_storageclass_errors_total counter
retroactive_storageclass_errors_total 1
# HELP retroactive_storageclass_total [ALPHA] Total number of retroactive StorageClass assignments to persistent volume claim
# TYPE retroactive_storageclass_total counter
retroactive_storageclass_total 2
# HELP volume_operation_errors_total [ALPHA] Total volume operation errors
# TYPE volume_operation_errors_total counter
volume_operation_errors_total{operation_name="delete",plugin_name="N/A"} 1
volume_operation_errors_total{operation_name="provision",plugin_name="example.com/p"} 1
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	h, err := testutil.GetHistogramVecFromGatherer(reg, "volume_operation_total_seconds", map[string]string{"plugin_name": "example.com/p", "operation_name": "provision"})
	if err != nil || h.GetAggregatedSampleCount() != 1 {
		t.Errorf("latency samples %v %v", h.GetAggregatedSampleCount(), err)
	}
	h, err = testutil.GetHistogramVecFromGatherer(reg, "storage_operation_duration_seconds", map[string]string{"volume_plugin": "kubernetes.io/host-path", "operation_name": "volume_delete", "status": "fail-unknown", "migrated": "false"})
	if err != nil || h.GetAggregatedSampleCount() != 1 {
		t.Errorf("storage operation samples %v %v", h.GetAggregatedSampleCount(), err)
	}
}
