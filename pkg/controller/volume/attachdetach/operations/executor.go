package operations

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/cache"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
)

// Event reasons on pods, shared with the kubelet.
const (
	FailedAttachVolume     = "FailedAttachVolume"
	SuccessfulAttachVolume = "SuccessfulAttachVolume"
)

// unknownPluginName labels the metrics of an attach whose plugin could not
// be found.
const unknownPluginName = "UnknownAttachableVolumePlugin"

// Executor starts attach, detach and verify operations in the background.
type Executor struct {
	client   clientset.Interface
	plugins  *plugins.Manager
	recorder record.EventRecorder
	pending  pending
}

// NewExecutor returns an executor; it registers the volume operation
// metrics.
func NewExecutor(client clientset.Interface, pm *plugins.Manager, recorder record.EventRecorder) *Executor {
	RegisterMetrics()
	return &Executor{client: client, plugins: pm, recorder: recorder, pending: pending{now: time.Now}}
}

// key scopes an operation to the volume, or to the volume on one node when
// the volume may be attached to several nodes at once.
func key(volume v1.UniqueVolumeName, node types.NodeName, spec *plugins.Spec) opKey {
	if plugins.IsMultiAttachAllowed(spec) {
		return opKey{volume: volume, node: node}
	}
	return opKey{volume: volume}
}

// IsOperationPending reports whether an operation on the volume runs; with
// a node, on the volume on that node.
func (e *Executor) IsOperationPending(volume v1.UniqueVolumeName, node types.NodeName) bool {
	return e.pending.isPending(opKey{volume: volume, node: node})
}

// IsOperationSafeToRetry reports whether operation may start now.
func (e *Executor) IsOperationSafeToRetry(volume v1.UniqueVolumeName, node types.NodeName, operation string) bool {
	return e.pending.safeToRetry(opKey{volume: volume, node: node}, operation)
}

// Wait blocks until every started operation has returned.
func (e *Executor) Wait() { e.pending.wg.Wait() }

func logFailure(logger klog.Logger, k opKey) func(error) {
	return func(err error) {
		logger.Error(err, "Operation failed; retrying after backoff", "operation", k.String())
	}
}

// AttachVolume attaches v to its node, records the result in asw and
// tells the pods by events.
func (e *Executor) AttachVolume(ctx context.Context, v cache.VolumeToAttach, asw *cache.ActualStateOfWorld) error {
	logger := klog.FromContext(ctx)
	metricPlugin := unknownPluginName
	if p, err := e.plugins.FindAttachableBySpec(v.Spec); err == nil && p != nil {
		metricPlugin = p.Name()
	}
	metricPlugin = plugins.MetricPluginName(metricPlugin, v.Spec)

	k := key(v.VolumeName, v.NodeName, v.Spec)
	return e.pending.start(k, AttachOperationName, func() error {
		start := time.Now()
		eventMsg, err := e.attach(ctx, logger, v, asw)
		observe(metricPlugin, AttachOperationName, start, err, v.Spec != nil && v.Spec.Migrated)
		// A failure caused by shutting down is no news for the pods.
		if eventMsg != "" && ctx.Err() == nil {
			for _, pod := range v.ScheduledPods {
				e.recorder.Eventf(pod, v1.EventTypeWarning, FailedAttachVolume, "%s", eventMsg)
			}
		}
		return err
	}, logFailure(logger, k))
}

// attach returns, on failure, the user-facing event message and the
// detailed error.
func (e *Executor) attach(ctx context.Context, logger klog.Logger, v cache.VolumeToAttach, asw *cache.ActualStateOfWorld) (string, error) {
	fail := func(prefix string, err error) (string, error) {
		suffix := cache.ErrSuffix(err)
		return v.Message(prefix, suffix), fmt.Errorf("%s", v.DetailedMessage(prefix, suffix))
	}
	p, err := e.plugins.FindAttachableBySpec(v.Spec)
	if err != nil || p == nil {
		return fail("AttachVolume.FindAttachablePluginBySpec failed", err)
	}
	devicePath, err := p.Attach(ctx, v.Spec, v.NodeName)
	if err != nil {
		if uerr := asw.MarkVolumeAsUncertain(logger, v.VolumeName, v.Spec, v.NodeName); uerr != nil {
			logger.Error(uerr, "AttachVolume.MarkVolumeAsUncertain failed to add the volume to actual state", "volumeName", v.VolumeName)
		}
		return fail("AttachVolume.Attach failed", err)
	}
	if err := asw.MarkVolumeAsAttached(logger, v.VolumeName, v.Spec, v.NodeName, devicePath); err != nil {
		return fail("AttachVolume.MarkVolumeAsAttached failed", err)
	}
	msg := v.Message("AttachVolume.Attach succeeded", "")
	for _, pod := range v.ScheduledPods {
		e.recorder.Eventf(pod, v1.EventTypeNormal, SuccessfulAttachVolume, "%s", msg)
	}
	logger.Info(v.DetailedMessage("AttachVolume.Attach succeeded", ""))
	return "", nil
}

