// This file checks the type checker against the apiserver's own
// (k8s.io/apiserver/pkg/admission/plugin/policy/validating), used here as
// a test oracle only: the same policies, schemas and RESTMapper must give
// the same warnings, up to the nanosecond suffix of generated type names.
package typecheck

import (
	"os"
	"regexp"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	upstream "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/openapitest"
)

// openAPIOnly is a discovery client that only serves OpenAPI v3.
type openAPIOnly struct {
	discovery.DiscoveryInterface
	client openapi.Client
}

func (o openAPIOnly) OpenAPIV3() openapi.Client { return o.client }

// generatedName matches type names made from a kind and a nanosecond.
var generatedName = regexp.MustCompile(`([A-Z][A-Za-z]*)\d+`)

// builtinExpressions use libraries, macros and fields of built-in kinds.
var builtinExpressions = []string{
	"object.spec.replicas > 1",
	"object.spec.replicass > 1",
	"object.spec.replicas > '1'",
	"object.metadata.name.startsWith('x')",
	"object.metadata.namespace == 'x'",
	"has(object.spec.template.spec.containers)",
	"object.spec.template.spec.containers.all(c, c.image.startsWith('r'))",
	"object.spec.template.spec.containers.all(c, c.imagee.startsWith('r'))",
	"object.spec.template.spec.containers[0].resources.limits['cpu']",
	"quantity(object.spec.template.spec.containers[0].resources.limits['cpu']).isGreaterThan(quantity('1'))",
	"quantity('1').add(2).isInteger()",
	"url('https://x').getHost() == 'x'",
	"[1,2,3].isSorted()",
	"[1,2].sum() == 3",
	"authorizer.group('apps').resource('deployments').check('create').allowed()",
	"authorizer.requestResource.check('x').allowed()",
	"authorizer.allowed()",
	"authorizer.serviceAccount('a','b').group('').resource('pods').namespace('x').name('y').fieldSelector('a=b').labelSelector('c').subresource('s').check('get').reason() == ''",
	"ip('1.2.3.4').family() == 4",
	"cidr('10.0.0.0/8').containsIP('10.1.1.1') && cidr('10.0.0.0/8').ip().isLoopback()",
	"format.dns1123Label().validate('x').hasValue()",
	"format.named('uuid').hasValue()",
	"semver('1.2.3', true).major() == 1",
	"'abc'.find('[a-z]') == 'a'",
	"'a,b'.split(',').size() == 2",
	"sets.contains([1,2],[1])",
	"object.spec.template.spec.containers.exists_one(c, c.name == 'a')",
	"object.spec.template.metadata.labels.all(k, v, k == v)",
	"lists.range(3).size() == 3",
	"object.?spec.?replicas.orValue(1) > 0",
	"duration('1x') > duration('1s')",
	"'x'.matches('[')",
	"[1, 'a'].size() > 0",
	"object.spec.strategy.rollingUpdate.maxSurge > 1",
	"object.status.conditions.exists(c, c.lastTransitionTime > timestamp('2020-01-01T00:00:00Z'))",
	"object.spec.minReadySeconds == 1.0",
	"request.userInfo.username == 'x'",
	"request.namespace == 'x' && request.kind.group == ''",
	"namespaceObject.metadata.labels['a'] == 'b'",
	"namespaceObject.metadata.foo == 1",
	"params.data.foo == 'x'",
	"params.dataa == 1",
	"variables.foo > 1",
	"variables.bar.size() > 0",
	"variables.bar[0].foo == 1",
	"variables.missing",
	"variables.foo == 'x'",
	"variables.broken == 1",
	"object.spec.replicas >",
	"object.spec.template.spec.containers.map(c, c.name).join(',')",
	"object.spec.selector.matchLabels.size() > 0",
	"object.metadata.creationTimestamp < now",
	"object.kind == 'Deployment' && object.apiVersion == 'apps/v1'",
	"oldObject == null || oldObject.spec.replicas <= object.spec.replicas",
	"object.spec.template.spec.containers[0].ports[0].containerPort + 1",
	"object.metadata.managedFields[0].fieldsV1.foo",
	"object.spec.template.spec.containers[0].resources.limits.cpu",
	"isQuantity('1')",
	"object.spec.template.spec.securityContext.seccompProfile.type == 'x'",
	"optional.of(1).value() == 1",
	"math.greatest(1,2) == 2",
	"base64.encode(b'x') == ''",
	"cel.bind(x, 1, x+1) == 2",
	"[3,1].sortBy(x, x) == [1,3]",
	"[3,1].sort() == [1,3] && [[1]].flatten() == [1] && [1,1].distinct() == [1] && [1].reverse() == [1] && [1,2].slice(0,1) == [1]",
	"'a'.reverse() == 'a'",
	"'x'.quote() == 'x'",
	"object.spec.template.spec.containers.transformList(i, c, c.name).size() > 0",
	"object.spec.template.spec.containers.transformMap(i, c, c.name).size() > 0",
	"[1,2].indexOf(1) == 0 && 'abc'.indexOf('b') == 1",
	"[1].includes(1)",
	"[1].max() == 1 && [1].min() == 1",
	"size(object.data) > 0",
	"object.data.foo == 'x'",
	"object.binaryData['x'] == b'x'",
	"object.spec.template.spec.containers[0].resources.limits",
	"object.spec.template.spec.containers.filter(c, c.name == 'x')[0].name",
	"type(object) == string",
	"object.spec.template.spec.volumes[0].hostPath.path.lowerAscii() == 'x'",
	"object.spec.template.spec.dnsPolicy + 1",
	"object.spec.schedule.size() + object.spec.jobTemplate.spec.template.spec.containers.size() > 0",
	"object.spec.versions[0].schema.openAPIV3Schema.properties['x'].properties['y'].type == 'x'",
	"object.spec.versions[0].schema.openAPIV3Schema.properties['x'].type == 'x'",
	"object.spec.versions[0].schema.openAPIV3Schema.type == 'x'",
	"object.spec.validations[0].expression == 'x'",
	"object.spec.matchConstraints.namespaceSelector.matchExpressions.all(e, e.operator == 'In')",
	"object.metadata.labels.exists(k, k == 'x') && object.metadata.annotations['a'] == 'b'",
	"string(ip('1.2.3.4')) == '' && string(cidr('1.2.3.0/24')) == ''",
	"ip.isCanonical('1.2.3.4')",
	"object.spec.template.spec.containers.all(c, c.env.all(e, e.valueFrom.fieldRef.fieldPath != ''))",
	"1 + 'a'",
	"timestamp('bad') > timestamp('2020-01-01T00:00:00Z')",
	"object.metadata.deletionTimestamp == null",
	"object.spec.template.spec.containers.all(c, has(c.securityContext.privileged) && !c.securityContext.privileged)",
	"object.spec.template.spec.containers.all(c, has(c.securityContext.privilegedd))",
	"object.spec.replicas.foo",
	"object.spec.replicas in [1, 2]",
	"object.spec.template.spec.nodeSelector.all(k, object.spec.template.spec.nodeSelector[k] != '')",
	"object.spec.template.spec.overhead['cpu']",
	"object.spec.template.spec.containers[0].resources.requests.size() > 0",
	"object.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[0]",
	"object.metadata.ownerReferences.exists(o, o.controller)",
	"object.status.readyReplicas == object.spec.replicas",
	"{'a': 1}.a == 1",
	"kubernetes.GroupVersionKind{group: 'x'}.group == 'x'",
}

