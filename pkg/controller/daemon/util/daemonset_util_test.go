package util

import (
	"reflect"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestGetTemplateGeneration(t *testing.T) {
	ds := &apps.DaemonSet{}
	if g, err := GetTemplateGeneration(ds); g != nil || err != nil {
		t.Errorf("no annotation: %v, %v", g, err)
	}
	ds.Annotations = map[string]string{apps.DeprecatedTemplateGeneration: "7"}
	if g, err := GetTemplateGeneration(ds); err != nil || g == nil || *g != 7 {
		t.Errorf("7: %v, %v", g, err)
	}
	ds.Annotations[apps.DeprecatedTemplateGeneration] = "x"
	if g, err := GetTemplateGeneration(ds); g != nil || err == nil {
		t.Errorf("bad value: %v, %v", g, err)
	}
}

func keysOf(ts []v1.Toleration) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Key+":"+string(t.Effect))
	}
	return out
}

func TestAddOrUpdateDaemonPodTolerations(t *testing.T) {
	defaults := []string{
		"node.kubernetes.io/not-ready:NoExecute",
		"node.kubernetes.io/unreachable:NoExecute",
		"node.kubernetes.io/disk-pressure:NoSchedule",
		"node.kubernetes.io/memory-pressure:NoSchedule",
		"node.kubernetes.io/pid-pressure:NoSchedule",
		"node.kubernetes.io/unschedulable:NoSchedule",
	}
	spec := v1.PodSpec{}
	AddOrUpdateDaemonPodTolerations(&spec)
	if got := keysOf(spec.Tolerations); !reflect.DeepEqual(got, defaults) {
		t.Errorf("tolerations = %v, want %v", got, defaults)
	}
	for _, tol := range spec.Tolerations {
		if tol.Operator != v1.TolerationOpExists || tol.TolerationSeconds != nil {
			t.Errorf("toleration %+v must be Exists without tolerationSeconds", tol)
		}
	}

	// Idempotent.
	AddOrUpdateDaemonPodTolerations(&spec)
	if len(spec.Tolerations) != len(defaults) {
		t.Errorf("second call added tolerations: %v", keysOf(spec.Tolerations))
	}

	hostNet := v1.PodSpec{HostNetwork: true}
	AddOrUpdateDaemonPodTolerations(&hostNet)
	if got := keysOf(hostNet.Tolerations); len(got) != 7 || got[6] != "node.kubernetes.io/network-unavailable:NoSchedule" {
		t.Errorf("host network tolerations = %v", got)
	}

	// A user toleration with the same key/operator/effect is replaced (its
	// tolerationSeconds dropped); others are kept in place.
	user := []v1.Toleration{
		{Key: "mine", Operator: v1.TolerationOpExists},
		{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
	}
	withUser := v1.PodSpec{Tolerations: user}
	AddOrUpdateDaemonPodTolerations(&withUser)
	if len(withUser.Tolerations) != 7 || withUser.Tolerations[0].Key != "mine" || withUser.Tolerations[1].TolerationSeconds != nil {
		t.Errorf("tolerations = %+v", withUser.Tolerations)
	}
	if user[1].TolerationSeconds == nil {
		t.Error("the caller's toleration slice was modified")
	}
}

func TestCreatePodTemplate(t *testing.T) {
	tmpl := v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}}}
	got := CreatePodTemplate(tmpl, ptr.To[int64](3), "abc")
	want := map[string]string{"app": "a", "pod-template-generation": "3", "controller-revision-hash": "abc"}
	if !reflect.DeepEqual(got.Labels, want) {
		t.Errorf("labels = %v, want %v", got.Labels, want)
	}
	if len(got.Spec.Tolerations) != 6 {
		t.Errorf("tolerations = %v", got.Spec.Tolerations)
	}
	if len(tmpl.Labels) != 1 || tmpl.Spec.Tolerations != nil {
		t.Error("input template modified")
	}
	bare := CreatePodTemplate(v1.PodTemplateSpec{}, nil, "")
	if len(bare.Labels) != 0 || bare.Labels == nil {
		t.Errorf("labels = %#v, want an empty map", bare.Labels)
	}
}

