// Package validatingadmissionpolicystatus tests the
// validatingadmissionpolicy-status-controller against a real apiserver:
// schemas come from its OpenAPI v3 documents and kinds from its
// discovery, as in the controller manager.
package validatingadmissionpolicystatus

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/validatingadmissionpolicystatus"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/validatingadmissionpolicystatus/typecheck"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const timeout = 30 * time.Second

// runController runs the controller in-process, wired as the controller
// manager wires it, until stop is called (or the test ends).
func runController(t *testing.T, c clientset.Interface) (stop func()) {
	t.Helper()
	cp := framework.Shared(t)
	disc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cacheddiscovery.NewMemCacheClient(disc))
	checker := typecheck.NewTypeChecker(typecheck.NewOpenAPIResolver(disc.OpenAPIV3()), mapper)

	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(c, 0)
	ctrl, err := validatingadmissionpolicystatus.NewController(
		factory.Admissionregistration().V1().ValidatingAdmissionPolicies(),
		c.AdmissionregistrationV1().ValidatingAdmissionPolicies(), checker)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctrl.Run(ctx, 5)
	}()
	var once bool
	stop = func() {
		if once {
			return
		}
		once = true
		cancel()
		<-done
		factory.Shutdown()
	}
	t.Cleanup(stop)
	return stop
}

func matchDeployments() *admissionregistrationv1.MatchResources {
	return matchResources("apps", "v1", "deployments")
}

func matchResources(group, version string, resources ...string) *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: resources},
		},
	}}}
}

func validations(exprs ...string) []admissionregistrationv1.Validation {
	out := make([]admissionregistrationv1.Validation, len(exprs))
	for i, e := range exprs {
		out[i] = admissionregistrationv1.Validation{Expression: e}
	}
	return out
}

func createPolicy(t *testing.T, c clientset.Interface, p *admissionregistrationv1.ValidatingAdmissionPolicy) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	created, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating policy %s: %v", p.Name, err)
	}
	t.Cleanup(func() {
		_ = c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), p.Name, metav1.DeleteOptions{})
	})
	return created
}

func newPolicy(name string, match *admissionregistrationv1.MatchResources, exprs ...string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: match,
			Validations:      validations(exprs...),
		},
	}
}

// waitChecked waits until the policy's status observes generation gen and
// returns the policy.
func waitChecked(t *testing.T, c clientset.Interface, name string, gen int64) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	var p *admissionregistrationv1.ValidatingAdmissionPolicy
	framework.Eventually(t, timeout, fmt.Sprintf("policy %s to observe generation %d", name, gen), func(ctx context.Context) (bool, error) {
		var err error
		p, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.ObservedGeneration == gen, nil
	})
	return p
}

func warningsOf(p *admissionregistrationv1.ValidatingAdmissionPolicy) []admissionregistrationv1.ExpressionWarning {
	if p.Status.TypeChecking == nil {
		return nil
	}
	return p.Status.TypeChecking.ExpressionWarnings
}

// expectNoWarnings checks the policy has no warnings. status.typeChecking
// itself may be gone: applying it empty after warnings were applied leaves
// nothing owned under it.
func expectNoWarnings(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	t.Helper()
	for _, w := range warningsOf(p) {
		t.Errorf("%s: unexpected warning on %s: %s", p.Name, w.FieldRef, w.Warning)
	}
}

// expectWarnings checks the fieldRefs, in order, and that each warning
// contains its substrings.
func expectWarnings(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy, want map[string][]string, order ...string) {
	t.Helper()
	got := warningsOf(p)
	if len(got) != len(order) {
		t.Fatalf("%s: got %d warnings, want %d: %+v", p.Name, len(got), len(order), got)
	}
	for i, w := range got {
		if w.FieldRef != order[i] {
			t.Errorf("%s: warning %d is on %s, want %s", p.Name, i, w.FieldRef, order[i])
		}
		for _, s := range want[w.FieldRef] {
			if !strings.Contains(w.Warning, s) {
				t.Errorf("%s: warning on %s is %q, lacking %q", p.Name, w.FieldRef, w.Warning, s)
			}
		}
	}
}

