package podcertificate

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
)

// Each key type gives a key of its kind, PEM PKCS#8, and a stub PKCS#10
// request signed with it (the proof of possession).
func TestGenerateKeyAndProof(t *testing.T) {
	for _, keyType := range []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"} {
		t.Run(keyType, func(t *testing.T) {
			key, proof, err := generateKeyAndProof(keyType)
			if err != nil {
				t.Fatal(err)
			}
			if got := keyTypeOf(key); got != keyType {
				t.Errorf("key %T is a %s", key, got)
			}
			csr, err := x509.ParseCertificateRequest(proof)
			if err != nil {
				t.Fatal(err)
			}
			if err := csr.CheckSignature(); err != nil {
				t.Errorf("proof: %v", err)
			}
			if !key.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(csr.PublicKey) {
				t.Error("the proof is not for the key")
			}
			keyPEM, err := pemEncodeKey(key)
			if err != nil {
				t.Fatal(err)
			}
			b, rest := pem.Decode(keyPEM)
			if b == nil || b.Type != "PRIVATE KEY" || len(b.Headers) != 0 || len(rest) != 0 {
				t.Fatalf("PEM key %q", keyPEM)
			}
			back, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if !back.(interface{ Equal(crypto.PrivateKey) bool }).Equal(key) {
				t.Error("PEM key is not the key")
			}
		})
	}
	if _, _, err := generateKeyAndProof("RSA2048"); err == nil || err.Error() != `unknown key type "RSA2048"` {
		t.Errorf("RSA2048: %v", err)
	}
}

func TestCleanCertificateChain(t *testing.T) {
	a := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("a")})
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("b")})
	for _, tc := range []struct {
		name, in, want string
	}{
		{name: "empty", in: "", want: ""},
		{name: "no PEM", in: "junk", want: ""},
		{name: "clean", in: string(a) + string(b), want: string(a) + string(b)},
		{name: "text between and around", in: "leaf\n" + string(a) + "\nroot:\n" + string(b) + "trailer", want: string(a) + string(b)},
		{name: "headers dropped", in: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"K": "v"}, Bytes: []byte("a")})), want: string(a)},
		{name: "type made CERTIFICATE", in: string(pem.EncodeToMemory(&pem.Block{Type: "X509 CERTIFICATE", Bytes: []byte("b")})), want: string(b)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(cleanCertificateChain([]byte(tc.in))); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// keyTypeOf is the podCertificate keyType of key.
func keyTypeOf(key crypto.PrivateKey) string {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return fmt.Sprintf("RSA%d", k.N.BitLen())
	case *ecdsa.PrivateKey:
		return "ECDSA" + strings.ReplaceAll(k.Curve.Params().Name, "-", "")
	case ed25519.PrivateKey:
		return "ED25519"
	}
	return fmt.Sprintf("%T", key)
}
