package options

import (
	"fmt"

	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// CSRSigningControllerOptions holds the certificatesigningrequest-signing-controller flags.
type CSRSigningControllerOptions struct {
	*kcmconfig.CSRSigningControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *CSRSigningControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	const exclusiveWithSpecific = "  When set, none of the signer-specific --cluster-signing-* flags may be set."
	const exclusiveWithGeneral = "  When set, --cluster-signing-{cert,key}-file must be unset."
	fs.StringVar(&o.ClusterSigningCertFile, "cluster-signing-cert-file", o.ClusterSigningCertFile,
		"PEM file with the X509 CA certificate that issues cluster-scoped certificates."+exclusiveWithSpecific)
	fs.StringVar(&o.ClusterSigningKeyFile, "cluster-signing-key-file", o.ClusterSigningKeyFile,
		"PEM file with the RSA or ECDSA private key that signs cluster-scoped certificates."+exclusiveWithSpecific)

	signer := func(c *kcmconfig.CSRSigningConfiguration, flagPrefix, signerName string) {
		fs.StringVar(&c.CertFile, flagPrefix+"-cert-file", c.CertFile,
			"PEM file with the X509 CA certificate that issues certificates for the "+signerName+" signer."+exclusiveWithGeneral)
		fs.StringVar(&c.KeyFile, flagPrefix+"-key-file", c.KeyFile,
			"PEM file with the RSA or ECDSA private key that signs certificates for the "+signerName+" signer."+exclusiveWithGeneral)
	}
	signer(&o.KubeletServingSignerConfiguration, "cluster-signing-kubelet-serving", "kubernetes.io/kubelet-serving")
	signer(&o.KubeletClientSignerConfiguration, "cluster-signing-kubelet-client", "kubernetes.io/kube-apiserver-client-kubelet")
	signer(&o.KubeAPIServerClientSignerConfiguration, "cluster-signing-kube-apiserver-client", "kubernetes.io/kube-apiserver-client")
	signer(&o.LegacyUnknownSignerConfiguration, "cluster-signing-legacy-unknown", "kubernetes.io/legacy-unknown")

	fs.DurationVar(&o.ClusterSigningDuration.Duration, "cluster-signing-duration", o.ClusterSigningDuration.Duration,
		"The longest validity given to signed certificates. A CSR may ask for less through spec.expirationSeconds.")
}

// ApplyTo copies the options into cfg.
func (o *CSRSigningControllerOptions) ApplyTo(cfg *kcmconfig.CSRSigningControllerConfiguration) error {
	if o == nil {
		return nil
	}
	*cfg = *o.CSRSigningControllerConfiguration
	return nil
}

// Validate requires each signer's cert and key together, and forbids
// mixing the cluster-wide pair with signer-specific files.
func (o *CSRSigningControllerOptions) Validate() []error {
	if o == nil {
		return nil
	}
	var errs []error
	pairs := []struct {
		flagPrefix string
		c          kcmconfig.CSRSigningConfiguration
	}{
		{"cluster-signing-kubelet-serving", o.KubeletServingSignerConfiguration},
		{"cluster-signing-kubelet-client", o.KubeletClientSignerConfiguration},
		{"cluster-signing-kube-apiserver-client", o.KubeAPIServerClientSignerConfiguration},
		{"cluster-signing-legacy-unknown", o.LegacyUnknownSignerConfiguration},
	}
	specific := false
	for _, p := range pairs {
		hasCert, hasKey := p.c.CertFile != "", p.c.KeyFile != ""
		specific = specific || hasCert || hasKey
		switch {
		case hasKey && !hasCert:
			errs = append(errs, fmt.Errorf("--%s-key-file needs --%s-cert-file", p.flagPrefix, p.flagPrefix))
		case hasCert && !hasKey:
			errs = append(errs, fmt.Errorf("--%s-cert-file needs --%s-key-file", p.flagPrefix, p.flagPrefix))
		}
	}
	general := o.ClusterSigningCertFile != "" || o.ClusterSigningKeyFile != ""
	if general && specific {
		errs = append(errs, fmt.Errorf("--cluster-signing-{cert,key}-file cannot be combined with the signer-specific --cluster-signing-*-file flags"))
	}
	return errs
}
