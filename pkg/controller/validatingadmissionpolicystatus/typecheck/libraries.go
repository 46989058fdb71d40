package typecheck

import (
	"fmt"

	"github.com/google/cel-go/cel"
)

// The Kubernetes CEL libraries, as far as the checker needs them: their
// types and the signatures of their functions. Expressions are only
// type-checked here, never evaluated, so no function has an
// implementation. Type names and overload ids are the apiserver's.

var (
	urlType      = cel.ObjectType("kubernetes.URL")
	quantityType = cel.ObjectType("kubernetes.Quantity")
	ipType       = cel.OpaqueType("net.IP")
	cidrType     = cel.OpaqueType("net.CIDR")
	formatType   = cel.ObjectType("kubernetes.NamedFormat")
	semverType   = cel.ObjectType("kubernetes.Semver")

	authorizerType    = cel.ObjectType("kubernetes.authorization.Authorizer")
	pathCheckType     = cel.ObjectType("kubernetes.authorization.PathCheck")
	groupCheckType    = cel.ObjectType("kubernetes.authorization.GroupCheck")
	resourceCheckType = cel.ObjectType("kubernetes.authorization.ResourceCheck")
	decisionType      = cel.ObjectType("kubernetes.authorization.Decision")
)

// sig is one overload: a global function unless member is set, in which
// case the receiver is args[0].
type sig struct {
	id     string
	member bool
	args   []*cel.Type
	result *cel.Type
}

func global(id string, result *cel.Type, args ...*cel.Type) sig {
	return sig{id: id, args: args, result: result}
}

func member(id string, result *cel.Type, args ...*cel.Type) sig {
	return sig{id: id, member: true, args: args, result: result}
}

// library is a set of functions by name, plus any types it registers.
type library struct {
	funcs map[string][]sig
	types []*cel.Type
}

func (l library) option() cel.EnvOption {
	var opts []cel.EnvOption
	if len(l.types) > 0 {
		ts := make([]any, len(l.types))
		for i, t := range l.types {
			ts[i] = t
		}
		opts = append(opts, cel.Types(ts...))
	}
	for name, sigs := range l.funcs {
		overloads := make([]cel.FunctionOpt, 0, len(sigs))
		for _, s := range sigs {
			if s.member {
				overloads = append(overloads, cel.MemberOverload(s.id, s.args, s.result))
			} else {
				overloads = append(overloads, cel.Overload(s.id, s.args, s.result))
			}
		}
		opts = append(opts, cel.Function(name, overloads...))
	}
	return func(e *cel.Env) (*cel.Env, error) {
		for _, o := range opts {
			var err error
			if e, err = o(e); err != nil {
				return nil, err
			}
		}
		return e, nil
	}
}

var (
	str      = cel.StringType
	boolean  = cel.BoolType
	integer  = cel.IntType
	strList  = cel.ListType(cel.StringType)
	typeA    = cel.TypeParamType("A")
	listOfA  = cel.ListType(typeA)
	dyn      = cel.DynType
	optional = cel.OptionalType
)

// urlsLibrary: url(), isURL() and the URL accessors.
var urlsLibrary = library{funcs: map[string][]sig{
	"url":            {global("string_to_url", urlType, str)},
	"isURL":          {global("is_url_string", boolean, str)},
	"getScheme":      {member("url_get_scheme", str, urlType)},
	"getHost":        {member("url_get_host", str, urlType)},
	"getHostname":    {member("url_get_hostname", str, urlType)},
	"getPort":        {member("url_get_port", str, urlType)},
	"getEscapedPath": {member("url_get_escaped_path", str, urlType)},
	"getQuery":       {member("url_get_query", cel.MapType(str, strList), urlType)},
}}

// regexLibrary: find and findAll on strings.
var regexLibrary = library{funcs: map[string][]sig{
	"find": {member("string_find_string", str, str, str)},
	"findAll": {
		member("string_find_all_string", strList, str, str),
		member("string_find_all_string_int", strList, str, str, integer),
	},
}}

