package serviceaccount

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// LegacyIssuer is the "iss" of secret-based service account tokens; the
// API server accepts it whatever its --service-account-issuer is.
const LegacyIssuer = "kubernetes/serviceaccount"

// serviceAccountUsernamePrefix starts the username (and "sub") of a
// service account: system:serviceaccount:<namespace>:<name>.
const serviceAccountUsernamePrefix = "system:serviceaccount:"

// MakeUsername is the username the API server gives a service account.
func MakeUsername(namespace, name string) string {
	return serviceAccountUsernamePrefix + namespace + ":" + name
}

// Claims are the registered JWT claims a generator sets; empty ones are
// left out of the payload.
type Claims struct {
	Issuer  string `json:"iss,omitempty"`
	Subject string `json:"sub,omitempty"`
}

// LegacyPrivateClaims are the kubernetes.io claims of a secret-based token;
// the API server's legacy authenticator requires all four.
type LegacyPrivateClaims struct {
	ServiceAccountName string `json:"kubernetes.io/serviceaccount/service-account.name"`
	ServiceAccountUID  string `json:"kubernetes.io/serviceaccount/service-account.uid"`
	SecretName         string `json:"kubernetes.io/serviceaccount/secret.name"`
	Namespace          string `json:"kubernetes.io/serviceaccount/namespace"`
}

// LegacyClaims are the claims of the token stored in secret for sa.
func LegacyClaims(sa *v1.ServiceAccount, secret *v1.Secret) (*Claims, *LegacyPrivateClaims) {
	return &Claims{Subject: MakeUsername(sa.Namespace, sa.Name)},
		&LegacyPrivateClaims{
			Namespace:          sa.Namespace,
			ServiceAccountName: sa.Name,
			ServiceAccountUID:  string(sa.UID),
			SecretName:         secret.Name,
		}
}

// TokenGenerator mints signed tokens.
type TokenGenerator interface {
	// GenerateToken returns a compact JWS whose payload is privateClaims
	// (any value that marshals to a JSON object) overlaid with claims;
	// a generator's issuer overrides both.
	GenerateToken(ctx context.Context, claims *Claims, privateClaims interface{}) (string, error)
}

// JWTTokenGenerator signs tokens with privateKey: RS256 for an
// *rsa.PrivateKey, ES256/ES384/ES512 for an *ecdsa.PrivateKey on P-256,
// P-384 or P-521. The header carries the key ID the API server derives from
// the matching public key, so it can pick the key among several.
func JWTTokenGenerator(iss string, privateKey crypto.PrivateKey) (TokenGenerator, error) {
	g := &jwtTokenGenerator{iss: iss}
	var pub crypto.PublicKey
	switch k := privateKey.(type) {
	case *rsa.PrivateKey:
		g.alg, g.hash, pub = "RS256", crypto.SHA256, &k.PublicKey
		g.sign = func(digest []byte) ([]byte, error) {
			return rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest)
		}
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			g.alg, g.hash = "ES256", crypto.SHA256
		case elliptic.P384():
			g.alg, g.hash = "ES384", crypto.SHA384
		case elliptic.P521():
			g.alg, g.hash = "ES512", crypto.SHA512
		default:
			return nil, fmt.Errorf("could not generate signer for ECDSA keypair: unknown private key curve %s, must be P-256, P-384 or P-521", k.Curve.Params().Name)
		}
		pub = &k.PublicKey
		g.sign = func(digest []byte) ([]byte, error) { return signECDSA(k, digest) }
	default:
		return nil, fmt.Errorf("unknown private key type %T, must be *rsa.PrivateKey or *ecdsa.PrivateKey", privateKey)
	}
	kid, err := KeyIDFromPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("failed to derive keyID: %w", err)
	}
	header, err := json.Marshal(struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}{g.alg, kid})
	if err != nil {
		return nil, err
	}
	g.encodedHeader = base64.RawURLEncoding.EncodeToString(header)
	return g, nil
}

// KeyIDFromPublicKey is the "kid" of tokens signed by the matching private
// key: the unpadded base64url SHA-256 of the DER (PKIX) public key. It is
// one-way so the ID never reveals the key.
func KeyIDFromPublicKey(publicKey crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(publicKey)
	if err != nil {
		return "", fmt.Errorf("failed to serialize public key to DER format: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

type jwtTokenGenerator struct {
	iss           string
	alg           string
	hash          crypto.Hash
	encodedHeader string
	sign          func(digest []byte) ([]byte, error)
}

func (g *jwtTokenGenerator) GenerateToken(_ context.Context, claims *Claims, privateClaims interface{}) (string, error) {
	payload, err := mergeClaims(privateClaims, claims, &Claims{Issuer: g.iss})
	if err != nil {
		return "", err
	}
	signingInput := g.encodedHeader + "." + base64.RawURLEncoding.EncodeToString(payload)
	h := g.hash.New()
	h.Write([]byte(signingInput))
	sig, err := g.sign(h.Sum(nil))
	if err != nil {
		return "", fmt.Errorf("signing token: %w", err)
	}
	return signingInput + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// mergeClaims flattens each part into one JSON object, later parts winning
// on the same key. Map marshalling sorts the keys, so equal claims always
// give equal payloads.
func mergeClaims(parts ...interface{}) ([]byte, error) {
	merged := map[string]json.RawMessage{}
	for _, p := range parts {
		if p == nil {
			continue
		}
		raw, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("marshalling claims: %w", err)
		}
		if string(raw) == "null" {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("claims must marshal to a JSON object: %w", err)
		}
		for k, v := range m {
			merged[k] = v
		}
	}
	return json.Marshal(merged)
}

// signECDSA returns the JWS form of an ECDSA signature: r and s as
// big-endian integers, each padded to the curve's byte size (RFC 7518 3.4),
// not the ASN.1 form crypto/ecdsa produces by default.
func signECDSA(k *ecdsa.PrivateKey, digest []byte) ([]byte, error) {
	r, s, err := ecdsa.Sign(rand.Reader, k, digest)
	if err != nil {
		return nil, err
	}
	size := (k.Curve.Params().BitSize + 7) / 8
	out := make([]byte, 2*size)
	r.FillBytes(out[:size])
	s.FillBytes(out[size:])
	return out, nil
}