// schemaExpressions select fields of testdata/widgets.json's kinds, one
// conversion rule each.
var schemaExpressions = []string{
	"object.spec.replicass > 1",
	"object.spec.template.spec.containers.size() > 0",
	"request.userInfo.username == 'x' && namespaceObject.metadata.labels['a'] == 'b'",
	"variables.foo > 1 && variables.bar.size() > 0",
	"object.spec.replicas + object.spec.ratio > 1.0",
	"object.spec.name.size() + object.spec.namespace.size() + object.spec.__namespace__.size() > 0",
	"object.spec.in == 1 && object.spec.__in__ == 1",
	"object.spec.x__dash__dash.size() > 0",
	"object.spec.x__dash__ == 1",
	"object.spec.a__dot__b + object.spec.a__slash__b == 'x'",
	"object.spec.__underscores__dunder == 1",
	"object.spec.__dunder == 1",
	"has(object.spec.enabled) && object.spec.enabled == 1",
	"object.spec.when > timestamp('2020-01-01T00:00:00Z') && object.spec.day == 1",
	"object.spec.timeout > duration('1s') && object.spec.timeout == 1",
	"object.spec.data == b'x' && object.spec.data == 'x'",
	"object.spec.port == 1 || object.spec.port == 'x' || object.spec.port2.foo == 1",
	"object.spec.anything == 1",
	"object.spec.freeform.x == 1",
	"object.spec.labels['a'] == 'b' && object.spec.labels.a == 1",
	"object.spec.allowAll.a == 'x' && object.spec.allowAll.b == 'y'",
	"object.spec.nested[0][0].x == 'a'",
	"object.spec.nested[0][0].y == 1",
	"object.spec.embedded.apiVersion == 1 && object.spec.embedded.metadata.name == 1 && object.spec.embedded.spec.y == 1",
	"object.spec.embedded.metadata.labels == 1",
	"object.spec.embeddedFull.metadata.labels['x'] == 1",
	"object.spec.embeddedList[0].kind == 1 && object.spec.embeddedList[0].metadata.generateName == 1 && object.spec.embeddedList[0].z == 1",
	"object.spec.nullableThing == null",
	"object.spec.listNoItems == 1",
	"object.spec.mapOfLists['a'][0] == 1",
	"object.spec.mapOfUntyped == 1",
	"object.spec.mapOfObjects['a'].q == 1 && object.spec.mapOfObjects.b.r == 1",
	"object.spec.listOfMaps[0]['a'] == 'x'",
	"object.spec.recursive.children[0].value == 1 && object.spec.recursive.parent.value == 1",
	"object.spec.recursive.children[0].children == 1 && object.spec.recursive.parent.parent.foo == 1",
	"object.spec.self.spec.replicas == 1",
	"object.spec.self.foo == 1",
	"object.spec.unknownType == 1",
	"object.status.ready == 1",
	"object.metadata.name == 1 && object.metadata.generateName == 1",
	"object.metadata.labels == 1",
	"object.metadata.creationTimestamp == 1",
	"object.metadata.namespace == 1",
	"object.spec.size == 'x'",
	"object.foo == 1",
	"params.spec.replicas == 'x'",
	"params.spec.size == 'x'",
	"params.metadata.labels == 1",
	"params.foo == 1",
}