// authzLibrary: the authorizer variable's checks.
var authzLibrary = library{funcs: map[string][]sig{
	"path":           {member("authorizer_path", pathCheckType, authorizerType, str)},
	"group":          {member("authorizer_group", groupCheckType, authorizerType, str)},
	"serviceAccount": {member("authorizer_serviceaccount", authorizerType, authorizerType, str, str)},
	"resource":       {member("groupcheck_resource", resourceCheckType, groupCheckType, str)},
	"subresource":    {member("resourcecheck_subresource", resourceCheckType, resourceCheckType, str)},
	"namespace":      {member("resourcecheck_namespace", resourceCheckType, resourceCheckType, str)},
	"name":           {member("resourcecheck_name", resourceCheckType, resourceCheckType, str)},
	"check": {
		member("pathcheck_check", decisionType, pathCheckType, str),
		member("resourcecheck_check", decisionType, resourceCheckType, str),
	},
	"errored": {member("decision_errored", boolean, decisionType)},
	"error":   {member("decision_error", str, decisionType)},
	"allowed": {member("decision_allowed", boolean, decisionType)},
	"reason":  {member("decision_reason", str, decisionType)},
}}

// authzSelectorsLibrary: field and label selectors on resource checks.
var authzSelectorsLibrary = library{funcs: map[string][]sig{
	"fieldSelector": {member("authorizer_fieldselector", resourceCheckType, resourceCheckType, str)},
	"labelSelector": {member("authorizer_labelselector", resourceCheckType, resourceCheckType, str)},
}}

// quantityLibrary: resource quantities.
var quantityLibrary = library{funcs: map[string][]sig{
	"quantity":           {global("string_to_quantity", quantityType, str)},
	"isQuantity":         {global("is_quantity_string", boolean, str)},
	"sign":               {global("quantity_sign", integer, quantityType)},
	"isGreaterThan":      {member("quantity_is_greater_than", boolean, quantityType, quantityType)},
	"isLessThan":         {member("quantity_is_less_than", boolean, quantityType, quantityType)},
	"compareTo":          {member("quantity_compare_to", integer, quantityType, quantityType)},
	"asApproximateFloat": {member("quantity_get_float", cel.DoubleType, quantityType)},
	"asInteger":          {member("quantity_get_int", integer, quantityType)},
	"isInteger":          {member("quantity_is_integer", boolean, quantityType)},
	"add": {
		member("quantity_add", quantityType, quantityType, quantityType),
		member("quantity_add_int", quantityType, quantityType, integer),
	},
	"sub": {
		member("quantity_sub", quantityType, quantityType, quantityType),
		member("quantity_sub_int", quantityType, quantityType, integer),
	},
}}

// ipLibrary: IP addresses.
var ipLibrary = library{types: []*cel.Type{ipType}, funcs: map[string][]sig{
	"ip":                   {global("string_to_ip", ipType, str)},
	"family":               {member("ip_family", integer, ipType)},
	"ip.isCanonical":       {global("ip_is_canonical", boolean, str)},
	"isUnspecified":        {member("ip_is_unspecified", boolean, ipType)},
	"isLoopback":           {member("ip_is_loopback", boolean, ipType)},
	"isLinkLocalMulticast": {member("ip_is_link_local_multicast", boolean, ipType)},
	"isLinkLocalUnicast":   {member("ip_is_link_local_unicast", boolean, ipType)},
	"isGlobalUnicast":      {member("ip_is_global_unicast", boolean, ipType)},
	"isIP":                 {global("is_ip", boolean, str)},
	"string":               {global("ip_to_string", str, ipType)},
}}

