package app

import (
	"context"
	"fmt"

	vapstatus "github.com/kcmclone/kube-controller-manager/pkg/controller/validatingadmissionpolicystatus"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/validatingadmissionpolicystatus/typecheck"
)

// newValidatingAdmissionPolicyStatusController type-checks policies against
// the schemas the apiserver publishes at /openapi/v3.
func newValidatingAdmissionPolicyStatusController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	discoveryClient, err := cc.ClientBuilder.DiscoveryClient(name)
	if err != nil {
		return nil, fmt.Errorf("failed to create the discovery client for %s: %w", name, err)
	}
	client, err := cc.NewClient(name)
	if err != nil {
		return nil, err
	}
	checker := typecheck.NewTypeChecker(typecheck.NewOpenAPIResolver(discoveryClient.OpenAPIV3()), cc.RESTMapper)
	c, err := vapstatus.NewController(cc.InformerFactory.Admissionregistration().V1().ValidatingAdmissionPolicies(),
		client.AdmissionregistrationV1().ValidatingAdmissionPolicies(), checker)
	if err != nil {
		return nil, err
	}
	workers := int(cc.ComponentConfig.ValidatingAdmissionPolicyStatusController.ConcurrentPolicySyncs)
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, workers) }), nil
}
