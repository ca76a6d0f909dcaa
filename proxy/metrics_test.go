package proxy

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/hostgate/hostgate/router"
)

// metric gathers s's registry and returns the series name whose labels
// include the label/value pairs given: a counter's or gauge's value, a
// histogram's sample count. ok is false when there is no such series.
func metric(t *testing.T, s *Server, name string, labels ...string) (value float64, ok bool) {
	t.Helper()
	families, err := s.opts.Registerer.(prometheus.Gatherer).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// wantMetric checks a series' value; a missing series reads as 0.
func wantMetric(t *testing.T, s *Server, want float64, name string, labels ...string) {
	t.Helper()
	if got, _ := metric(t, s, name, labels...); got != want {
		t.Errorf("%s%q = %v, want %v", name, labels, got, want)
	}
}

// eventuallyMetric waits for a series to reach want, for values that
// another goroutine updates after the client is done (closing, handshakes).
func eventuallyMetric(t *testing.T, s *Server, want float64, name string, labels ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := metric(t, s, name, labels...)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%q = %v, want %v", name, labels, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRequestMetrics counts requests per route and code, times them, and
// drops the series of routes and listeners that Apply removes.
func TestRequestMetrics(t *testing.T) {
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: startBackend(t, echo("web"))}}})
	web := route("web", nil, router.Rule{Matches: prefix("/web"), Backends: backends("web")})
	listener := Listener{Address: "127.0.0.1:0", Routes: compile(t, web)}
	addr := apply(t, s, listener)[0]
	for _, path := range []string{"/web/a", "/web/b", "/none"} {
		get(t, http.DefaultClient, "http://"+addr+path)
	}

	const webID = "HTTPRoute ns/web"
	for _, tt := range []struct {
		want   float64
		name   string
		labels []string
	}{
		{2, "hostgate_http_requests_total", []string{"route", webID, "code", "200"}},
		{1, "hostgate_http_requests_total", []string{"route", "", "code", "404"}},
		{0, "hostgate_http_requests_total", []string{"route", webID, "code", "404"}},
		{2, "hostgate_http_request_duration_seconds", []string{"route", webID}},
		{1, "hostgate_http_request_duration_seconds", []string{"route", ""}},
		{2, "hostgate_upstream_response_duration_seconds", []string{"route", webID}},
		{0, "hostgate_upstream_response_duration_seconds", []string{"route", ""}},
	} {
		wantMetric(t, s, tt.want, tt.name, append([]string{"listener", "127.0.0.1:0"}, tt.labels...)...)
	}

	listener.Routes = compile(t, route("other", nil, router.Rule{Backends: backends("web")}))
	apply(t, s, listener)
	if _, ok := metric(t, s, "hostgate_http_requests_total", "route", webID); ok {
		t.Error("series of a removed route remain")
	}
	if _, ok := metric(t, s, "hostgate_http_requests_total", "route", ""); !ok {
		t.Error("series of the listener's unmatched requests went with the route")
	}
	apply(t, s)
	if _, ok := metric(t, s, "hostgate_http_request_duration_seconds", "listener", "127.0.0.1:0"); ok {
		t.Error("series of a removed listener remain")
	}
}

// TestUpstreamMetrics counts backend errors by kind and ejections, and
// shows the ejected endpoint as unhealthy in Endpoints.
func TestUpstreamMetrics(t *testing.T) {
	opts := testOptions()
	opts.FailureThreshold = 1
	opts.ConnectAttempts = 1
	s := startServer(t, opts)
	dead := deadAddr(t)
	slow := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	s.UpdateEndpoints(map[string][]Endpoint{"dead": {{Address: dead}}, "slow": {{Address: slow, Weight: 2}}, "empty": {}})
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t,
		route("dead", nil, router.Rule{Matches: prefix("/dead"), Backends: backends("dead")}),
		route("slow", nil, router.Rule{Matches: prefix("/slow"), Backends: backends("slow"), Timeouts: router.Timeouts{Request: 50 * time.Millisecond}}),
		route("empty", nil, router.Rule{Matches: prefix("/empty"), Backends: backends("empty")}),
	)})[0]
	for path, status := range map[string]int{"/dead": 502, "/slow": 504, "/empty": 503} {
		if resp, _ := get(t, http.DefaultClient, "http://"+addr+path); resp.StatusCode != status {
			t.Errorf("GET %s: status %d, want %d", path, resp.StatusCode, status)
		}
	}
	for kind, want := range map[string]float64{"connect_refused": 1, "timeout": 1, "no_endpoint": 1, "connect_timeout": 0, "reset": 0, "tls": 0, "other": 0} {
		wantMetric(t, s, want, "hostgate_upstream_errors_total", "kind", kind)
	}
	wantMetric(t, s, 1, "hostgate_upstream_ejections_total")

	eps := s.Endpoints()
	if e := eps["dead"]; len(e) != 1 || e[0].Address != dead || e[0].Healthy || !e[0].EjectedUntil.After(time.Now()) {
		t.Errorf("dead endpoint: %+v", e)
	}
	if e := eps["slow"]; len(e) != 1 || e[0] != (EndpointState{Address: slow, Weight: 2, Healthy: true}) {
		t.Errorf("slow endpoint (a timeout is no failure of the endpoint): %+v", e)
	}
	if e, ok := eps["empty"]; !ok || len(e) != 0 {
		t.Errorf("empty set: %+v, %v", e, ok)
	}
}