// cidrLibrary: CIDR ranges.
var cidrLibrary = library{types: []*cel.Type{cidrType}, funcs: map[string][]sig{
	"cidr": {global("string_to_cidr", cidrType, str)},
	"containsIP": {
		member("cidr_contains_ip_string", boolean, cidrType, str),
		member("cidr_contains_ip_ip", boolean, cidrType, ipType),
	},
	"containsCIDR": {
		member("cidr_contains_cidr_string", boolean, cidrType, str),
		member("cidr_contains_cidr", boolean, cidrType, cidrType),
	},
	"ip":           {member("cidr_ip", ipType, cidrType)},
	"prefixLength": {member("cidr_prefix_length", integer, cidrType)},
	"masked":       {member("cidr_masked", cidrType, cidrType)},
	"isCIDR":       {global("is_cidr", boolean, str)},
	"string":       {global("cidr_to_string", str, cidrType)},
}}

// namedFormats are the formats reachable as format.<name>().
var namedFormats = []string{
	"dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName",
	"dns1123LabelPrefix", "dns1123SubdomainPrefix", "dns1035LabelPrefix",
	"labelValue", "uri", "uuid", "byte", "date", "datetime",
}

// formatLibrary: named string formats and their validation.
var formatLibrary = func() library {
	l := library{funcs: map[string][]sig{
		"validate":     {member("format-validate", optional(strList), formatType, str)},
		"format.named": {global("format-named", optional(formatType), str)},
	}}
	for _, name := range namedFormats {
		fn := "format." + name
		l.funcs[fn] = []sig{global(fn, formatType)}
	}
	return l
}()

// semverLibrary: semantic versions, with the normalizing overloads of
// version 1.
var semverLibrary = library{funcs: map[string][]sig{
	"semver": {
		global("string_to_semver", semverType, str),
		global("string_bool_to_semver", semverType, str, boolean),
	},
	"isSemver": {
		global("is_semver_string", boolean, str),
		global("is_semver_string_bool", boolean, str, boolean),
	},
	"isGreaterThan": {member("semver_is_greater_than", boolean, semverType, semverType)},
	"isLessThan":    {member("semver_is_less_than", boolean, semverType, semverType)},
	"compareTo":     {member("semver_compare_to", integer, semverType, semverType)},
	"major":         {member("semver_major", integer, semverType)},
	"minor":         {member("semver_minor", integer, semverType)},
	"patch":         {member("semver_patch", integer, semverType)},
}}

// listsLibrary: Kubernetes' list functions at version 1 (with includes).
var listsLibrary = func() library {
	comparable := []struct {
		name string
		t    *cel.Type
	}{
		{"int", cel.IntType}, {"uint", cel.UintType}, {"double", cel.DoubleType}, {"bool", cel.BoolType},
		{"duration", cel.DurationType}, {"timestamp", cel.TimestampType}, {"string", cel.StringType}, {"bytes", cel.BytesType},
	}
	summable := comparable[:3:3]
	summable = append(summable, comparable[4])

	l := library{funcs: map[string][]sig{
		"indexOf":     {member("list_a_index_of_int", integer, listOfA, typeA)},
		"lastIndexOf": {member("list_a_last_index_of_int", integer, listOfA, typeA)},
		"includes":    {member("list_includes_dyn_dyn", boolean, dyn, dyn)},
	}}
	for _, c := range comparable {
		list := cel.ListType(c.t)
		l.funcs["isSorted"] = append(l.funcs["isSorted"], member(fmt.Sprintf("list_%s_is_sorted_bool", c.name), boolean, list))
		l.funcs["max"] = append(l.funcs["max"], member(fmt.Sprintf("list_%s_max_%s", c.name, c.name), c.t, list))
		l.funcs["min"] = append(l.funcs["min"], member(fmt.Sprintf("list_%s_min_%s", c.name, c.name), c.t, list))
	}
	for _, s := range summable {
		l.funcs["sum"] = append(l.funcs["sum"], member(fmt.Sprintf("list_%s_sum_%s", s.name, s.name), s.t, cel.ListType(s.t)))
	}
	return l
}()
