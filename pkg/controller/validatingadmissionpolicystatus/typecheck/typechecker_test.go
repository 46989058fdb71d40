package typecheck

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type rule struct{ groups, versions, resources []string }

func policyOf(rules []rule, paramKind *admissionregistrationv1.ParamKind, variables []admissionregistrationv1.Variable, validations ...admissionregistrationv1.Validation) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	p.Name = "p"
	p.Spec.ParamKind = paramKind
	p.Spec.Variables = variables
	p.Spec.Validations = validations
	if rules != nil {
		p.Spec.MatchConstraints = &admissionregistrationv1.MatchResources{}
		for _, r := range rules {
			p.Spec.MatchConstraints.ResourceRules = append(p.Spec.MatchConstraints.ResourceRules, admissionregistrationv1.NamedRuleWithOperations{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: r.groups, APIVersions: r.versions, Resources: r.resources},
				},
			})
		}
	}
	return p
}

var (
	deployments = []rule{{[]string{"apps"}, []string{"v1"}, []string{"deployments"}}}
	widgets     = []rule{{[]string{"example.com"}, []string{"v1"}, []string{"widgets"}}}
)

func expr(e string) admissionregistrationv1.Validation {
	return admissionregistrationv1.Validation{Expression: e}
}

func newTestChecker(t *testing.T) *TypeChecker {
	return NewTypeChecker(NewOpenAPIResolver(testOpenAPI(t)), testMapper())
}

