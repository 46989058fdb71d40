package bootstrap

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

func TestTokenIDFromName(t *testing.T) {
	cases := map[string]string{
		"bootstrap-token-abc123":  "abc123",
		"bootstrap-token-000000":  "000000",
		"bootstrap-token-abc12":   "",
		"bootstrap-token-abc1234": "",
		"bootstrap-token-ABC123":  "",
		"bootstrap-token-abc_23":  "",
		"xbootstrap-token-abc123": "",
		"token-abc123":            "",
	}
	for name, want := range cases {
		got, ok := tokenIDFromName(name)
		if got != want || ok != (want != "") {
			t.Errorf("tokenIDFromName(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

func TestExpiration(t *testing.T) {
	cases := []struct {
		name        string
		value       *string
		wantLeft    time.Duration
		wantExpired bool
	}{
		{name: "no expiration"},
		{name: "empty expiration", value: ptr("")},
		{name: "in an hour", value: ptr(testNow.Add(time.Hour).Format(time.RFC3339)), wantLeft: time.Hour},
		{name: "in another zone", value: ptr("2030-01-02T05:04:05+01:00"), wantLeft: time.Hour},
		{name: "right now", value: ptr(testNow.Format(time.RFC3339)), wantExpired: true},
		{name: "a second ago", value: ptr(testNow.Add(-time.Second).Format(time.RFC3339)), wantExpired: true},
		{name: "garbage", value: ptr("tomorrow"), wantExpired: true},
		{name: "not RFC3339", value: ptr("2031-01-02 03:04:05"), wantExpired: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tokenSecret("abc123", "0123456789abcdef")
			if tc.value != nil {
				withExpiration(s, *tc.value)
			}
			left, expired := expiration(s, testNow)
			if left != tc.wantLeft || expired != tc.wantExpired {
				t.Fatalf("expiration = %v, %v; want %v, %v", left, expired, tc.wantLeft, tc.wantExpired)
			}
		})
	}
}

func ptr(s string) *string { return &s }

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
		{"name and ID differ", func(s *v1.Secret) { s.Name = BootstrapTokenSecretPrefix + "zzzzzz" }, false},
		{"no token-id", func(s *v1.Secret) { delete(s.Data, BootstrapTokenIDKey) }, false},
		{"no token-secret", func(s *v1.Secret) { delete(s.Data, BootstrapTokenSecretKey) }, false},
		{"not for signing", func(s *v1.Secret) { delete(s.Data, BootstrapTokenUsageSigningKey) }, false},
		{"signing false", func(s *v1.Secret) { s.Data[BootstrapTokenUsageSigningKey] = []byte("false") }, false},
		{"signing True", func(s *v1.Secret) { s.Data[BootstrapTokenUsageSigningKey] = []byte("True") }, false},
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
