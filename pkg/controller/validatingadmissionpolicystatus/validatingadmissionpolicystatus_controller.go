// Package validatingadmissionpolicystatus implements the
// validatingadmissionpolicy-status-controller: for every
// ValidatingAdmissionPolicy whose generation is newer than its
// status.observedGeneration it type-checks the policy's expressions and
// applies status.observedGeneration and status.typeChecking.
package validatingadmissionpolicystatus

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	applyv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	admissionregistrationinformers "k8s.io/client-go/informers/admissionregistration/v1"
	admissionregistrationclient "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	admissionregistrationlisters "k8s.io/client-go/listers/admissionregistration/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/validatingadmissionpolicystatus/typecheck"
)

// ControllerName names the queue and is the field manager of the status
// it applies. It says "status" to tell it from the apiserver's own
// validating admission policy controller.
const ControllerName = "validatingadmissionpolicy-status"

// Checker type-checks a policy; *typecheck.TypeChecker is the real one.
type Checker interface {
	Check(policy *admissionregistrationv1.ValidatingAdmissionPolicy) []admissionregistrationv1.ExpressionWarning
}

var _ Checker = (*typecheck.TypeChecker)(nil)

// Controller reconciles the status of ValidatingAdmissionPolicies. Its
// queue holds policy names (policies are cluster-scoped).
type Controller struct {
	client       admissionregistrationclient.ValidatingAdmissionPolicyInterface
	lister       admissionregistrationlisters.ValidatingAdmissionPolicyLister
	policySynced cache.InformerSynced
	checker      Checker

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]
}

// NewController wires the controller to the policy informer. policyClient
// writes status; checker is usually a *typecheck.TypeChecker.
func NewController(policyInformer admissionregistrationinformers.ValidatingAdmissionPolicyInformer,
	policyClient admissionregistrationclient.ValidatingAdmissionPolicyInterface, checker Checker) (*Controller, error) {
	c := &Controller{
		client:  policyClient,
		lister:  policyInformer.Lister(),
		checker: checker,
		queue:   controller.NewNamedQueue(ControllerName),
	}
	c.loop = controller.WorkLoop[string]{Name: ControllerName, Queue: c.queue, Sync: c.sync}
	// Deletions need nothing: the status goes with the policy.
	reg, err := policyInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
	})
	if err != nil {
		return nil, err
	}
	c.policySynced = reg.HasSynced
	return c, nil
}

// Run waits for the policy cache and syncs policies with workers
// goroutines until ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	c.loop.Run(ctx, workers, c.policySynced)
}

func (c *Controller) enqueue(obj interface{}) {
	policy, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy)
	if !ok {
		return
	}
	if policy.Name == "" {
		utilruntime.HandleError(fmt.Errorf("cannot get name of object %v", policy))
	}
	c.queue.Add(policy.Name)
}

// sync type-checks a policy whose spec changed since the last check and
// applies the result. The check never fails: kinds or schemas that cannot
// be resolved are skipped.
func (c *Controller) sync(ctx context.Context, name string) error {
	policy, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if policy.Generation <= policy.Status.ObservedGeneration {
		return nil
	}

	warnings := c.checker.Check(policy)
	applied := make([]*applyv1.ExpressionWarningApplyConfiguration, 0, len(warnings))
	for _, w := range warnings {
		applied = append(applied, applyv1.ExpressionWarning().WithFieldRef(w.FieldRef).WithWarning(w.Warning))
	}
	status := applyv1.ValidatingAdmissionPolicy(policy.Name).WithStatus(
		applyv1.ValidatingAdmissionPolicyStatus().
			WithObservedGeneration(policy.Generation).
			WithTypeChecking(applyv1.TypeChecking().WithExpressionWarnings(applied...)))
	_, err = c.client.ApplyStatus(ctx, status, metav1.ApplyOptions{FieldManager: ControllerName, Force: true})
	return err
}
