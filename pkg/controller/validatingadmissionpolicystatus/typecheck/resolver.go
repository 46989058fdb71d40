package typecheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/openapi"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// ErrSchemaNotFound is wrapped by resolvers when a kind has no schema; the
// type checker skips such kinds silently.
var ErrSchemaNotFound = errors.New("schema not found")

// SchemaResolver finds the OpenAPI schema of a kind, with every $ref
// replaced by the schema it refers to.
type SchemaResolver interface {
	ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error)
}

// OpenAPIResolver resolves schemas from the apiserver's OpenAPI v3
// documents, one per group version. The index of documents is fetched for
// every lookup, so new custom resources are seen at once; a document is
// parsed once per version of it (its URL carries a content hash).
type OpenAPIResolver struct {
	client openapi.Client

	mu sync.Mutex
	// docs holds, per group version path, the last document parsed.
	docs map[string]*openAPIDoc
}

type openAPIDoc struct {
	url     string
	schemas map[string]*spec.Schema
}

// NewOpenAPIResolver returns a resolver reading through client, usually
// a discovery client's OpenAPIV3().
func NewOpenAPIResolver(client openapi.Client) *OpenAPIResolver {
	return &OpenAPIResolver{client: client, docs: map[string]*openAPIDoc{}}
}

const (
	refPrefix = "#/components/schemas/"
	extGVK    = "x-kubernetes-group-version-kind"
)

// ResolveSchema implements SchemaResolver.
func (r *OpenAPIResolver) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	schemas, err := r.document(gvk.GroupVersion())
	if err != nil {
		return nil, err
	}
	name, err := componentOf(schemas, gvk)
	if err != nil {
		return nil, err
	}
	return populateRefs(schemas, name)
}

// document returns the component schemas of a group version's document.
func (r *OpenAPIResolver) document(gv schema.GroupVersion) (map[string]*spec.Schema, error) {
	paths, err := r.client.Paths()
	if err != nil {
		return nil, err
	}
	path := "apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		path = "api/" + gv.Version
	}
	entry, ok := paths[path]
	if !ok {
		return nil, fmt.Errorf("cannot resolve group version %q: %w", gv, ErrSchemaNotFound)
	}
	url := entry.ServerRelativeURL()

	r.mu.Lock()
	doc := r.docs[path]
	r.mu.Unlock()
	if doc != nil && url != "" && doc.url == url {
		return doc.schemas, nil
	}

	raw, err := entry.Schema(runtime.ContentTypeJSON)
	if err != nil {
		return nil, err
	}
	// Only the components are needed; the paths are left unparsed.
	var parsed struct {
		Components spec3.Components `json:"components"`
	}
	if err := json.Unmarshal(raw, &parsed); err != nil {
		return nil, err
	}
	schemas := parsed.Components.Schemas
	r.mu.Lock()
	r.docs[path] = &openAPIDoc{url: url, schemas: schemas}
	r.mu.Unlock()
	return schemas, nil
}

// componentOf finds the component schema declaring gvk in its
// x-kubernetes-group-version-kind extension.
func componentOf(schemas map[string]*spec.Schema, gvk schema.GroupVersionKind) (string, error) {
	for name, s := range schemas {
		var gvks []schema.GroupVersionKind
		if err := s.Extensions.GetObject(extGVK, &gvks); err != nil {
			return "", err
		}
		for _, g := range gvks {
			if g == gvk {
				return name, nil
			}
		}
	}
	return "", fmt.Errorf("cannot resolve group version kind %q: %w", gvk, ErrSchemaNotFound)
}

// populateRefs returns the schema of component root with every $ref
// (also one wrapped in allOf) replaced by the schema it points to. A $ref
// back to a schema being expanded becomes an empty object, which is how
// recursive types (JSONSchemaProps) end. As in the apiserver's discovery
// resolver, the root is tracked by its component name and nested schemas
// by their $ref, so a kind referring to itself is expanded once more
// before it stops (no built-in kind does). Shared schemas are never
// modified: what changes is copied.
func populateRefs(schemas map[string]*spec.Schema, root string) (*spec.Schema, error) {
	lookup := func(ref string) (*spec.Schema, bool) {
		s, ok := schemas[strings.TrimPrefix(ref, refPrefix)]
		return s, ok && s != nil
	}
	s, ok := lookup(root)
	if !ok {
		return nil, fmt.Errorf("internal error: cannot resolve Ref for root schema %q: %w", root, ErrSchemaNotFound)
	}
	expanding := sets.New(root)
	return expandRefs(lookup, expanding, s)
}

func expandRefs(lookup func(string) (*spec.Schema, bool), expanding sets.Set[string], s *spec.Schema) (*spec.Schema, error) {
	out := *s
	changed := false
	if ref, ok := refOf(s); ok {
		if expanding.Has(ref) {
			return &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}}, nil
		}
		target, found := lookup(ref)
		if !found {
			return nil, fmt.Errorf("internal error: cannot resolve Ref %q: %w", ref, ErrSchemaNotFound)
		}
		expanding.Insert(ref)
		defer expanding.Delete(ref)
		out = *target
		changed = true
	}

	if len(out.Properties) > 0 {
		props := make(map[string]spec.Schema, len(out.Properties))
		propsChanged := false
		for name, prop := range out.Properties {
			expanded, err := expandRefs(lookup, expanding, &prop)
			if err != nil {
				return nil, err
			}
			if expanded != &prop {
				propsChanged = true
			}
			props[name] = *expanded
		}
		if propsChanged {
			out.Properties = props
			changed = true
		}
	}
	if ap := out.AdditionalProperties; ap != nil && ap.Schema != nil {
		expanded, err := expandRefs(lookup, expanding, ap.Schema)
		if err != nil {
			return nil, err
		}
		if expanded != ap.Schema {
			copied := *ap
			copied.Schema = expanded
			out.AdditionalProperties = &copied
			changed = true
		}
	}
	if items := out.Items; items != nil && items.Schema != nil {
		expanded, err := expandRefs(lookup, expanding, items.Schema)
		if err != nil {
			return nil, err
		}
		if expanded != items.Schema {
			copied := *items
			copied.Schema = expanded
			out.Items = &copied
			changed = true
		}
	}
	if !changed {
		return s, nil
	}
	return &out, nil
}

// refOf is the schema's $ref, looking into allOf too: the apiserver wraps a
// $ref in allOf to keep a description or default beside it.
func refOf(s *spec.Schema) (string, bool) {
	if s.Ref.GetURL() != nil {
		return s.Ref.String(), true
	}
	for i := range s.AllOf {
		if ref, ok := refOf(&s.AllOf[i]); ok {
			return ref, true
		}
	}
	return "", false
}
