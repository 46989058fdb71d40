package typecheck

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"
)

var (
	widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	gadgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}
)

func TestResolveFollowsRefs(t *testing.T) {
	r := NewOpenAPIResolver(testOpenAPI(t))
	s, err := r.ResolveSchema(widgetGVK)
	if err != nil {
		t.Fatal(err)
	}
	// metadata is an allOf-wrapped $ref; creationTimestamp one more level.
	meta := s.Properties["metadata"]
	if !meta.Type.Contains("object") || meta.Properties["creationTimestamp"].Format != "date-time" {
		t.Errorf("metadata not resolved: %+v", meta)
	}
	spec := s.Properties["spec"]
	rec := spec.Properties["recursive"]
	if !rec.Type.Contains("object") {
		t.Fatalf("recursive not resolved: %+v", rec)
	}
	// Node.children refers back to Node while Node is being expanded: an
	// empty object ends the recursion.
	children := rec.Properties["children"].Items.Schema
	if !children.Type.Contains("object") || len(children.Properties) != 0 || children.Ref.GetURL() != nil {
		t.Errorf("recursive items: %+v", children)
	}
	parent := rec.Properties["parent"]
	if len(parent.Properties) != 0 || len(parent.AllOf) != 0 {
		t.Errorf("recursive allOf ref: %+v", parent)
	}
	// The root is tracked by name, not by $ref: its self reference is
	// expanded once before it stops, as upstream's discovery resolver does.
	self := spec.Properties["self"]
	if _, ok := self.Properties["spec"]; !ok {
		t.Errorf("self reference expanded: %+v", self)
	}
	if inner := self.Properties["spec"].Properties["self"]; len(inner.Properties) != 0 {
		t.Errorf("second self reference should be empty: %+v", inner)
	}

	// The cached document is left as served.
	doc, err := r.document(widgetGVK.GroupVersion())
	if err != nil {
		t.Fatal(err)
	}
	if doc["com.example.v1.Widget"].Properties["metadata"].AllOf == nil {
		t.Error("cached document was modified")
	}
}

func TestResolveBuiltIn(t *testing.T) {
	r := NewOpenAPIResolver(testOpenAPI(t))
	s, err := r.ResolveSchema(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	if err != nil {
		t.Fatal(err)
	}
	containers := s.Properties["spec"].Properties["template"].Properties["spec"].Properties["containers"]
	if containers.Items == nil || containers.Items.Schema.Properties["image"].Type[0] != "string" {
		t.Errorf("containers not resolved: %+v", containers)
	}
}

func TestResolveNotFound(t *testing.T) {
	r := NewOpenAPIResolver(testOpenAPI(t))
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "nope.example.com", Version: "v1", Kind: "Widget"}, // no such group version
		{Group: "example.com", Version: "v1", Kind: "Nope"},        // no such kind
		{Group: "example.com", Version: "v2", Kind: "Widget"},
	} {
		if _, err := r.ResolveSchema(gvk); !errors.Is(err, ErrSchemaNotFound) {
			t.Errorf("%v: got %v, want ErrSchemaNotFound", gvk, err)
		}
	}
}

type failingClient struct{}

func (failingClient) Paths() (map[string]openapi.GroupVersion, error) {
	return nil, errors.New("connection refused")
}

func TestResolveServerError(t *testing.T) {
	_, err := NewOpenAPIResolver(failingClient{}).ResolveSchema(widgetGVK)
	if err == nil || errors.Is(err, ErrSchemaNotFound) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("got %v", err)
	}
}

func TestResolveBrokenRef(t *testing.T) {
	c := docClient{"apis/example.com/v1": docGV{url: "u", data: []byte(`{"components":{"schemas":{
		"W":{"type":"object","x-kubernetes-group-version-kind":[{"group":"example.com","version":"v1","kind":"Widget"}],
		     "properties":{"a":{"$ref":"#/components/schemas/Missing"}}}}}}`)}}
	_, err := NewOpenAPIResolver(c).ResolveSchema(widgetGVK)
	if !errors.Is(err, ErrSchemaNotFound) || !strings.Contains(err.Error(), "Missing") {
		t.Errorf("got %v", err)
	}
}

// A document is fetched and parsed once per URL: the URL carries the
// document's hash, so a new URL means new content.
func TestResolveCachesDocumentsByURL(t *testing.T) {
	var fetches atomic.Int32
	c := testOpenAPI(t)
	widgets := c["apis/example.com/v1"].(docGV)
	widgets.fetches = &fetches
	c["apis/example.com/v1"] = widgets
	r := NewOpenAPIResolver(c)

	for _, gvk := range []schema.GroupVersionKind{widgetGVK, gadgetGVK, widgetGVK} {
		if _, err := r.ResolveSchema(gvk); err != nil {
			t.Fatal(err)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("fetched %d times for one URL, want 1", n)
	}

	widgets.url = "/openapi/v3/apis/example.com/v1?hash=2"
	widgets.data = []byte(`{"components":{"schemas":{"W":{"type":"object","x-kubernetes-group-version-kind":[{"group":"example.com","version":"v1","kind":"Widget"}],"properties":{"fresh":{"type":"string"}}}}}}`)
	c["apis/example.com/v1"] = widgets
	s, err := r.ResolveSchema(widgetGVK)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Properties["fresh"]; !ok || fetches.Load() != 2 {
		t.Errorf("new document not used after the URL changed (fetches %d)", fetches.Load())
	}
	if _, err := r.ResolveSchema(gadgetGVK); !errors.Is(err, ErrSchemaNotFound) {
		t.Errorf("gadget is gone from the new document: got %v", err)
	}
}
