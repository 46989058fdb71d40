package signer

import (
	"errors"

	capi "k8s.io/api/certificates/v1"
	capiv1beta1 "k8s.io/api/certificates/v1beta1"
	"k8s.io/klog/v2"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// SignerFiles is one signing loop to start: which signer, under which
// controller name, with which CA files.
type SignerFiles struct {
	ControllerName string
	SignerName     string
	CertFile       string
	KeyFile        string
}

// ErrDefaultAndSpecificFiles is upstream's refusal to mix
// --cluster-signing-{cert,key}-file with the per-signer flags.
var ErrDefaultAndSpecificFiles = errors.New("cannot specify default and per controller certs at the same time")

// SignersToStart picks the loops to run, as upstream:
//   - with no complete cluster-wide pair and no per-signer file, none
//     (the controller is skipped);
//   - a complete cluster-wide pair together with any per-signer file is
//     an error;
//   - if any per-signer file is set, only signers with at least one of
//     their own files get a loop (a missing half fails at construction);
//   - otherwise every signer gets a loop with the cluster-wide pair.
func SignersToStart(logger klog.Logger, cfg kcmconfig.CSRSigningControllerConfiguration) ([]SignerFiles, error) {
	perSigner := []struct {
		controllerName, signerName string
		files                      kcmconfig.CSRSigningConfiguration
	}{
		{"csrsigning-kubelet-serving", capi.KubeletServingSignerName, cfg.KubeletServingSignerConfiguration},
		{"csrsigning-kubelet-client", capi.KubeAPIServerClientKubeletSignerName, cfg.KubeletClientSignerConfiguration},
		{"csrsigning-kube-apiserver-client", capi.KubeAPIServerClientSignerName, cfg.KubeAPIServerClientSignerConfiguration},
		{"csrsigning-legacy-unknown", capiv1beta1.LegacyUnknownSignerName, cfg.LegacyUnknownSignerConfiguration},
	}
	anySpecific := false
	for _, s := range perSigner {
		anySpecific = anySpecific || s.files.CertFile != "" || s.files.KeyFile != ""
	}
	missingDefault := cfg.ClusterSigningCertFile == "" || cfg.ClusterSigningKeyFile == ""
	if missingDefault && !anySpecific {
		logger.Info("Skipping CSR signer controller because no csr cert/key was specified")
		return nil, nil
	}
	if !missingDefault && anySpecific {
		return nil, ErrDefaultAndSpecificFiles
	}

	var out []SignerFiles
	for _, s := range perSigner {
		certFile, keyFile := cfg.ClusterSigningCertFile, cfg.ClusterSigningKeyFile
		if anySpecific {
			certFile, keyFile = s.files.CertFile, s.files.KeyFile
		}
		if certFile == "" && keyFile == "" {
			logger.Info("Skipping CSR signer controller because specific files were specified for other signers and not this one", "controller", s.signerName)
			continue
		}
		out = append(out, SignerFiles{ControllerName: s.controllerName, SignerName: s.signerName, CertFile: certFile, KeyFile: keyFile})
	}
	return out, nil
}
