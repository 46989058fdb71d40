package util

import (
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEqualIgnoreHash(t *testing.T) {
	tmpl := func(labels map[string]string, image string) *v1.PodTemplateSpec {
		return &v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}}}
	}
	hashed := tmpl(map[string]string{"app": "a", apps.DefaultDeploymentUniqueLabelKey: "h1"}, "img")
	plain := tmpl(map[string]string{"app": "a"}, "img")
	if !EqualIgnoreHash(hashed, plain) {
		t.Error("templates differing only in the hash label must be equal")
	}
	if EqualIgnoreHash(hashed, tmpl(map[string]string{"app": "b"}, "img")) {
		t.Error("different labels must differ")
	}
	if EqualIgnoreHash(hashed, tmpl(map[string]string{"app": "a"}, "img:2")) {
		t.Error("different images must differ")
	}
	// Only the hash label, against no labels at all: as upstream (a deep
	// copy with the key deleted is an empty, non-nil map).
	if got, want := EqualIgnoreHash(tmpl(map[string]string{apps.DefaultDeploymentUniqueLabelKey: "h"}, "img"), tmpl(nil, "img")),
		EqualIgnoreHash(tmpl(map[string]string{}, "img"), tmpl(nil, "img")); got != want {
		t.Errorf("hash-only labels vs none: %v, want %v", got, want)
	}
	// The inputs (cache objects) are left alone.
	if hashed.Labels[apps.DefaultDeploymentUniqueLabelKey] != "h1" {
		t.Error("EqualIgnoreHash modified its input")
	}
}

// TemplateMatches remembers a comparison while both generations hold, and
// compares again when either changes or an object has no generation.
func TestTemplateMatches(t *testing.T) {
	tmpl := func(image string) v1.PodTemplateSpec {
		return v1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}},
		}
	}
	d := &apps.Deployment{ObjectMeta: metav1.ObjectMeta{UID: "d", Generation: 1}, Spec: apps.DeploymentSpec{Template: tmpl("a")}}
	rs := &apps.ReplicaSet{ObjectMeta: metav1.ObjectMeta{UID: "rs", Generation: 1}, Spec: apps.ReplicaSetSpec{Template: tmpl("a")}}
	rs.Spec.Template.Labels = map[string]string{"app": "web", apps.DefaultDeploymentUniqueLabelKey: "h"}
	m := NewTemplateMatches()
	if !m.Equal(rs, d) {
		t.Fatal("same templates: want equal")
	}
	// Same generations: the remembered answer, even though (as an API
	// server never allows) the template changed in place.
	d.Spec.Template = tmpl("b")
	if !m.Equal(rs, d) {
		t.Fatal("same generations: want the remembered answer")
	}
	// A new generation is compared again.
	d.Generation = 2
	if m.Equal(rs, d) {
		t.Fatal("new Deployment generation with another image: want not equal")
	}
	// Without a generation nothing is remembered.
	d.Generation, rs.Generation = 0, 0
	d.Spec.Template = tmpl("a")
	if !m.Equal(rs, d) {
		t.Fatal("no generation, same templates: want equal")
	}
	d.Spec.Template = tmpl("c")
	if m.Equal(rs, d) {
		t.Fatal("no generation, other image: want not equal")
	}
	// A nil memo compares every time.
	if (*TemplateMatches)(nil).Equal(rs, d) {
		t.Fatal("nil memo, other image: want not equal")
	}
}
