package app

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/approver"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/cleaner"
	ctbpublisher "github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/clustertrustbundlepublisher"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/podcertificaterequestcleaner"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/rootcacertpublisher"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/signer"
)

// newCSRSigningController runs one signing loop per built-in signer whose
// CA files are configured; none configured skips the controller.
func newCSRSigningController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	cfg := cc.ComponentConfig.CSRSigningController
	files, err := signer.SignersToStart(klog.FromContext(ctx), cfg)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, nil
	}
	client, err := cc.NewClient("certificate-controller")
	if err != nil {
		return nil, err
	}
	csrs := cc.InformerFactory.Certificates().V1().CertificateSigningRequests()
	var loops []*signer.Controller
	for _, f := range files {
		c, err := signer.NewController(ctx, f.ControllerName, f.SignerName, client, csrs, f.CertFile, f.KeyFile, cfg.ClusterSigningDuration.Duration)
		if err != nil {
			return nil, fmt.Errorf("failed to init %s certificate controller: %w", f.SignerName, err)
		}
		loops = append(loops, c)
	}
	return newControllerLoop(name, func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, c := range loops {
			wg.Go(func() { c.Run(ctx, 5) })
		}
		wg.Wait()
	}), nil
}

// Worker counts below are upstream's fixed ones: these controllers have no flags.

func newCSRApprovingController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("certificate-controller")
	if err != nil {
		return nil, err
	}
	c := approver.NewController(ctx, client, cc.InformerFactory.Certificates().V1().CertificateSigningRequests())
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 5) }), nil
}

func newCSRCleanerController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("certificate-controller")
	if err != nil {
		return nil, err
	}
	c := cleaner.NewController(client.CertificatesV1().CertificateSigningRequests(), cc.InformerFactory.Certificates().V1().CertificateSigningRequests())
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 1) }), nil
}

func newPodCertificateRequestCleanerController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("podcertificaterequestcleaner")
	if err != nil {
		return nil, err
	}
	c := podcertificaterequestcleaner.NewController(client,
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

func newRootCACertificatePublisherController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	rootCA, err := rootCAFor(cc.ComponentConfig.SAController.RootCAFile, cc.ClientBuilder, "root-ca-cert-publisher")
	if err != nil {
		return nil, err
	}
	client, err := cc.NewClient("root-ca-cert-publisher")
	if err != nil {
		return nil, err
	}
	// Only kube-root-ca.crt matters; the shared factory would cache every
	// ConfigMap's body.
	cms := cc.FilteredInformerFactory("", "metadata.name="+rootcacertpublisher.RootCACertConfigMapName).Core().V1().ConfigMaps()
	pub, err := rootcacertpublisher.NewController(cms, cc.InformerFactory.Core().V1().Namespaces(), client, rootCA)
	if err != nil {
		return nil, fmt.Errorf("error creating root CA certificate publisher: %w", err)
	}
	return newControllerLoop(name, func(ctx context.Context) { pub.Run(ctx, 1) }), nil
}
