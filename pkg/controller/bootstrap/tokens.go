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
	"time"

	v1 "k8s.io/api/core/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstrapsecretutil "k8s.io/cluster-bootstrap/util/secrets"
	"k8s.io/klog/v2"
)

// isTokenSecretIn: obj is a bootstrap token Secret in namespace.
func isTokenSecretIn(obj interface{}, namespace string) bool {
	s, ok := obj.(*v1.Secret)
	return ok && s.Type == bootstrapapi.SecretTypeBootstrapToken && s.Namespace == namespace
}

// signingToken returns the ID and secret of a token Secret that may sign
// cluster-info: correctly named, its token-id matching its name, with a
// secret, unexpired, and usage-bootstrap-signing "true".
func signingToken(logger klog.Logger, secret *v1.Secret, now time.Time) (id, tokenSecret string, ok bool) {
	nameID, ok := bootstrapsecretutil.ParseName(secret.Name)
	if !ok {
		logger.V(3).Info("Invalid secret name, must be of the form "+bootstrapapi.BootstrapTokenSecretPrefix+"<secret-id>", "secretName", secret.Name)
		return "", "", false
	}
	id = bootstrapsecretutil.GetData(secret, bootstrapapi.BootstrapTokenIDKey)
	if id == "" {
		logger.V(3).Info("No key in Secret", "key", bootstrapapi.BootstrapTokenIDKey, "secret", klog.KObj(secret))
		return "", "", false
	}
	if id != nameID {
		logger.V(3).Info("Token ID doesn't match secret name", "tokenID", id, "secretName", secret.Name)
		return "", "", false
	}
	tokenSecret = bootstrapsecretutil.GetData(secret, bootstrapapi.BootstrapTokenSecretKey)
	if tokenSecret == "" {
		logger.V(3).Info("No key in Secret", "key", bootstrapapi.BootstrapTokenSecretKey, "secret", klog.KObj(secret))
		return "", "", false
	}
	if bootstrapsecretutil.HasExpired(secret, now) {
		return "", "", false
	}
	if bootstrapsecretutil.GetData(secret, bootstrapapi.BootstrapTokenUsageSigningKey) != "true" {
		return "", "", false
	}
	return id, tokenSecret, true
}
