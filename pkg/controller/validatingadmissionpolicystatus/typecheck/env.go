package typecheck

import (
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
)

// Variable names of a validating admission policy's expressions.
const (
	objectVar     = "object"
	oldObjectVar  = "oldObject"
	paramsVar     = "params"
	requestVar    = "request"
	namespaceVar  = "namespaceObject"
	authorizerVar = "authorizer"
	variablesVar  = "variables"

	variablesTypeName = "kubernetes.variables"
)

// baseOptions is the apiserver's CEL environment for stored expressions:
// every language option and library that Kubernetes 1.37 enables, each at
// the newest version (a library replaced by a newer version is left out).
// Only what changes compilation matters here; cost limits and runtime
// options are not part of type checking.
func baseOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		urlsLibrary.option(),
		regexLibrary.option(),
		authzLibrary.option(),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		quantityLibrary.option(),
		cel.ASTValidators(
			cel.ValidateDurationLiterals(),
			cel.ValidateTimestampLiterals(),
			cel.ValidateRegexLiterals(),
			cel.ValidateHomogeneousAggregateLiterals(),
		),
		ext.Strings(ext.StringsVersion(2)),
		ext.Sets(),
		ipLibrary.option(),
		cidrLibrary.option(),
		formatLibrary.option(),
		authzSelectorsLibrary.option(),
		ext.TwoVarComprehensions(),
		semverLibrary.option(),
		ext.Lists(ext.ListsVersion(3)),
		listsLibrary.option(),
	}
}

var (
	baseEnvOnce sync.Once
	baseEnv     *cel.Env
	baseEnvErr  error
)

// sharedBaseEnv builds the base environment once; extending it is cheaper
// than building it and cel.Env is safe for concurrent use.
func sharedBaseEnv() (*cel.Env, error) {
	baseEnvOnce.Do(func() {
		baseEnv, baseEnvErr = cel.NewEnv(baseOptions()...)
	})
	return baseEnv, baseEnvErr
}

// checkEnv is the environment expressions of one policy are checked in for
// one matched kind.
type checkEnv struct {
	env *cel.Env
	// variables is the type of the variables variable; its fields are
	// added as spec.variables are compiled, in order.
	variables *declType
}

// newCheckEnv declares the policy's variables: object and oldObject typed
// by the matched kind (dyn without a schema), params when the policy has a
// paramKind (typed by its schema, dyn without one), request,
// namespaceObject, authorizer and variables.
//
// authorizer.requestResource is not declared: the apiserver's type checker
// leaves it out too, so its warnings for expressions using it are kept.
func newCheckEnv(object, params *declType, hasParams bool) (*checkEnv, error) {
	base, err := sharedBaseEnv()
	if err != nil {
		return nil, err
	}
	request, namespace := requestDeclType(), namespaceDeclType()
	variables := newObjectType(variablesTypeName, nil)
	roots := []*declType{namespace, request, variables}

	typeOrDyn := func(t *declType) *cel.Type {
		if t == nil {
			return cel.DynType
		}
		return t.celType
	}
	opts := []cel.EnvOption{
		cel.Variable(namespaceVar, namespace.celType),
		cel.Variable(requestVar, request.celType),
		cel.Variable(objectVar, typeOrDyn(object)),
		cel.Variable(oldObjectVar, typeOrDyn(object)),
	}
	if object != nil {
		roots = append(roots, object)
	}
	if hasParams {
		if params != nil {
			roots = append(roots, params)
		}
		opts = append(opts, cel.Variable(paramsVar, typeOrDyn(params)))
	}
	opts = append(opts,
		cel.Variable(authorizerVar, authorizerType),
		cel.Variable(variablesVar, variables.celType),
	)
	opts = append([]cel.EnvOption{cel.CustomTypeProvider(newTypeProvider(base.CELTypeProvider(), roots...))}, opts...)
	env, err := base.Extend(opts...)
	if err != nil {
		return nil, err
	}
	return &checkEnv{env: env, variables: variables}, nil
}

// addVariable compiles a spec.variables entry and exposes it as
// variables.<name> with the type it evaluates to; a variable that does not
// compile is dyn. Its own errors are not reported: only validations carry
// warnings, as upstream.
func (e *checkEnv) addVariable(name, expression string) {
	var out *cel.Type
	if ast, iss := e.env.Compile(expression); iss == nil {
		out = ast.OutputType()
	}
	e.variables.fields[name] = declTypeOfCELType(out)
}

// check compiles an expression and returns cel's issues, nil when it
// type-checks.
func (e *checkEnv) check(expression string) *cel.Issues {
	_, iss := e.env.Compile(expression)
	return iss
}
