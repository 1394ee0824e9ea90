package podcertificate

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
)

// generateKeyAndProof generates a private key of keyType (the
// podCertificate source's keyType) and its proof of possession: a stub
// PKCS#10 request signed with it.
func generateKeyAndProof(keyType string) (crypto.PrivateKey, []byte, error) {
	var privKey crypto.PrivateKey
	switch keyType {
	case "RSA3072":
		priv, err := rsa.GenerateKey(rand.Reader, 3072)
		if err != nil {
			return nil, nil, fmt.Errorf("while generating RSA 3072 key: %w", err)
		}
		privKey = priv
	case "RSA4096":
		priv, err := rsa.GenerateKey(rand.Reader, 4096)
		if err != nil {
			return nil, nil, fmt.Errorf("while generating RSA 4096 key: %w", err)
		}
		privKey = priv
	case "ECDSAP256":
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("while generating ECDSA P256 key: %w", err)
		}
		privKey = priv
	case "ECDSAP384":
		priv, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("while generating ECDSA P384 key: %w", err)
		}
		privKey = priv
	case "ECDSAP521":
		priv, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("while generating ECDSA P521 key: %w", err)
		}
		privKey = priv
	case "ED25519":
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("while generating Ed25519 key: %w", err)
		}
		privKey = priv
	default:
		return nil, nil, fmt.Errorf("unknown key type %q", keyType)
	}

	pkcs10Req, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, privKey)
	if err != nil {
		return nil, nil, fmt.Errorf("while generating stub PKCS#10 request: %w", err)
	}
	return privKey, pkcs10Req, nil
}

// pemEncodeKey is key as a PEM "PRIVATE KEY" block (PKCS#8).
func pemEncodeKey(key crypto.PrivateKey) ([]byte, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("while marshaling key to PKCS#8: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// cleanCertificateChain drops all inter-block data and block headers from
// a PEM certificate chain: what remains is each block's bytes as a
// "CERTIFICATE" block.
func cleanCertificateChain(in []byte) []byte {
	out := &bytes.Buffer{}
	rest := in
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		out.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes}))
	}
	return out.Bytes()
}
