package validatingadmissionpolicystatus

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	clientset "k8s.io/client-go/kubernetes"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// TestUpstreamDiff applies the same policies under upstream's
// kube-controller-manager binary (only this controller) and under ours,
// and compares the warnings. Upstream resolves built-in kinds from its
// compiled-in OpenAPI definitions, ours from the apiserver's documents, so
// this also checks that both see the same schemas. Opt in with
// KCM_UPSTREAM_DIFF=1; it needs _output/bin/kube-controller-manager-upstream.
func TestUpstreamDiff(t *testing.T) {
	if os.Getenv("KCM_UPSTREAM_DIFF") == "" {
		t.Skip("set KCM_UPSTREAM_DIFF=1 to compare with the upstream binary")
	}
	cp := framework.Shared(t)
	c := cp.Client(t)
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	crd := crdWithSchema(t, dyn, "ReplicaLimit", limitsSpec)
	policies := diffPolicies(crd)

	stop := startUpstream(t, cp)
	upstream := applyAndCollect(t, c, "up-", policies)
	stop()
	stop = runController(t, c)
	ours := applyAndCollect(t, c, "ours-", policies)
	stop()

	for _, p := range policies {
		u, o := upstream[p.Name], ours[p.Name]
		t.Logf("%s, upstream:\n%s", p.Name, u)
		if u != o {
			t.Errorf("%s differs\nupstream: %q\nours:     %q", p.Name, u, o)
		}
	}
}

func startUpstream(t *testing.T, cp *framework.ControlPlane) (stop func()) {
	t.Helper()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(framework.BinDir(), "kube-controller-manager-upstream"),
		"--kubeconfig="+cp.Kubeconfig, "--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port), "--cert-dir="+dir,
		"--leader-elect=false", "--controllers=validatingadmissionpolicy-status-controller", "--v=2")
	logf, err := os.Create(filepath.Join(dir, "kcm.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		_ = logf.Close()
	}
	t.Cleanup(stop)
	return stop
}

// generatedTypeName matches the kind-plus-nanoseconds names of object
// types, which differ from run to run.
var generatedTypeName = regexp.MustCompile(`([A-Z][A-Za-z]*)\d{3,}`)