func TestSurgeAndUnavailableCounts(t *testing.T) {
	rolling := func(unavail, surge *intstr.IntOrString) *apps.DaemonSet {
		return &apps.DaemonSet{Spec: apps.DaemonSetSpec{UpdateStrategy: apps.DaemonSetUpdateStrategy{
			Type:          apps.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &apps.RollingUpdateDaemonSet{MaxUnavailable: unavail, MaxSurge: surge},
		}}}
	}
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(i int32) *intstr.IntOrString { v := intstr.FromInt32(i); return &v }
	tests := []struct {
		name         string
		ds           *apps.DaemonSet
		n            int
		surge, unav  int
		allowsSurge  bool
		wantErrorish bool
	}{
		{name: "OnDelete", ds: &apps.DaemonSet{Spec: apps.DaemonSetSpec{UpdateStrategy: apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}}}, n: 10},
		{name: "no params", ds: &apps.DaemonSet{Spec: apps.DaemonSetSpec{UpdateStrategy: apps.DaemonSetUpdateStrategy{Type: apps.RollingUpdateDaemonSetStrategyType}}}, n: 10},
		{name: "numbers", ds: rolling(num(2), num(3)), n: 10, surge: 3, unav: 2, allowsSurge: true},
		{name: "percent rounds up", ds: rolling(pct("25%"), pct("15%")), n: 10, surge: 2, unav: 3, allowsSurge: true},
		{name: "surge unset", ds: rolling(num(1), nil), n: 10, unav: 1},
		{name: "bad percent", ds: rolling(pct("x%"), pct("y%")), n: 10, wantErrorish: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err1 := SurgeCount(tc.ds, tc.n)
			u, err2 := UnavailableCount(tc.ds, tc.n)
			if tc.wantErrorish {
				if err1 == nil || err2 == nil {
					t.Errorf("errors = %v, %v; want both", err1, err2)
				}
				return
			}
			if err1 != nil || err2 != nil || s != tc.surge || u != tc.unav {
				t.Errorf("surge %d (%v), unavailable %d (%v); want %d, %d", s, err1, u, err2, tc.surge, tc.unav)
			}
			if got := AllowsSurge(tc.ds); got != tc.allowsSurge {
				t.Errorf("AllowsSurge = %v", got)
			}
		})
	}
}

func TestIsPodUpdated(t *testing.T) {
	pod := func(lbls map[string]string) *v1.Pod { return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: lbls}} }
	gen := ptr.To[int64](2)
	tests := []struct {
		name string
		pod  *v1.Pod
		hash string
		gen  *int64
		want bool
	}{
		{"hash matches", pod(map[string]string{"controller-revision-hash": "h"}), "h", nil, true},
		{"hash differs", pod(map[string]string{"controller-revision-hash": "x"}), "h", nil, false},
		{"generation matches", pod(map[string]string{"pod-template-generation": "2"}), "h", gen, true},
		{"generation differs", pod(map[string]string{"pod-template-generation": "1"}), "h", gen, false},
		{"empty hash never matches", pod(map[string]string{}), "", nil, false},
	}
	for _, tc := range tests {
		if got := IsPodUpdated(tc.pod, tc.hash, tc.gen); got != tc.want {
			t.Errorf("%s: got %v", tc.name, got)
		}
	}
}

func TestReplaceDaemonSetPodNodeNameNodeAffinity(t *testing.T) {
	pin := &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n1"}}},
	}}}
	preferred := []v1.PreferredSchedulingTerm{{Weight: 5, Preference: v1.NodeSelectorTerm{
		MatchExpressions: []v1.NodeSelectorRequirement{{Key: "a", Operator: v1.NodeSelectorOpExists}},
	}}}
	podAffinity := &v1.PodAffinity{}
	tests := []struct {
		name string
		in   *v1.Affinity
		want *v1.Affinity
	}{
		{"nil", nil, &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: pin}}},
		{"pod affinity only", &v1.Affinity{PodAffinity: podAffinity},
			&v1.Affinity{PodAffinity: podAffinity, NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: pin}}},
		{"preferred only", &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: preferred}},
			&v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: pin, PreferredDuringSchedulingIgnoredDuringExecution: preferred}}},
		{"required replaced", &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{
				{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a"}}}},
				{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n2"}}}},
			}},
			PreferredDuringSchedulingIgnoredDuringExecution: preferred,
		}}, &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: pin, PreferredDuringSchedulingIgnoredDuringExecution: preferred}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReplaceDaemonSetPodNodeNameNodeAffinity(tc.in, "n1"); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestGetTargetNodeName(t *testing.T) {
	bound := &v1.Pod{Spec: v1.PodSpec{NodeName: "n"}}
	if n, err := GetTargetNodeName(bound); n != "n" || err != nil {
		t.Errorf("bound: %q, %v", n, err)
	}
	pinned := &v1.Pod{Spec: v1.PodSpec{Affinity: ReplaceDaemonSetPodNodeNameNodeAffinity(nil, "p")}}
	if n, err := GetTargetNodeName(pinned); n != "p" || err != nil {
		t.Errorf("pinned: %q, %v", n, err)
	}
	for name, pod := range map[string]*v1.Pod{
		"no affinity": {},
		"no terms":    {Spec: v1.PodSpec{Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{}}}}},
		"two values": {Spec: v1.PodSpec{Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}},
		}}}}},
		"labels only": {Spec: v1.PodSpec{Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "a", Operator: v1.NodeSelectorOpExists}}}},
		}}}}},
	} {
		if n, err := GetTargetNodeName(pod); err == nil {
			t.Errorf("%s: got %q, want an error", name, n)
		}
	}
}
