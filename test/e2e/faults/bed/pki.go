package bed

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// keyPair is a certificate and its key, in memory and PEM.
type keyPair struct {
	cert    *x509.Certificate
	key     *rsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

func newKey() (*rsa.PrivateKey, []byte, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	return k, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

// newCA makes a self-signed CA, as kubeadm's ca and front-proxy-ca.
func newCA(cn string) (*keyPair, error) {
	k, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return nil, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: c, key: k, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM: keyPEM}, nil
}

// issue signs a leaf: a client certificate when dns and ips are empty,
// a serving one otherwise.
func (ca *keyPair) issue(cn string, orgs []string, dns []string, ips []net.IP) (*keyPair, error) {
	k, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if len(dns)+len(ips) > 0 {
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  usage,
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &k.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: c, key: k, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM: keyPEM}, nil
}

// pki is the cluster-wide part of kubeadm's /etc/kubernetes/pki.
type pki struct {
	ca, frontProxyCA, frontProxyClient *keyPair
	saKeyPEM, saPubPEM                 []byte
	// Client certificates for the kubeconfigs, by file name.
	clients map[string]*keyPair
}

func newPKI() (*pki, error) {
	p := &pki{clients: map[string]*keyPair{}}
	var err error
	if p.ca, err = newCA("kubernetes"); err != nil {
		return nil, err
	}
	if p.frontProxyCA, err = newCA("front-proxy-ca"); err != nil {
		return nil, err
	}
	if p.frontProxyClient, err = p.frontProxyCA.issue("front-proxy-client", nil, nil, nil); err != nil {
		return nil, err
	}
	sa, saPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	p.saKeyPEM = saPEM
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	p.saPubPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	// The identities kubeadm gives each component's kubeconfig.
	for file, id := range map[string][2]string{
		"controller-manager.conf": {"system:kube-controller-manager", ""},
		"scheduler.conf":          {"system:kube-scheduler", ""},
		"admin.conf":              {"kubernetes-super-admin", "system:masters"},
	} {
		var orgs []string
		if id[1] != "" {
			orgs = []string{id[1]}
		}
		if p.clients[file], err = p.ca.issue(id[0], orgs, nil, nil); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// writeNode writes one node's /etc/kubernetes/pki under dir.
func (p *pki) writeNode(dir, nodeName string, nodeIP net.IP) error {
	serving, err := p.ca.issue("kube-apiserver", nil,
		[]string{nodeName, "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{nodeIP, net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")})
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"ca.crt": p.ca.certPEM, "ca.key": p.ca.keyPEM,
		"front-proxy-ca.crt": p.frontProxyCA.certPEM, "front-proxy-ca.key": p.frontProxyCA.keyPEM,
		"front-proxy-client.crt": p.frontProxyClient.certPEM, "front-proxy-client.key": p.frontProxyClient.keyPEM,
		"sa.key": p.saKeyPEM, "sa.pub": p.saPubPEM,
		"apiserver.crt": serving.certPEM, "apiserver.key": serving.keyPEM,
	}
	pkiDir := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o755); err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(pkiDir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// kubeconfig is a client-certificate kubeconfig with embedded data.
func (p *pki) kubeconfig(file, server string) ([]byte, error) {
	kp, ok := p.clients[file]
	if !ok {
		return nil, fmt.Errorf("no client certificate for %s", file)
	}
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: kubernetes
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: default
  context: {cluster: kubernetes, user: %s}
current-context: default
`, server, b64(p.ca.certPEM), kp.cert.Subject.CommonName, b64(kp.certPEM), b64(kp.keyPEM), kp.cert.Subject.CommonName), nil
}
