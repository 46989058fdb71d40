// Package metrics holds the metrics of the persistentvolume-binder-controller,
// with upstream's names, labels and help texts: the pv_collector_* gauges
// computed from the controller's caches, the volume operation error and
// latency metrics, and the retroactive default StorageClass counters.
package metrics

import (
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/operationmetrics"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

// Lister lists the objects of one of the controller's caches.
type Lister interface {
	List() []interface{}
}

// PluginNamer names the volume plugin serving a PV for the plugin_name
// label, "N/A" when none does.
type PluginNamer func(pv *v1.PersistentVolume) string

// PluginNameNotAvailable is the plugin_name of volumes no plugin handles.
const PluginNameNotAvailable = "N/A"

var (
	totalPVCountDesc = metrics.NewDesc("pv_collector_total_pv_count",
		"Gauge measuring total number of persistent volumes",
		[]string{"plugin_name", "volume_mode"}, nil, metrics.ALPHA, "")
	boundPVCountDesc = metrics.NewDesc("pv_collector_bound_pv_count",
		"Gauge measuring number of persistent volume currently bound",
		[]string{"storage_class"}, nil, metrics.ALPHA, "")
	unboundPVCountDesc = metrics.NewDesc("pv_collector_unbound_pv_count",
		"Gauge measuring number of persistent volume currently unbound",
		[]string{"storage_class"}, nil, metrics.ALPHA, "")
	boundPVCCountDesc = metrics.NewDesc("pv_collector_bound_pvc_count",
		"Gauge measuring number of persistent volume claim currently bound",
		[]string{"namespace", "storage_class", "volume_attributes_class"}, nil, metrics.ALPHA, "")
	unboundPVCCountDesc = metrics.NewDesc("pv_collector_unbound_pvc_count",
		"Gauge measuring number of persistent volume claim currently unbound",
		[]string{"namespace", "storage_class", "volume_attributes_class"}, nil, metrics.ALPHA, "")

	// volumeOperationTotalErrors is the deprecated name of
	// volumeOperationErrors; hidden from 1.37 on unless
	// --show-hidden-metrics-for-version=1.36.
	volumeOperationTotalErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:              "volume_operation_total_errors",
		Help:              "Total volume operation errors",
		StabilityLevel:    metrics.ALPHA,
		DeprecatedVersion: "1.36.0",
	}, []string{"plugin_name", "operation_name"})
	volumeOperationErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "volume_operation_errors_total",
		Help:           "Total volume operation errors",
		StabilityLevel: metrics.ALPHA,
	}, []string{"plugin_name", "operation_name"})
	retroactiveStorageClass = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "retroactive_storageclass_total",
		Help:           "Total number of retroactive StorageClass assignments to persistent volume claim",
		StabilityLevel: metrics.ALPHA,
	})
	retroactiveStorageClassErrors = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "retroactive_storageclass_errors_total",
		Help:           "Total number of failed retroactive StorageClass assignments to persistent volume claim",
		StabilityLevel: metrics.ALPHA,
	})
)

var registerOnce sync.Once

// Register registers the controller's metrics once per process; the
// collector reads pvs and pvcs, the controller's caches, at scrape time.
func Register(pvs, pvcs Lister, pluginName PluginNamer) {
	registerOnce.Do(func() {
		legacyregistry.CustomMustRegister(&countCollector{pvs: pvs, pvcs: pvcs, pluginName: pluginName})
		legacyregistry.MustRegister(volumeOperationTotalErrors)
		legacyregistry.MustRegister(volumeOperationErrors)
		legacyregistry.MustRegister(retroactiveStorageClass)
		legacyregistry.MustRegister(retroactiveStorageClassErrors)
	})
}

// RegisterOperationMetrics registers the volume operation metrics shared
// with the other volume controllers.
func RegisterOperationMetrics() { operationmetrics.Register() }

// countCollector computes the pv_collector_* gauges on every scrape.
type countCollector struct {
	metrics.BaseStableCollector

	pvs, pvcs  Lister
	pluginName PluginNamer
}

var _ metrics.StableCollector = &countCollector{}

func (c *countCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- totalPVCountDesc
	ch <- boundPVCountDesc
	ch <- unboundPVCountDesc
	ch <- boundPVCCountDesc
	ch <- unboundPVCCountDesc
}

func (c *countCollector) CollectWithStability(ch chan<- metrics.Metric) {
	c.collectVolumes(ch)
	c.collectClaims(ch)
}

