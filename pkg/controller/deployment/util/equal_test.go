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
