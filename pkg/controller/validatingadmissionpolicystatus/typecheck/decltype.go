package typecheck

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// declType is the compile-time shape of a value the checker sees: its CEL
// type and, for objects, the types of its fields. Object types are
// registered with the type provider under their name, so field selection
// on them resolves through fields.
type declType struct {
	// name is the registered name of an object type. Objects converted
	// from a schema are named after their path from the root type
	// ("Deployment123.spec.template"), list items add ".@idx" and map
	// values ".@elem", as the apiserver names them.
	name    string
	celType *cel.Type
	// fields is non-nil exactly for object types. Keys are field names
	// escaped into CEL identifiers.
	fields map[string]*declType
	// elem is the item type of a list or the value type of a map.
	elem *declType
}

func (t *declType) isObject() bool { return t.fields != nil }

// newObjectType declares an object type; fields may be added later (the
// variables object grows as variables are compiled).
func newObjectType(name string, fields map[string]*declType) *declType {
	if fields == nil {
		fields = map[string]*declType{}
	}
	return &declType{name: name, celType: cel.ObjectType(name), fields: fields}
}

func newListType(elem *declType) *declType {
	return &declType{name: "list", celType: cel.ListType(elem.celType), elem: elem}
}

func newMapType(elem *declType) *declType {
	return &declType{name: "map", celType: cel.MapType(cel.StringType, elem.celType), elem: elem}
}

func simpleType(t *cel.Type) *declType { return &declType{name: t.String(), celType: t} }

var (
	dynDecl       = simpleType(cel.DynType)
	boolDecl      = simpleType(cel.BoolType)
	intDecl       = simpleType(cel.IntType)
	doubleDecl    = simpleType(cel.DoubleType)
	stringDecl    = simpleType(cel.StringType)
	bytesDecl     = simpleType(cel.BytesType)
	durationDecl  = simpleType(cel.DurationType)
	timestampDecl = simpleType(cel.TimestampType)
)

// intOrStringFormat marks int-or-string fields of built-in types; custom
// resources mark them with the x-kubernetes-int-or-string extension.
var intOrStringFormat = intstr.IntOrString{}.OpenAPISchemaFormat()

const (
	extIntOrString      = "x-kubernetes-int-or-string"
	extEmbeddedResource = "x-kubernetes-embedded-resource"
)

func hasExtension(s *spec.Schema, name string) bool {
	v, ok := s.Extensions.GetBool(name)
	return ok && v
}

// schemaToDeclType converts a resolved schema (no $refs left) into the type
// of its values in CEL, naming object types after their path below name.
// It returns nil for a schema that CEL does not see: such a property is
// left out of its object, and a list or map of such values is left out
// altogether. resourceRoot marks the root of a resource or an embedded
// resource, where apiVersion, kind and metadata.name/generateName are
// always present.
//
// Like the apiserver, it ignores x-kubernetes-preserve-unknown-fields and
// nullable: an object exposes exactly its declared properties, and a
// schema without a type (other than int-or-string) is not exposed.
func schemaToDeclType(s *spec.Schema, resourceRoot bool, name string) *declType {
	if s == nil {
		return nil
	}
	if s.Format == intOrStringFormat || hasExtension(s, extIntOrString) {
		// Either an int or a string: the checker can only defer to runtime.
		return dynDecl
	}
	if resourceRoot {
		s = withTypeAndObjectMeta(s)
	}
	typ := ""
	if len(s.Type) > 0 {
		typ = s.Type[0]
	}
	switch typ {
	case "array":
		if s.Items == nil || s.Items.Schema == nil {
			return nil
		}
		items := s.Items.Schema
		elem := schemaToDeclType(items, hasExtension(items, extEmbeddedResource), name+".@idx")
		if elem == nil {
			return nil
		}
		return newListType(elem)
	case "object":
		if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil {
			elem := schemaToDeclType(ap.Schema, hasExtension(ap.Schema, extEmbeddedResource), name+".@elem")
			if elem == nil {
				return nil
			}
			return newMapType(elem)
		}
		fields := make(map[string]*declType, len(s.Properties))
		for propName, prop := range s.Properties {
			escaped, ok := escapeFieldName(propName)
			if !ok {
				continue
			}
			if ft := schemaToDeclType(&prop, hasExtension(&prop, extEmbeddedResource), name+"."+escaped); ft != nil {
				fields[escaped] = ft
			}
		}
		return newObjectType(name, fields)
	case "string":
		switch s.Format {
		case "byte":
			return bytesDecl
		case "duration":
			return durationDecl
		case "date", "date-time":
			return timestampDecl
		}
		return stringDecl
	case "boolean":
		return boolDecl
	case "number":
		return doubleDecl
	case "integer":
		return intDecl
	}
	return nil
}

