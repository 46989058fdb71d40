package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// PrivateKeyFromFile reads the PEM file given to
// --service-account-private-key-file and returns its first RSA or ECDSA
// private key (*rsa.PrivateKey or *ecdsa.PrivateKey).
func PrivateKeyFromFile(path string) (crypto.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("error reading private key file %s: %w", path, err)
	}
	key, err := ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("error reading private key file %s: %w", path, err)
	}
	return key, nil
}

// ParsePrivateKeyPEM returns the first RSA or ECDSA private key in data,
// accepting "RSA PRIVATE KEY" (PKCS#1), "EC PRIVATE KEY" (SEC 1) and
// "PRIVATE KEY" (PKCS#8) blocks. Other blocks, such as the "EC PARAMETERS"
// openssl writes before an EC key, or certificates, are skipped. When no
// key is found the error says what was seen instead.
func ParsePrivateKeyPEM(data []byte) (crypto.PrivateKey, error) {
	var problems []error
	blocks := 0
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		blocks++
		var key interface{}
		var err error
		switch block.Type {
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			err = errors.New("encrypted private keys are not supported")
		default:
			continue
		}
		if err != nil {
			problems = append(problems, fmt.Errorf("%q block: %w", block.Type, err))
			continue
		}
		switch k := key.(type) {
		case *rsa.PrivateKey:
			return k, nil
		case *ecdsa.PrivateKey:
			return k, nil
		default:
			problems = append(problems, fmt.Errorf("%q block holds a %T; only RSA and ECDSA keys can sign service account tokens", block.Type, key))
		}
	}
	if blocks == 0 {
		return nil, errors.New("data does not contain any PEM block")
	}
	err := errors.New("data does not contain a valid RSA or ECDSA private key")
	if len(problems) > 0 {
		err = fmt.Errorf("%w: %w", err, errors.Join(problems...))
	}
	return nil, err
}
