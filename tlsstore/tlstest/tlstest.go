// Package tlstest issues throwaway certificates at test time, so that no
// key material is checked in and no test depends on a certificate expiring.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"
)

// CA is a certificate authority that exists for one test.
type CA struct {
	// Pool trusts the CA, for clients' RootCAs.
	Pool *x509.CertPool
	// PEM is the CA certificate, for clients that read files (curl).
	PEM  []byte
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA creates a CA.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, "hostgate test CA")
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("create CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse CA certificate: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{Pool: pool, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}
}

// Issue returns a PEM certificate and key for hosts: DNS names (wildcards
// included), IP addresses or URIs (with a scheme). The first host is also the subject name, so
// tests can tell certificates apart by it.
func (ca *CA) Issue(t testing.TB, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, hosts[0])
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	// Client authentication too, so that a test can present any of them
	// as a client certificate.
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if u, err := url.Parse(h); err == nil && u.Scheme != "" {
			tmpl.URIs = append(tmpl.URIs, u)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("issue certificate for %v: %v", hosts, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("marshal key for %v: %v", hosts, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	return key
}

func template(t testing.TB, commonName string) *x509.Certificate {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("generate serial: %v", err)
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
	}
}