// The warning text is exactly upstream's: per kind "<gvk>: <cel issues>\n",
// kinds joined by "\n"; fieldRef names the expression.
func TestWarningFormat(t *testing.T) {
	c := newTestChecker(t)
	rules := []rule{{[]string{"apps"}, []string{"v1"}, []string{"deployments", "statefulsets"}}}
	got := c.Check(policyOf(rules, nil, nil,
		expr("object.spec.replicas > 1"),
		admissionregistrationv1.Validation{Expression: "object.spec.replicass > 1", MessageExpression: "object.metadata.name + 1"},
		admissionregistrationv1.Validation{Expression: "true", MessageExpression: "'ok: ' + object.metadata.name"},
	))
	want := []admissionregistrationv1.ExpressionWarning{
		{
			FieldRef: "spec.validations[1].expression",
			Warning: "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicass'\n" +
				" | object.spec.replicass > 1\n" +
				" | ...........^\n" +
				"\n" +
				"apps/v1, Kind=StatefulSet: ERROR: <input>:1:12: undefined field 'replicass'\n" +
				" | object.spec.replicass > 1\n" +
				" | ...........^\n",
		},
		{
			FieldRef: "spec.validations[1].messageExpression",
			Warning: "apps/v1, Kind=Deployment: ERROR: <input>:1:22: found no matching overload for '_+_' applied to '(string, int)'\n" +
				" | object.metadata.name + 1\n" +
				" | .....................^\n" +
				"\n" +
				"apps/v1, Kind=StatefulSet: ERROR: <input>:1:22: found no matching overload for '_+_' applied to '(string, int)'\n" +
				" | object.metadata.name + 1\n" +
				" | .....................^\n",
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
}

func TestResultString(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	rs := Results{
		{GVK: gvk},
		{GVK: gvk, Err: errors.New("boom")},
	}
	if got, want := rs.String(), "apps/v1, Kind=Deployment: type checking error: boom\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := (Results{}).String(); got != "" {
		t.Errorf("empty results: %q", got)
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		policy *admissionregistrationv1.ValidatingAdmissionPolicy
		// want maps fieldRefs to substrings of their warning; nil means no
		// warnings at all.
		want map[string][]string
	}{
		{name: "correct expression", policy: policyOf(deployments, nil, nil, expr("object.spec.replicas > 1"))},
		{name: "type mismatch", policy: policyOf(deployments, nil, nil, expr("object.spec.replicas < 100"), expr("object.spec.replicas > '1'")),
			want: map[string][]string{"spec.validations[1].expression": {"found no matching overload for '_>_' applied to '(int, string)'"}}},
		{name: "no match constraints: nothing is checked, not even syntax", policy: policyOf(nil, nil, nil, expr("object.spec.replicas >"))},
		{name: "wildcard group: nothing is checked", policy: policyOf([]rule{{[]string{"*"}, []string{"v1"}, []string{"deployments"}}}, nil, nil, expr("object.x"))},
		{name: "wildcard version: nothing is checked", policy: policyOf([]rule{{[]string{"apps"}, []string{"*"}, []string{"deployments"}}}, nil, nil, expr("object.x"))},
		{name: "only subresources and wildcards: nothing is checked", policy: policyOf([]rule{{[]string{"apps"}, []string{"v1"}, []string{"deployments/status", "*"}}}, nil, nil, expr("object.x"))},
		{name: "unknown resource is skipped", policy: policyOf([]rule{{[]string{"apps"}, []string{"v1"}, []string{"nopes", "deployments"}}}, nil, nil, expr("object.x == 1")),
			want: map[string][]string{"spec.validations[0].expression": {"apps/v1, Kind=Deployment: ", "undefined field 'x'"}}},
		{name: "kind without schema is skipped", policy: policyOf([]rule{{[]string{"example.com"}, []string{"v1"}, []string{"schemalesses"}}}, nil, nil, expr("object.x == 1"))},
		{name: "schema CEL cannot see makes object dyn, the kind is still checked", policy: policyOf([]rule{{[]string{"example.com"}, []string{"v1"}, []string{"untypeds"}}}, nil, nil, expr("object.x == 1"), expr("nope")),
			want: map[string][]string{"spec.validations[1].expression": {"example.com/v1, Kind=Untyped: ", "undeclared reference to 'nope'"}}},
		{name: "custom resource fields", policy: policyOf(widgets, nil, nil,
			expr("object.spec.replicas > 1 && object.spec.port == 'a' && object.spec.labels['x'] == 'y'"),
			expr("object.spec.namespace == 'x' && object.spec.x__dash__dash == 'y' && object.spec.when < timestamp('2030-01-01T00:00:00Z')"),
			expr("object.spec.embedded.metadata.name == 'n' && object.spec.embedded.spec.y == 's'"),
			expr("object.spec.anything == 1")),
			want: map[string][]string{"spec.validations[3].expression": {"example.com/v1, Kind=Widget: ", "undefined field 'anything'"}}},
		{name: "params typed by their schema", policy: policyOf(deployments, &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}, nil,
			expr("params.data['max'] == '3'"), expr("params.dataa == 1"), expr("params.data == 1")),
			want: map[string][]string{
				"spec.validations[1].expression": {"undefined field 'dataa'"},
				"spec.validations[2].expression": {"found no matching overload for '_==_' applied to '(map(string, string), int)'"},
			}},
		{name: "params of a kind without schema are dyn", policy: policyOf(deployments, &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: "Nope"}, nil,
			expr("params.anything == 1"))},
		{name: "params undeclared without paramKind", policy: policyOf(deployments, nil, nil, expr("params.x == 1")),
			want: map[string][]string{"spec.validations[0].expression": {"undeclared reference to 'params'"}}},
		{name: "params undeclared with an unparsable paramKind apiVersion", policy: policyOf(deployments, &admissionregistrationv1.ParamKind{APIVersion: "a/b/c", Kind: "X"}, nil, expr("params.x == 1")),
			want: map[string][]string{"spec.validations[0].expression": {"undeclared reference to 'params'"}}},
		{name: "variables are typed in order", policy: policyOf(deployments, nil, []admissionregistrationv1.Variable{
			{Name: "replicas", Expression: "object.spec.replicas"},
			{Name: "double", Expression: "variables.replicas * 2"},
			{Name: "containers", Expression: "object.spec.template.spec.containers"},
			{Name: "early", Expression: "variables.later"},
			{Name: "later", Expression: "'s'"},
			{Name: "broken", Expression: "object.nope"},
		},
			expr("variables.double > 1 && variables.containers.size() > 0 && variables.containers[0].anything == 1"),
			expr("variables.replicas == 'x'"),
			expr("variables.early == 1 && variables.broken == 1"),
			expr("variables.later == 1"),
			expr("variables.missing")),
			want: map[string][]string{
				"spec.validations[1].expression": {"found no matching overload for '_==_' applied to '(int, string)'"},
				"spec.validations[3].expression": {"found no matching overload for '_==_' applied to '(string, int)'"},
				"spec.validations[4].expression": {"undefined field 'missing'"},
			}},
		{name: "admission variables", policy: policyOf(deployments, nil, nil,
			expr("request.operation == 'CREATE' && request.userInfo.groups.exists(g, g == 'x') && request.namespace == 'ns' && request.kind.kind == 'Deployment'"),
			expr("namespaceObject.metadata.labels['env'] == 'prod' && namespaceObject.status.phase == 'Active'"),
			expr("oldObject == null || oldObject.spec.replicas <= object.spec.replicas"),
			expr("request.uid == 'x'"),
			expr("namespaceObject.metadata.ownerReferences.size() == 0")),
			want: map[string][]string{
				"spec.validations[3].expression": {"undefined field 'uid'"},
				"spec.validations[4].expression": {"undefined field 'ownerReferences'"},
			}},
		{name: "authorizer.requestResource is not declared, as upstream", policy: policyOf(deployments, nil, nil,
			expr("authorizer.requestResource.check('update').allowed()")),
			want: map[string][]string{"spec.validations[0].expression": {"unexpected failed resolution of 'kubernetes.authorization.Authorizer'"}}},
		{name: "libraries not in the Kubernetes environment", policy: policyOf(deployments, nil, nil,
			expr("math.greatest(1, 2) == 2"), expr("cel.bind(x, 1, x) == 1"), expr("base64.encode(b'x') == 'eA=='"), expr("'a'.reverse() == 'a'")),
			want: map[string][]string{
				"spec.validations[0].expression": {"undeclared reference to 'math'"},
				"spec.validations[1].expression": {"undeclared reference to 'cel'"},
				"spec.validations[2].expression": {"undeclared reference to 'base64'"},
				"spec.validations[3].expression": {"found no matching overload for 'reverse'"},
			}},
		{name: "literal validators", policy: policyOf(deployments, nil, nil,
			expr("duration('1x') > duration('1s')"), expr("'x'.matches('[')"), expr("[1, 'a'].size() > 0"), expr("timestamp('x') > timestamp('2020-01-01T00:00:00Z')")),
			want: map[string][]string{
				"spec.validations[0].expression": {"invalid duration argument"},
				"spec.validations[1].expression": {"invalid matches argument"},
				"spec.validations[2].expression": {"expected type 'int' but found 'string'"},
				"spec.validations[3].expression": {"invalid timestamp argument"},
			}},
	}
	c := newTestChecker(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := c.Check(tc.policy)
			if len(got) != len(tc.want) {
				t.Errorf("got %d warnings, want %d: %+v", len(got), len(tc.want), got)
			}
			for _, w := range got {
				subs, ok := tc.want[w.FieldRef]
				if !ok {
					t.Errorf("unexpected warning on %s: %s", w.FieldRef, w.Warning)
				}
				for _, s := range subs {
					if !strings.Contains(w.Warning, s) {
						t.Errorf("%s: warning %q lacks %q", w.FieldRef, w.Warning, s)
					}
				}
			}
		})
	}
}

