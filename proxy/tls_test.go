package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/hostgate/hostgate/router"
)

// tlsListener starts a server with an HTTPS listener routing every host to
// an echo backend, and returns the server and the bound address.
func tlsListener(t *testing.T, f *tlsFixture, certs ...string) (*Server, string) {
	t.Helper()
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: startBackend(t, echo("web"))}}})
	addr := apply(t, s, Listener{
		Address: "127.0.0.1:0", Protocol: HTTPS, TLS: f.store(t, certs...),
		Routes: compile(t, route("web", nil, router.Rule{Backends: backends("web")})),
	})[0]
	return s, addr
}

// TestTLSProtocols proxies over TLS with HTTP/1.1, h2 (ALPN) and HTTP/3.
func TestTLSProtocols(t *testing.T) {
	f := newTLSFixture(t)
	_, addr := tlsListener(t, f, "app.example.com")
	_, port, _ := net.SplitHostPort(addr)
	url := "https://app.example.com:" + port + "/x"
	resolve := "app.example.com:" + port + ":127.0.0.1"
	altSvc := fmt.Sprintf(`h3=":%s"; ma=86400`, port)

	h3 := f.h3Transport(t, addr)

	tests := []struct {
		name, proto string
		do          func(t *testing.T) (alt, body string)
	}{
		{"net/http HTTP/1.1", "HTTP/1.1", func(t *testing.T) (string, string) {
			resp, body := get(t, f.client(addr, false), url)
			return resp.Header.Get("Alt-Svc"), body
		}},
		{"net/http h2", "HTTP/2.0", func(t *testing.T) (string, string) {
			resp, body := get(t, f.client(addr, true), url)
			return resp.Header.Get("Alt-Svc"), body
		}},
		{"curl HTTP/1.1", "HTTP/1.1", func(t *testing.T) (string, string) {
			return altSvc, curl(t, "--http1.1", "--cacert", f.caFile, "--resolve", resolve, url)
		}},
		{"curl h2", "HTTP/2.0", func(t *testing.T) (string, string) {
			out := curl(t, "-i", "--http2", "--cacert", f.caFile, "--resolve", resolve, url)
			if !strings.HasPrefix(out, "HTTP/2 200") || !strings.Contains(out, "alt-svc: "+altSvc) {
				t.Errorf("curl got %q", out)
			}
			return altSvc, out
		}},
		{"HTTP/3", "HTTP/3.0", func(t *testing.T) (string, string) {
			resp, body := get(t, &http.Client{Transport: h3, Timeout: 10 * time.Second}, url)
			if resp.ProtoMajor != 3 {
				t.Errorf("client spoke %s", resp.Proto)
			}
			return altSvc, body
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			alt, body := tt.do(t)
			if alt != altSvc {
				t.Errorf("Alt-Svc = %q, want %q", alt, altSvc)
			}
			for _, want := range []string{"backend=web", "host=app.example.com:" + port, "X-Forwarded-Proto=https\n", "path=/x"} {
				if !strings.Contains(body, want) {
					t.Errorf("response lacks %q:\n%s", want, body)
				}
			}
		})
	}
}

// TestSNI checks which certificate a handshake gets through the proxy's
// listener, on TCP and QUIC.
func TestSNI(t *testing.T) {
	f := newTLSFixture(t)
	_, withDefault := tlsListener(t, f, "app.example.com", "*.example.com", "fallback!")
	_, noDefault := tlsListener(t, f, "app.example.com")
	tests := []struct {
		name, addr, sni, want string
	}{
		{"exact", withDefault, "app.example.com", "app.example.com"},
		{"wildcard", withDefault, "www.example.com", "*.example.com"},
		{"default for unknown", withDefault, "other.test", "fallback"},
		{"default without SNI", withDefault, "", "fallback"},
		{"unknown without default", noDefault, "other.test", "unrecognized name"},
		{"no SNI without default", noDefault, "", "unrecognized name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &tls.Config{ServerName: tt.sni, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
			if got := peerName(tls.Dial("tcp", tt.addr, cfg)); !strings.Contains(got, tt.want) {
				t.Errorf("TCP: got %q, want %q", got, tt.want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			qc, err := quic.DialAddr(ctx, tt.addr, &tls.Config{ServerName: tt.sni, InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}}, nil)
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = qc.ConnectionState().TLS.PeerCertificates[0].Subject.CommonName
				qc.CloseWithError(0, "")
			}
			if !strings.Contains(got, tt.want) && !(strings.Contains(tt.want, "unrecognized") && strings.Contains(got, "CRYPTO_ERROR 0x170")) {
				t.Errorf("QUIC: got %q, want %q", got, tt.want)
			}
		})
	}
}