type diffPolicy struct {
	name        string
	expressions []string
	groups      []string
	versions    []string
	resources   []string
	paramKind   *admissionregistrationv1.ParamKind
}

// TestUpstreamDiff checks a corpus of expressions over built-in kinds and
// over custom resource schemas exercising every conversion rule. Setting
// KCM_OPENAPI_V3_DIR to a directory of OpenAPI v3 documents (as in
// kubernetes' api/openapi-spec/v3) checks the built-in kinds against those
// instead of client-go's embedded copies.
func TestUpstreamDiff(t *testing.T) {
	oc := testOpenAPI(t)
	if dir := os.Getenv("KCM_OPENAPI_V3_DIR"); dir != "" {
		full, err := openapitest.NewFileClient(dir).Paths()
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range full {
			oc[k] = v
		}
	}
	mapper := testMapper()
	up := &upstream.TypeChecker{SchemaResolver: &resolver.ClientDiscoveryResolver{Discovery: openAPIOnly{client: oc}}, RestMapper: mapper}
	ours := NewTypeChecker(NewOpenAPIResolver(oc), mapper)

	variables := []admissionregistrationv1.Variable{
		{Name: "foo", Expression: "object.spec.replicas"},
		{Name: "bar", Expression: "object.spec.template.spec.containers"},
		{Name: "broken", Expression: "object.nope"},
		{Name: "early", Expression: "variables.later"},
		{Name: "later", Expression: "1"},
	}
	policies := []diffPolicy{
		{name: "deploy", expressions: append(builtinExpressions, libraryExpressions...), groups: []string{"apps"}, versions: []string{"v1"}, resources: []string{"deployments"}},
		{name: "deploy-params", expressions: builtinExpressions, groups: []string{"apps"}, versions: []string{"v1"}, resources: []string{"deployments"}, paramKind: &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}},
		{name: "deploy-badparams", expressions: schemaExpressions, groups: []string{"apps"}, versions: []string{"v1"}, resources: []string{"deployments"}, paramKind: &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: "Nope"}},
		{name: "deploy-unparsable", expressions: schemaExpressions, groups: []string{"apps"}, versions: []string{"v1"}, resources: []string{"deployments"}, paramKind: &admissionregistrationv1.ParamKind{APIVersion: "a/b/c", Kind: "Nope"}},
		{name: "core", expressions: schemaExpressions, groups: []string{""}, versions: []string{"v1"}, resources: []string{"pods", "configmaps", "pods/status", "namespaces"}},
		{name: "multi", expressions: schemaExpressions, groups: []string{"apps", "batch"}, versions: []string{"v1"}, resources: []string{"deployments", "statefulsets", "jobs", "cronjobs"}},
		{name: "wild", expressions: schemaExpressions, groups: []string{"*"}, versions: []string{"v1"}, resources: []string{"deployments"}},
		{name: "widget", expressions: schemaExpressions, groups: []string{"example.com"}, versions: []string{"v1"}, resources: []string{"widgets"}, paramKind: &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: "Widget"}},
		{name: "gadget", expressions: schemaExpressions, groups: []string{"example.com"}, versions: []string{"v1"}, resources: []string{"gadgets", "untypeds", "schemalesses"}, paramKind: &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: "Gadget"}},
		{name: "untyped-params", expressions: schemaExpressions, groups: []string{"apps"}, versions: []string{"v1"}, resources: []string{"deployments"}, paramKind: &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1", Kind: "Untyped"}},
		{name: "nokind-params", expressions: schemaExpressions, groups: []string{"apps"}, versions: []string{"v1"}, resources: []string{"deployments"}, paramKind: &admissionregistrationv1.ParamKind{APIVersion: "example.com/v1"}},
		{name: "unknown", expressions: schemaExpressions, groups: []string{"example.com"}, versions: []string{"v1"}, resources: []string{"widgets"}},
	}
	for _, p := range policies {
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: p.name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				ParamKind: p.paramKind,
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{Rule: admissionregistrationv1.Rule{APIGroups: p.groups, APIVersions: p.versions, Resources: p.resources}},
				}}},
				Variables: variables,
			},
		}
		for i, e := range p.expressions {
			v := admissionregistrationv1.Validation{Expression: e}
			if i%8 == 0 {
				// A few message expressions: they are checked the same way.
				v.MessageExpression = "'msg: ' + " + e
			}
			policy.Spec.Validations = append(policy.Spec.Validations, v)
		}
		want, got := normalized(up.Check(policy)), normalized(ours.Check(policy))
		if len(want) == 0 && p.name != "wild" {
			t.Errorf("%s: upstream found nothing; the corpus no longer exercises it", p.name)
		}
		for i := 0; i < len(want) || i < len(got); i++ {
			var w, g string
			if i < len(want) {
				w = want[i]
			}
			if i < len(got) {
				g = got[i]
			}
			if w != g {
				t.Errorf("%s: warning %d differs\nupstream: %q\nours:     %q", p.name, i, w, g)
			}
		}
	}
}

// normalized renders warnings as "fieldRef: warning" with generated type
// names made comparable.
func normalized(ws []admissionregistrationv1.ExpressionWarning) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.FieldRef + ": " + generatedName.ReplaceAllString(w.Warning, "${1}N")
	}
	return out
}
