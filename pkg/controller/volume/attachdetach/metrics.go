package attachdetach

import (
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/cache"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
)

const (
	forceDetachReasonTimeout      = "timeout"
	forceDetachReasonOutOfService = "out-of-service"
	// pluginNameNotAvailable labels volumes whose plugin is unknown.
	pluginNameNotAvailable = "N/A"
)

var (
	inUseVolumeMetricDesc = metrics.NewDesc(
		metrics.BuildFQName("", "storage_count", "attachable_volumes_in_use"),
		"Measure number of volumes in use",
		[]string{"node", "volume_plugin"}, nil,
		metrics.ALPHA, "")

	totalVolumesMetricDesc = metrics.NewDesc(
		metrics.BuildFQName("", "attachdetach_controller", "total_volumes"),
		"Number of volumes in A/D Controller",
		[]string{"plugin_name", "state"}, nil,
		metrics.ALPHA, "")

	// forcedDetaches counts detaches that skipped the in-use check. Its
	// full name repeats the subsystem, as upstream's does:
	// attach_detach_controller_attachdetach_controller_forced_detaches.
	forcedDetaches = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Subsystem:      "attach_detach_controller",
			Name:           "attachdetach_controller_forced_detaches",
			Help:           "Number of times the A/D Controller performed a forced detach",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"reason"},
	)
)

var registerOnce sync.Once

// registerMetrics registers the state collector and the forced detach
// counter, once per process (the first controller's state is reported).
func registerMetrics(collector *stateCollector) {
	registerOnce.Do(func() {
		legacyregistry.CustomMustRegister(collector)
		legacyregistry.MustRegister(forcedDetaches)
	})
}

func recordForcedDetach(reason string) {
	forcedDetaches.WithLabelValues(reason).Inc()
}

// stateCollector computes the volume gauges at scrape time.
type stateCollector struct {
	metrics.BaseStableCollector

	podLister corelisters.PodLister
	specs     volumeSpecs
	plugins   *plugins.Manager
	asw       *cache.ActualStateOfWorld
	dsw       *cache.DesiredStateOfWorld
}

var _ metrics.StableCollector = &stateCollector{}

func newStateCollector(podLister corelisters.PodLister, specs volumeSpecs, pm *plugins.Manager, asw *cache.ActualStateOfWorld, dsw *cache.DesiredStateOfWorld) *stateCollector {
	return &stateCollector{podLister: podLister, specs: specs, plugins: pm, asw: asw, dsw: dsw}
}

func (c *stateCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- inUseVolumeMetricDesc
	ch <- totalVolumesMetricDesc
}

func (c *stateCollector) CollectWithStability(ch chan<- metrics.Metric) {
	for node, byPlugin := range c.volumesInUse() {
		for plugin, n := range byPlugin {
			ch <- metrics.NewLazyConstMetric(inUseVolumeMetricDesc, metrics.GaugeValue, float64(n), node, plugin)
		}
	}
	for state, byPlugin := range c.totalVolumes() {
		for plugin, n := range byPlugin {
			ch <- metrics.NewLazyConstMetric(totalVolumesMetricDesc, metrics.GaugeValue, float64(n), plugin, state)
		}
	}
}

// counts is outer label -> plugin -> count.
type counts map[string]map[string]int64

func (c counts) add(outer, plugin string) {
	if c[outer] == nil {
		c[outer] = map[string]int64{}
	}
	c[outer][plugin]++
}

// volumesInUse counts, per node, the volumes of scheduled pods that one
// of the controller's plugins handles (attachable or not).
func (c *stateCollector) volumesInUse() counts {
	logger := klog.TODO()
	pods, err := c.podLister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Get pod list failed")
		return nil
	}
	out := counts{}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" {
			continue
		}
		for i := range pod.Spec.Volumes {
			podVolume := &pod.Spec.Volumes[i]
			if nodeLocal(podVolume) {
				continue
			}
			spec, err := c.specs.forPodVolume(logger, *podVolume, pod)
			if err != nil {
				continue
			}
			p, err := c.plugins.FindBySpec(spec)
			if err != nil {
				continue
			}
			out.add(string(types.NodeName(pod.Spec.NodeName)), plugins.MetricPluginName(p.Name(), spec))
		}
	}
	return out
}

// totalVolumes counts the desired and actual volumes by plugin. Volumes
// known without a spec (from node status at start-up) are not counted.
func (c *stateCollector) totalVolumes() counts {
	out := counts{}
	add := func(state string, spec *plugins.Spec) {
		p, err := c.plugins.FindBySpec(spec)
		if err != nil {
			return
		}
		name := pluginNameNotAvailable
		if p != nil {
			name = plugins.MetricPluginName(p.Name(), spec)
		}
		out.add(state, name)
	}
	for _, v := range c.dsw.GetVolumesToAttach() {
		add("desired_state_of_world", v.Spec)
	}
	for _, v := range c.asw.GetAttachedVolumes() {
		add("actual_state_of_world", v.Spec)
	}
	return out
}
