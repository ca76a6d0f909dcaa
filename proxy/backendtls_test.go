package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
)

// TestBackendTLS forwards to a TLS backend whose certificate comes from a
// CA of its own, as BackendTLSPolicy asks: the server name is sent in SNI
// and checked, or the subject alternative names are checked instead; a
// wrong CA, server name or SAN list, or the system roots, fail the
// request with 502. (TestBackendTransportsByIdentity in proxy/pipeline
// checks that transports are kept by identity.)
func TestBackendTLS(t *testing.T) {
	ca, other := tlstest.NewCA(t), tlstest.NewCA(t)
	const uri = "spiffe://cluster.local/ns/apps/sa/backend"
	backend := startTLSBackend(t, ca, []string{"h2", "http/1.1"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "sni=%s proto=%s", r.TLS.ServerName, r.Proto)
	}), "backend.example.com", uri)
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"tls": {{Address: backend}}})
	right := &router.BackendTLS{ServerName: "backend.example.com", CAPEM: ca.PEM}
	cases := []struct {
		path, protocol string
		tls            *router.BackendTLS
		status         int
		body           string
	}{
		{"/right", "https", right, 200, "sni=backend.example.com proto=HTTP/1.1"},
		{"/h2", "h2", right, 200, "sni=backend.example.com proto=HTTP/2.0"},
		{"/wrong-ca", "https", &router.BackendTLS{ServerName: "backend.example.com", CAPEM: other.PEM}, 502, ""},
		{"/wrong-host", "https", &router.BackendTLS{ServerName: "other.example.com", CAPEM: ca.PEM}, 502, ""},
		{"/system", "https", &router.BackendTLS{ServerName: "backend.example.com"}, 502, ""},
		// ingress-nginx's HTTPS backends without proxy-ssl-verify: any
		// certificate, and SNI only when a name is given.
		{"/unverified", "https", &router.BackendTLS{SkipVerify: true}, 200, "sni= proto=HTTP/1.1"},
		{"/unverified-sni", "h2", &router.BackendTLS{ServerName: "named.example.com", SkipVerify: true}, 200, "sni=named.example.com proto=HTTP/2.0"},
		{"/san-dns", "https", &router.BackendTLS{ServerName: "sni.example.com", CAPEM: ca.PEM,
			SubjectAltNames: []router.SubjectAltName{{Hostname: "nope.example.com"}, {Hostname: "backend.example.com"}}}, 200, "sni=sni.example.com proto=HTTP/1.1"},
		{"/san-uri", "h2", &router.BackendTLS{ServerName: "sni.example.com", CAPEM: ca.PEM,
			SubjectAltNames: []router.SubjectAltName{{URI: uri}}}, 200, "sni=sni.example.com proto=HTTP/2.0"},
		{"/san-miss", "https", &router.BackendTLS{ServerName: "backend.example.com", CAPEM: ca.PEM,
			SubjectAltNames: []router.SubjectAltName{{Hostname: "nope.example.com"}, {URI: "spiffe://cluster.local/ns/apps/sa/other"}}}, 502, ""},
		{"/san-wrong-ca", "https", &router.BackendTLS{ServerName: "backend.example.com", CAPEM: other.PEM,
			SubjectAltNames: []router.SubjectAltName{{Hostname: "backend.example.com"}}}, 502, ""},
	}
	var routes []router.Route
	for _, c := range cases {
		routes = append(routes, route(c.path, nil, router.Rule{Matches: prefix(c.path), Backends: []router.BackendRef{{Name: "tls", Weight: 1, Protocol: c.protocol, TLS: c.tls}}}))
	}
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, routes...)})[0]
	for _, c := range cases {
		resp, body := get(t, http.DefaultClient, "http://"+addr+c.path)
		if resp.StatusCode != c.status || c.body != "" && body != c.body {
			t.Errorf("%s: %d %q, want %d %q", c.path, resp.StatusCode, body, c.status, c.body)
		}
	}
}

