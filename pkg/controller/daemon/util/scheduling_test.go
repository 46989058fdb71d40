package util

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

func req(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirement {
	return v1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func required(terms ...v1.NodeSelectorTerm) *v1.Affinity {
	return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms}}}
}

func exprs(rs ...v1.NodeSelectorRequirement) v1.NodeSelectorTerm {
	return v1.NodeSelectorTerm{MatchExpressions: rs}
}

func TestRequiredNodeAffinity(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a", "cpus": "8"}}}
	tests := []struct {
		name     string
		selector map[string]string
		affinity *v1.Affinity
		want     bool
		wantErr  bool
	}{
		{name: "nothing", want: true},
		{name: "selector matches", selector: map[string]string{"zone": "a"}, want: true},
		{name: "selector does not match", selector: map[string]string{"zone": "b"}},
		{name: "selector and affinity both needed", selector: map[string]string{"zone": "a"}, affinity: required(exprs(req("zone", v1.NodeSelectorOpIn, "b")))},
		{name: "preferred only is no constraint", affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{}}, want: true},
		{name: "In", affinity: required(exprs(req("zone", v1.NodeSelectorOpIn, "a", "b"))), want: true},
		{name: "NotIn", affinity: required(exprs(req("zone", v1.NodeSelectorOpNotIn, "a"))), want: false},
		{name: "Exists", affinity: required(exprs(req("cpus", v1.NodeSelectorOpExists))), want: true},
		{name: "DoesNotExist", affinity: required(exprs(req("gpu", v1.NodeSelectorOpDoesNotExist))), want: true},
		{name: "Gt", affinity: required(exprs(req("cpus", v1.NodeSelectorOpGt, "4"))), want: true},
		{name: "Lt", affinity: required(exprs(req("cpus", v1.NodeSelectorOpLt, "4"))), want: false},
		{name: "expressions ANDed", affinity: required(exprs(req("zone", v1.NodeSelectorOpIn, "a"), req("gpu", v1.NodeSelectorOpExists)))},
		{name: "terms ORed", affinity: required(exprs(req("gpu", v1.NodeSelectorOpExists)), exprs(req("zone", v1.NodeSelectorOpIn, "a"))), want: true},
		{name: "no terms matches nothing", affinity: required()},
		{name: "empty term matches nothing", affinity: required(v1.NodeSelectorTerm{})},
		{name: "field In name", affinity: required(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{req("metadata.name", v1.NodeSelectorOpIn, "n1")}}), want: true},
		{name: "field In other name", affinity: required(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{req("metadata.name", v1.NodeSelectorOpIn, "n2")}})},
		{name: "field NotIn other name", affinity: required(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{req("metadata.name", v1.NodeSelectorOpNotIn, "n2")}}), want: true},
		{name: "fields and labels ANDed", affinity: required(v1.NodeSelectorTerm{
			MatchExpressions: []v1.NodeSelectorRequirement{req("zone", v1.NodeSelectorOpIn, "b")},
			MatchFields:      []v1.NodeSelectorRequirement{req("metadata.name", v1.NodeSelectorOpIn, "n1")},
		})},
		{name: "bad term alone is an error", affinity: required(exprs(req("cpus", v1.NodeSelectorOpGt, "many"))), wantErr: true},
		{name: "bad field term is an error", affinity: required(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{req("metadata.name", v1.NodeSelectorOpExists)}}), wantErr: true},
		{name: "two values in a field term is an error", affinity: required(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{req("metadata.name", v1.NodeSelectorOpIn, "n1", "n2")}}), wantErr: true},
		{name: "bad term ignored when another matches", affinity: required(exprs(req("zone", "Bogus", "a")), exprs(req("zone", v1.NodeSelectorOpIn, "a"))), want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NewRequiredNodeAffinity(tc.selector, tc.affinity).Match(node)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("Match = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestFindMatchingUntoleratedTaint(t *testing.T) {
	logger := klog.Background()
	noSched := v1.Taint{Key: "a", Value: "1", Effect: v1.TaintEffectNoSchedule}
	noExec := v1.Taint{Key: "b", Value: "2", Effect: v1.TaintEffectNoExecute}
	prefer := v1.Taint{Key: "c", Effect: v1.TaintEffectPreferNoSchedule}
	numeric := v1.Taint{Key: "level", Value: "5", Effect: v1.TaintEffectNoSchedule}
	onlyNoExec := func(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }
	tests := []struct {
		name        string
		taints      []v1.Taint
		tolerations []v1.Toleration
		filter      TaintFilter
		cmpOps      bool
		want        bool
		wantKey     string
	}{
		{name: "no taints", want: false},
		{name: "untolerated", taints: []v1.Taint{noSched}, want: true, wantKey: "a"},
		{name: "filter skips", taints: []v1.Taint{noSched}, filter: onlyNoExec},
		{name: "filter keeps", taints: []v1.Taint{noSched, noExec}, filter: onlyNoExec, want: true, wantKey: "b"},
		{name: "Equal toleration", taints: []v1.Taint{noSched}, tolerations: []v1.Toleration{{Key: "a", Operator: v1.TolerationOpEqual, Value: "1"}}},
		{name: "empty operator means Equal", taints: []v1.Taint{noSched}, tolerations: []v1.Toleration{{Key: "a", Value: "2"}}, want: true, wantKey: "a"},
		{name: "Exists any value", taints: []v1.Taint{noSched}, tolerations: []v1.Toleration{{Key: "a", Operator: v1.TolerationOpExists}}},
		{name: "effect must match", taints: []v1.Taint{noSched}, tolerations: []v1.Toleration{{Key: "a", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}, want: true, wantKey: "a"},
		{name: "empty key Exists tolerates all", taints: []v1.Taint{noSched, noExec, prefer}, tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}}},
		{name: "Gt off by default", taints: []v1.Taint{numeric}, tolerations: []v1.Toleration{{Key: "level", Operator: v1.TolerationOpGt, Value: "3"}}, want: true, wantKey: "level"},
		{name: "Gt with the feature", taints: []v1.Taint{numeric}, tolerations: []v1.Toleration{{Key: "level", Operator: v1.TolerationOpGt, Value: "3"}}, cmpOps: true},
		{name: "Lt with the feature", taints: []v1.Taint{numeric}, tolerations: []v1.Toleration{{Key: "level", Operator: v1.TolerationOpLt, Value: "3"}}, cmpOps: true, want: true, wantKey: "level"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			taint, got := FindMatchingUntoleratedTaint(logger, tc.taints, tc.tolerations, tc.filter, tc.cmpOps)
			if got != tc.want || taint.Key != tc.wantKey {
				t.Errorf("got %v (%q), want %v (%q)", got, taint.Key, tc.want, tc.wantKey)
			}
		})
	}
}
