package bootstrap

import "testing"

// TestDetachedSignature pins signatures computed outside Go, with
//
//	b64u() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
//	hdr=$(printf '{"alg":"HS256","kid":"<id>"}' | b64u)
//	sig=$(printf '%s.%s' "$hdr" "$(printf '%s' "<content>" | b64u)" |
//	      openssl dgst -sha256 -hmac '<secret>' -binary | b64u)
//	echo "$hdr..$sig"
//
// The "joshua" vectors are also k8s.io/cluster-bootstrap's own test values,
// so kubeadm and kubelet accept what we write.
func TestDetachedSignature(t *testing.T) {
	const clusterKubeconfig = "apiVersion: v1\nclusters:\n- cluster:\n    server: https://10.0.0.1:6443\n  name: \"\"\nkind: Config\n"
	cases := []struct {
		content, id, secret, want string
	}{
		{
			"Hello from the other side. I must have called a thousand times.", "joshua", "my voice is my passcode",
			"eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8",
		},
		{
			"", "joshua", "my voice is my passcode",
			"eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..7Ui1ALizW4jXphVUB7xUqC9vLYLL9RZeOFfVLoB7Tgk",
		},
		{
			clusterKubeconfig, "abcdef", "0123456789abcdef",
			"eyJhbGciOiJIUzI1NiIsImtpZCI6ImFiY2RlZiJ9..ix0BKYDxDGO6ajW-0nGw2my9eNJg8wSoeX53bfSt0JI",
		},
		{
			"héllo {\"x\":1}", "07401b", "f395accd246ae52d",
			"eyJhbGciOiJIUzI1NiIsImtpZCI6IjA3NDAxYiJ9..Ka9ZhwiO8A2gOxIvDpbPlCiWRsxD8qT_8iK5OQ0gdw0",
		},
	}
	for _, tc := range cases {
		if got := detachedSignature(tc.content, tc.id, tc.secret); got != tc.want {
			t.Errorf("detachedSignature(%q, %q, %q) = %s, want %s", tc.content, tc.id, tc.secret, got, tc.want)
		}
	}
}