// TestBackendTLSGRPC calls a gRPC-like backend over h2 with TLS, the way
// a GRPCRoute backend with a BackendTLSPolicy is reached: a client on h2c
// to the proxy, h2 over TLS to the backend.
func TestBackendTLSGRPC(t *testing.T) {
	ca := tlstest.NewCA(t)
	backend := startTLSBackend(t, ca, []string{"h2"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		fmt.Fprintf(w, "sni=%s proto=%s", r.TLS.ServerName, r.Proto)
		w.Header().Set("Grpc-Status", "0")
	}), "grpc.example.com")
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"grpc": {{Address: backend}}})
	r := router.Route{ID: router.RouteID{Kind: router.KindGRPCRoute, Namespace: "ns", Name: "grpc"}, Rules: []router.Rule{{
		Backends: []router.BackendRef{{Name: "grpc", Weight: 1, Protocol: "h2", TLS: &router.BackendTLS{ServerName: "grpc.example.com", CAPEM: ca.PEM}}},
	}}}
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, r)})[0]
	h2c := &http.Transport{Protocols: new(http.Protocols), DialContext: (&net.Dialer{}).DialContext}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(h2c.CloseIdleConnections)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/echo.Echo/Call", strings.NewReader("\x00\x00\x00\x00\x00"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := (&http.Client{Transport: h2c, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || string(body) != "sni=grpc.example.com proto=HTTP/2.0" || resp.Trailer.Get("Grpc-Status") != "0" {
		t.Errorf("gRPC over TLS: %d %q grpc-status=%q", resp.StatusCode, body, resp.Trailer.Get("Grpc-Status"))
	}
}

// TestBackendTLSClientCertificate forwards to a TLS backend that requires
// a client certificate from a CA of its own, as a Gateway's
// spec.tls.backend.clientCertificateRef asks: the identity that carries
// the right certificate gets 200 (HTTP/1.1 and h2) and the backend sees
// it; one without a certificate, or with one the backend does not trust,
// gets 502, also after the right one has left connections in a pool: the
// client certificate is part of the identity transports are kept by.
func TestBackendTLSClientCertificate(t *testing.T) {
	ca, clientCA, other := tlstest.NewCA(t), tlstest.NewCA(t), tlstest.NewCA(t)
	certPEM, keyPEM := ca.Issue(t, "backend.example.com")
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(clientCA.PEM)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2", "http/1.1"},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "client=%s proto=%s", r.TLS.PeerCertificates[0].Subject.CommonName, r.Proto)
		})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"mtls": {{Address: ln.Addr().String()}}})
	clientCert, clientKey := clientCA.Issue(t, "gateway.example.com")
	untrustedCert, untrustedKey := other.Issue(t, "stranger.example.com")
	identity := func(c *router.ClientCertificate) *router.BackendTLS {
		return &router.BackendTLS{ServerName: "backend.example.com", CAPEM: ca.PEM, ClientCertificate: c}
	}
	right := &router.ClientCertificate{Name: "infra/client", CertPEM: clientCert, KeyPEM: router.PrivateKey(clientKey)}
	cases := []struct {
		path, protocol string
		tls            *router.BackendTLS
		status         int
		body           string
	}{
		{"/right", "https", identity(right), 200, "client=gateway.example.com proto=HTTP/1.1"},
		{"/right-h2", "h2", identity(right), 200, "client=gateway.example.com proto=HTTP/2.0"},
		{"/none", "https", identity(nil), 502, ""},
		{"/none-h2", "h2", identity(nil), 502, ""},
		{"/untrusted", "https", identity(&router.ClientCertificate{Name: "infra/other", CertPEM: untrustedCert, KeyPEM: router.PrivateKey(untrustedKey)}), 502, ""},
		{"/bad-key", "https", identity(&router.ClientCertificate{Name: "infra/bad", CertPEM: clientCert, KeyPEM: router.PrivateKey(untrustedKey)}), 502, ""},
	}
	var routes []router.Route
	for _, c := range cases {
		routes = append(routes, route(c.path, nil, router.Rule{Matches: prefix(c.path), Backends: []router.BackendRef{{Name: "mtls", Weight: 1, Protocol: c.protocol, TLS: c.tls}}}))
	}
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, routes...)})[0]
	for round := range 2 {
		for _, c := range cases {
			resp, body := get(t, http.DefaultClient, "http://"+addr+c.path)
			if resp.StatusCode != c.status || c.body != "" && body != c.body {
				t.Errorf("round %d %s: %d %q, want %d %q", round, c.path, resp.StatusCode, body, c.status, c.body)
			}
		}
	}
	if text := fmt.Sprintf("%v %+v %#v", *right, *identity(right), right.KeyPEM); strings.Contains(text, "PRIVATE KEY") {
		t.Errorf("a printed client certificate shows its key: %s", text)
	}
}
