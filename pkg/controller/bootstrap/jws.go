package bootstrap

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
)

// jwsHeader is the protected header of the signatures: HMAC-SHA256 with the
// token ID as key ID. Fields are in alphabetical order, which is how the
// upstream JOSE library serialises them; clients compare whole strings.
type jwsHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

// detachedSignature computes the JWS (RFC 7515) of content signed with the
// token secret, in compact serialisation with the payload left out
// (Appendix F): "<header>..<signature>". A client that knows the token
// recomputes it over the kubeconfig it downloaded.
func detachedSignature(content, tokenID, tokenSecret string) string {
	enc := base64.RawURLEncoding
	// Marshalling two strings cannot fail.
	header, _ := json.Marshal(jwsHeader{Alg: "HS256", Kid: tokenID})
	signingInput := enc.EncodeToString(header) + "." + enc.EncodeToString([]byte(content))
	mac := hmac.New(sha256.New, []byte(tokenSecret))
	mac.Write([]byte(signingInput))
	return enc.EncodeToString(header) + ".." + enc.EncodeToString(mac.Sum(nil))
}