// applyAndCollect creates the policies under prefix, waits until each is
// checked, deletes them, and returns their warnings rendered as text.
func applyAndCollect(t *testing.T, c clientset.Interface, prefix string, policies []*admissionregistrationv1.ValidatingAdmissionPolicy) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range policies {
		p = p.DeepCopy()
		key := p.Name
		p.Name = prefix + p.Name
		created := createPolicy(t, c, p)
		checked := waitChecked(t, c, created.Name, created.Generation)
		text := ""
		for _, w := range warningsOf(checked) {
			text += w.FieldRef + ": " + generatedTypeName.ReplaceAllString(w.Warning, "${1}N") + "\n"
		}
		out[key] = text
		if err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func diffPolicies(crd framework.CRD) []*admissionregistrationv1.ValidatingAdmissionPolicy {
	withParams := func(p *admissionregistrationv1.ValidatingAdmissionPolicy, apiVersion, kind string) *admissionregistrationv1.ValidatingAdmissionPolicy {
		p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: apiVersion, Kind: kind}
		return p
	}
	deploy := newPolicy("deployments", matchDeployments(),
		"object.spec.replicas > 1",
		"object.spec.replicass > 1",
		"object.spec.replicas > '1'",
		"object.spec.template.spec.containers.all(c, c.imagee != '')",
		"object.spec.template.spec.containers[0].resources.limits['cpu'] == '1'",
		"authorizer.requestResource.check('update').allowed()",
		"authorizer.group('apps').resource('deployments').check('create').allowed()",
		"quantity('1').isLessThan(quantity('2')) && url('https://x').getHost() == 'x' && [1, 2].isSorted()",
		"object.metadata.namespace == 'x' && object.metadata.labels.x == 'y'",
		"object.spec.strategy.rollingUpdate.maxSurge == 1",
		"object.status.conditions.exists(c, c.lastTransitionTime > timestamp('2020-01-01T00:00:00Z'))",
		"object.spec.minReadySeconds == 1.0",
		"request.userInfo.username == 'x' && namespaceObject.metadata.name == object.metadata.namespac",
		"object.metadata.managedFields[0].fieldsV1.foo == 1",
		"has(object.spec.template.spec.securityContext.seccompProfile) && object.spec.template.spec.securityContext.seccompProfile.typ == 'x'",
		"object.spec.template.metadata.annotations.all(k, v, k != v)",
		"object.spec.template.spec.overhead == null && object.spec.template.spec.volumes[0].hostPath.path.size() > 0",
		"type(object) == string",
		"object.spec.template.spec.containers.map(c, c.name).join(',') != object.spec.template.spec.containers[0].ports[0].containerPort",
		"object.spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[0] == 1",
		"object.metadata.creationTimestamp == 'x' && object.metadata.deletionGracePeriodSeconds == 'x'",
		"object.spec.selector.matchLabels['a'] == 1 && object.spec.selector.matchExpressions[0].operator == 1",
		"object.spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.optional == 'x'",
		"object.spec.template.spec.containers[0].livenessProbe.httpGet.port == 'x' && object.spec.template.spec.containers[0].livenessProbe.httpGet.port == 1",
	)
	deploy.Spec.Variables = []admissionregistrationv1.Variable{
		{Name: "replicas", Expression: "object.spec.replicas"},
		{Name: "containers", Expression: "object.spec.template.spec.containers"},
	}
	deploy.Spec.Validations = append(deploy.Spec.Validations,
		admissionregistrationv1.Validation{Expression: "variables.replicas == 'x'", MessageExpression: "'n: ' + object.metadata.nam"},
		admissionregistrationv1.Validation{Expression: "variables.containers[0].foo == 1", MessageExpression: "string(variables.replicas) + object.metadata.name"},
	)
	return []*admissionregistrationv1.ValidatingAdmissionPolicy{
		deploy,
		newPolicy("core", matchResources("", "v1", "pods", "configmaps", "services", "pods/status"),
			"object.data.x == 'y'", "object.spec.containers.size() > 0", "object.metadata.name != ''",
			"object.spec.ports[0].targetPort == 1 && object.spec.clusterIPs[0] == 1",
			"object.spec.containers[0].securityContext.capabilities.add[0] == 1",
			"object.binaryData['x'] == 'y'"),
		newPolicy("batch", matchResources("batch", "v1", "jobs", "cronjobs"),
			"object.spec.schedule == 1", "object.spec.jobTemplate.spec.backoffLimit == 'x'", "object.spec.suspend == 'x'",
			"object.spec.podFailurePolicy.rules[0].onExitCodes.values[0] == 'x'"),
		newPolicy("custom-kind", matchResources(crd.GVR.Group, "v1", crd.GVR.Resource),
			"object.spec.maxReplicas > 0", "object.spec.minReplicas > 0", "object.spec.window == 1", "object.spec.namespace == 1",
			"object.metadata.labels == 1", "object.kind == 1"),
		withParams(newPolicy("custom-params", matchDeployments(),
			"params.spec.maxReplicass > 1", "params.spec.window > duration('1s')", "params.spec.allowed == 'x'",
			"object.spec.replicas <= params.spec.maxReplicas"), crd.GVR.GroupVersion().String(), crd.Kind),
		withParams(newPolicy("configmap-params", matchDeployments(), "params.data.foo == 'x'", "params.dataa == 1"), "v1", "ConfigMap"),
		withParams(newPolicy("unknown-params", matchDeployments(), "params.x.y == 1", "object.nope == 1"), "nope.example.com/v1", "Nope"),
		newPolicy("wildcards", matchResources("*", "v1", "deployments"), "object.nope == 1"),
		newPolicy("rbac", matchResources("rbac.authorization.k8s.io", "v1", "roles", "clusterroles"),
			"object.rules[0].verbs[0] == 1", "object.aggregationRule.clusterRoleSelectors[0].matchLabels == 1"),
		newPolicy("admissionregistration", matchResources("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "validatingwebhookconfigurations"),
			"object.spec.validations[0].expression == 1", "object.webhooks[0].clientConfig.caBundle == 'x'"),
		newPolicy("crds", matchResources("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
			"object.spec.versions[0].schema.openAPIV3Schema.properties['x'].properties['y'].type == 1",
			"object.spec.versions[0].schema.openAPIV3Schema.x__dash__kubernetes__dash__int__dash__or__dash__string == 'x'"),
	}
}
