package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
)

func l4Table(t *testing.T, kind router.Kind, backend string, hosts ...string) *router.L4Table {
	t.Helper()
	table, errs := router.CompileL4([]router.Route{{
		ID:        router.RouteID{Kind: kind, Namespace: "ns", Name: "r"},
		Hostnames: hosts,
		Rules:     []router.Rule{{Backends: []router.BackendRef{{Name: backend, Weight: 1}}}},
	}}, "")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return table
}

// TestApplyTLSPassthrough: a TLSPassthrough listener applied to the
// Server passes an HTTPS request to a backend whose own certificate the
// client verifies, through the connection caps' wrapper, and a listener
// that changes to TCP is served as TCP.
func TestApplyTLSPassthrough(t *testing.T) {
	ca := tlstest.NewCA(t)
	backend := startTLSBackend(t, ca, []string{"h2", "http/1.1"}, echo("secure"), "secure.example.com")
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"ns/secure:443": {{Address: backend}}})
	addr := freeAddr(t)
	bound := apply(t, s, Listener{Address: addr, Protocol: TLSPassthrough, L4: l4Table(t, router.KindTLSRoute, "ns/secure:443", "secure.example.com")})[0]
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, bound)
		},
		ForceAttemptHTTP2: true,
	}}
	resp, body := get(t, client, "https://secure.example.com/x")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "backend=secure ") || resp.TLS == nil || resp.TLS.PeerCertificates[0].DNSNames[0] != "secure.example.com" {
		t.Fatalf("answer %d %q, want 200 from the backend with its certificate", resp.StatusCode, body)
	}
	wantMetric(t, s, 1, "hostgate_l4_connections_total", "listener", addr)

	// The same address as TCP: the listener is replaced, and bytes pass
	// as they are (here a TLS handshake nobody routes by name).
	bound = apply(t, s, Listener{Address: addr, Protocol: TCP, L4: l4Table(t, router.KindTCPRoute, "ns/secure:443")})[0]
	c, err := tls.Dial("tcp", bound, &tls.Config{ServerName: "secure.example.com", RootCAs: ca.Pool})
	if err != nil {
		t.Fatalf("TLS through the TCP listener: %v", err)
	}
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: secure.example.com\r\nConnection: close\r\n\r\n")
	got, _ := io.ReadAll(c)
	c.Close()
	if len(got) < 12 || string(got[:12]) != "HTTP/1.1 200" {
		t.Errorf("answer %q, want HTTP/1.1 200", got)
	}
}
