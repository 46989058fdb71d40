package bootstrap

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/klog/v2"
)

func TestSigningToken(t *testing.T) {
	future := testNow.Add(time.Hour).Format(time.RFC3339)
	past := testNow.Add(-time.Hour).Format(time.RFC3339)
	cases := []struct {
		name   string
		mutate func(*v1.Secret)
		ok     bool
	}{
		{"valid", func(*v1.Secret) {}, true},
		{"valid until later", func(s *v1.Secret) { withExpiration(s, future) }, true},
		{"expired", func(s *v1.Secret) { withExpiration(s, past) }, false},
		{"bad name", func(s *v1.Secret) { s.Name = "my-token" }, false},
		{"name and ID differ", func(s *v1.Secret) { s.Name = bootstrapapi.BootstrapTokenSecretPrefix + "zzzzzz" }, false},
		{"no token-id", func(s *v1.Secret) { delete(s.Data, bootstrapapi.BootstrapTokenIDKey) }, false},
		{"no token-secret", func(s *v1.Secret) { delete(s.Data, bootstrapapi.BootstrapTokenSecretKey) }, false},
		{"not for signing", func(s *v1.Secret) { delete(s.Data, bootstrapapi.BootstrapTokenUsageSigningKey) }, false},
		{"signing false", func(s *v1.Secret) { s.Data[bootstrapapi.BootstrapTokenUsageSigningKey] = []byte("false") }, false},
		{"signing True", func(s *v1.Secret) { s.Data[bootstrapapi.BootstrapTokenUsageSigningKey] = []byte("True") }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tokenSecret("abc123", "0123456789abcdef")
			tc.mutate(s)
			id, secret, ok := signingToken(klog.Background(), s, testNow)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if ok && (id != "abc123" || secret != "0123456789abcdef") {
				t.Fatalf("got %q, %q", id, secret)
			}
		})
	}
}

func TestIsTokenSecretIn(t *testing.T) {
	token := tokenSecret("abc123", "x")
	opaque := tokenSecret("abc123", "x")
	opaque.Type = v1.SecretTypeOpaque
	if !isTokenSecretIn(token, "kube-system") {
		t.Error("token in kube-system not recognised")
	}
	if isTokenSecretIn(token, "default") {
		t.Error("token outside the namespace accepted")
	}
	if isTokenSecretIn(opaque, "kube-system") {
		t.Error("opaque Secret accepted")
	}
	if isTokenSecretIn(&v1.ConfigMap{}, "kube-system") {
		t.Error("a ConfigMap accepted")
	}
}
