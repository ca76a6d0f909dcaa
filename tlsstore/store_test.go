package tlsstore_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hostgate/hostgate/tlsstore"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
)

// subject returns the common name of the leaf c, which tlstest sets to the
// first host the certificate was issued for.
func subject(c *tls.Certificate) string {
	if c == nil {
		return ""
	}
	return c.Leaf.Subject.CommonName
}

func cert(t *testing.T, ca *tlstest.CA, name string, def bool, hosts ...string) tlsstore.Certificate {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, name)
	return tlsstore.Certificate{Name: name, Hosts: hosts, Default: def, CertPEM: certPEM, KeyPEM: keyPEM}
}

func TestLookup(t *testing.T) {
	ca := tlstest.NewCA(t)
	withDefault, errs := tlsstore.Build([]tlsstore.Certificate{
		cert(t, ca, "exact.example.com", false),
		cert(t, ca, "*.example.com", false),
		cert(t, ca, "*.deep.example.com", false),
		cert(t, ca, "default", true, "default.test"),
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	noDefault, errs := tlsstore.Build([]tlsstore.Certificate{cert(t, ca, "*.example.com", false)})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	tests := []struct {
		name  string
		store *tlsstore.Store
		sni   string
		want  string
	}{
		{"exact", withDefault, "exact.example.com", "exact.example.com"},
		{"exact is case-insensitive and ignores a trailing dot", withDefault, "Exact.Example.COM.", "exact.example.com"},
		{"wildcard one label", withDefault, "www.example.com", "*.example.com"},
		{"wildcard several labels", withDefault, "a.b.example.com", "*.example.com"},
		{"longest wildcard wins", withDefault, "x.deep.example.com", "*.deep.example.com"},
		{"wildcard needs a label", withDefault, "example.com", "default"},
		{"unknown takes default", withDefault, "other.test", "default"},
		{"no SNI takes default", withDefault, "", "default"},
		{"explicit hosts replace SANs", withDefault, "default.test", "default"},
		{"unknown without default", noDefault, "other.test", ""},
		{"no SNI without default", noDefault, "", ""},
		{"nil store", nil, "exact.example.com", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := subject(tt.store.Lookup(tt.sni)); got != tt.want {
				t.Errorf("Lookup(%q) = %q, want %q", tt.sni, got, tt.want)
			}
		})
	}
}

func TestBuildReportsAndKeepsGoing(t *testing.T) {
	ca := tlstest.NewCA(t)
	store, errs := tlsstore.Build([]tlsstore.Certificate{
		{Name: "ns/broken", CertPEM: []byte("nope"), KeyPEM: []byte("nope")},
		cert(t, ca, "first.example.com", true),
		cert(t, ca, "second", true, "first.example.com", "second.example.com"),
	})
	want := []string{
		"load certificate ns/broken",
		`index certificate second: host "first.example.com" already served by first.example.com`,
		"index certificate second: default already set by first.example.com",
	}
	if len(errs) != len(want) {
		t.Fatalf("errors = %v, want %d", errs, len(want))
	}
	for i, w := range want {
		if !strings.Contains(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want it to contain %q", i, errs[i], w)
		}
	}
	for sni, want := range map[string]string{"first.example.com": "first.example.com", "second.example.com": "second", "": "first.example.com"} {
		if got := subject(store.Lookup(sni)); got != want {
			t.Errorf("Lookup(%q) = %q, want %q", sni, got, want)
		}
	}
}

func TestPrivateKeyRedacted(t *testing.T) {
	c := tlsstore.Certificate{Name: "x", KeyPEM: tlsstore.PrivateKey("-----BEGIN PRIVATE KEY----- secret")}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprintf("%x", c.KeyPEM), fmt.Sprintf("%s", c.KeyPEM), string(js)} {
		if strings.Contains(s, "secret") || strings.Contains(s, "LS0t") || strings.Contains(s, "2d2d") {
			t.Errorf("key material printed: %s", s)
		}
	}
}

