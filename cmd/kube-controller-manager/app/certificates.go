package app

import (
	"context"

	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/approver"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/cleaner"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/podcertificaterequestcleaner"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/clusterroleaggregation"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/ttl"
)

// Worker counts below are upstream's fixed ones: these controllers have no flags.

func newCSRApprovingController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("certificate-controller")
	if err != nil {
		return nil, err
	}
	c := approver.NewCSRApprovingController(ctx, client, cc.InformerFactory.Certificates().V1().CertificateSigningRequests())
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 5) }), nil
}

func newCSRCleanerController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("certificate-controller")
	if err != nil {
		return nil, err
	}
	c := cleaner.NewCSRCleanerController(client.CertificatesV1().CertificateSigningRequests(), cc.InformerFactory.Certificates().V1().CertificateSigningRequests())
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 1) }), nil
}

func newClusterRoleAggregationController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("clusterrole-aggregation-controller")
	if err != nil {
		return nil, err
	}
	c := clusterroleaggregation.NewClusterRoleAggregation(cc.InformerFactory.Rbac().V1().ClusterRoles(), client.RbacV1())
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 5) }), nil
}

func newTTLController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("ttl-controller")
	if err != nil {
		return nil, err
	}
	c := ttl.NewTTLController(ctx, cc.InformerFactory.Core().V1().Nodes(), client)
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 5) }), nil
}

func newPodCertificateRequestCleanerController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("podcertificaterequestcleaner")
	if err != nil {
		return nil, err
	}
	c := podcertificaterequestcleaner.NewPCRCleanerController(client,
		cc.InformerFactory.Certificates().V1().PodCertificateRequests(), clock.RealClock{},
		podcertificaterequestcleaner.DefaultThreshold, podcertificaterequestcleaner.DefaultPollingInterval)
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 1) }), nil
}