// peerName returns the common name of the certificate the server
// presented, or the handshake error.
func peerName(c *tls.Conn, err error) string {
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestCertificateSwap replaces a listener's certificate while a connection
// made with the old one keeps serving requests.
func TestCertificateSwap(t *testing.T) {
	f := newTLSFixture(t)
	s, addr := tlsListener(t, f, "app.example.com")
	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "app.example.com", RootCAs: f.ca.Pool, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	old := conn.ConnectionState().PeerCertificates[0].SerialNumber
	br := bufio.NewReader(conn)
	roundTrip := func() {
		t.Helper()
		if _, err := fmt.Fprint(conn, "GET / HTTP/1.1\r\nHost: app.example.com\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	roundTrip()

	routes := compile(t, route("web", nil, router.Rule{Backends: backends("web")}))
	if err := s.Apply(Config{Listeners: []Listener{{Address: "127.0.0.1:0", Protocol: HTTPS, Routes: routes, TLS: f.store(t, "app.example.com")}}}); err != nil {
		t.Fatal(err)
	}
	roundTrip() // same connection, old certificate
	fresh, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "app.example.com", RootCAs: f.ca.Pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if fresh.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(old) == 0 {
		t.Error("a new connection still got the old certificate")
	}
}

// TestTLSBackends forwards to backends over TLS, with and without h2.
func TestTLSBackends(t *testing.T) {
	f := newTLSFixture(t)
	backend := startTLSBackend(t, f.ca, []string{"h2", "http/1.1"}, echo("tls"), "127.0.0.1")
	opts := testOptions()
	opts.UpstreamTLS = &tls.Config{RootCAs: f.ca.Pool, MinVersion: tls.VersionTLS12}
	s := startServer(t, opts)
	s.UpdateEndpoints(map[string][]Endpoint{"tls": {{Address: backend}}})
	rule := func(path, protocol string) router.Route {
		return route(protocol, nil, router.Rule{Matches: prefix(path), Backends: []router.BackendRef{{Name: "tls", Weight: 1, Protocol: protocol}}})
	}
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, rule("/https", "https"), rule("/h2", "h2"))})[0]
	for path, proto := range map[string]string{"/https": "HTTP/1.1", "/h2": "HTTP/2.0"} {
		resp, body := get(t, http.DefaultClient, "http://"+addr+path)
		if resp.StatusCode != 200 || !strings.Contains(body, "backend=tls proto="+proto) {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
}

// TestMisdirectedRequest: on a socket that HTTPS listeners of several
// hostnames share, a request whose Host selects another listener than its
// connection's server name (SNI) gets 421, on HTTP/1.1, h2 and HTTP/3; the
// client would otherwise reach a listener whose certificate (and client
// certificate checks) it never saw.
func TestMisdirectedRequest(t *testing.T) {
	f := newTLSFixture(t)
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{
		"a":   {{Address: startBackend(t, echo("a"))}},
		"any": {{Address: startBackend(t, echo("any"))}},
	})
	onListener := func(r router.Route, listener string) router.Route { r.Listener = listener; return r }
	addr := apply(t, s, Listener{
		Address: "127.0.0.1:0", Protocol: HTTPS, TLS: f.store(t, "a.example.com", "*.example.com"),
		Routes: compile(t,
			onListener(route("a", []string{"a.example.com"}, router.Rule{Backends: backends("a")}), "a.example.com"),
			onListener(route("any", nil, router.Rule{Backends: backends("any")}), "")),
	})[0]
	_, port, _ := net.SplitHostPort(addr)
	h3 := f.h3Transport(t, addr)
	clients := map[string]*http.Client{
		"HTTP/1.1": f.client(addr, false),
		"h2":       f.client(addr, true),
		"HTTP/3":   {Transport: h3, Timeout: 10 * time.Second},
	}
	for name, c := range clients {
		for _, tt := range []struct {
			sni, host string
			status    int
			backend   string
		}{
			{"a.example.com", "a.example.com", 200, "a"},
			{"a.example.com", "b.example.com", 421, ""},
			{"b.example.com", "b.example.com", 200, "any"},
			{"b.example.com", "c.example.com", 200, "any"}, // one listener, another host: its own routes decide
			{"b.example.com", "a.example.com", 421, ""},
		} {
			t.Run(fmt.Sprintf("%s/sni %s host %s", name, tt.sni, tt.host), func(t *testing.T) {
				resp, body := get(t, c, "https://"+tt.sni+":"+port+"/", "Host", tt.host)
				if resp.StatusCode != tt.status || (tt.backend != "" && !strings.HasPrefix(body, "backend="+tt.backend+" ")) {
					t.Errorf("status %d, body %q; want %d from backend %q", resp.StatusCode, body, tt.status, tt.backend)
				}
			})
		}
	}
}