// TestTLSHandshakeMetrics counts handshakes by result, on TCP and QUIC.
func TestTLSHandshakeMetrics(t *testing.T) {
	f := newTLSFixture(t)
	s, addr := tlsListener(t, f, "app.example.com")
	const name = "hostgate_tls_handshakes_total"

	// No certificate for the name and no default: the handshake fails on
	// both transports.
	if _, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "other.test", InsecureSkipVerify: true}); err == nil {
		t.Fatal("TCP handshake for an unknown name succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := quic.DialAddr(ctx, addr, &tls.Config{ServerName: "other.test", InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}}, nil); err == nil {
		t.Fatal("QUIC handshake for an unknown name succeeded")
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "app.example.com", RootCAs: f.ca.Pool})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	eventuallyMetric(t, s, 1, name, "result", "ok")
	// A client that never speaks TLS.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	raw.Close()
	eventuallyMetric(t, s, 1, name, "result", "error")
	eventuallyMetric(t, s, 0, "hostgate_active_connections", "protocol", "http1")
	wantMetric(t, s, 2, name, "result", "unknown_sni")
	wantMetric(t, s, 1, name, "result", "error")
}

// TestActiveConnections counts an open keep-alive connection under the
// protocol it speaks until it closes.
func TestActiveConnections(t *testing.T) {
	f := newTLSFixture(t)
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: startBackend(t, echo("web"))}}})
	routes := compile(t, route("web", nil, router.Rule{Backends: backends("web")}))
	addrs := apply(t, s,
		Listener{Address: freeAddr(t), Routes: routes},
		Listener{Address: freeAddr(t), Protocol: HTTPS, TLS: f.store(t, "app.example.com"), Routes: routes})
	cleartext, secure := addrs[0], addrs[1]

	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	h3 := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool},
		Dial: func(ctx context.Context, _ string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
			return quic.DialAddr(ctx, secure, tlsCfg, cfg)
		},
	}
	tests := []struct {
		name     string
		protocol string
		url      string
		client   *http.Client
		close    func()
	}{
		{"HTTP/1.1 cleartext", "http1", "http://" + cleartext, &http.Client{Transport: &http.Transport{}}, nil},
		{"h2c prior knowledge", "h2c", "http://" + cleartext, &http.Client{Transport: h2c}, nil},
		{"HTTP/1.1 over TLS", "http1", "https://app.example.com", f.client(secure, false), nil},
		{"h2", "h2", "https://app.example.com", f.client(secure, true), nil},
		{"HTTP/3", "h3", "https://app.example.com", &http.Client{Transport: h3}, func() { h3.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			get(t, tt.client, tt.url+"/")
			get(t, tt.client, tt.url+"/")
			for _, p := range []string{"http1", "h2", "h2c", "h3"} {
				want := 0.0
				if p == tt.protocol {
					want = 1
				}
				wantMetric(t, s, want, "hostgate_active_connections", "protocol", p)
			}
			if tt.close != nil {
				tt.close()
			} else {
				tt.client.CloseIdleConnections()
			}
			eventuallyMetric(t, s, 0, "hostgate_active_connections", "protocol", tt.protocol)
		})
	}
}

// TestActiveConnectionsFromAccept counts connections that have sent
// nothing yet, on cleartext and TLS (no handshake) listeners, from accept.
func TestActiveConnectionsFromAccept(t *testing.T) {
	f := newTLSFixture(t)
	s := startServer(t, testOptions())
	routes := compile(t, route("web", nil, router.Rule{Backends: backends("web")}))
	addrs := apply(t, s,
		Listener{Address: freeAddr(t), Routes: routes},
		Listener{Address: freeAddr(t), Protocol: HTTPS, TLS: f.store(t, "app.example.com"), Routes: routes})
	var conns []net.Conn
	for _, addr := range []string{addrs[0], addrs[0], addrs[1]} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	eventuallyMetric(t, s, 3, "hostgate_active_connections", "protocol", "http1")
	for _, c := range conns {
		c.Close()
	}
	eventuallyMetric(t, s, 0, "hostgate_active_connections", "protocol", "http1")
}
