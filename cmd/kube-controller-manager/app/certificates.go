package app

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/approver"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/cleaner"
	ctbpublisher "github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/clustertrustbundlepublisher"
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

// newKubeAPIServerServingCTBPublisher publishes the CA kube-apiserver's
// serving certificates chain to as a ClusterTrustBundle, in the newest
// certificates.k8s.io version the apiserver serves.
func newKubeAPIServerServingCTBPublisher(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	rootCA, err := rootCAFor(cc.ComponentConfig.SAController.RootCAFile, cc.ClientBuilder, "root-ca-cert-publisher")
	if err != nil {
		return nil, err
	}
	if len(rootCA) == 0 {
		return nil, nil
	}
	ca, err := ctbpublisher.NewStaticCAContent("kube-apiserver-serving", rootCA)
	if err != nil {
		return nil, fmt.Errorf("failed to create a static CA content provider for the kube-apiserver-serving signer: %w", err)
	}
	client, err := cc.NewClient("kube-apiserver-serving-clustertrustbundle-publisher")
	if err != nil {
		return nil, err
	}
	runner, err := ctbpublisher.NewForServedVersion(ctbpublisher.KubeAPIServerServingSignerName, ca, client)
	if err != nil {
		return nil, fmt.Errorf("error creating kube-apiserver-serving signer certificates publisher: %w", err)
	}
	if runner == nil {
		klog.FromContext(ctx).Info("no known scheme version was found for clustertrustbundles, cannot start kube-apiserver-serving-clustertrustbundle-publisher-controller")
		return nil, nil
	}
	return newControllerLoop(name, runner.Run), nil
}
