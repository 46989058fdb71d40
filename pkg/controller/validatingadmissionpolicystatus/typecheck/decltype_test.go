package typecheck

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func mustSchema(t *testing.T, js string) *spec.Schema {
	t.Helper()
	s := &spec.Schema{}
	if err := json.Unmarshal([]byte(js), s); err != nil {
		t.Fatalf("bad schema %s: %v", js, err)
	}
	return s
}

// describe renders a declType as "<cel type>" for scalars, lists and maps
// and "<name>{field:<type>,...}" for objects, fields sorted.
func describe(t *declType) string {
	if t == nil {
		return "<none>"
	}
	if !t.isObject() {
		if t.elem != nil && t.elem.isObject() {
			return t.celType.String() + " of " + describe(t.elem)
		}
		return t.celType.String()
	}
	names := make([]string, 0, len(t.fields))
	for n := range t.fields {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + ":" + describe(t.fields[n])
	}
	return t.name + "{" + strings.Join(parts, ",") + "}"
}

func TestSchemaToDeclType(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		root   bool
		want   string
	}{
		{"int-or-string by format", `{"type":"string","format":"int-or-string"}`, false, "dyn"},
		{"int-or-string by extension, no type", `{"x-kubernetes-int-or-string":true}`, false, "dyn"},
		{"string", `{"type":"string","maxLength":3}`, false, "string"},
		{"byte", `{"type":"string","format":"byte"}`, false, "bytes"},
		{"duration", `{"type":"string","format":"duration"}`, false, "google.protobuf.Duration"},
		{"date", `{"type":"string","format":"date"}`, false, "google.protobuf.Timestamp"},
		{"date-time", `{"type":"string","format":"date-time"}`, false, "google.protobuf.Timestamp"},
		{"other format is a string", `{"type":"string","format":"email"}`, false, "string"},
		{"boolean", `{"type":"boolean"}`, false, "bool"},
		{"number", `{"type":"number"}`, false, "double"},
		{"integer", `{"type":"integer","format":"int32"}`, false, "int"},
		{"nullable is ignored", `{"type":"integer","nullable":true}`, false, "int"},
		{"no type is not exposed", `{"description":"x"}`, false, "<none>"},
		{"preserve-unknown-fields without type is not exposed", `{"x-kubernetes-preserve-unknown-fields":true}`, false, "<none>"},
		{"unknown type is not exposed", `{"type":"null"}`, false, "<none>"},
		{"list", `{"type":"array","items":{"type":"string"}}`, false, "list(string)"},
		{"list of lists", `{"type":"array","items":{"type":"array","items":{"type":"integer"}}}`, false, "list(list(int))"},
		{"list without items", `{"type":"array"}`, false, "<none>"},
		{"list of unexposed items", `{"type":"array","items":{}}`, false, "<none>"},
		{"map", `{"type":"object","additionalProperties":{"type":"string"}}`, false, "map(string, string)"},
		{"map of unexposed values", `{"type":"object","additionalProperties":{}}`, false, "<none>"},
		{"map wins over properties", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}}`, false, "map(string, int)"},
		{"additionalProperties true is an object", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":true}`, false, "R{a:string}"},
		{"preserve-unknown-fields object exposes declared fields only", `{"type":"object","x-kubernetes-preserve-unknown-fields":true,"properties":{"a":{"type":"integer"}}}`, false, "R{a:int}"},
		{"empty object", `{"type":"object"}`, false, "R{}"},
		{"unexposed properties are left out", `{"type":"object","properties":{"a":{},"b":{"type":"boolean"}}}`, false, "R{b:bool}"},
		{"property names are escaped", `{"type":"object","properties":{
			"namespace":{"type":"string"},"x-y":{"type":"string"},"a.b":{"type":"string"},"a/b":{"type":"string"},
			"__u":{"type":"string"},"ok_1":{"type":"string"},"1st":{"type":"string"},"sp ace":{"type":"string"},"ünï":{"type":"string"}}}`, false,
			"R{__namespace__:string,__underscores__u:string,a__dot__b:string,a__slash__b:string,ok_1:string,x__dash__y:string}"},
		{"nested objects are named by path", `{"type":"object","properties":{
			"spec":{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"n":{"type":"integer"}}}},
			"byName":{"type":"object","additionalProperties":{"type":"object","properties":{"v":{"type":"string"}}}}}}}}`, false,
			"R{spec:R.spec{byName:map(string, R.spec.byName.@elem) of R.spec.byName.@elem{v:string},items:list(R.spec.items.@idx) of R.spec.items.@idx{n:int}}}"},
		{"resource root gets kind, apiVersion and name/generateName", `{"type":"object","properties":{"spec":{"type":"object"}}}`, true,
			"R{apiVersion:string,kind:string,metadata:R.metadata{generateName:string,name:string},spec:R.spec{}}"},
		{"resource root with partial metadata loses the rest of it", `{"type":"object","properties":{
			"apiVersion":{"type":"string"},"kind":{"type":"string"},
			"metadata":{"type":"object","properties":{"name":{"type":"string"},"labels":{"type":"object","additionalProperties":{"type":"string"}}}}}}`, true,
			"R{apiVersion:string,kind:string,metadata:R.metadata{generateName:string,name:string}}"},
		{"complete resource root is kept", `{"type":"object","properties":{
			"apiVersion":{"type":"string"},"kind":{"type":"string"},
			"metadata":{"type":"object","properties":{"name":{"type":"string"},"generateName":{"type":"string"},"uid":{"type":"string"}}}}}`, true,
			"R{apiVersion:string,kind:string,metadata:R.metadata{generateName:string,name:string,uid:string}}"},
		{"embedded resources", `{"type":"object","properties":{
			"one":{"type":"object","x-kubernetes-embedded-resource":true,"properties":{"x":{"type":"integer"}}},
			"many":{"type":"array","items":{"type":"object","x-kubernetes-embedded-resource":true}},
			"byKey":{"type":"object","additionalProperties":{"type":"object","x-kubernetes-embedded-resource":true}}}}`, false,
			"R{byKey:map(string, R.byKey.@elem) of R.byKey.@elem{apiVersion:string,kind:string,metadata:R.byKey.@elem.metadata{generateName:string,name:string}}," +
				"many:list(R.many.@idx) of R.many.@idx{apiVersion:string,kind:string,metadata:R.many.@idx.metadata{generateName:string,name:string}}," +
				"one:R.one{apiVersion:string,kind:string,metadata:R.one.metadata{generateName:string,name:string},x:int}}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := describe(schemaToDeclType(mustSchema(t, tc.schema), tc.root, "R"))
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// The conversion must not modify the (cached, shared) schema.
func TestSchemaToDeclTypeLeavesSchemaAlone(t *testing.T) {
	s := mustSchema(t, `{"type":"object","properties":{"metadata":{"type":"object","properties":{"labels":{"type":"object"}}}}}`)
	schemaToDeclType(s, true, "R")
	if _, ok := s.Properties["kind"]; ok {
		t.Error("kind was added to the input schema")
	}
	if _, ok := s.Properties["metadata"].Properties["labels"]; !ok {
		t.Error("input metadata lost labels")
	}
}

func TestEscapeFieldName(t *testing.T) {
	for in, want := range map[string]string{
		"name": "name", "_x": "_x", "a_b": "a_b", "__": "__underscores__", "___": "__underscores___",
		"a__b__c": "a__underscores__b__underscores__c", "x-y": "x__dash__y", "a.b/c": "a__dot__b__slash__c",
		"in": "__in__", "namespace": "__namespace__", "true": "__true__", "while": "__while__",
		"-lead": "__dash__lead",
	} {
		got, ok := escapeFieldName(in)
		if !ok || got != want {
			t.Errorf("escape(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "1a", "a b", "a:b", "é", "a@b", "a$"} {
		if got, ok := escapeFieldName(in); ok {
			t.Errorf("escape(%q) = %q, want not exposed", in, got)
		}
	}
}

func TestDeclTypeOfCELType(t *testing.T) {
	for _, tc := range []struct {
		in   *cel.Type
		want string
	}{
		{nil, "dyn"},
		{cel.IntType, "int"},
		{cel.StringType, "string"},
		{cel.BoolType, "bool"},
		{cel.TimestampType, "google.protobuf.Timestamp"},
		{cel.NullType, "null_type"},
		{cel.ListType(cel.IntType), "list(int)"},
		{cel.ListType(cel.ObjectType("X")), "list(dyn)"},
		{cel.MapType(cel.StringType, cel.ListType(cel.StringType)), "map(string, list(string))"},
		{cel.ObjectType("X"), "dyn"},
		{cel.OptionalType(cel.IntType), "dyn"},
		{cel.TypeType, "dyn"},
	} {
		if got := declTypeOfCELType(tc.in).celType.String(); got != tc.want {
			t.Errorf("%v: got %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestTypeProvider(t *testing.T) {
	base, err := cel.NewEnv()
	if err != nil {
		t.Fatal(err)
	}
	root := schemaToDeclType(mustSchema(t, `{"type":"object","properties":{"namespace":{"type":"string"},"in":{"type":"integer"},"spec":{"type":"object","properties":{"n":{"type":"integer"}}}}}`), false, "R")
	p := newTypeProvider(base.CELTypeProvider(), root)

	if tt, ok := p.FindStructType("R.spec"); !ok || !tt.IsExactType(types.NewTypeTypeWithParam(cel.ObjectType("R.spec"))) {
		t.Errorf("R.spec: %v %v", tt, ok)
	}
	for field, want := range map[string]string{"namespace": "string", "__namespace__": "string", "in": "int", "spec": "R.spec"} {
		ft, ok := p.FindStructFieldType("R", field)
		if !ok || ft.Type.String() != want {
			t.Errorf("R.%s: %v %v, want %s", field, ft, ok, want)
		}
	}
	if _, ok := p.FindStructFieldType("R", "missing"); ok {
		t.Error("missing field found")
	}
	if _, ok := p.FindStructType("google.protobuf.Timestamp"); !ok {
		t.Error("types of the base environment must still be found")
	}
	if _, ok := p.FindStructType("Nope"); ok {
		t.Error("unknown type found")
	}
}