// A correct expression gets observedGeneration and an empty typeChecking;
// a misspelled field gets upstream's warning text on the right fieldRef;
// the status is written by the controller's field manager.
func TestExpressions(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runController(t, c)

	good := createPolicy(t, c, newPolicy("vap-good", matchDeployments(), "object.spec.replicas > 1"))
	p := waitChecked(t, c, good.Name, good.Generation)
	if p.Status.TypeChecking == nil {
		t.Errorf("%s: no status.typeChecking", p.Name)
	}
	expectNoWarnings(t, p)
	managers := map[string]bool{}
	for _, mf := range p.ManagedFields {
		if mf.Subresource == "status" {
			managers[mf.Manager] = mf.Operation == metav1.ManagedFieldsOperationApply
		}
	}
	if !managers["validatingadmissionpolicy-status"] {
		t.Errorf("status not applied by field manager validatingadmissionpolicy-status: %+v", p.ManagedFields)
	}

	bad := createPolicy(t, c, newPolicy("vap-typo", matchDeployments(),
		"object.spec.replicas < 100", "object.spec.replicass > 1", "object.spec.replicas > '1'"))
	p = waitChecked(t, c, bad.Name, bad.Generation)
	got := warningsOf(p)
	want := []admissionregistrationv1.ExpressionWarning{
		{FieldRef: "spec.validations[1].expression", Warning: "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicass'\n" +
			" | object.spec.replicass > 1\n" +
			" | ...........^\n"},
		{FieldRef: "spec.validations[2].expression", Warning: "apps/v1, Kind=Deployment: ERROR: <input>:1:22: found no matching overload for '_>_' applied to '(int, string)'\n" +
			" | object.spec.replicas > '1'\n" +
			" | .....................^\n"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("warnings\n got %q\nwant %q", got, want)
	}
}

// Message expressions are checked too and reported on their own fieldRef;
// several matched kinds are reported in one warning, one per kind.
func TestMessageExpressionAndKinds(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runController(t, c)

	p := newPolicy("vap-message", matchResources("apps", "v1", "deployments", "replicasets", "deployments/status"))
	p.Spec.Validations = []admissionregistrationv1.Validation{
		{Expression: "object.spec.replicas > 0", MessageExpression: "'replicas: ' + string(object.spec.replicass)"},
		{Expression: "object.spec.strategy.type == 'Recreate'", MessageExpression: "'ok'"},
	}
	created := createPolicy(t, c, p)
	got := waitChecked(t, c, created.Name, created.Generation)
	expectWarnings(t, got, map[string][]string{
		"spec.validations[0].messageExpression": {"apps/v1, Kind=Deployment: ERROR: <input>:1:34: undefined field 'replicass'", "\n\napps/v1, Kind=ReplicaSet: ERROR: <input>:1:34: undefined field 'replicass'"},
		// ReplicaSets have no strategy; Deployments do.
		"spec.validations[1].expression": {"apps/v1, Kind=ReplicaSet: ERROR: <input>:1:12: undefined field 'strategy'"},
	}, "spec.validations[0].messageExpression", "spec.validations[1].expression")
	if w := warningsOf(got)[1].Warning; strings.Contains(w, "Kind=Deployment") {
		t.Errorf("Deployments have a strategy: %q", w)
	}
}

// Expressions calling the Kubernetes CEL libraries type-check clean.
// (Quantity-valued fields such as resources.requests are not visible to
// type checking at all, upstream as here: their schema has no type.)
func TestLibraries(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runController(t, c)

	p := createPolicy(t, c, newPolicy("vap-libraries", matchDeployments(),
		"object.spec.template.spec.containers.all(c, c.image != '' && quantity('100Mi').isLessThan(quantity('1Gi')))",
		"url('https://example.com/path').getHost() == 'example.com' && isURL('https://example.com')",
		"object.spec.template.spec.containers.map(c, c.name).isSorted()",
		"authorizer.group('apps').resource('deployments').namespace(object.metadata.namespace).check('update').allowed()",
		"authorizer.group('').resource('pods').labelSelector('app=x').check('list').allowed() || authorizer.path('/healthz').check('get').allowed()",
		"object.metadata.name.find('[a-z]+') != '' && object.metadata.name.findAll('[0-9]').size() >= 0",
		"ip('10.0.0.1').family() == 4 && cidr('10.0.0.0/8').containsIP('10.1.2.3') && isCIDR('10.0.0.0/8')",
		"!format.dns1123Label().validate(object.metadata.name).hasValue() && semver('1.2.3').major() == 1",
		"[1, 2, 3].sum() == 6 && [3, 1].sort().isSorted() && sets.contains([1, 2], [1]) && lists.range(2).size() == 2",
		"object.metadata.labels.all(k, v, k.size() + v.size() < 100) && object.?spec.?replicas.orValue(1) >= 0",
		"request.userInfo.username != '' && (request.namespace == '' || namespaceObject.metadata.name == request.namespace)",
	))
	expectNoWarnings(t, waitChecked(t, c, p.Name, p.Generation))
}

// A new generation is checked again: fixing the expression clears the
// warning, breaking it again brings it back.
func TestNewGenerationRechecked(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runController(t, c)

	p := createPolicy(t, c, newPolicy("vap-generations", matchDeployments(), "object.spec.replicass > 1"))
	got := waitChecked(t, c, p.Name, 1)
	expectWarnings(t, got, map[string][]string{"spec.validations[0].expression": {"undefined field 'replicass'"}}, "spec.validations[0].expression")

	update := func(exprs ...string) int64 {
		t.Helper()
		var gen int64
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			cur, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			cur.Spec.Validations = validations(exprs...)
			updated, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Update(ctx, cur, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			gen = updated.Generation
			return true, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return gen
	}

	gen := update("object.spec.replicas > 1")
	if gen != 2 {
		t.Fatalf("generation %d after a spec change", gen)
	}
	expectNoWarnings(t, waitChecked(t, c, p.Name, gen))

	gen = update("object.spec.replicas > 1", "object.metadata.nam == 'x'")
	expectWarnings(t, waitChecked(t, c, p.Name, gen),
		map[string][]string{"spec.validations[1].expression": {"undefined field 'nam'"}}, "spec.validations[1].expression")
}

// crdWithSchema creates a namespaced custom resource type with a typed
// spec and deletes it when the test ends.
func crdWithSchema(t *testing.T, dyn dynamic.Interface, kind string, spec map[string]interface{}) framework.CRD {
	t.Helper()
	plural := strings.ToLower(kind) + "s"
	group := fmt.Sprintf("vap%d.example.com", time.Now().UnixNano()%1000000)
	crd := framework.CRD{Name: plural + "." + group, Kind: kind}
	crd.GVR.Group, crd.GVR.Version, crd.GVR.Resource = group, "v1", plural
	obj := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]interface{}{"name": crd.Name},
		"spec": map[string]interface{}{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]interface{}{"plural": plural, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List"},
			"versions": []interface{}{map[string]interface{}{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]interface{}{"openAPIV3Schema": map[string]interface{}{
					"type":       "object",
					"properties": map[string]interface{}{"spec": spec},
				}},
			}},
		},
	}}
	if _, err := dyn.Resource(framework.CRDGVR).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CRD %s: %v", crd.Name, err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(framework.CRDGVR).Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
	})
	framework.Eventually(t, time.Minute, "CRD "+crd.Name+" to be served", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(crd.GVR).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	// The OpenAPI document of the new group is published a moment later; a
	// policy checked before that sees no schema (and keeps that result
	// until its next generation, upstream too).
	disc, err := discovery.NewDiscoveryClientForConfig(framework.Shared(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	resolver := typecheck.NewOpenAPIResolver(disc.OpenAPIV3())
	framework.Eventually(t, time.Minute, "OpenAPI schema of "+crd.Name, func(context.Context) (bool, error) {
		_, err := resolver.ResolveSchema(crd.GVR.GroupVersion().WithKind(kind))
		return err == nil, nil
	})
	return crd
}

var limitsSpec = map[string]interface{}{
	"type": "object",
	"properties": map[string]interface{}{
		"maxReplicas": map[string]interface{}{"type": "integer"},
		"allowed":     map[string]interface{}{"type": "array", "items": map[string]interface{}{"type": "string"}},
		"window":      map[string]interface{}{"type": "string", "format": "duration"},
		"namespace":   map[string]interface{}{"type": "string"},
	},
}

// params are typed by the schema of the CRD paramKind names. The CRD is
// created after the controller's RESTMapper discovered the API, so as a
// matched resource its kind is only found through a RESTMapper reset.
func TestParamKindCustomResource(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	runController(t, c)
	// Let the controller's RESTMapper discover the API before the CRD exists.
	warm := createPolicy(t, c, newPolicy("vap-warm", matchDeployments(), "object.spec.replicas > 0"))
	waitChecked(t, c, warm.Name, warm.Generation)
	crd := crdWithSchema(t, dyn, "ReplicaLimit", limitsSpec)

	p := newPolicy("vap-params", matchDeployments(),
		"object.spec.replicas <= params.spec.maxReplicas && object.metadata.name in params.spec.allowed",
		"params.spec.maxReplicass > 1",
		"params.spec.window > duration('1s') && params.spec.namespace == object.metadata.namespace",
		"params.spec.allowed == 'x'",
	)
	p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: crd.GVR.GroupVersion().String(), Kind: crd.Kind}
	created := createPolicy(t, c, p)
	expectWarnings(t, waitChecked(t, c, created.Name, created.Generation), map[string][]string{
		"spec.validations[1].expression": {"apps/v1, Kind=Deployment: ", "undefined field 'maxReplicass'"},
		"spec.validations[3].expression": {"found no matching overload for '_==_' applied to '(list(string), string)'"},
	}, "spec.validations[1].expression", "spec.validations[3].expression")

	// The custom resource as the matched kind.
	own := createPolicy(t, c, newPolicy("vap-custom-kind", matchResources(crd.GVR.Group, "v1", crd.GVR.Resource),
		"object.spec.maxReplicas > 0 && object.metadata.name != ''", "object.spec.minReplicas > 0"))
	expectWarnings(t, waitChecked(t, c, own.Name, own.Generation), map[string][]string{
		"spec.validations[1].expression": {crd.GVR.Group + "/v1, Kind=ReplicaLimit: ", "undefined field 'minReplicas'"},
	}, "spec.validations[1].expression")
}

// Kinds without a schema or unknown to the apiserver are skipped without
// a warning, and params of an unknown kind are dyn.
func TestUnresolvableKinds(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runController(t, c)

	p := newPolicy("vap-unknown", matchResources("nope.example.com", "v1", "widgets"), "object.anything.goes == 1")
	p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "nope.example.com/v1", Kind: "Widget"}
	created := createPolicy(t, c, p)
	expectNoWarnings(t, waitChecked(t, c, created.Name, created.Generation))

	q := newPolicy("vap-unknown-params", matchDeployments(), "params.anything.goes == 1 && object.spec.replicas > 0")
	q.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "nope.example.com/v1", Kind: "Widget"}
	created = createPolicy(t, c, q)
	expectNoWarnings(t, waitChecked(t, c, created.Name, created.Generation))
}