// TestHandshake serves TLS on loopback from a swappable Store and checks
// what real clients see, including a swap under an open connection.
func TestHandshake(t *testing.T) {
	ca := tlstest.NewCA(t)
	build := func(certs ...tlsstore.Certificate) *tlsstore.Store {
		s, errs := tlsstore.Build(certs)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return s
	}
	var current atomic.Pointer[tlsstore.Store]
	current.Store(build(cert(t, ca, "a.example.com", false), cert(t, ca, "*.example.com", false)))

	addr := echoServer(t, tlsstore.ServerConfig(current.Load))

	// dial verifies the chain but not the name, so that a default
	// certificate served for another name is seen rather than rejected.
	dial := func(sni string) (*tls.Conn, error) {
		return tls.Dial("tcp", addr, &tls.Config{
			ServerName: sni, MinVersion: tls.VersionTLS12, InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error {
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: ca.Pool})
				return err
			},
		})
	}
	peer := func(c *tls.Conn) string { return c.ConnectionState().PeerCertificates[0].Subject.CommonName }

	open, err := dial("a.example.com")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if got := peer(open); got != "a.example.com" {
		t.Errorf("exact: got %q", got)
	}
	if c, err := dial("b.example.com"); err != nil {
		t.Errorf("wildcard: %v", err)
	} else {
		if got := peer(c); got != "*.example.com" {
			t.Errorf("wildcard: got %q", got)
		}
		c.Close()
	}
	if _, err := dial("unknown.test"); err == nil || !strings.Contains(err.Error(), "unrecognized name") {
		t.Errorf("unknown name: err = %v, want an unrecognized_name alert", err)
	}

	// Swap: the exact certificate is replaced by a new one for the same name.
	current.Store(build(cert(t, ca, "a.example.com", false, "a.example.com"), cert(t, ca, "new-default", true)))
	if c, err := dial("unknown.test"); err != nil {
		t.Errorf("after swap, unknown name: %v", err)
	} else {
		if got := peer(c); got != "new-default" {
			t.Errorf("after swap, unknown name: got %q", got)
		}
		c.Close()
	}
	if _, err := open.Write([]byte("ping")); err != nil {
		t.Fatalf("open connection after swap: %v", err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(open, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("open connection after swap: read %q, %v", buf, err)
	}
	if old, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "a.example.com", RootCAs: ca.Pool, MaxVersion: tls.VersionTLS11, MinVersion: tls.VersionTLS10}); err == nil {
		old.Close()
		t.Error("TLS 1.1 handshake succeeded")
	}
}

// TestCipherSuitesByCertificate: the handshakes a certificate with suites
// of its own serves offer only those (TLS 1.2); other certificates' keep
// ServerConfig's, and TLS 1.3 is unchanged.
func TestCipherSuitesByCertificate(t *testing.T) {
	ca := tlstest.NewCA(t)
	strict := cert(t, ca, "strict.example.com", false, "strict.example.com")
	strict.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}
	s, errs := tlsstore.Build([]tlsstore.Certificate{strict, cert(t, ca, "plain.example.com", false, "plain.example.com")})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	addr := echoServer(t, tlsstore.ServerConfig(func() *tlsstore.Store { return s }))
	handshake := func(sni string, maxVersion uint16, suites ...uint16) (uint16, error) {
		c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: sni, RootCAs: ca.Pool, MaxVersion: maxVersion, CipherSuites: suites})
		if err != nil {
			return 0, err
		}
		defer c.Close()
		return c.ConnectionState().CipherSuite, nil
	}
	aes := tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
	chacha := tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
	if _, err := handshake("strict.example.com", tls.VersionTLS12, aes); err == nil {
		t.Error("strict.example.com: a TLS 1.2 client offering only a suite the certificate leaves out completed its handshake")
	}
	if got, err := handshake("strict.example.com", tls.VersionTLS12, aes, chacha); err != nil || got != chacha {
		t.Errorf("strict.example.com: suite %s, %v; want %s", tls.CipherSuiteName(got), err, tls.CipherSuiteName(chacha))
	}
	if got, err := handshake("plain.example.com", tls.VersionTLS12, aes); err != nil || got != aes {
		t.Errorf("plain.example.com: suite %s, %v; want %s", tls.CipherSuiteName(got), err, tls.CipherSuiteName(aes))
	}
	if _, err := handshake("strict.example.com", tls.VersionTLS13); err != nil {
		t.Errorf("strict.example.com over TLS 1.3: %v", err)
	}
}

// TestSameCertificateTwiceIsNoConflict: listeners sharing a port often name
// one Secret; listing it twice must not be reported as a conflict.
func TestSameCertificateTwiceIsNoConflict(t *testing.T) {
	ca := tlstest.NewCA(t)
	shared := cert(t, ca, "shared.example.com", true, "*.example.com")
	store, errs := tlsstore.Build([]tlsstore.Certificate{shared, shared})
	if len(errs) != 0 {
		t.Errorf("errors = %v, want none", errs)
	}
	if got := subject(store.Lookup("a.example.com")); got != "shared.example.com" {
		t.Errorf("Lookup = %q, want the shared certificate", got)
	}
}