func (c *countCollector) collectVolumes(ch chan<- metrics.Metric) {
	type pluginMode struct{ plugin, mode string }
	total := map[pluginMode]int{}
	bound := map[string]int{}
	unbound := map[string]int{}
	for _, obj := range c.pvs.List() {
		pv, ok := obj.(*v1.PersistentVolume)
		if !ok {
			continue
		}
		mode := string(ptr.Deref(pv.Spec.VolumeMode, v1.PersistentVolumeFilesystem))
		total[pluginMode{c.pluginName(pv), mode}]++
		if pv.Status.Phase == v1.VolumeBound {
			bound[pv.Spec.StorageClassName]++
		} else {
			unbound[pv.Spec.StorageClassName]++
		}
	}
	for class, n := range bound {
		ch <- metrics.NewLazyConstMetric(boundPVCountDesc, metrics.GaugeValue, float64(n), class)
	}
	for class, n := range unbound {
		ch <- metrics.NewLazyConstMetric(unboundPVCountDesc, metrics.GaugeValue, float64(n), class)
	}
	for k, n := range total {
		ch <- metrics.NewLazyConstMetric(totalPVCountDesc, metrics.GaugeValue, float64(n), k.plugin, k.mode)
	}
}

func (c *countCollector) collectClaims(ch chan<- metrics.Metric) {
	type dims struct{ namespace, class, vac string }
	bound := map[dims]int{}
	unbound := map[dims]int{}
	for _, obj := range c.pvcs.List() {
		pvc, ok := obj.(*v1.PersistentVolumeClaim)
		if !ok {
			continue
		}
		d := dims{pvc.Namespace, storagehelpers.GetPersistentVolumeClaimClass(pvc), ptr.Deref(pvc.Spec.VolumeAttributesClassName, "")}
		if pvc.Status.Phase == v1.ClaimBound {
			bound[d]++
		} else {
			unbound[d]++
		}
	}
	for d, n := range bound {
		ch <- metrics.NewLazyConstMetric(boundPVCCountDesc, metrics.GaugeValue, float64(n), d.namespace, d.class, d.vac)
	}
	for d, n := range unbound {
		ch <- metrics.NewLazyConstMetric(unboundPVCCountDesc, metrics.GaugeValue, float64(n), d.namespace, d.class, d.vac)
	}
}

// RecordRetroactiveStorageClassMetric counts an attempt to give a claim the
// default StorageClass after its creation, and a failed one as an error.
func RecordRetroactiveStorageClassMetric(success bool) {
	retroactiveStorageClass.Inc()
	if !success {
		retroactiveStorageClassErrors.Inc()
	}
}

// RecordVolumeOperationErrorMetric counts a failed provision or delete.
func RecordVolumeOperationErrorMetric(pluginName, opName string) {
	if pluginName == "" {
		pluginName = PluginNameNotAvailable
	}
	volumeOperationTotalErrors.WithLabelValues(pluginName, opName).Inc()
	volumeOperationErrors.WithLabelValues(pluginName, opName).Inc()
}

// RecordOperationLatencyMetric observes the end-to-end duration of a
// provision (until bound) or delete (until the PV is gone).
func RecordOperationLatencyMetric(pluginName, opName string, seconds float64) {
	RegisterOperationMetrics()
	operationmetrics.VolumeOperationTotalSeconds.WithLabelValues(pluginName, opName).Observe(seconds)
}

// OperationCompleteHook starts timing a call into a volume plugin; call the
// result with the call's error when it returns.
func OperationCompleteHook(pluginName, opName string) func(err error) {
	RegisterOperationMetrics()
	start := time.Now()
	return func(err error) {
		status := "success"
		if err != nil {
			status = "fail-unknown"
		}
		operationmetrics.StorageOperationDuration.WithLabelValues(pluginName, opName, status, strconv.FormatBool(false)).Observe(time.Since(start).Seconds())
	}
}

// operationStart is when an operation of a plugin began.
type operationStart struct {
	pluginName string
	operation  string
	start      time.Time
}

// OperationStartTimeCache remembers when provisions (key: claim
// namespace/name) and deletions (key: PV name) began. Safe for concurrent use.
type OperationStartTimeCache struct {
	m sync.Map // string -> *operationStart
}

// NewOperationStartTimeCache returns an empty cache.
func NewOperationStartTimeCache() *OperationStartTimeCache {
	return &OperationStartTimeCache{}
}

// AddIfNotExist records that operation of pluginName started now, unless
// an operation is already recorded under key.
func (c *OperationStartTimeCache) AddIfNotExist(key, pluginName, operation string) {
	c.m.LoadOrStore(key, &operationStart{pluginName: pluginName, operation: operation, start: time.Now()})
}

// Delete forgets key.
func (c *OperationStartTimeCache) Delete(key string) { c.m.Delete(key) }

// Has reports whether an operation is recorded under key.
func (c *OperationStartTimeCache) Has(key string) bool {
	_, ok := c.m.Load(key)
	return ok
}

// RecordMetric reports on the operation recorded under key, if any: a
// failure is counted and the entry kept (the operation is retried); a
// success observes the latency and forgets the entry.
func RecordMetric(key string, c *OperationStartTimeCache, err error) {
	obj, ok := c.m.Load(key)
	if !ok {
		return
	}
	op := obj.(*operationStart)
	if err != nil {
		RecordVolumeOperationErrorMetric(op.pluginName, op.operation)
		return
	}
	RecordOperationLatencyMetric(op.pluginName, op.operation, time.Since(op.start).Seconds())
	c.Delete(key)
}
