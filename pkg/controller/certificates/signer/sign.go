package signer

import (
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"math/big"
	"slices"
	"time"

	capi "k8s.io/api/certificates/v1"
)

const (
	// backdate moves NotBefore into the past to tolerate clock skew. It must
	// stay below minDuration, or a short certificate would be born expired.
	backdate = 5 * time.Minute
	// shortLived certificates keep their full TTL: taking the backdate off
	// their NotAfter would cost them a noticeable share of their life.
	shortLived = 8 * time.Hour
	// minDuration is the shortest lifetime a CSR can ask for.
	minDuration = 10 * time.Minute
)

// serialLimit bounds random serial numbers to 128 bits.
var serialLimit = new(big.Int).Lsh(big.NewInt(1), 128)

var keyUsages = map[capi.KeyUsage]x509.KeyUsage{
	capi.UsageSigning:           x509.KeyUsageDigitalSignature,
	capi.UsageDigitalSignature:  x509.KeyUsageDigitalSignature,
	capi.UsageContentCommitment: x509.KeyUsageContentCommitment,
	capi.UsageKeyEncipherment:   x509.KeyUsageKeyEncipherment,
	capi.UsageKeyAgreement:      x509.KeyUsageKeyAgreement,
	capi.UsageDataEncipherment:  x509.KeyUsageDataEncipherment,
	capi.UsageCertSign:          x509.KeyUsageCertSign,
	capi.UsageCRLSign:           x509.KeyUsageCRLSign,
	capi.UsageEncipherOnly:      x509.KeyUsageEncipherOnly,
	capi.UsageDecipherOnly:      x509.KeyUsageDecipherOnly,
}

var extKeyUsages = map[capi.KeyUsage]x509.ExtKeyUsage{
	capi.UsageAny:             x509.ExtKeyUsageAny,
	capi.UsageServerAuth:      x509.ExtKeyUsageServerAuth,
	capi.UsageClientAuth:      x509.ExtKeyUsageClientAuth,
	capi.UsageCodeSigning:     x509.ExtKeyUsageCodeSigning,
	capi.UsageEmailProtection: x509.ExtKeyUsageEmailProtection,
	capi.UsageSMIME:           x509.ExtKeyUsageEmailProtection,
	capi.UsageIPsecEndSystem:  x509.ExtKeyUsageIPSECEndSystem,
	capi.UsageIPsecTunnel:     x509.ExtKeyUsageIPSECTunnel,
	capi.UsageIPsecUser:       x509.ExtKeyUsageIPSECUser,
	capi.UsageTimestamping:    x509.ExtKeyUsageTimeStamping,
	capi.UsageOCSPSigning:     x509.ExtKeyUsageOCSPSigning,
	capi.UsageMicrosoftSGC:    x509.ExtKeyUsageMicrosoftServerGatedCrypto,
	capi.UsageNetscapeSGC:     x509.ExtKeyUsageNetscapeServerGatedCrypto,
}

// x509Usages maps API usages onto the key usage bits and the distinct
// extended key usages, the latter in ascending order so the encoding is
// stable.
func x509Usages(usages []capi.KeyUsage) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	var ku x509.KeyUsage
	var ext []x509.ExtKeyUsage
	var unknown []capi.KeyUsage
	for _, u := range usages {
		if bit, ok := keyUsages[u]; ok {
			ku |= bit
		} else if e, ok := extKeyUsages[u]; ok {
			if !slices.Contains(ext, e) {
				ext = append(ext, e)
			}
		} else {
			unknown = append(unknown, u)
		}
	}
	if len(unknown) > 0 {
		return 0, nil, fmt.Errorf("unrecognized usage values: %q", unknown)
	}
	slices.Sort(ext)
	return ku, ext, nil
}

// validity computes NotBefore/NotAfter for a certificate of lifetime ttl
// issued at now by a CA that expires at caNotAfter. The certificate never
// outlives its CA, and nothing is issued by an expired CA.
func validity(now time.Time, ttl time.Duration, caNotAfter time.Time) (notBefore, notAfter time.Time, err error) {
	notBefore = now.Add(-backdate)
	if ttl < shortLived {
		notAfter = now.Add(ttl)
	} else {
		notAfter = now.Add(ttl - backdate)
	}
	if !notAfter.Before(caNotAfter) {
		notAfter = caNotAfter
	}
	if !notBefore.Before(caNotAfter) {
		return time.Time{}, time.Time{}, fmt.Errorf("the signer has expired: NotAfter=%v", caNotAfter)
	}
	if !now.Before(caNotAfter) {
		return time.Time{}, time.Time{}, fmt.Errorf("refusing to sign a certificate that expired in the past: NotAfter=%v", caNotAfter)
	}
	return notBefore, notAfter, nil
}

// issue signs the DER certificate request crDER with ca. Subject and SANs
// come from the request; usages and lifetime are ours; every other
// extension the request asked for is dropped.
func issue(ca *certificateAuthority, crDER []byte, usages []capi.KeyUsage, ttl time.Duration, now time.Time) ([]byte, error) {
	cr, err := x509.ParseCertificateRequest(crDER)
	if err != nil {
		return nil, fmt.Errorf("unable to parse certificate request: %w", err)
	}
	if err := cr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("unable to verify certificate request signature: %w", err)
	}
	serial, err := rand.Int(rand.Reader, serialLimit)
	if err != nil {
		return nil, fmt.Errorf("unable to generate a serial number for %s: %w", cr.Subject.CommonName, err)
	}
	ku, ext, err := x509Usages(usages)
	if err != nil {
		return nil, err
	}
	notBefore, notAfter, err := validity(now, ttl, ca.cert.NotAfter)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               cr.Subject,
		DNSNames:              cr.DNSNames,
		IPAddresses:           cr.IPAddresses,
		EmailAddresses:        cr.EmailAddresses,
		URIs:                  cr.URIs,
		PublicKeyAlgorithm:    cr.PublicKeyAlgorithm,
		PublicKey:             cr.PublicKey,
		KeyUsage:              ku,
		ExtKeyUsage:           ext,
		BasicConstraintsValid: true,
		IsCA:                  false,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, cr.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("failed to sign certificate: %w", err)
	}
	return der, nil
}