// libraryExpressions call every function of the Kubernetes and cel-go
// libraries the apiserver enables, with their declared signatures.
var libraryExpressions = []string{
	// urls
	"url('https://example.com/p?q=1').getScheme() == 'https' && isURL('x') && url('https://a').getHost() != ''",
	"url('https://a').getHostname() + url('https://a').getPort() + url('https://a').getEscapedPath() != '' && url('https://a').getQuery()['q'][0] == '1'",
	// regex
	"'abc'.find('[a-z]') == 'a' && 'abc'.findAll('[a-z]').size() == 3 && 'abc'.findAll('[a-z]', 2).size() == 2",
	// authz and selectors
	"authorizer.group('apps').resource('deployments').subresource('scale').namespace('ns').name('n').check('update').allowed()",
	"authorizer.path('/healthz').check('get').reason() == '' && !authorizer.group('').resource('pods').check('list').errored()",
	"authorizer.serviceAccount('ns', 'sa').group('').resource('pods').fieldSelector('spec.nodeName=n').labelSelector('a=b').check('list').error() == ''",
	// quantity
	"quantity('1Gi').isGreaterThan(quantity('1Mi')) && quantity('1').isLessThan(quantity('2')) && quantity('1').compareTo(quantity('1')) == 0",
	"quantity('1').add(quantity('1')).add(1).sub(quantity('1')).sub(1).asInteger() == 1 && quantity('1.5').asApproximateFloat() > 1.0",
	"isQuantity('1') && quantity('1').isInteger() && sign(quantity('-1')) == -1",
	// ip and cidr
	"ip('10.0.0.1').family() == 4 && ip.isCanonical('10.0.0.1') && isIP('x') && string(ip('::1')) == '::1'",
	"ip('::1').isLoopback() || ip('::').isUnspecified() || ip('fe80::1').isLinkLocalUnicast() || ip('ff02::1').isLinkLocalMulticast() || ip('8.8.8.8').isGlobalUnicast()",
	"cidr('10.0.0.0/8').containsIP('10.1.2.3') && cidr('10.0.0.0/8').containsIP(ip('10.1.2.3')) && cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')",
	"cidr('10.0.0.0/8').containsCIDR(cidr('10.1.0.0/16')) && cidr('10.0.0.1/8').ip().family() == 4 && cidr('10.0.0.0/8').prefixLength() == 8",
	"string(cidr('10.0.0.1/8').masked()) == '10.0.0.0/8' && isCIDR('10.0.0.0/8')",
	// format
	"!format.dns1123Label().validate('a').hasValue() && format.named('uuid').hasValue()",
	"[format.dns1123Subdomain(), format.dns1035Label(), format.qualifiedName(), format.dns1123LabelPrefix(), format.dns1123SubdomainPrefix(), format.dns1035LabelPrefix(), format.labelValue(), format.uri(), format.uuid(), format.byte(), format.date(), format.datetime()].size() == 12",
	// semver
	"semver('1.2.3').isGreaterThan(semver('1.0.0')) && semver('1.2.3').isLessThan(semver('2.0.0')) && semver('1.2.3').compareTo(semver('1.2.3')) == 0",
	"semver('v1.2', true).major() + semver('1.2.3').minor() + semver('1.2.3').patch() == 6 && isSemver('1.2.3') && isSemver('v1', true)",
	// Kubernetes lists
	"[1, 2, 3].isSorted() && ['a'].isSorted() && [1.0].sum() == 1.0 && [duration('1s')].sum() == duration('1s') && [1u].sum() == 1u",
	"[1, 2].max() == 2 && ['a'].min() == 'a' && [timestamp('2020-01-01T00:00:00Z')].max() > timestamp('2019-01-01T00:00:00Z') && [b'a'].min() == b'a'",
	"[1, 2].indexOf(2) == 1 && [1, 2].lastIndexOf(2) == 1 && [1].includes(1) && [true].isSorted()",
	// cel-go strings v2, sets, lists v3, two-variable comprehensions, optionals
	"'a,b'.split(',').join('-') == 'a-b' && 'abc'.indexOf('b') == 1 && 'x'.upperAscii() == 'X' && strings.quote('x') == '\"x\"' && '%d'.format([1]) == '1'",
	"sets.contains([1, 2], [1]) && sets.equivalent([1], [1]) && sets.intersects([1], [1])",
	"lists.range(3).size() == 3 && [3, 1].sort() == [1, 3] && [[1]].flatten() == [1] && [1, 1].distinct() == [1] && [1, 2].reverse() == [2, 1] && [1, 2].slice(0, 1) == [1] && [2, 1].sortBy(x, x) == [1, 2]",
	"[1].first().orValue(0) == 1 && [1].last().hasValue()",
	"[1, 2].all(i, v, i < v) && {'a': 1}.exists(k, v, k == 'a' && v == 1) && [1].transformList(i, v, v * 2) == [2] && [1].transformMap(i, v, v) == {0: 1}",
	"optional.of(1).value() == 1 && optional.none().orValue(2) == 2 && object.?spec.?replicas.orValue(1) > 0 && [?optional.of(1)].size() == 1",
	"object.spec.replicas < 2.0 && object.spec.replicas < 2u",
	"object.metadata.creationTimestamp.getFullYear() > 2000",
}

