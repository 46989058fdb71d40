package daemonset

import (
	"context"
	"reflect"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// Golden values recorded from upstream kube-controller-manager v1.37.2
// (daemonset controller only) against this same apiserver, for the
// DaemonSet below: revision name, labels, annotations and data, and the
// daemon pod's labels, affinity and tolerations.
const (
	goldenRevisionName = "golden-9899c796c"
	goldenHash         = "9899c796c"
	goldenRevisionData = `{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"golden"}},"spec":{"containers":[{"image":"nginx:1.27","imagePullPolicy":"IfNotPresent","name":"nginx","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"terminationGracePeriodSeconds":30}}}}`
)

var goldenTolerations = []v1.Toleration{
	{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
	{Key: "node.kubernetes.io/unreachable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
	{Key: "node.kubernetes.io/disk-pressure", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	{Key: "node.kubernetes.io/memory-pressure", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	{Key: "node.kubernetes.io/pid-pressure", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	{Key: "node.kubernetes.io/unschedulable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
}

// The same DaemonSet gives the same revision, byte for byte, and the same
// daemon pod as upstream: rollouts and `kubectl rollout undo` work across
// the two controllers.
func TestUpstreamGoldenRevisionAndPod(t *testing.T) {
	e := start(t, "ds-golden")
	node := e.addNode("n", nil)
	lbl := map[string]string{"app": "golden"}
	e.createDS(&apps.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "golden"},
		Spec: apps.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Image: "nginx:1.27"}}},
			},
		},
	})

	var pod *v1.Pod
	framework.Eventually(t, 60*time.Second, "the daemon pod on the test's node", func(ctx context.Context) (bool, error) {
		for _, p := range e.pods("app=golden") {
			if p.Spec.NodeName == node.Name {
				pod = p.DeepCopy()
				return true, nil
			}
		}
		return false, nil
	})

	rev, err := e.c.AppsV1().ControllerRevisions(e.ns).Get(e.ctx, goldenRevisionName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("revision %s (upstream's name): %v", goldenRevisionName, err)
	}
	if got := string(rev.Data.Raw); got != goldenRevisionData {
		t.Errorf("revision data\n got %s\nwant %s", got, goldenRevisionData)
	}
	if want := map[string]string{"app": "golden", "controller-revision-hash": goldenHash}; !reflect.DeepEqual(rev.Labels, want) {
		t.Errorf("revision labels = %v, want %v", rev.Labels, want)
	}
	if want := map[string]string{"deprecated.daemonset.template.generation": "1"}; !reflect.DeepEqual(rev.Annotations, want) {
		t.Errorf("revision annotations = %v, want %v", rev.Annotations, want)
	}
	if rev.Revision != 1 {
		t.Errorf("revision = %d, want 1", rev.Revision)
	}

	if want := map[string]string{"app": "golden", "controller-revision-hash": goldenHash, "pod-template-generation": "1"}; !reflect.DeepEqual(pod.Labels, want) {
		t.Errorf("pod labels = %v, want %v", pod.Labels, want)
	}
	if pod.GenerateName != "golden-" {
		t.Errorf("generateName = %q", pod.GenerateName)
	}
	if !reflect.DeepEqual(pod.Spec.Tolerations, goldenTolerations) {
		t.Errorf("tolerations = %+v\nwant %+v", pod.Spec.Tolerations, goldenTolerations)
	}
	wantAffinity := &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node.Name}}}}},
	}}}
	if !reflect.DeepEqual(pod.Spec.Affinity, wantAffinity) {
		t.Errorf("affinity = %+v", pod.Spec.Affinity)
	}
}
