package signer

import (
	"net"
	"net/url"
	"testing"

	capi "k8s.io/api/certificates/v1"
	capiv1beta1 "k8s.io/api/certificates/v1beta1"
)

func TestValidators(t *testing.T) {
	nodes := []string{"system:nodes"}
	node := "system:node:n1"
	ip := []net.IP{net.ParseIP("10.0.0.1")}
	uri := []*url.URL{{Scheme: "spiffe", Host: "example.org"}}
	servingRSA := []capi.KeyUsage{capi.UsageKeyEncipherment, capi.UsageDigitalSignature, capi.UsageServerAuth}
	serving := []capi.KeyUsage{capi.UsageDigitalSignature, capi.UsageServerAuth}
	clientRSA := []capi.KeyUsage{capi.UsageDigitalSignature, capi.UsageKeyEncipherment, capi.UsageClientAuth}
	client := []capi.KeyUsage{capi.UsageClientAuth, capi.UsageDigitalSignature}
	const servingUsageMsg = "usages did not match [digital signature key encipherment server auth]"
	const clientUsageMsg = "usages did not match [client auth digital signature key encipherment]"

	cases := []struct {
		name    string
		signer  string
		req     request
		usages  []capi.KeyUsage
		wantErr string
	}{
		// kubelet-serving
		{"serving ok with DNS", capi.KubeletServingSignerName, request{cn: node, orgs: nodes, dns: []string{"n1"}}, servingRSA, ""},
		{"serving ok with IP, no RSA", capi.KubeletServingSignerName, request{cn: node, orgs: nodes, ips: ip}, serving, ""},
		{"serving duplicate usages collapse", capi.KubeletServingSignerName, request{cn: node, orgs: nodes, ips: ip}, append(serving, capi.UsageServerAuth), ""},
		{"serving wrong org", capi.KubeletServingSignerName, request{cn: node, orgs: []string{"other"}, dns: []string{"n1"}}, serving, "subject organization is not system:nodes"},
		{"serving extra org", capi.KubeletServingSignerName, request{cn: node, orgs: []string{"system:nodes", "x"}, dns: []string{"n1"}}, serving, "subject organization is not system:nodes"},
		{"serving no SAN", capi.KubeletServingSignerName, request{cn: node, orgs: nodes}, serving, "DNS or IP subjectAltName is required"},
		{"serving email", capi.KubeletServingSignerName, request{cn: node, orgs: nodes, ips: ip, emails: []string{"a@b.c"}}, serving, "Email subjectAltNames are not allowed"},
		{"serving URI", capi.KubeletServingSignerName, request{cn: node, orgs: nodes, ips: ip, uris: uri}, serving, "URI subjectAltNames are not allowed"},
		{"serving client usage", capi.KubeletServingSignerName, request{cn: node, orgs: nodes, ips: ip}, client, servingUsageMsg},
		{"serving extra usage", capi.KubeletServingSignerName, request{cn: node, orgs: nodes, ips: ip}, append(serving, capi.UsageClientAuth), servingUsageMsg},
		// Usages are checked before the common name.
		{"serving usages before CN", capi.KubeletServingSignerName, request{cn: "n1", orgs: nodes, ips: ip}, client, servingUsageMsg},
		{"serving bad CN", capi.KubeletServingSignerName, request{cn: "n1", orgs: nodes, ips: ip}, serving, "subject common name does not begin with system:node:"},

		// kube-apiserver-client-kubelet
		{"client ok", capi.KubeAPIServerClientKubeletSignerName, request{cn: node, orgs: nodes}, clientRSA, ""},
		{"client ok no RSA", capi.KubeAPIServerClientKubeletSignerName, request{cn: node, orgs: nodes}, client, ""},
		{"client wrong org", capi.KubeAPIServerClientKubeletSignerName, request{cn: node}, client, "subject organization is not system:nodes"},
		{"client DNS", capi.KubeAPIServerClientKubeletSignerName, request{cn: node, orgs: nodes, dns: []string{"n1"}}, client, "DNS subjectAltNames are not allowed"},
		{"client email", capi.KubeAPIServerClientKubeletSignerName, request{cn: node, orgs: nodes, emails: []string{"a@b.c"}}, client, "Email subjectAltNames are not allowed"},
		{"client IP", capi.KubeAPIServerClientKubeletSignerName, request{cn: node, orgs: nodes, ips: ip}, client, "IP subjectAltNames are not allowed"},
		{"client URI", capi.KubeAPIServerClientKubeletSignerName, request{cn: node, orgs: nodes, uris: uri}, client, "URI subjectAltNames are not allowed"},
		// The common name is checked before the usages.
		{"client CN before usages", capi.KubeAPIServerClientKubeletSignerName, request{cn: "n1", orgs: nodes}, serving, "subject common name does not begin with system:node:"},
		{"client server usage", capi.KubeAPIServerClientKubeletSignerName, request{cn: node, orgs: nodes}, serving, clientUsageMsg},
		{"client missing digital signature", capi.KubeAPIServerClientKubeletSignerName, request{cn: node, orgs: nodes}, []capi.KeyUsage{capi.UsageClientAuth}, clientUsageMsg},

		// kube-apiserver-client: any subject, client usages only.
		{"apiserver client anything goes", capi.KubeAPIServerClientSignerName, request{cn: "alice", orgs: []string{"devs"}, dns: []string{"x"}, ips: ip}, []capi.KeyUsage{capi.UsageClientAuth}, ""},
		{"apiserver client all optional usages", capi.KubeAPIServerClientSignerName, request{cn: "alice"}, clientRSA, ""},
		{"apiserver client server auth", capi.KubeAPIServerClientSignerName, request{cn: "alice"}, []capi.KeyUsage{capi.UsageClientAuth, capi.UsageServerAuth}, "invalid usage for client certificate: server auth"},
		{"apiserver client no client auth", capi.KubeAPIServerClientSignerName, request{cn: "alice"}, []capi.KeyUsage{capi.UsageDigitalSignature}, "missing required usage for client certificate: client auth"},
		{"apiserver client no usages", capi.KubeAPIServerClientSignerName, request{cn: "alice"}, nil, "missing required usage for client certificate: client auth"},

		// legacy-unknown: no restrictions.
		{"legacy unknown anything", capiv1beta1.LegacyUnknownSignerName, request{cn: "x"}, []capi.KeyUsage{capi.UsageCertSign, capi.UsageServerAuth}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			validate, err := validatorFor(tc.signer)
			if err != nil {
				t.Fatal(err)
			}
			err = validate(tc.req.parsed(t), tc.usages)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestValidatorForUnknownSigner(t *testing.T) {
	_, err := validatorFor("example.com/other")
	if err == nil || err.Error() != `unrecognized signerName: "example.com/other"` {
		t.Fatalf("error = %v", err)
	}
}
