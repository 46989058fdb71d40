// Package serviceaccount holds two controllers:
//
//   - serviceaccount-controller (ServiceAccountsController) makes sure every
//     active namespace has the "default" ServiceAccount, recreating it when
//     it is deleted;
//   - serviceaccount-token-controller (TokensController) fills legacy
//     kubernetes.io/service-account-token Secrets with a signed JWT, the CA
//     bundle and the namespace, and deletes such Secrets once the
//     ServiceAccount they name is gone.
//
// It also holds the legacy token signer (JWTTokenGenerator, built on the
// standard library only) and PrivateKeyFromFile for
// --service-account-private-key-file.
package serviceaccount
