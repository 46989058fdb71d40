package daemon

import (
	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/daemon/util"
)

// placement holds what is needed to decide, node by node, whether a
// DaemonSet's pod belongs there. It depends only on the DaemonSet, so a
// sync builds it once and checks every node against it.
type placement struct {
	ds          *apps.DaemonSet
	tolerations []v1.Toleration
	affinity    nodeaffinity.RequiredNodeAffinity
	// comparisonOperators enables Lt/Gt tolerations.
	comparisonOperators bool
}

func newPlacement(ds *apps.DaemonSet, comparisonOperators bool) *placement {
	return &placement{
		ds:                  ds,
		tolerations:         daemonPodTolerations(ds),
		affinity:            nodeaffinity.NewRequiredNodeAffinity(ds.Spec.Template.Spec.NodeSelector, ds.Spec.Template.Spec.Affinity),
		comparisonOperators: comparisonOperators,
	}
}

// daemonPodTolerations are the tolerations the DaemonSet's pods carry:
// the template's plus the daemon defaults. The template is not modified.
func daemonPodTolerations(ds *apps.DaemonSet) []v1.Toleration {
	spec := ds.Spec.Template.Spec
	util.AddOrUpdateDaemonPodTolerations(&spec)
	return spec.Tolerations
}

func isNoExecute(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }

func isNoScheduleOrNoExecute(t *v1.Taint) bool {
	return t.Effect == v1.TaintEffectNoExecute || t.Effect == v1.TaintEffectNoSchedule
}

// check returns shouldRun (a pod should be created on node if there is
// none) and shouldContinueRunning (an existing pod may stay). They differ
// only for a node with an untolerated NoSchedule but no untolerated
// NoExecute taint: nothing new goes there, existing pods stay.
func (p *placement) check(logger klog.Logger, node *v1.Node) (shouldRun, shouldContinueRunning bool) {
	// A template naming a node only ever runs there.
	if name := p.ds.Spec.Template.Spec.NodeName; name != "" && name != node.Name {
		return false, false
	}
	// Bad affinity terms count as not matching, as upstream does.
	if fits, _ := p.affinity.Match(node); !fits {
		return false, false
	}
	if _, untolerated := v1helper.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, p.tolerations, isNoScheduleOrNoExecute, p.comparisonOperators); !untolerated {
		return true, true
	}
	_, evicting := v1helper.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, p.tolerations, isNoExecute, p.comparisonOperators)
	return false, !evicting
}

// NodeShouldRunDaemonPod reports whether a pod of ds should be created on
// node (shouldRun) and whether one already there may keep running
// (shouldContinueRunning). comparisonOperators is the
// TaintTolerationComparisonOperators feature.
func NodeShouldRunDaemonPod(logger klog.Logger, node *v1.Node, ds *apps.DaemonSet, comparisonOperators bool) (shouldRun, shouldContinueRunning bool) {
	return newPlacement(ds, comparisonOperators).check(logger, node)
}

// NewPod returns the pod ds would run on nodeName, with the daemon
// tolerations, as used to simulate scheduling.
func NewPod(ds *apps.DaemonSet, nodeName string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: *ds.Spec.Template.ObjectMeta.DeepCopy(), Spec: *ds.Spec.Template.Spec.DeepCopy()}
	pod.Namespace = ds.Namespace
	pod.Spec.NodeName = nodeName
	util.AddOrUpdateDaemonPodTolerations(&pod.Spec)
	return pod
}
