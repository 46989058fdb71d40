package signer

import (
	"crypto/x509"
	"encoding/pem"
	"errors"

	capi "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
)

// isApproved: an Approved condition and no Denied one. Their status is not
// looked at, as upstream: the API server only admits them as True.
func isApproved(req *capi.CertificateSigningRequest) bool {
	approved, denied := false, false
	for _, c := range req.Status.Conditions {
		switch c.Type {
		case capi.CertificateApproved:
			approved = true
		case capi.CertificateDenied:
			denied = true
		}
	}
	return approved && !denied
}

// hasTrueCondition reports a condition of type t whose status is True or
// unset.
func hasTrueCondition(req *capi.CertificateSigningRequest, t capi.RequestConditionType) bool {
	for _, c := range req.Status.Conditions {
		if c.Type == t && (c.Status == "" || c.Status == v1.ConditionTrue) {
			return true
		}
	}
	return false
}

func parseCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}
