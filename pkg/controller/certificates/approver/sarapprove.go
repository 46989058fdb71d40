// Package approver implements the
// certificatesigningrequest-approving-controller: it approves kubelet
// client certificate requests whose requester a SubjectAccessReview allows
// to create certificatesigningrequests/selfnodeclient (renewing its own
// node credential) or certificatesigningrequests/nodeclient (any node
// credential, e.g. a bootstrap token).
package approver

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	capi "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

const (
	// approvedReason is the reason of the Approved condition this controller adds.
	approvedReason = "AutoApproved"

	selfNodeClientMessage = "Auto approving self kubelet client certificate after SubjectAccessReview."
	nodeClientMessage     = "Auto approving kubelet client certificate after SubjectAccessReview."
)

// recognizer pairs a kind of request with the permission that approves it.
type recognizer struct {
	matches    func(csr *capi.CertificateSigningRequest, req *x509.CertificateRequest) bool
	permission authorizationv1.ResourceAttributes
	message    string
}

func recognizers() []recognizer {
	attrs := func(subresource string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{
			Group:       "certificates.k8s.io",
			Version:     "*",
			Resource:    "certificatesigningrequests",
			Subresource: subresource,
			Verb:        "create",
		}
	}
	// selfnodeclient first: a node renewing its own credential needs only that.
	return []recognizer{
		{matches: isSelfNodeClientCert, permission: attrs("selfnodeclient"), message: selfNodeClientMessage},
		{matches: isNodeClientCert, permission: attrs("nodeclient"), message: nodeClientMessage},
	}
}

// handle approves csr when a recognizer matches it and the requester holds
// that recognizer's permission. A recognized but unauthorized request is
// retried with backoff (permissions may be granted later), quietly.
func (a *Controller) handle(ctx context.Context, csr *capi.CertificateSigningRequest) error {
	if len(csr.Status.Certificate) != 0 {
		return nil
	}
	if approved, denied := approvalConditions(csr); approved || denied {
		return nil
	}
	req, err := parseCSR(csr.Spec.Request)
	if err != nil {
		return fmt.Errorf("unable to parse csr %q: %w", csr.Name, err)
	}

	var tried []string
	for _, r := range a.recognizers {
		if !r.matches(csr, req) {
			continue
		}
		tried = append(tried, r.permission.Subresource)
		allowed, err := a.authorize(ctx, csr, r.permission)
		if err != nil {
			return err
		}
		if !allowed {
			continue
		}
		csr.Status.Conditions = append(csr.Status.Conditions, capi.CertificateSigningRequestCondition{
			Type:    capi.CertificateApproved,
			Status:  corev1.ConditionTrue,
			Reason:  approvedReason,
			Message: r.message,
		})
		if _, err := a.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("error updating approval for csr: %w", err)
		}
		return nil
	}
	if len(tried) > 0 {
		return newIgnorableError("recognized csr %q as %v but subject access review was not approved", csr.Name, tried)
	}
	return nil
}

// authorize asks whether the CSR's requester may perform attrs.
func (a *Controller) authorize(ctx context.Context, csr *capi.CertificateSigningRequest, attrs authorizationv1.ResourceAttributes) (bool, error) {
	var extra map[string]authorizationv1.ExtraValue
	if csr.Spec.Extra != nil {
		extra = make(map[string]authorizationv1.ExtraValue, len(csr.Spec.Extra))
		for k, v := range csr.Spec.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	sar := &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               csr.Spec.Username,
			UID:                csr.Spec.UID,
			Groups:             csr.Spec.Groups,
			Extra:              extra,
			ResourceAttributes: &attrs,
		},
	}
	sar, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}

// approvalConditions reports whether csr carries an Approved and a Denied
// condition (of any status, as upstream checks).
func approvalConditions(csr *capi.CertificateSigningRequest) (approved, denied bool) {
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case capi.CertificateApproved:
			approved = true
		case capi.CertificateDenied:
			denied = true
		}
	}
	return approved, denied
}

func parseCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// isNodeClientCert: the kubelet client signer, organization exactly
// [system:nodes], no SANs of any kind, common name system:node:<name>, and
// usages exactly {digital signature, client auth} with or without key
// encipherment.
func isNodeClientCert(csr *capi.CertificateSigningRequest, req *x509.CertificateRequest) bool {
	if csr.Spec.SignerName != capi.KubeAPIServerClientKubeletSignerName {
		return false
	}
	if !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) {
		return false
	}
	if len(req.DNSNames) > 0 || len(req.EmailAddresses) > 0 || len(req.IPAddresses) > 0 || len(req.URIs) > 0 {
		return false
	}
	if !strings.HasPrefix(req.Subject.CommonName, "system:node:") {
		return false
	}
	usages := sets.New[string]()
	for _, u := range csr.Spec.Usages {
		usages.Insert(string(u))
	}
	withRSA := sets.New(string(capi.UsageDigitalSignature), string(capi.UsageKeyEncipherment), string(capi.UsageClientAuth))
	withoutRSA := sets.New(string(capi.UsageDigitalSignature), string(capi.UsageClientAuth))
	return usages.Equal(withRSA) || usages.Equal(withoutRSA)
}

// isSelfNodeClientCert is a node client request made by the node it names.
func isSelfNodeClientCert(csr *capi.CertificateSigningRequest, req *x509.CertificateRequest) bool {
	return csr.Spec.Username == req.Subject.CommonName && isNodeClientCert(csr, req)
}
