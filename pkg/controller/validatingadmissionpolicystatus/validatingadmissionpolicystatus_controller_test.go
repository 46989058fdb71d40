package validatingadmissionpolicystatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// fakeChecker returns fixed warnings and records what it checked.
type fakeChecker struct {
	mu       sync.Mutex
	warnings []admissionregistrationv1.ExpressionWarning
	checked  []string
}

func (f *fakeChecker) Check(p *admissionregistrationv1.ValidatingAdmissionPolicy) []admissionregistrationv1.ExpressionWarning {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checked = append(f.checked, p.Name)
	return f.warnings
}

func newPolicy(name string, generation, observed int64) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	p.Name = name
	p.Generation = generation
	p.Status.ObservedGeneration = observed
	p.Spec.Validations = []admissionregistrationv1.Validation{{Expression: "true"}}
	return p
}

func newTestController(t *testing.T, checker Checker, objs ...runtime.Object) (*Controller, *fake.Clientset, informers.SharedInformerFactory) {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewController(factory.Admissionregistration().V1().ValidatingAdmissionPolicies(),
		client.AdmissionregistrationV1().ValidatingAdmissionPolicies(), checker)
	if err != nil {
		t.Fatal(err)
	}
	return c, client, factory
}

// appliedStatus decodes the status apply patches sent by the controller.
func appliedStatus(t *testing.T, actions []clienttesting.Action) []admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	var out []admissionregistrationv1.ValidatingAdmissionPolicy
	for _, a := range actions {
		p, ok := a.(clienttesting.PatchAction)
		if !ok {
			continue
		}
		if p.GetSubresource() != "status" || p.GetPatchType() != types.ApplyPatchType {
			t.Errorf("unexpected patch %s %s %s", p.GetSubresource(), p.GetPatchType(), p.GetPatch())
			continue
		}
		var obj admissionregistrationv1.ValidatingAdmissionPolicy
		if err := json.Unmarshal(p.GetPatch(), &obj); err != nil {
			t.Fatal(err)
		}
		out = append(out, obj)
	}
	return out
}

// writes drops the informer's list and watch calls, which may land after
// ClearActions when the machine is busy.
func writes(actions []clienttesting.Action) []clienttesting.Action {
	var out []clienttesting.Action
	for _, a := range actions {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a)
		}
	}
	return out
}

func TestSync(t *testing.T) {
	warnings := []admissionregistrationv1.ExpressionWarning{
		{FieldRef: "spec.validations[0].expression", Warning: "apps/v1, Kind=Deployment: ERROR: x\n"},
		{FieldRef: "spec.validations[0].messageExpression", Warning: "apps/v1, Kind=Deployment: ERROR: y\n"},
	}
	tests := []struct {
		name     string
		policy   *admissionregistrationv1.ValidatingAdmissionPolicy
		warnings []admissionregistrationv1.ExpressionWarning
		// wantApply is the applied status, nil for no write.
		wantApply *admissionregistrationv1.ValidatingAdmissionPolicyStatus
	}{
		{name: "missing policy"},
		{name: "new generation with warnings", policy: newPolicy("p", 2, 1), warnings: warnings,
			wantApply: &admissionregistrationv1.ValidatingAdmissionPolicyStatus{ObservedGeneration: 2,
				TypeChecking: &admissionregistrationv1.TypeChecking{ExpressionWarnings: warnings}}},
		{name: "never checked, no warnings", policy: newPolicy("p", 1, 0),
			wantApply: &admissionregistrationv1.ValidatingAdmissionPolicyStatus{ObservedGeneration: 1,
				TypeChecking: &admissionregistrationv1.TypeChecking{}}},
		{name: "already observed", policy: newPolicy("p", 3, 3), warnings: warnings},
		{name: "observed ahead", policy: newPolicy("p", 3, 4), warnings: warnings},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.policy != nil {
				objs = append(objs, tc.policy)
			}
			checker := &fakeChecker{warnings: tc.warnings}
			c, client, factory := newTestController(t, checker, objs...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			factory.Start(ctx.Done())
			factory.WaitForCacheSync(ctx.Done())
			client.ClearActions()

			if err := c.sync(ctx, "p"); err != nil {
				t.Fatal(err)
			}
			actions := writes(client.Actions())
			applied := appliedStatus(t, actions)
			if tc.wantApply == nil {
				if len(actions) != 0 || len(checker.checked) != 0 {
					t.Errorf("want no check and no write, got checks %v, actions %v", checker.checked, actions)
				}
				return
			}
			if len(applied) != 1 {
				t.Fatalf("want one status apply, got %v", actions)
			}
			patch := actions[0].(clienttesting.PatchActionImpl)
			if patch.PatchOptions.FieldManager != ControllerName || patch.PatchOptions.Force == nil || !*patch.PatchOptions.Force {
				t.Errorf("apply options %+v, want field manager %q and force", patch.PatchOptions, ControllerName)
			}
			got := applied[0]
			if got.Name != "p" || got.Kind != "ValidatingAdmissionPolicy" || got.APIVersion != "admissionregistration.k8s.io/v1" {
				t.Errorf("applied object %s %s %s", got.APIVersion, got.Kind, got.Name)
			}
			if !reflect.DeepEqual(got.Spec, admissionregistrationv1.ValidatingAdmissionPolicySpec{}) {
				t.Errorf("apply must carry status only, got spec %+v", got.Spec)
			}
			if !reflect.DeepEqual(&got.Status, tc.wantApply) {
				t.Errorf("applied status %+v, want %+v", got.Status, *tc.wantApply)
			}
		})
	}
}

func TestSyncApplyError(t *testing.T) {
	c, client, factory := newTestController(t, &fakeChecker{}, newPolicy("p", 2, 1))
	client.PrependReactor("patch", "validatingadmissionpolicies", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("conflict")
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if err := c.sync(ctx, "p"); err == nil {
		t.Error("want the apply error returned, so the key is retried")
	}
}

// Run checks policies as they are added and updated, with the queue named
// as upstream names it.
func TestRun(t *testing.T) {
	queues := testutil.RecordQueueNames()
	checker := &fakeChecker{}
	c, client, factory := newTestController(t, checker, newPolicy("a", 1, 0), newPolicy("done", 1, 1))
	if !queues.Has(ControllerName) {
		t.Errorf("no queue named %q, have %v", ControllerName, queues.Names())
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, 2)
	}()
	defer func() {
		cancel()
		<-done
	}()

	waitObserved := func(name string, gen int64) {
		t.Helper()
		testutil.WaitUntil(t, fmt.Sprintf("%s to observe generation %d", name, gen), func(ctx context.Context) (bool, error) {
			p, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Status.ObservedGeneration == gen, nil
		})
	}
	waitObserved("a", 1)

	// A spec change bumps the generation (the fake does not, so do it here).
	p, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Generation = 2
	p.Spec.Validations = append(p.Spec.Validations, admissionregistrationv1.Validation{Expression: "false"})
	if _, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitObserved("a", 2)

	checker.mu.Lock()
	defer checker.mu.Unlock()
	for _, name := range checker.checked {
		if name == "done" {
			t.Error("a policy whose generation was observed was checked again")
		}
	}
}
