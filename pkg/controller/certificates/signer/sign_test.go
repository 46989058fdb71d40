package signer

import (
	"crypto/x509"
	"net"
	"reflect"
	"testing"
	"time"

	capi "k8s.io/api/certificates/v1"
)

func TestX509Usages(t *testing.T) {
	ku, ext, err := x509Usages([]capi.KeyUsage{
		capi.UsageClientAuth, capi.UsageSigning, capi.UsageKeyEncipherment,
		capi.UsageServerAuth, capi.UsageClientAuth, capi.UsageSMIME, capi.UsageEmailProtection,
		capi.UsageCertSign,
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign; ku != want {
		t.Errorf("key usage = %v, want %v", ku, want)
	}
	// Deduplicated and in ascending order.
	if want := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageEmailProtection}; !reflect.DeepEqual(ext, want) {
		t.Errorf("ext key usage = %v, want %v", ext, want)
	}

	_, _, err = x509Usages([]capi.KeyUsage{capi.UsageClientAuth, "bogus", "worse"})
	if err == nil || err.Error() != `unrecognized usage values: ["bogus" "worse"]` {
		t.Fatalf("error = %v", err)
	}
}

func TestValidity(t *testing.T) {
	farCA := testNow.Add(10 * 365 * 24 * time.Hour)
	cases := []struct {
		name          string
		ttl           time.Duration
		caNotAfter    time.Time
		wantNotBefore time.Time
		wantNotAfter  time.Time
		wantErr       string
	}{
		{name: "short lived keeps full ttl", ttl: time.Hour, caNotAfter: farCA,
			wantNotBefore: testNow.Add(-5 * time.Minute), wantNotAfter: testNow.Add(time.Hour)},
		{name: "just under 8h is short", ttl: 8*time.Hour - time.Second, caNotAfter: farCA,
			wantNotBefore: testNow.Add(-5 * time.Minute), wantNotAfter: testNow.Add(8*time.Hour - time.Second)},
		{name: "8h is long lived and backdated", ttl: 8 * time.Hour, caNotAfter: farCA,
			wantNotBefore: testNow.Add(-5 * time.Minute), wantNotAfter: testNow.Add(8*time.Hour - 5*time.Minute)},
		{name: "a year", ttl: 365 * 24 * time.Hour, caNotAfter: farCA,
			wantNotBefore: testNow.Add(-5 * time.Minute), wantNotAfter: testNow.Add(365*24*time.Hour - 5*time.Minute)},
		{name: "capped at the CA's expiry", ttl: 365 * 24 * time.Hour, caNotAfter: testNow.Add(time.Hour),
			wantNotBefore: testNow.Add(-5 * time.Minute), wantNotAfter: testNow.Add(time.Hour)},
		{name: "CA expired before the backdated start", ttl: time.Hour, caNotAfter: testNow.Add(-10 * time.Minute),
			wantErr: "the signer has expired: NotAfter=" + testNow.Add(-10*time.Minute).String()},
		{name: "CA expired within the backdate", ttl: time.Hour, caNotAfter: testNow.Add(-time.Minute),
			wantErr: "refusing to sign a certificate that expired in the past: NotAfter=" + testNow.Add(-time.Minute).String()},
		{name: "CA expiring right now", ttl: time.Hour, caNotAfter: testNow,
			wantErr: "refusing to sign a certificate that expired in the past: NotAfter=" + testNow.String()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nb, na, err := validity(testNow, tc.ttl, tc.caNotAfter)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !nb.Equal(tc.wantNotBefore) || !na.Equal(tc.wantNotAfter) {
				t.Fatalf("validity = [%v, %v], want [%v, %v]", nb, na, tc.wantNotBefore, tc.wantNotAfter)
			}
		})
	}
}

func TestIssue(t *testing.T) {
	ca := newTestCA(t, "test-ca", testNow.Add(365*24*time.Hour))
	p := &certificateAuthority{cert: ca.cert, key: ca.key}
	req := request{cn: "system:node:n1", orgs: []string{"system:nodes"}, dns: []string{"n1.example"}, ips: []net.IP{net.ParseIP("10.1.2.3")}}
	der, err := issue(p, req.der(t), []capi.KeyUsage{capi.UsageDigitalSignature, capi.UsageServerAuth}, 2*time.Hour, testNow)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:n1" || !reflect.DeepEqual(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject = %v", cert.Subject)
	}
	if !reflect.DeepEqual(cert.DNSNames, []string{"n1.example"}) || len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP("10.1.2.3")) {
		t.Errorf("SANs = %v %v", cert.DNSNames, cert.IPAddresses)
	}
	if cert.IsCA || !cert.BasicConstraintsValid {
		t.Errorf("basic constraints: valid=%v isCA=%v", cert.BasicConstraintsValid, cert.IsCA)
	}
	if cert.KeyUsage != x509.KeyUsageDigitalSignature || !reflect.DeepEqual(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("usages = %v %v", cert.KeyUsage, cert.ExtKeyUsage)
	}
	if !cert.NotBefore.Equal(testNow.Add(-backdate)) || !cert.NotAfter.Equal(testNow.Add(2*time.Hour)) {
		t.Errorf("validity = [%v, %v]", cert.NotBefore, cert.NotAfter)
	}
	if cert.SerialNumber.Sign() <= 0 || cert.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v", cert.SerialNumber)
	}
	if err := cert.CheckSignatureFrom(ca.cert); err != nil {
		t.Errorf("not signed by the CA: %v", err)
	}

	// Two issues of the same request get different serials.
	der2, err := issue(p, req.der(t), []capi.KeyUsage{capi.UsageDigitalSignature, capi.UsageServerAuth}, 2*time.Hour, testNow)
	if err != nil {
		t.Fatal(err)
	}
	cert2, _ := x509.ParseCertificate(der2)
	if cert2.SerialNumber.Cmp(cert.SerialNumber) == 0 {
		t.Error("serial numbers repeat")
	}
}

func TestIssueRefusals(t *testing.T) {
	ca := newTestCA(t, "test-ca", testNow.Add(time.Hour))
	p := &certificateAuthority{cert: ca.cert, key: ca.key}
	good := kubeletClientRequest.der(t)

	tampered := append([]byte(nil), good...)
	tampered[len(tampered)-1] ^= 0xff
	if _, err := issue(p, tampered, []capi.KeyUsage{capi.UsageClientAuth}, time.Hour, testNow); err == nil {
		t.Error("a request with a broken signature was signed")
	}
	if _, err := issue(p, good, []capi.KeyUsage{"nonsense"}, time.Hour, testNow); err == nil {
		t.Error("an unknown usage was signed")
	}
	if _, err := issue(p, good, []capi.KeyUsage{capi.UsageClientAuth}, time.Hour, testNow.Add(2*time.Hour)); err == nil {
		t.Error("signed with an expired CA")
	}
}
