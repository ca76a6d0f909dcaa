package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/hostgate/hostgate/internal/tcptest"
	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
)

// testOptions are fast-stopping options for tests. The HTTP/1.1 and HTTP/2
// engines are the defaults unless HOSTGATE_TEST_HTTP1_ENGINE and
// HOSTGATE_TEST_HTTP2_ENGINE name others, so that the tests can run on
// net/http alone too.
func testOptions() Options {
	return Options{
		ShutdownDelay: time.Millisecond, ShutdownGrace: 2 * time.Second,
		Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler),
		HTTP1Engine: Engine(os.Getenv("HOSTGATE_TEST_HTTP1_ENGINE")),
		HTTP2Engine: Engine(os.Getenv("HOSTGATE_TEST_HTTP2_ENGINE")),
	}
}

// startServer returns a Server that is shut down when the test ends.
func startServer(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s
}

// apply applies listeners and returns the bound TCP address of each, in
// order.
func apply(t testing.TB, s *Server, listeners ...Listener) []string {
	t.Helper()
	if err := s.Apply(Config{Listeners: listeners}); err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, len(listeners))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range listeners {
		addrs[i] = s.listeners[l.Address].tcp.Addr().String()
	}
	return addrs
}

func compile(t testing.TB, routes ...router.Route) *router.Table {
	t.Helper()
	tbl, errs := router.Compile(routes)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return tbl
}

// route is an HTTPRoute with one rule.
func route(name string, hosts []string, rule router.Rule) router.Route {
	return router.Route{ID: router.RouteID{Kind: router.KindHTTPRoute, Namespace: "ns", Name: name}, Hostnames: hosts, Rules: []router.Rule{rule}}
}

func prefix(p string) []router.Match {
	return []router.Match{{Path: router.PathMatch{Type: router.PathPrefix, Value: p}}}
}

func backends(names ...string) []router.BackendRef {
	refs := make([]router.BackendRef, len(names))
	for i, n := range names {
		refs[i] = router.BackendRef{Name: n, Weight: 1}
	}
	return refs
}

// freeAddr returns a loopback address with a port that was free a moment
// ago, for tests with several listeners (which need distinct addresses).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// echo is a backend handler that describes the request it got.
func echo(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Backend", name)
		w.Header().Set("Connection", "keep-alive, X-Hop")
		w.Header().Set("X-Hop", "must not pass")
		fmt.Fprintf(w, "backend=%s proto=%s method=%s host=%s path=%s query=%s body=%s\n", name, r.Proto, r.Method, r.Host, r.URL.EscapedPath(), r.URL.RawQuery, body)
		for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Hop", "X-Test", "X-Added", "Forwarded", "X-Forwarded-Client-Cert"} {
			fmt.Fprintf(w, "%s=%s\n", h, strings.Join(r.Header.Values(h), ","))
		}
	}
}

// startBackend serves h on loopback over HTTP/1.1 and h2c.
func startBackend(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	return startBackendServer(t, srv)
}

// startBackendServer runs srv on a loopback port until the test ends.
func startBackendServer(t testing.TB, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// startTLSBackend serves h over TLS on loopback, offering protos in ALPN,
// with a certificate of ca for hosts, until the test ends.
func startTLSBackend(t testing.TB, ca *tlstest.CA, protos []string, h http.Handler, hosts ...string) string {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, hosts...)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: protos, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// deadAddr returns a loopback address that refuses connections.
func deadAddr(t *testing.T) string { return tcptest.Refused(t).String() }

func get(t *testing.T, c *http.Client, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Add(header[i], header[i+1])
		}
	}
	resp, err := c.Do(req)
	return resp, bodyOf(t, resp, err)
}

// bodyOf reads and closes the body of resp, the outcome of a request that
// must not fail.
func bodyOf(t testing.TB, resp *http.Response, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return string(body)
}

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// curl runs curl with args and returns its output; without curl the test
// is skipped, except in CI where curl must be there.
func curl(t *testing.T, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl not found")
		}
		t.Skip("curl not found")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, append([]string{"--silent", "--show-error", "--max-time", "10"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// tlsFixture is a CA with certificates for SNI tests.
type tlsFixture struct {
	ca     *tlstest.CA
	caFile string
}

func newTLSFixture(t testing.TB) *tlsFixture {
	ca := tlstest.NewCA(t)
	return &tlsFixture{ca: ca, caFile: writeCAFile(t, ca)}
}

func writeCAFile(t testing.TB, ca *tlstest.CA) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// store builds a Store: each entry is "name" (a certificate for that host)
// or "name!" (the same, also the default).
func (f *tlsFixture) store(t testing.TB, names ...string) *tlsstore.Store {
	t.Helper()
	return f.validatingStore(t, nil, names...)
}

// validatingStore is store with client certificate validations.
func (f *tlsFixture) validatingStore(t testing.TB, clients []tlsstore.ClientValidation, names ...string) *tlsstore.Store {
	t.Helper()
	var certs []tlsstore.Certificate
	for _, n := range names {
		host, def := strings.CutSuffix(n, "!")
		certPEM, keyPEM := f.ca.Issue(t, host)
		certs = append(certs, tlsstore.Certificate{Name: host, Default: def, CertPEM: certPEM, KeyPEM: keyPEM})
	}
	s, errs := tlsstore.Build(certs, clients...)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return s
}

// client returns an HTTP client that trusts the fixture's CA and dials
// addr whatever the URL says, so URLs can carry real host names.
func (f *tlsFixture) client(addr string, h2 bool) *http.Client {
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		Protocols: new(http.Protocols),
	}
	tr.Protocols.SetHTTP1(!h2)
	tr.Protocols.SetHTTP2(h2)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// h2cTransport speaks HTTP/2 with prior knowledge over cleartext.
// h2cClients are n clients of h2c with prior knowledge, each with its own
// connection.
func h2cClients(t *testing.T, n int, timeout time.Duration) []*http.Client {
	clients := make([]*http.Client, n)
	for i := range clients {
		tr := h2cTransport()
		t.Cleanup(tr.CloseIdleConnections)
		clients[i] = &http.Client{Transport: tr, Timeout: timeout}
	}
	return clients
}

func h2cTransport() *http.Transport {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return tr
}

// h3Transport speaks HTTP/3 to addr, whatever host a URL names, trusting
// the fixture's CA; it is closed when the test ends.
func (f *tlsFixture) h3Transport(t testing.TB, addr string) *http3.Transport {
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool, MinVersion: tls.VersionTLS13},
		Dial: func(ctx context.Context, _ string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
			return quic.DialAddr(ctx, addr, tlsCfg, cfg)
		},
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}
