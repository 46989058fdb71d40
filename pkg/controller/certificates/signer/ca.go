package signer

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
)

// certificateAuthority is one parsed CA cert/key pair, remembered with the
// bytes it came from so a reload can tell whether anything changed.
type certificateAuthority struct {
	certPEM, keyPEM []byte
	cert            *x509.Certificate
	key             crypto.Signer
}

// caProvider serves the CA held in a cert file and a key file. The files are
// re-read whenever a CA is asked for, so a rotated CA is used from the next
// signature on. A half-written rotation (unreadable files, or a cert and key
// that do not belong together) keeps the previous pair, as upstream's
// dynamic file loader does.
type caProvider struct {
	certFile, keyFile string

	mu sync.Mutex
	ca *certificateAuthority
}

func newCAProvider(certFile, keyFile string) (*caProvider, error) {
	p := &caProvider{certFile: certFile, keyFile: keyFile}
	certPEM, keyPEM, err := p.readPair()
	if err != nil {
		return nil, fmt.Errorf("error reading CA cert file %q: %w", certFile, err)
	}
	ca, err := p.parse(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	p.ca = ca
	return p, nil
}

// readPair reads both files and checks that the key matches the cert.
func (p *caProvider) readPair() (certPEM, keyPEM []byte, err error) {
	if p.certFile == "" {
		return nil, nil, errors.New("missing filename for CA cert")
	}
	if p.keyFile == "" {
		return nil, nil, errors.New("missing filename for CA key")
	}
	if certPEM, err = os.ReadFile(p.certFile); err != nil {
		return nil, nil, err
	}
	if keyPEM, err = os.ReadFile(p.keyFile); err != nil {
		return nil, nil, err
	}
	if len(certPEM) == 0 {
		return nil, nil, fmt.Errorf("missing content for CA cert %q", p.certFile)
	}
	if len(keyPEM) == 0 {
		return nil, nil, fmt.Errorf("missing content for CA key %q", p.keyFile)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// parse turns a matching pair into a CA: exactly one certificate and a key
// that can sign.
func (p *caProvider) parse(certPEM, keyPEM []byte) (*certificateAuthority, error) {
	certs, err := cert.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("error reading CA cert file %q: %w", p.certFile, err)
	}
	if len(certs) != 1 {
		return nil, fmt.Errorf("error reading CA cert file %q: expected 1 certificate, found %d", p.certFile, len(certs))
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("error reading CA key file %q: %w", p.keyFile, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("error reading CA key file %q: key did not implement crypto.Signer", p.keyFile)
	}
	return &certificateAuthority{certPEM: certPEM, keyPEM: keyPEM, cert: certs[0], key: signer}, nil
}

// current returns the CA on disk now, or the last good one if the files
// are mid-rotation. A matching pair that is still unusable as a CA is an
// error: signing must wait until the files are fixed.
func (p *caProvider) current(logger klog.Logger) (*certificateAuthority, error) {
	p.mu.Lock()
	defer p.mu.Unlock()

	certPEM, keyPEM, err := p.readPair()
	if err != nil {
		logger.Error(err, "Keeping the previous CA: failed to load the CA files", "certFile", p.certFile, "keyFile", p.keyFile)
		return p.ca, nil
	}
	if bytes.Equal(certPEM, p.ca.certPEM) && bytes.Equal(keyPEM, p.ca.keyPEM) {
		return p.ca, nil
	}
	ca, err := p.parse(certPEM, keyPEM)
	if err != nil {
		return p.ca, err
	}
	logger.Info("Loaded a new CA for signing", "certFile", p.certFile, "subject", ca.cert.Subject.String(), "notAfter", ca.cert.NotAfter)
	p.ca = ca
	return ca, nil
}