// withTypeAndObjectMeta makes sure a resource root declares kind,
// apiVersion and metadata with name and generateName. A schema lacking any
// of them gets them as plain strings, and its metadata is then replaced by
// one with only name and generateName, as the apiserver does. The input is
// not modified.
func withTypeAndObjectMeta(s *spec.Schema) *spec.Schema {
	hasString := func(props map[string]spec.Schema, name string) bool {
		return props[name].Type.Contains("string")
	}
	if s.Properties != nil && hasString(s.Properties, "kind") && hasString(s.Properties, "apiVersion") {
		meta := s.Properties["metadata"]
		if meta.Type.Contains("object") && meta.Properties != nil &&
			hasString(meta.Properties, "name") && hasString(meta.Properties, "generateName") {
			return s
		}
	}
	out := *s
	out.Properties = make(map[string]spec.Schema, len(s.Properties)+3)
	for k, v := range s.Properties {
		out.Properties[k] = v
	}
	str := *spec.StringProperty()
	out.Properties["kind"] = str
	out.Properties["apiVersion"] = str
	out.Properties["metadata"] = spec.Schema{SchemaProps: spec.SchemaProps{
		Type:       spec.StringOrArray{"object"},
		Properties: map[string]spec.Schema{"name": str, "generateName": str},
	}}
	return &out
}

// declTypeOfCELType turns the type a variable's expression evaluates to into
// the type of variables.<name>. Like the apiserver it keeps primitive types
// (compared by identity with cel-go's singletons), rebuilds lists and maps
// from their parameters, and makes everything else dyn: a variable holding
// an object cannot be type-checked field by field.
func declTypeOfCELType(t *cel.Type) *declType {
	if t == nil {
		return dynDecl
	}
	switch t {
	case cel.AnyType, cel.BoolType, cel.BytesType, cel.DoubleType, cel.DurationType,
		cel.IntType, cel.NullType, cel.StringType, cel.TimestampType, cel.UintType:
		return simpleType(t)
	}
	if t.HasTrait(traits.ContainerType) && t.HasTrait(traits.IndexerType) {
		switch params := t.Parameters(); len(params) {
		case 1:
			return newListType(declTypeOfCELType(params[0]))
		case 2:
			key, val := declTypeOfCELType(params[0]), declTypeOfCELType(params[1])
			return &declType{name: "map", celType: cel.MapType(key.celType, val.celType), elem: val}
		}
	}
	return dynDecl
}

// registerObjects adds every object type reachable from t to into, keyed
// by name.
func registerObjects(t *declType, into map[string]*declType) {
	if t == nil {
		return
	}
	if t.isObject() {
		into[t.name] = t
		for _, f := range t.fields {
			registerObjects(f, into)
		}
		return
	}
	registerObjects(t.elem, into)
}

// typeNameFor makes a name for a resolved kind that is unique enough to
// keep the object and params types apart, as the apiserver does (kind
// followed by the current nanosecond).
func typeNameFor(kind string, nanos int) string {
	return fmt.Sprintf("%s%d", kind, nanos)
}

// typeTypeOf wraps a struct type the way providers report them.
func typeTypeOf(t *cel.Type) *types.Type { return types.NewTypeTypeWithParam(t) }