// TestClientValidation checks handshakes against the validation of the
// server name they ask for: required, optional, or none.
func TestClientValidation(t *testing.T) {
	ca, clientCA, otherCA := tlstest.NewCA(t), tlstest.NewCA(t), tlstest.NewCA(t)
	store, errs := tlsstore.Build(
		[]tlsstore.Certificate{cert(t, ca, "*.example.com", true)},
		tlsstore.ClientValidation{Name: "required", Host: "secure.example.com", CAPEM: clientCA.PEM},
		tlsstore.ClientValidation{Name: "optional", Host: "*.optional.example.com", CAPEM: clientCA.PEM, Optional: true},
	)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	addr := echoServer(t, tlsstore.ServerConfig(func() *tlsstore.Store { return store }))
	good, bad := clientCert(t, clientCA), clientCert(t, otherCA)
	for _, tt := range []struct {
		name   string
		sni    string
		certs  []tls.Certificate
		asked  bool
		passes bool
	}{
		{"required, valid", "secure.example.com", good, true, true},
		{"required, other authority", "secure.example.com", bad, true, false},
		{"required, none", "secure.example.com", nil, true, false},
		{"optional, valid", "a.optional.example.com", good, true, true},
		{"optional, other authority", "a.b.optional.example.com", bad, true, true},
		{"optional, none", "a.optional.example.com", nil, true, true},
		{"no validation", "www.example.com", nil, false, true},
		{"no validation without SNI", "", nil, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			asked, err := roundTrip(addr, &tls.Config{ServerName: tt.sni, InsecureSkipVerify: true}, tt.certs)
			if passes := err == nil; passes != tt.passes {
				t.Errorf("passes = %v (%v), want %v", passes, err, tt.passes)
			}
			if asked != tt.asked {
				t.Errorf("asked for a certificate = %v, want %v", asked, tt.asked)
			}
		})
	}
}

// TestOtherClientValidation: a request is misdirected when its Host has
// another validation than its connection's server name, so that naming
// another listener in the handshake, or none, passes no validation by.
func TestOtherClientValidation(t *testing.T) {
	caPEM := tlstest.NewCA(t).PEM
	store, errs := tlsstore.Build(nil,
		tlsstore.ClientValidation{Name: "secure", Host: "secure.example.com", CAPEM: caPEM},
		tlsstore.ClientValidation{Name: "wild", Host: "*.example.com", CAPEM: caPEM},
	)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, tt := range []struct {
		serverName, host string
		other            bool
	}{
		{"secure.example.com", "secure.example.com", false},
		{"secure.example.com", "Secure.Example.com.:443", false},
		{"", "secure.example.com", true},
		{"open.test", "secure.example.com", true},
		{"a.example.com", "b.example.com:8443", false},
		{"a.example.com", "secure.example.com", true},
		{"", "open.test", false},
		{"", "[::1]:443", false},
	} {
		if got := store.OtherClientValidation(tt.serverName, tt.host); got != tt.other {
			t.Errorf("OtherClientValidation(%q, %q) = %v, want %v", tt.serverName, tt.host, got, tt.other)
		}
	}
	plain, _ := tlsstore.Build(nil)
	if plain.OtherClientValidation("", "secure.example.com") {
		t.Error("a Store without validations finds another validation")
	}
}

// TestBadAuthorityFailsClosed: a validation whose authorities do not parse
// is reported and still refuses every client certificate.
func TestBadAuthorityFailsClosed(t *testing.T) {
	ca := tlstest.NewCA(t)
	store, errs := tlsstore.Build([]tlsstore.Certificate{cert(t, ca, "server", true)},
		tlsstore.ClientValidation{Name: "ns/gw/https", CAPEM: []byte("not PEM")})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "load client validation ns/gw/https") {
		t.Fatalf("errors = %v, want one naming the validation", errs)
	}
	addr := echoServer(t, tlsstore.ServerConfig(func() *tlsstore.Store { return store }))
	if _, err := roundTrip(addr, &tls.Config{InsecureSkipVerify: true}, clientCert(t, ca)); err == nil {
		t.Error("a client certificate passed a validation without authorities")
	}
}

// echoServer serves cfg on loopback, echoing what clients send, and
// returns its address.
func echoServer(t *testing.T, cfg *tls.Config) string {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func clientCert(t *testing.T, ca *tlstest.CA) []tls.Certificate {
	certPEM, keyPEM := ca.Issue(t, "client")
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return []tls.Certificate{pair}
}

// roundTrip connects to the echo server at addr with cfg, presenting certs
// (if any) when asked for a certificate, and echoes a few bytes. It
// reports whether the server asked for a certificate.
func roundTrip(addr string, cfg *tls.Config, certs []tls.Certificate) (asked bool, err error) {
	cfg.MinVersion = tls.VersionTLS12
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		asked = true
		if len(certs) == 0 {
			return &tls.Certificate{}, nil
		}
		return &certs[0], nil
	}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return asked, err
	}
	defer c.Close()
	// With TLS 1.3 the server's verdict on the client's certificate
	// arrives after the client's handshake: a round trip shows it.
	if _, err = c.Write([]byte("ping")); err == nil {
		_, err = io.ReadFull(c, make([]byte, 4))
	}
	return asked, err
}