// Every library function type-checks with its declared signature.
func TestLibrariesTypeCheck(t *testing.T) {
	rules := []rule{{[]string{"apps"}, []string{"v1"}, []string{"deployments"}}}
	var validations []admissionregistrationv1.Validation
	for _, e := range libraryExpressions {
		validations = append(validations, expr(e))
	}
	for _, w := range newTestChecker(t).Check(policyOf(rules, nil, nil, validations...)) {
		t.Errorf("%s: %s", w.FieldRef, w.Warning)
	}
}

// countingMapper records KindsFor lookups and resets.
type countingMapper struct {
	meta.RESTMapper
	lookups []schema.GroupVersionResource
	resets  int
}

func (m *countingMapper) KindsFor(gvr schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	m.lookups = append(m.lookups, gvr)
	return m.RESTMapper.KindsFor(gvr)
}

func (m *countingMapper) Reset() { m.resets++ }

func TestKindsToCheck(t *testing.T) {
	m := meta.NewDefaultRESTMapper(nil)
	var all []schema.GroupVersionKind
	for _, k := range "abcdefghijkl" {
		gvk := schema.GroupVersionKind{Group: "g", Version: "v1", Kind: strings.ToUpper(string(k))}
		m.Add(gvk, meta.RESTScopeNamespace)
		all = append(all, gvk)
	}
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1beta1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "", Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	resources := func(letters string) []string {
		var out []string
		for _, l := range letters {
			out = append(out, string(l)+"s")
		}
		return out
	}
	deploy := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	deployBeta := schema.GroupVersionKind{Group: "apps", Version: "v1beta1", Kind: "Deployment"}
	pod := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}

	tests := []struct {
		name   string
		rules  []rule
		want   []schema.GroupVersionKind
		resets int
	}{
		{name: "no rules", rules: []rule{}},
		{name: "sorted by group, version, kind, duplicates once",
			rules: []rule{{[]string{"apps", ""}, []string{"v1beta1", "v1"}, []string{"deployments", "pods"}}, {[]string{"apps"}, []string{"v1"}, []string{"deployments"}}},
			want:  []schema.GroupVersionKind{pod, deploy, deployBeta}, resets: 1},
		{name: "subresources and wildcard resources are dropped", rules: []rule{{[]string{"apps"}, []string{"v1"}, []string{"deployments/scale", "*", "*/status", "deployments"}}},
			want: []schema.GroupVersionKind{deploy}},
		{name: "a wildcard group drops the rule only", rules: []rule{{[]string{"apps", "*"}, []string{"v1"}, []string{"deployments"}}, {[]string{""}, []string{"v1"}, []string{"pods"}}},
			want: []schema.GroupVersionKind{pod}},
		{name: "at most ten kinds from a rule, then stop",
			rules: []rule{{[]string{""}, []string{"v1"}, []string{"pods"}}, {[]string{"g"}, []string{"v1"}, resources("lkjihgfedcba")}, {[]string{"apps"}, []string{"v1"}, []string{"deployments"}}},
			want:  append([]schema.GroupVersionKind{pod}, all[:10]...)},
		{name: "ten per rule, not in total",
			rules: []rule{{[]string{"g"}, []string{"v1"}, resources("abcdefghi")}, {[]string{"g"}, []string{"v1"}, resources("jkl")}},
			want:  all},
		{name: "unknown resources: one reset per policy", rules: []rule{{[]string{"x"}, []string{"v1"}, []string{"as", "bs"}}, {[]string{"y"}, []string{"v1"}, []string{"cs"}}},
			resets: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cm := &countingMapper{RESTMapper: m}
			c := NewTypeChecker(nil, cm)
			got := c.kindsToCheck(policyOf(tc.rules, nil, nil))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
			if cm.resets != tc.resets {
				t.Errorf("%d resets, want %d", cm.resets, tc.resets)
			}
		})
	}
}
