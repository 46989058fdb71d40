// Package bootstrap holds the two controllers that serve bootstrap tokens
// (Secrets of type bootstrap.kubernetes.io/token in kube-system):
//   - bootstrap-signer-controller signs the kubeconfig in the kube-public
//     cluster-info ConfigMap with every token allowed to sign, so a joining
//     node holding a token can trust what it downloads;
//   - token-cleaner-controller deletes tokens once they expire.
//
// Both are disabled by default in the controller manager.
package bootstrap

import (
	"regexp"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Bootstrap token and cluster-info names, as k8s.io/cluster-bootstrap
// defines them.
const (
	// SecretTypeBootstrapToken is the type of bootstrap token Secrets.
	SecretTypeBootstrapToken v1.SecretType = "bootstrap.kubernetes.io/token"
	// BootstrapTokenSecretPrefix starts a token Secret's name; the token ID
	// follows.
	BootstrapTokenSecretPrefix = "bootstrap-token-"

	// Data keys of a token Secret.
	BootstrapTokenIDKey           = "token-id"
	BootstrapTokenSecretKey       = "token-secret"
	BootstrapTokenExpirationKey   = "expiration"
	BootstrapTokenUsageSigningKey = "usage-bootstrap-signing"

	// ConfigMapClusterInfo is the ConfigMap in kube-public whose kubeconfig
	// gets signed.
	ConfigMapClusterInfo = "cluster-info"
	// KubeConfigKey is the signed key of cluster-info.
	KubeConfigKey = "kubeconfig"
	// JWSSignatureKeyPrefix starts the cluster-info key holding one token's
	// signature; the token ID follows.
	JWSSignatureKeyPrefix = "jws-kubeconfig-"
)

// secretNameRE accepts "bootstrap-token-" and a six character token ID.
var secretNameRE = regexp.MustCompile(`^` + regexp.QuoteMeta(BootstrapTokenSecretPrefix) + `([a-z0-9]{6})$`)

// tokenIDFromName returns the token ID a Secret name carries.
func tokenIDFromName(name string) (string, bool) {
	m := secretNameRE.FindStringSubmatch(name)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// isTokenSecretIn: obj is a bootstrap token Secret in namespace.
func isTokenSecretIn(obj interface{}, namespace string) bool {
	s, ok := obj.(*v1.Secret)
	return ok && s.Type == SecretTypeBootstrapToken && s.Namespace == namespace
}

// secretData is secret.Data[key] as a string, "" when missing.
func secretData(secret *v1.Secret, key string) string {
	return string(secret.Data[key])
}

// expiration reports how long a token Secret has left. A token without an
// expiration never expires (0, false); an unparseable one is treated as
// expired, so a malformed token is never trusted.
func expiration(secret *v1.Secret, now time.Time) (remaining time.Duration, expired bool) {
	value := secretData(secret, BootstrapTokenExpirationKey)
	if value == "" {
		return 0, false
	}
	at, err := time.Parse(time.RFC3339, value)
	if err != nil {
		klog.V(3).Info("Unparseable expiration time in bootstrap token Secret, treating it as expired", "secret", klog.KObj(secret), "expiration", value, "err", err)
		return 0, true
	}
	remaining = at.Sub(now)
	if remaining <= 0 {
		klog.V(3).Info("Expired bootstrap token", "secret", klog.KObj(secret), "expiration", value)
		return 0, true
	}
	return remaining, false
}

// signingToken returns the ID and secret of a token Secret that may sign
// cluster-info: correctly named, its token-id matching its name, with a
// secret, unexpired, and usage-bootstrap-signing "true".
func signingToken(logger klog.Logger, secret *v1.Secret, now time.Time) (id, tokenSecret string, ok bool) {
	nameID, ok := tokenIDFromName(secret.Name)
	if !ok {
		logger.V(3).Info("Invalid secret name, must be of the form "+BootstrapTokenSecretPrefix+"<secret-id>", "secretName", secret.Name)
		return "", "", false
	}
	id = secretData(secret, BootstrapTokenIDKey)
	if id == "" {
		logger.V(3).Info("No key in Secret", "key", BootstrapTokenIDKey, "secret", klog.KObj(secret))
		return "", "", false
	}
	if id != nameID {
		logger.V(3).Info("Token ID doesn't match secret name", "tokenID", id, "secretName", secret.Name)
		return "", "", false
	}
	tokenSecret = secretData(secret, BootstrapTokenSecretKey)
	if tokenSecret == "" {
		logger.V(3).Info("No key in Secret", "key", BootstrapTokenSecretKey, "secret", klog.KObj(secret))
		return "", "", false
	}
	if _, expired := expiration(secret, now); expired {
		return "", "", false
	}
	if secretData(secret, BootstrapTokenUsageSigningKey) != "true" {
		return "", "", false
	}
	return id, tokenSecret, true
}
