package typecheck

import (
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// typeProvider tells the checker about the object types built from
// schemas (and the hand-made request, namespace and variables types), and
// defers everything else to the environment's own provider.
type typeProvider struct {
	base    types.Provider
	objects map[string]*declType
}

var _ types.Provider = (*typeProvider)(nil)

func newTypeProvider(base types.Provider, roots ...*declType) *typeProvider {
	p := &typeProvider{base: base, objects: map[string]*declType{}}
	for _, r := range roots {
		registerObjects(r, p.objects)
	}
	return p
}

func (p *typeProvider) EnumValue(name string) ref.Val { return p.base.EnumValue(name) }

func (p *typeProvider) FindIdent(name string) (ref.Val, bool) { return p.base.FindIdent(name) }

func (p *typeProvider) FindStructType(name string) (*types.Type, bool) {
	if t, ok := p.objects[name]; ok {
		return typeTypeOf(t.celType), true
	}
	return p.base.FindStructType(name)
}

func (p *typeProvider) FindStructFieldNames(name string) ([]string, bool) {
	if _, ok := p.objects[name]; ok {
		// Schema types do not enumerate their fields, as in the apiserver.
		return []string{}, false
	}
	return p.base.FindStructFieldNames(name)
}

func (p *typeProvider) FindStructFieldType(typeName, fieldName string) (*types.FieldType, bool) {
	t, ok := p.objects[typeName]
	if !ok {
		return p.base.FindStructFieldType(typeName, fieldName)
	}
	f, found := t.fields[fieldName]
	if !found && celKeywords[fieldName] {
		// A keyword-named property is stored escaped.
		f, found = t.fields["__"+fieldName+"__"]
	}
	if !found {
		return nil, false
	}
	return &types.FieldType{Type: f.celType}, true
}

func (p *typeProvider) NewValue(typeName string, fields map[string]ref.Val) ref.Val {
	return p.base.NewValue(typeName, fields)
}
