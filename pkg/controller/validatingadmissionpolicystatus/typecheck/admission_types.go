package typecheck

import "github.com/google/cel-go/cel"

// The hand-declared types of the request and namespaceObject variables,
// with the apiserver's type names and fields.

func fieldsOf(pairs ...any) map[string]*declType {
	out := make(map[string]*declType, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out[pairs[i].(string)] = pairs[i+1].(*declType)
	}
	return out
}

func listOf(t *declType) *declType { return newListType(t) }

// requestDeclType is the admission request as policies see it: without uid,
// object and oldObject (those are variables of their own).
func requestDeclType() *declType {
	gvk := newObjectType("kubernetes.GroupVersionKind", fieldsOf(
		"group", stringDecl, "version", stringDecl, "kind", stringDecl))
	gvr := newObjectType("kubernetes.GroupVersionResource", fieldsOf(
		"group", stringDecl, "version", stringDecl, "resource", stringDecl))
	userInfo := newObjectType("kubernetes.UserInfo", fieldsOf(
		"username", stringDecl,
		"uid", stringDecl,
		"groups", listOf(stringDecl),
		"extra", &declType{name: "map", celType: cel.MapType(cel.StringType, cel.ListType(cel.StringType)), elem: listOf(stringDecl)},
	))
	return newObjectType("kubernetes.AdmissionRequest", fieldsOf(
		"kind", gvk,
		"resource", gvr,
		"subResource", stringDecl,
		"requestKind", gvk,
		"requestResource", gvr,
		"requestSubResource", stringDecl,
		"name", stringDecl,
		"namespace", stringDecl,
		"operation", stringDecl,
		"userInfo", userInfo,
		"dryRun", boolDecl,
		"options", dynDecl,
	))
}

// namespaceDeclType is the namespace of a namespaced request, reduced to
// the fields the apiserver exposes.
func namespaceDeclType() *declType {
	strMap := newMapType(stringDecl)
	spec := newObjectType("kubernetes.NamespaceSpec", fieldsOf("finalizers", listOf(stringDecl)))
	condition := newObjectType("kubernetes.NamespaceCondition", fieldsOf(
		"status", stringDecl,
		"type", stringDecl,
		"lastTransitionTime", timestampDecl,
		"message", stringDecl,
		"reason", stringDecl,
	))
	status := newObjectType("kubernetes.NamespaceStatus", fieldsOf(
		"conditions", listOf(condition),
		"phase", stringDecl,
	))
	metadata := newObjectType("kubernetes.NamespaceMetadata", fieldsOf(
		"name", stringDecl,
		"generateName", stringDecl,
		"namespace", stringDecl,
		"labels", strMap,
		"annotations", strMap,
		"UID", stringDecl,
		"creationTimestamp", timestampDecl,
		"deletionGracePeriodSeconds", intDecl,
		"deletionTimestamp", timestampDecl,
		"generation", intDecl,
		"resourceVersion", stringDecl,
		"finalizers", listOf(stringDecl),
	))
	return newObjectType("kubernetes.Namespace", fieldsOf(
		"metadata", metadata,
		"spec", spec,
		"status", status,
	))
}
