package serviceaccount

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func TestPrivateKeyFromFile(t *testing.T) {
	rsaKey := testRSAKey(t)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8 := func(k interface{}) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	sec1, err := x509.MarshalECPrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	cert := pemBlock("CERTIFICATE", []byte("not parsed"))
	// openssl ecparam -genkey writes the curve parameters first.
	ecParams := pemBlock("EC PARAMETERS", []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07})

	cases := map[string]struct {
		data    []byte
		wantRSA bool
		wantEC  bool
		wantErr string
	}{
		"rsa pkcs1":                    {data: pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)), wantRSA: true},
		"rsa pkcs8":                    {data: pemBlock("PRIVATE KEY", pkcs8(rsaKey)), wantRSA: true},
		"ec sec1 after params":         {data: append(ecParams, pemBlock("EC PRIVATE KEY", sec1)...), wantEC: true},
		"ec pkcs8":                     {data: pemBlock("PRIVATE KEY", pkcs8(ecKey)), wantEC: true},
		"key after a certificate":      {data: append(cert, pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey))...), wantRSA: true},
		"ed25519 is refused":           {data: pemBlock("PRIVATE KEY", pkcs8(edKey)), wantErr: "only RSA and ECDSA"},
		"corrupt key says which block": {data: pemBlock("RSA PRIVATE KEY", []byte("junk")), wantErr: `"RSA PRIVATE KEY" block`},
		"certificate only":             {data: cert, wantErr: "does not contain a valid RSA or ECDSA private key"},
		"not PEM":                      {data: []byte("hello"), wantErr: "does not contain any PEM block"},
		"encrypted":                    {data: pemBlock("ENCRYPTED PRIVATE KEY", []byte("x")), wantErr: "encrypted"},
	}
	dir := t.TempDir()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".pem")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			key, err := PrivateKeyFromFile(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error %v, want one naming %s and containing %q", err, path, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch k := key.(type) {
			case *rsa.PrivateKey:
				if !tc.wantRSA || !k.Equal(rsaKey) {
					t.Fatalf("got an RSA key, unexpected")
				}
			case *ecdsa.PrivateKey:
				if !tc.wantEC || !k.Equal(ecKey) {
					t.Fatalf("got an EC key, unexpected")
				}
			default:
				t.Fatalf("got %T", key)
			}
			if _, err := JWTTokenGenerator(LegacyIssuer, key); err != nil {
				t.Fatalf("loaded key cannot sign: %v", err)
			}
		})
	}

	if _, err := PrivateKeyFromFile(filepath.Join(dir, "missing.pem")); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("missing file: %v", err)
	}
}
