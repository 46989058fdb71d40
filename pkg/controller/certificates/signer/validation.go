package signer

import (
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"

	capi "k8s.io/api/certificates/v1"
	capiv1beta1 "k8s.io/api/certificates/v1beta1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// validateFunc decides whether a signer may issue what a request asks for.
// Its error becomes the message of the CSR's Failed condition, so the
// wording matches upstream's.
type validateFunc func(req *x509.CertificateRequest, usages []capi.KeyUsage) error

// Failure messages, worded as upstream's.
var (
	errOrgNotSystemNodes  = errors.New("subject organization is not system:nodes")
	errCNNotSystemNode    = errors.New("subject common name does not begin with system:node:") //nolint:staticcheck // upstream message, ends with the prefix
	errDNSOrIPSANRequired = errors.New("DNS or IP subjectAltName is required")
	errDNSSANNotAllowed   = errors.New("DNS subjectAltNames are not allowed")
	errEmailSANNotAllowed = errors.New("Email subjectAltNames are not allowed") //nolint:staticcheck // upstream message, capitalised
	errIPSANNotAllowed    = errors.New("IP subjectAltNames are not allowed")
	errURISANNotAllowed   = errors.New("URI subjectAltNames are not allowed")
)

const nodeCommonNamePrefix = "system:node:"

var (
	nodesOrganization = []string{"system:nodes"}

	// Kubelet usage sets: with key encipherment (RSA keys) or without.
	kubeletServingUsages = sets.New(string(capi.UsageDigitalSignature), string(capi.UsageKeyEncipherment), string(capi.UsageServerAuth))
	kubeletServingNoRSA  = sets.New(string(capi.UsageDigitalSignature), string(capi.UsageServerAuth))
	kubeletClientUsages  = sets.New(string(capi.UsageDigitalSignature), string(capi.UsageKeyEncipherment), string(capi.UsageClientAuth))
	kubeletClientNoRSA   = sets.New(string(capi.UsageDigitalSignature), string(capi.UsageClientAuth))

	apiServerClientAllowed = sets.New(capi.UsageDigitalSignature, capi.UsageKeyEncipherment, capi.UsageClientAuth)
)

// validatorFor maps each built-in signer to its rules; any other name is
// refused at construction so a wiring mistake cannot sign blindly.
func validatorFor(signerName string) (validateFunc, error) {
	switch signerName {
	case capi.KubeletServingSignerName:
		return validateKubeletServing, nil
	case capi.KubeAPIServerClientKubeletSignerName:
		return validateKubeletClient, nil
	case capi.KubeAPIServerClientSignerName:
		return validateAPIServerClient, nil
	case capiv1beta1.LegacyUnknownSignerName:
		// No restrictions, for compatibility with what v1beta1 allowed.
		return func(*x509.CertificateRequest, []capi.KeyUsage) error { return nil }, nil
	default:
		return nil, fmt.Errorf("unrecognized signerName: %q", signerName)
	}
}

func usageSet(usages []capi.KeyUsage) sets.Set[string] {
	s := sets.New[string]()
	for _, u := range usages {
		s.Insert(string(u))
	}
	return s
}

// validateKubeletServing: a node's serving certificate, named
// system:node:<name> in group system:nodes, for at least one DNS name or IP.
func validateKubeletServing(req *x509.CertificateRequest, usages []capi.KeyUsage) error {
	if !slices.Equal(req.Subject.Organization, nodesOrganization) {
		return errOrgNotSystemNodes
	}
	if len(req.DNSNames) == 0 && len(req.IPAddresses) == 0 {
		return errDNSOrIPSANRequired
	}
	if len(req.EmailAddresses) > 0 {
		return errEmailSANNotAllowed
	}
	if len(req.URIs) > 0 {
		return errURISANNotAllowed
	}
	if u := usageSet(usages); !u.Equal(kubeletServingUsages) && !u.Equal(kubeletServingNoRSA) {
		return fmt.Errorf("usages did not match %v", sets.List(kubeletServingUsages))
	}
	if !strings.HasPrefix(req.Subject.CommonName, nodeCommonNamePrefix) {
		return errCNNotSystemNode
	}
	return nil
}

// validateKubeletClient: a node's client certificate, named
// system:node:<name> in group system:nodes, with no SANs at all.
func validateKubeletClient(req *x509.CertificateRequest, usages []capi.KeyUsage) error {
	if !slices.Equal(req.Subject.Organization, nodesOrganization) {
		return errOrgNotSystemNodes
	}
	if len(req.DNSNames) > 0 {
		return errDNSSANNotAllowed
	}
	if len(req.EmailAddresses) > 0 {
		return errEmailSANNotAllowed
	}
	if len(req.IPAddresses) > 0 {
		return errIPSANNotAllowed
	}
	if len(req.URIs) > 0 {
		return errURISANNotAllowed
	}
	if !strings.HasPrefix(req.Subject.CommonName, nodeCommonNamePrefix) {
		return errCNNotSystemNode
	}
	if u := usageSet(usages); !u.Equal(kubeletClientUsages) && !u.Equal(kubeletClientNoRSA) {
		return fmt.Errorf("usages did not match %v", sets.List(kubeletClientUsages))
	}
	return nil
}

// validateAPIServerClient accepts any subject; only the usages are checked:
// client auth is required, digital signature and key encipherment optional.
func validateAPIServerClient(_ *x509.CertificateRequest, usages []capi.KeyUsage) error {
	hasClientAuth := false
	for _, u := range usages {
		if !apiServerClientAllowed.Has(u) {
			return fmt.Errorf("invalid usage for client certificate: %s", u)
		}
		hasClientAuth = hasClientAuth || u == capi.UsageClientAuth
	}
	if !hasClientAuth {
		return fmt.Errorf("missing required usage for client certificate: %s", capi.UsageClientAuth)
	}
	return nil
}
