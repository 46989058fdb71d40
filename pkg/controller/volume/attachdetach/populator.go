package attachdetach

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/cache"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
)

// populator repairs the desired state behind the event handlers' back:
// every loopPeriod it drops pods that are gone, replaced or terminated and
// volumes that stopped being attachable (a CSIDriver switched to
// attachRequired: false); every listPodsRetryTime it re-adds every active
// pod.
type populator struct {
	loopPeriod        time.Duration
	listPodsRetryTime time.Duration
	podLister         corelisters.PodLister
	dsw               *cache.DesiredStateOfWorld
	plugins           *plugins.Manager
	addPod            func(logger klog.Logger, pod *v1.Pod, add bool)

	// timeOfLastListPods is only touched by the populator goroutine.
	timeOfLastListPods time.Time
}

func (p *populator) run(ctx context.Context) {
	wait.UntilWithContext(ctx, p.loop, p.loopPeriod)
}

func (p *populator) loop(ctx context.Context) {
	logger := klog.FromContext(ctx)
	p.removeDeletedPods(logger)
	if time.Since(p.timeOfLastListPods) < p.listPodsRetryTime {
		logger.V(5).Info("Skipping findAndAddActivePods(). Not permitted until the retry time is reached",
			"retryTime", p.timeOfLastListPods.Add(p.listPodsRetryTime), "retryDuration", p.listPodsRetryTime)
		return
	}
	p.addActivePods(logger)
}

func (p *populator) removeDeletedPods(logger klog.Logger) {
	for _, want := range p.dsw.GetPodsToAdd() {
		pod, err := p.podLister.Pods(want.Pod.Namespace).Get(want.Pod.Name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			logger.Error(err, "podLister Get failed for pod", "pod", klog.KObj(want.Pod), "podUID", want.Pod.UID)
			continue
		case wantsVolumes(pod) && pod.UID == want.Pod.UID:
			logger.V(10).Info("Verified podfrom dsw exists in pod informer", "pod", klog.KObj(pod), "podUID", pod.UID)
			continue
		}
		logger.V(1).Info("Removing pod from dsw because it does not exist in pod informer", "pod", klog.KObj(want.Pod), "podUID", want.Pod.UID)
		p.dsw.DeletePod(want.Pod.UID, want.VolumeName, want.NodeName)
	}

	for _, v := range p.dsw.GetVolumesToAttach() {
		if p.plugins.IsAttachable(v.Spec) {
			continue
		}
		logger.Info("Volume changes from attachable to non-attachable", "volumeName", v.VolumeName)
		for _, pod := range v.ScheduledPods {
			p.dsw.DeletePod(pod.UID, v.VolumeName, v.NodeName)
			logger.V(4).Info("Removing podUID and volume on node from desired state of world because of the change of volume attachability",
				"node", klog.KRef("", string(v.NodeName)), "podUID", pod.UID, "volumeName", v.VolumeName)
		}
	}
}

func (p *populator) addActivePods(logger klog.Logger) {
	pods, err := p.podLister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "PodLister List failed")
		return
	}
	p.timeOfLastListPods = time.Now()
	for _, pod := range pods {
		if isPodTerminated(pod) {
			continue
		}
		p.addPod(logger, pod, true)
	}
}
