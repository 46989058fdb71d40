package framework

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

var crdSeq atomic.Int64

// CRDGVR is the resource of CustomResourceDefinitions themselves.
var CRDGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRD is a custom resource type made for one test.
type CRD struct {
	Name string // <plural>.<group>
	GVR  schema.GroupVersionResource
	Kind string
}

// NewObject returns an object of the custom type, ready to create.
func (c CRD) NewObject(name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": c.GVR.GroupVersion().String(), "kind": c.Kind}}
	u.SetName(name)
	u.SetOwnerReferences(owners)
	return u
}

// CreateCRD creates a namespaced custom resource type with kind kind in a
// group unique to the test, waits until the apiserver serves it, and
// deletes it when the test ends.
func CreateCRD(t testing.TB, dyn dynamic.Interface, kind string) CRD {
	t.Helper()
	plural := strings.ToLower(kind) + "s"
	group := fmt.Sprintf("t%d-%d.example.com", time.Now().UnixNano()%1000000, crdSeq.Add(1))
	crd := CRD{Name: plural + "." + group, GVR: schema.GroupVersionResource{Group: group, Version: "v1", Resource: plural}, Kind: kind}
	obj := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]interface{}{"name": crd.Name},
		"spec": map[string]interface{}{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]interface{}{"plural": plural, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List"},
			"versions": []interface{}{map[string]interface{}{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]interface{}{"openAPIV3Schema": map[string]interface{}{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	if _, err := dyn.Resource(CRDGVR).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CRD %s: %v", crd.Name, err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(CRDGVR).Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
	})
	// The CRD becomes servable asynchronously.
	Eventually(t, time.Minute, "CRD "+crd.Name+" to be served", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(crd.GVR).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	return crd
}

// DeleteCRD deletes the type and waits until it is gone (with its objects).
func DeleteCRD(t testing.TB, dyn dynamic.Interface, crd CRD) {
	t.Helper()
	if err := dyn.Resource(CRDGVR).Delete(context.Background(), crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting CRD %s: %v", crd.Name, err)
	}
	Eventually(t, time.Minute, "CRD "+crd.Name+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(CRDGVR).Get(ctx, crd.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
