package serviceaccount

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	rsaKeyOnce sync.Once
	rsaKey     *rsa.PrivateKey
)

// testRSAKey is generated once: 2048-bit generation is slow under -race.
func testRSAKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	rsaKeyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		rsaKey = k
	})
	return rsaKey
}

// verifyJWT checks a compact JWS against pub the way a relying party does
// and returns its header and claims.
func verifyJWT(t *testing.T, token string, pub crypto.PublicKey) (map[string]string, map[string]interface{}) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts, want 3", len(parts))
	}
	dec := func(s string) []byte {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("segment %q is not unpadded base64url: %v", s, err)
		}
		return b
	}
	headerJSON, payloadJSON, sig := dec(parts[0]), dec(parts[1]), dec(parts[2])
	var header map[string]string
	if err := json.Unmarshal(headerJSON, &header); err != nil {
		t.Fatalf("header: %v", err)
	}
	var claims map[string]interface{}
	if err := json.Unmarshal(payloadJSON, &claims); err != nil {
		t.Fatalf("payload: %v", err)
	}
	input := []byte(parts[0] + "." + parts[1])
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if header["alg"] != "RS256" {
			t.Fatalf("alg %q for an RSA key", header["alg"])
		}
		d := sha256.Sum256(input)
		if err := rsa.VerifyPKCS1v15(k, crypto.SHA256, d[:], sig); err != nil {
			t.Fatalf("RSA signature does not verify: %v", err)
		}
	case *ecdsa.PublicKey:
		want := map[string]struct {
			alg  string
			hash crypto.Hash
		}{"P-256": {"ES256", crypto.SHA256}, "P-384": {"ES384", crypto.SHA384}, "P-521": {"ES512", crypto.SHA512}}[k.Curve.Params().Name]
		if header["alg"] != want.alg {
			t.Fatalf("alg %q for curve %s, want %s", header["alg"], k.Curve.Params().Name, want.alg)
		}
		size := (k.Curve.Params().BitSize + 7) / 8
		if len(sig) != 2*size {
			t.Fatalf("ECDSA signature is %d bytes, want %d (raw r||s)", len(sig), 2*size)
		}
		h := want.hash.New()
		h.Write(input)
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		if !ecdsa.Verify(k, h.Sum(nil), r, s) {
			t.Fatal("ECDSA signature does not verify")
		}
	default:
		t.Fatalf("unexpected key %T", pub)
	}
	return header, claims
}

// expectedKID recomputes the key ID independently: SHA-256 over the PKIX
// DER of the public key, unpadded base64url.
func expectedKID(t *testing.T, pub crypto.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func TestJWTTokenGeneratorLegacyClaims(t *testing.T) {
	ecKey := func(c elliptic.Curve) crypto.Signer {
		k, err := ecdsa.GenerateKey(c, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	keys := map[string]crypto.Signer{
		"RS256": testRSAKey(t),
		"ES256": ecKey(elliptic.P256()),
		"ES384": ecKey(elliptic.P384()),
		"ES512": ecKey(elliptic.P521()),
	}
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "builder", UID: "sa-uid"}}
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "builder-token"}}
	for alg, key := range keys {
		t.Run(alg, func(t *testing.T) {
			gen, err := JWTTokenGenerator(LegacyIssuer, key)
			if err != nil {
				t.Fatal(err)
			}
			c, pc := LegacyClaims(sa, secret)
			token, err := gen.GenerateToken(context.Background(), c, pc)
			if err != nil {
				t.Fatal(err)
			}
			header, claims := verifyJWT(t, token, key.Public())
			wantHeader := map[string]string{"alg": alg, "kid": expectedKID(t, key.Public())}
			if !reflect.DeepEqual(header, wantHeader) {
				t.Errorf("header %v, want %v", header, wantHeader)
			}
			wantClaims := map[string]interface{}{
				"iss":                                    "kubernetes/serviceaccount",
				"sub":                                    "system:serviceaccount:ns:builder",
				"kubernetes.io/serviceaccount/namespace": "ns",
				"kubernetes.io/serviceaccount/secret.name":          "builder-token",
				"kubernetes.io/serviceaccount/service-account.name": "builder",
				"kubernetes.io/serviceaccount/service-account.uid":  "sa-uid",
			}
			if !reflect.DeepEqual(claims, wantClaims) {
				t.Errorf("claims %v, want %v", claims, wantClaims)
			}
		})
	}
}

// Public claims win over private ones, and the issuer over both.
func TestGenerateTokenClaimPrecedence(t *testing.T) {
	gen, err := JWTTokenGenerator("me", testRSAKey(t))
	if err != nil {
		t.Fatal(err)
	}
	token, err := gen.GenerateToken(context.Background(), &Claims{Subject: "public", Issuer: "ignored"},
		map[string]string{"sub": "private", "iss": "private", "extra": "x"})
	if err != nil {
		t.Fatal(err)
	}
	_, claims := verifyJWT(t, token, testRSAKey(t).Public())
	want := map[string]interface{}{"iss": "me", "sub": "public", "extra": "x"}
	if !reflect.DeepEqual(claims, want) {
		t.Fatalf("claims %v, want %v", claims, want)
	}
	if _, err := gen.GenerateToken(context.Background(), nil, []string{"not", "an", "object"}); err == nil {
		t.Fatal("private claims that are not an object must be refused")
	}
}

func TestJWTTokenGeneratorRejectsKeys(t *testing.T) {
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]crypto.PrivateKey{"P-224": p224, "ed25519": edKey, "nil": nil} {
		if _, err := JWTTokenGenerator(LegacyIssuer, key); err == nil {
			t.Errorf("%s: expected an error", name)
		}
	}
}

// failingGenerator lets tests make token generation fail.
type failingGenerator struct{}

func (failingGenerator) GenerateToken(context.Context, *Claims, interface{}) (string, error) {
	return "", errors.New("signer unavailable")
}
