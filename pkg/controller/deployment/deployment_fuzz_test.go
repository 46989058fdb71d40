package deployment

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	apps "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// FuzzSelectorWithLabel: the selector a new ReplicaSet gets (the
// Deployment's plus the pod-template-hash label) selects exactly the label
// sets the Deployment's selects that also carry the hash, and building it
// leaves the Deployment's selector untouched.
func FuzzSelectorWithLabel(f *testing.F) {
	f.Add("app", "web", "tier", "In", "a,b", "5fc9f4bf66", "app=web,tier=a,pod-template-hash=5fc9f4bf66")
	f.Add("", "", "tier", "NotIn", "a", "x", "tier=b")
	f.Add("app", "web", "pod-template-hash", "Exists", "", "h", "pod-template-hash=h,app=web")
	f.Add("pod-template-hash", "old", "", "", "", "new", "pod-template-hash=new")
	f.Add("a/b/c", "-", "k", "DoesNotExist", "", "", "")
	f.Add("app", "web", "k", "Gt", "1,2", "h", "k=3")
	f.Add("app", "web", "k", "Bogus", "", "h", "k=3")
	f.Fuzz(func(t *testing.T, mk, mv, ek, op, vals, hash, set string) {
		sel := &metav1.LabelSelector{}
		if mk != "" {
			sel.MatchLabels = map[string]string{mk: mv}
		}
		if ek != "" {
			req := metav1.LabelSelectorRequirement{Key: ek, Operator: metav1.LabelSelectorOperator(op)}
			if vals != "" {
				req.Values = strings.Split(vals, ",")
			}
			sel.MatchExpressions = []metav1.LabelSelectorRequirement{req}
		}
		before := sel.DeepCopy()
		got := selectorWithLabel(sel, apps.DefaultDeploymentUniqueLabelKey, hash)
		if !reflect.DeepEqual(sel, before) {
			t.Fatalf("selector changed: %+v -> %+v", before, sel)
		}
		orig, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return
		}
		withHash, err := metav1.LabelSelectorAsSelector(got)
		if err != nil {
			// Only the hash label may make it invalid.
			if _, verr := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: map[string]string{apps.DefaultDeploymentUniqueLabelKey: hash}}); verr == nil {
				t.Fatalf("valid selector %+v with valid hash %q gave invalid %+v: %v", sel, hash, got, err)
			}
			return
		}
		ls, err := labels.ConvertSelectorToLabelsMap(set)
		if err != nil {
			return
		}
		if mk == apps.DefaultDeploymentUniqueLabelKey {
			// The hash replaces a MatchLabels entry of the same key.
			delete(before.MatchLabels, mk)
			if orig, err = metav1.LabelSelectorAsSelector(before); err != nil {
				return
			}
		}
		want := orig.Matches(ls) && ls.Has(apps.DefaultDeploymentUniqueLabelKey) && ls.Get(apps.DefaultDeploymentUniqueLabelKey) == hash
		if withHash.Matches(ls) != want {
			t.Fatalf("selector %+v with hash %q: matches(%v)=%v, want %v", sel, hash, ls, withHash.Matches(ls), want)
		}
	})
}

// FuzzSyncDecodedDeployment decodes arbitrary bytes as the informer decodes
// a watch event's object, and syncs what decodes: the controller must
// return or error, never panic, whatever the object holds.
func FuzzSyncDecodedDeployment(f *testing.F) {
	seed := func(mutate func(d *apps.Deployment)) {
		d := newDeployment(3)
		mutate(d)
		b, err := json.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(func(*apps.Deployment) {})
	seed(func(d *apps.Deployment) { d.Spec.Replicas = nil })
	seed(func(d *apps.Deployment) { d.Spec.Replicas = ptr.To[int32](-5) })
	seed(func(d *apps.Deployment) { d.Spec.Selector = nil })
	seed(func(d *apps.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} })
	seed(func(d *apps.Deployment) {
		d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Bogus"}}
	})
	seed(func(d *apps.Deployment) { d.Spec.Paused = true; d.Spec.ProgressDeadlineSeconds = ptr.To[int32](-1) })
	seed(func(d *apps.Deployment) {
		s, u := intstr.FromString("250%"), intstr.FromString("nope")
		d.Spec.Strategy.RollingUpdate = &apps.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}
	})
	seed(func(d *apps.Deployment) {
		s, u := intstr.FromInt32(-3), intstr.FromInt32(0)
		d.Spec.Strategy.RollingUpdate = &apps.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}
	})
	seed(func(d *apps.Deployment) {
		d.Spec.Strategy = apps.DeploymentStrategy{Type: apps.RecreateDeploymentStrategyType}
	})
	seed(func(d *apps.Deployment) { d.Spec.Strategy = apps.DeploymentStrategy{Type: "Other"} })
	seed(func(d *apps.Deployment) { d.Spec.RevisionHistoryLimit = ptr.To[int32](-1) })
	seed(func(d *apps.Deployment) {
		d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "x", "deprecated.deployment.rollback.to": "-1"}
	})
	seed(func(d *apps.Deployment) { d.DeletionTimestamp = &metav1.Time{Time: t0} })
	seed(func(d *apps.Deployment) { d.Spec.Template.Labels = nil })
	f.Add([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default"}}`))
	f.Add([]byte(`{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"default"},"spec":{"replicas":2147483647}}`))

	decoder := scheme.Codecs.UniversalDeserializer()
	f.Fuzz(func(t *testing.T, b []byte) {
		obj, _, err := decoder.Decode(b, nil, &apps.Deployment{})
		if err != nil {
			return
		}
		d, ok := obj.(*apps.Deployment)
		// The apiserver never sends an object without a name or namespace.
		if !ok || d.Name == "" || d.Namespace == "" || strings.Contains(d.Namespace+d.Name, "/") {
			return
		}
		// apps/v1 validation requires a selector (upstream's controller
		// dereferences it too).
		if d.Spec.Selector == nil {
			return
		}
		defaultDeployment(d)
		fx := newFixture(t, d)
		_, _ = fx.sync(d)
	})
}

// defaultDeployment applies the apiserver's apps/v1 defaults, which every
// stored object, and so every object a watch delivers, has.
func defaultDeployment(d *apps.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr.To[int32](1)
	}
	if d.Spec.Strategy.Type == "" {
		d.Spec.Strategy.Type = apps.RollingUpdateDeploymentStrategyType
	}
	if d.Spec.Strategy.Type == apps.RollingUpdateDeploymentStrategyType {
		if d.Spec.Strategy.RollingUpdate == nil {
			d.Spec.Strategy.RollingUpdate = &apps.RollingUpdateDeployment{}
		}
		if d.Spec.Strategy.RollingUpdate.MaxUnavailable == nil {
			v := intstr.FromString("25%")
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = &v
		}
		if d.Spec.Strategy.RollingUpdate.MaxSurge == nil {
			v := intstr.FromString("25%")
			d.Spec.Strategy.RollingUpdate.MaxSurge = &v
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	}
}
