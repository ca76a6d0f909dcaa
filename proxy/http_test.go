package proxy

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

// TestCleartextProtocols proxies one route with every client a cleartext
// listener serves: HTTP/1.1, h2c with prior knowledge and h2c by Upgrade.
func TestCleartextProtocols(t *testing.T) {
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: startBackend(t, echo("web"))}}})
	tbl := compile(t, route("web", []string{"app.example.com"}, router.Rule{Matches: prefix("/"), Backends: backends("web")}))
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Protocol: HTTP, Routes: tbl})[0]
	url := "http://" + addr + "/a/b?x=1"

	h2c := &http.Client{Transport: &http.Transport{Protocols: new(http.Protocols)}, Timeout: 10 * time.Second}
	h2c.Transport.(*http.Transport).Protocols.SetUnencryptedHTTP2(true)

	tests := []struct {
		name  string
		do    func(t *testing.T) string
		proto string
	}{
		{"net/http HTTP/1.1", func(t *testing.T) string {
			resp, body := get(t, http.DefaultClient, url, "Host", "app.example.com", "Connection", "X-Hop", "X-Hop", "client", "Forwarded", "for=10.0.0.1")
			if resp.Header.Get("X-Hop") != "" {
				t.Error("hop-by-hop response header X-Hop reached the client")
			}
			return body
		}, "HTTP/1.1"},
		{"net/http h2c", func(t *testing.T) string {
			resp, body := get(t, h2c, url, "Host", "app.example.com", "Forwarded", "for=10.0.0.1")
			if resp.ProtoMajor != 2 {
				t.Errorf("client spoke %s", resp.Proto)
			}
			return body
		}, "HTTP/1.1"},
		{"curl HTTP/1.1", func(t *testing.T) string {
			return curl(t, "--http1.1", "-H", "Host: app.example.com", "-H", "Connection: X-Hop", "-H", "X-Hop: client", url)
		}, "HTTP/1.1"},
		{"curl h2c prior knowledge", func(t *testing.T) string {
			out := curl(t, "-i", "--http2-prior-knowledge", "-H", "Host: app.example.com", url)
			if !strings.HasPrefix(out, "HTTP/2 200") {
				t.Errorf("curl got %q", firstLine(out))
			}
			return out
		}, "HTTP/1.1"},
		{"curl h2c upgrade", func(t *testing.T) string {
			out := curl(t, "-i", "--http2", "-H", "Host: app.example.com", url)
			if !strings.Contains(out, "101 Switching Protocols") || !strings.Contains(out, "HTTP/2 200") {
				t.Errorf("curl got %q", out)
			}
			return out
		}, "HTTP/1.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.do(t)
			for _, want := range []string{
				"backend=web", "proto=" + tt.proto, "host=app.example.com", "path=/a/b", "query=x=1",
				"X-Forwarded-For=127.0.0.1\n", "X-Forwarded-Proto=http\n", "X-Forwarded-Host=app.example.com\n", "X-Hop=\n",
				// A client's own Forwarded is dropped, as ReverseProxy
				// drops it.
				"Forwarded=\n",
			} {
				if !strings.Contains(body, want) {
					t.Errorf("response lacks %q:\n%s", want, body)
				}
			}
		})
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestForwardedHeaders checks that client-sent X-Forwarded-* are replaced
// unless trusted, and appended to when trusted.
func TestForwardedHeaders(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		opts := testOptions()
		if trusted {
			opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		}
		s := startServer(t, opts)
		s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: startBackend(t, echo("web"))}}})
		addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, route("web", nil, router.Rule{Backends: backends("web")}))})[0]
		_, body := get(t, http.DefaultClient, "http://"+addr+"/", "X-Forwarded-For", "10.0.0.1", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "spoofed")
		want := []string{"X-Forwarded-For=127.0.0.1\n", "X-Forwarded-Proto=http\n", "X-Forwarded-Host=" + addr + "\n"}
		if trusted {
			want = []string{"X-Forwarded-For=10.0.0.1, 127.0.0.1\n", "X-Forwarded-Proto=https\n", "X-Forwarded-Host=spoofed\n"}
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("trusted=%v: response lacks %q:\n%s", trusted, w, body)
			}
		}
	}
}

// TestAccessLog checks the record each request leaves behind.
func TestAccessLog(t *testing.T) {
	opts := testOptions()
	records := make(chan AccessRecord, 4)
	opts.AccessLog = func(a *AccessRecord) { records <- *a }
	s := startServer(t, opts)
	backend := startBackend(t, echo("web"))
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, route("web", nil, router.Rule{Matches: prefix("/web"), Backends: backends("web")}))})[0]
	get(t, http.DefaultClient, "http://"+addr+"/web/x")
	get(t, http.DefaultClient, "http://"+addr+"/none")

	for _, want := range []AccessRecord{
		{Status: 200, Path: "/web/x", Route: router.RouteID{Kind: router.KindHTTPRoute, Namespace: "ns", Name: "web"}, Backend: "web", Endpoint: backend},
		{Status: 404, Path: "/none"},
	} {
		got := <-records
		if got.Status != want.Status || got.Path != want.Path || got.Route != want.Route || got.Backend != want.Backend || got.Endpoint != want.Endpoint ||
			got.Listener != "127.0.0.1:0" || got.Method != "GET" || got.BytesSent == 0 || got.Duration <= 0 {
			t.Errorf("record %+v, want %+v", got, want)
		}
	}
}