// DetachVolume detaches v from its node and records it in asw. With
// verifySafe, the node is read from the API server first and the detach
// fails while it still lists the volume in use. Errors finding the plugin
// are returned directly.
func (e *Executor) DetachVolume(ctx context.Context, v cache.AttachedVolume, verifySafe bool, asw *cache.ActualStateOfWorld) error {
	logger := klog.FromContext(ctx)
	var p plugins.Plugin
	var volumeName string
	var err error
	if v.Spec != nil {
		p, err = e.plugins.FindDetachableBySpec(v.Spec)
		if err != nil || p == nil {
			return fmt.Errorf("%s", v.DetailedMessage("DetachVolume.findDetachablePluginBySpec failed", cache.ErrSuffix(err)))
		}
		if volumeName, err = p.VolumeName(v.Spec); err != nil {
			return fmt.Errorf("%s", v.DetailedMessage("DetachVolume.GetVolumeName failed", cache.ErrSuffix(err)))
		}
	} else {
		// Known only from node status at start-up: the unique name is all
		// there is.
		var pluginName string
		pluginName, volumeName, err = plugins.SplitUniqueName(v.VolumeName)
		if err != nil {
			return fmt.Errorf("%s", v.DetailedMessage("DetachVolume.SplitUniqueName failed", cache.ErrSuffix(err)))
		}
		if p, err = e.plugins.FindByName(pluginName); err != nil {
			return fmt.Errorf("%s", v.DetailedMessage("DetachVolume.FindAttachablePluginByName failed", cache.ErrSuffix(err)))
		}
	}
	metricPlugin := plugins.MetricPluginName(p.Name(), v.Spec)

	k := key(v.VolumeName, v.NodeName, v.Spec)
	return e.pending.start(k, DetachOperationName, func() error {
		start := time.Now()
		var err error
		if verifySafe {
			err = e.verifySafeToDetach(ctx, logger, v)
		}
		if err == nil {
			err = p.Detach(ctx, volumeName, v.NodeName)
		}
		if err != nil {
			// It may still be attached; an attach must succeed before the
			// node lists it again.
			if uerr := asw.MarkVolumeAsUncertain(logger, v.VolumeName, v.Spec, v.NodeName); uerr != nil {
				logger.Error(uerr, "DetachVolume.MarkVolumeAsUncertain failed to add the volume to actual state after detach error", "volumeName", v.VolumeName)
			}
			err = fmt.Errorf("%s", v.DetailedMessage("DetachVolume.Detach failed", cache.ErrSuffix(err)))
		} else {
			logger.Info(v.DetailedMessage("DetachVolume.Detach succeeded", ""))
			asw.MarkVolumeAsDetached(v.VolumeName, v.NodeName)
		}
		observe(metricPlugin, DetachOperationName, start, err, v.Spec != nil && v.Spec.Migrated)
		return err
	}, logFailure(logger, k))
}

// verifySafeToDetach re-reads the node from the API server (the cache may
// lag behind the kubelet): a volume still in volumesInUse must stay.
func (e *Executor) verifySafeToDetach(ctx context.Context, logger klog.Logger, v cache.AttachedVolume) error {
	node, err := e.client.CoreV1().Nodes().Get(ctx, string(v.NodeName), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		logger.Info(v.DetailedMessage("Node not found on API server. DetachVolume will skip safe to detach check", ""))
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s", v.DetailedMessage("DetachVolume failed fetching node from API server", cache.ErrSuffix(err)))
	}
	if slices.Contains(node.Status.VolumesInUse, v.VolumeName) {
		return fmt.Errorf("%s", v.DetailedMessage("DetachVolume failed", cache.ErrSuffix(fmt.Errorf("volume is still in use by node, according to Node status"))))
	}
	logger.Info(v.DetailedMessage("Verified volume is safe to detach", ""))
	return nil
}

// VerifyVolumesAreAttached asks each plugin, node by node, whether the
// volumes are still attached, and forgets those that are not. Volumes
// without a spec are skipped.
func (e *Executor) VerifyVolumesAreAttached(ctx context.Context, perNode map[types.NodeName][]cache.AttachedVolume, asw *cache.ActualStateOfWorld) {
	logger := klog.FromContext(ctx)
	for node, vols := range perNode {
		byPlugin := map[string][]*plugins.Spec{}
		names := map[*plugins.Spec]v1.UniqueVolumeName{}
		for _, v := range vols {
			if v.Spec == nil {
				logger.Error(nil, "VerifyVolumesAreAttached: nil spec for volume", "volumeName", v.VolumeName)
				continue
			}
			p, err := e.plugins.FindBySpec(v.Spec)
			if err != nil {
				logger.Error(err, v.DetailedMessage("VolumesAreAttached.FindPluginBySpec failed", ""))
				continue
			}
			byPlugin[p.Name()] = append(byPlugin[p.Name()], v.Spec)
			names[v.Spec] = v.VolumeName
		}
		_ = e.pending.start(opKey{}, VerifyOperationName, func() error {
			start := time.Now()
			for pluginName, specs := range byPlugin {
				p, err := e.plugins.FindByName(pluginName)
				if err != nil {
					logger.Error(err, "VolumesAreAttached failed to find plugin", "plugin", pluginName)
					continue
				}
				attached, err := p.VolumesAreAttached(ctx, specs, node)
				if err != nil {
					logger.Error(err, "VolumesAreAttached failed", "node", klog.KRef("", string(node)))
					continue
				}
				for spec, ok := range attached {
					if !ok {
						asw.MarkVolumeAsDetached(names[spec], node)
						logger.V(1).Info("VerifyVolumesAreAttached determined volume is no longer attached to node, therefore it was marked as detached",
							"volumeName", names[spec], "specName", spec.Name(), "node", klog.KRef("", string(node)))
					}
				}
			}
			observe("<n/a>", VerifyOperationName, start, nil, false)
			return nil
		}, nil)
	}
}
