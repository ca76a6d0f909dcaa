package proxy

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/hostgate/hostgate/router"
)

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, p := range s {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

var requestIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// whoHandler is a backend that describes who the request says it is
// from.
var whoHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Real-Ip", "X-Request-Id"} {
		fmt.Fprintf(w, "%s=%s\n", h, strings.Join(r.Header.Values(h), ","))
	}
})

// clientTestServer serves whoHandler on a cleartext listener with opts,
// and returns its address and the access records.
func clientTestServer(t *testing.T, opts Options, listeners ...Listener) ([]string, chan AccessRecord) {
	records := make(chan AccessRecord, 16)
	opts.AccessLog = func(a *AccessRecord) { records <- *a }
	s := startServer(t, opts)
	s.UpdateEndpoints(map[string][]Endpoint{"who": {{Address: startBackend(t, whoHandler)}}})
	routes := compile(t, route("who", nil, router.Rule{Backends: backends("who")}))
	if len(listeners) == 0 {
		listeners = []Listener{{Address: "127.0.0.1:0"}}
	}
	for i := range listeners {
		listeners[i].Routes = routes
	}
	return apply(t, s, listeners...), records
}

// TestClientAddress checks the real client's address and the request ID
// on HTTP/1.1 and h2c, from a trusted and an untrusted peer: what the
// backend gets and what the access log says.
func TestClientAddress(t *testing.T) {
	clients := map[string]*http.Client{"HTTP/1.1": {}, "h2c": {Transport: h2cTransport()}}
	for _, tt := range []struct {
		name    string
		trusted []netip.Prefix
		sentID  string
		want    []string
		client  string
		keepsID bool
	}{
		{
			name: "untrusted", sentID: "client-id",
			want:   []string{"X-Forwarded-For=127.0.0.1\n", "X-Forwarded-Proto=http\n", "X-Real-Ip=127.0.0.1\n"},
			client: "127.0.0.1",
		},
		{
			name: "trusted", trusted: prefixes("127.0.0.0/8", "10.0.0.0/8"), sentID: "client-id", keepsID: true,
			want:   []string{"X-Forwarded-For=192.0.2.1, 203.0.113.7, 10.0.0.5, 127.0.0.1\n", "X-Forwarded-Proto=https\n", "X-Real-Ip=203.0.113.7\n"},
			client: "203.0.113.7",
		},
		{
			name: "trusted without an ID", trusted: prefixes("127.0.0.1/32"),
			want:   []string{"X-Real-Ip=10.0.0.5\n"},
			client: "10.0.0.5",
		},
	} {
		for proto, c := range clients {
			t.Run(tt.name+"/"+proto, func(t *testing.T) {
				opts := testOptions()
				opts.TrustedProxies = tt.trusted
				addrs, records := clientTestServer(t, opts)
				header := []string{"X-Forwarded-For", "192.0.2.1, 203.0.113.7", "X-Forwarded-For", "10.0.0.5", "X-Forwarded-Proto", "https", "X-Real-IP", "6.6.6.6"}
				if tt.sentID != "" {
					header = append(header, "X-Request-ID", tt.sentID)
				}
				_, body := get(t, c, "http://"+addrs[0]+"/", header...)
				for _, w := range tt.want {
					if !strings.Contains(body, w) {
						t.Errorf("backend got no %q:\n%s", w, body)
					}
				}
				id := strings.TrimSuffix(body[strings.Index(body, "X-Request-Id=")+len("X-Request-Id="):], "\n")
				if tt.keepsID && id != tt.sentID || !tt.keepsID && !requestIDPattern.MatchString(id) {
					t.Errorf("X-Request-Id %q, want the client's %v", id, tt.keepsID)
				}
				a := <-records
				if a.Client.String() != tt.client || a.RequestID != id || !strings.HasPrefix(a.RemoteAddr, "127.0.0.1:") {
					t.Errorf("access record client %v, request ID %q, remote %q; want %s, %q, 127.0.0.1", a.Client, a.RequestID, a.RemoteAddr, tt.client, id)
				}
			})
		}
	}
}

// TestRequestIDOff: with DisableRequestID none is made, and the client's
// goes on.
func TestRequestIDOff(t *testing.T) {
	opts := testOptions()
	opts.DisableRequestID = true
	addrs, records := clientTestServer(t, opts)
	if _, body := get(t, http.DefaultClient, "http://"+addrs[0]+"/"); !strings.Contains(body, "X-Request-Id=\n") {
		t.Errorf("backend got an ID:\n%s", body)
	}
	<-records
	if _, body := get(t, http.DefaultClient, "http://"+addrs[0]+"/", "X-Request-Id", "mine"); !strings.Contains(body, "X-Request-Id=mine\n") {
		t.Errorf("backend did not get the client's ID:\n%s", body)
	}
}

// proxyDial connects to addr and sends header first.
func proxyDial(t *testing.T, addr string, header []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(header); err != nil {
		t.Fatal(err)
	}
	return c
}

// roundTripOn sends a GET over c, HTTP/1.1 or h2 (prior knowledge, or
// chosen by ALPN), and returns the body.
func roundTripOn(t *testing.T, c net.Conn, h2 bool, url string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	var resp *http.Response
	var err error
	if h2 {
		var cc *http2.ClientConn
		if cc, err = (&http2.Transport{AllowHTTP: true}).NewClientConn(c); err != nil {
			t.Fatal(err)
		}
		resp, err = cc.RoundTrip(req)
	} else if err = req.Write(c); err == nil {
		resp, err = http.ReadResponse(bufio.NewReader(c), req)
	}
	return bodyOf(t, resp, err)
}

// TestProxyProtocol sends the PROXY header, versions 1 and 2, before
// HTTP/1.1, h2c and TLS (HTTP/1.1 and h2), and checks whose address the
// backend gets.
func TestProxyProtocol(t *testing.T) {
	f := newTLSFixture(t)
	opts := testOptions()
	opts.ProxyProtocol = true
	opts.ProxyProtocolFrom = prefixes("127.0.0.0/8")
	// The PROXY header's address is trusted to say more.
	opts.TrustedProxies = prefixes("198.51.100.0/24")
	addrs, records := clientTestServer(t, opts,
		Listener{Address: "127.0.0.1:0"},
		Listener{Address: freeAddr(t), Protocol: HTTPS, TLS: f.store(t, "app.test")})
	plain, secure := addrs[0], addrs[1]
	v1 := []byte("PROXY TCP4 203.0.113.7 10.0.0.1 56324 80\r\n")
	// Version 2: the signature, PROXY or LOCAL, TCP over IPv4 or
	// unspecified, the length; then 203.0.113.7:56324 to 10.0.0.1:443,
	// and in v2TLV 300 bytes of TLVs after the addresses.
	const signature, addresses = "\r\n\r\n\x00\r\nQUIT\n", "\xcb\x00\x71\x07\x0a\x00\x00\x01\xdc\x04\x01\xbb"
	v2 := []byte(signature + "\x21\x11\x00\x0c" + addresses)
	v2TLV := append([]byte(signature+"\x21\x11\x01\x38"+addresses), make([]byte, 300)...)
	local := []byte(signature + "\x20\x00\x00\x00")
	v6 := []byte("PROXY TCP6 2001:db8::7 2001:db8::1 4000 80\r\n")
	trusted := []byte("PROXY TCP4 198.51.100.4 10.0.0.1 4000 80\r\n")
	for _, tt := range []struct {
		name     string
		header   []byte
		tls, h2  bool
		xffSent  bool
		client   string
		wantXFF  string
		wantAddr string
	}{
		{name: "v1 HTTP/1.1", header: v1, client: "203.0.113.7"},
		{name: "v2 HTTP/1.1", header: v2, client: "203.0.113.7"},
		{name: "v2 with TLVs", header: v2TLV, client: "203.0.113.7"},
		{name: "v2 LOCAL", header: local, client: "127.0.0.1"},
		{name: "v1 IPv6", header: v6, client: "2001:db8::7"},
		{name: "v1 h2c", header: v1, h2: true, client: "203.0.113.7"},
		{name: "v2 TLS HTTP/1.1", header: v2, tls: true, client: "203.0.113.7"},
		{name: "v2 TLS h2", header: v2, tls: true, h2: true, client: "203.0.113.7"},
		// X-Forwarded-For is read only when the PROXY header's address
		// is trusted.
		{name: "untrusted X-Forwarded-For", header: v1, xffSent: true, client: "203.0.113.7", wantXFF: "203.0.113.7"},
		{name: "trusted X-Forwarded-For", header: trusted, xffSent: true, client: "192.0.2.8", wantXFF: "192.0.2.8, 198.51.100.4"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr, url := plain, "http://app.test/"
			if tt.tls {
				addr, url = secure, "https://app.test/"
			}
			c := proxyDial(t, addr, tt.header)
			if tt.tls {
				protos := []string{"http/1.1"}
				if tt.h2 {
					protos = []string{"h2"}
				}
				c = tls.Client(c, &tls.Config{ServerName: "app.test", RootCAs: f.ca.Pool, NextProtos: protos})
			}
			if tt.xffSent {
				// Sent by hand: the helper's clients do not take fields.
				fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: app.test\r\nX-Forwarded-For: 192.0.2.8\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				body := bodyOf(t, resp, err)
				if want := "X-Forwarded-For=" + tt.wantXFF + "\n"; !strings.Contains(body, want) {
					t.Errorf("backend got no %q:\n%s", want, body)
				}
			} else {
				body := roundTripOn(t, c, tt.h2, url)
				if want := "X-Real-Ip=" + tt.client + "\n"; !strings.Contains(body, want) {
					t.Errorf("backend got no %q:\n%s", want, body)
				}
			}
			a := <-records
			if a.Client.String() != tt.client {
				t.Errorf("access record client %v, want %s", a.Client, tt.client)
			}
		})
	}
}

// TestProxyProtocolRejects closes connections from peers not allowed to
// send the header, and those whose header is malformed, cut short or late,
// counting each.
func TestProxyProtocolRejects(t *testing.T) {
	for _, tt := range []struct {
		name   string
		from   string
		send   string
		close  bool
		reason string
	}{
		{name: "untrusted peer", from: "10.0.0.0/8", send: "PROXY TCP4 203.0.113.7 10.0.0.1 1 80\r\n", reason: "untrusted_peer"},
		{name: "no header", from: "127.0.0.0/8", send: "GET / HTTP/1.1\r\nHost: a\r\n\r\n", reason: "malformed"},
		{name: "malformed", from: "127.0.0.0/8", send: "PROXY TCP4 203.0.113.7 10.0.0.1 1\r\n", reason: "malformed"},
		{name: "too long", from: "127.0.0.0/8", send: "PROXY TCP4 " + strings.Repeat("1", 100), reason: "malformed"},
		{name: "cut short", from: "127.0.0.0/8", send: "PROXY TCP4 203.0", close: true, reason: "incomplete"},
		{name: "late", from: "127.0.0.0/8", send: "PROXY TCP4 203.0", reason: "timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOptions()
			opts.ProxyProtocol = true
			opts.ProxyProtocolFrom = prefixes(tt.from)
			opts.ReadHeaderTimeout = 200 * time.Millisecond
			s := startServer(t, opts)
			addr := apply(t, s, Listener{Address: "127.0.0.1:0"})[0]
			c := proxyDial(t, addr, []byte(tt.send))
			if tt.close {
				c.(*net.TCPConn).CloseWrite()
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := c.Read(make([]byte, 1)); err == nil || n > 0 || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("read %d bytes, %v; want the connection closed", n, err)
			}
			deadline := time.Now().Add(5 * time.Second)
			const rejected = "hostgate_proxy_protocol_rejected_total"
			for v, _ := metric(t, s, rejected, "reason", tt.reason); v != 1 && time.Now().Before(deadline); v, _ = metric(t, s, rejected, "reason", tt.reason) {
				time.Sleep(5 * time.Millisecond)
			}
			for _, r := range []string{"untrusted_peer", "malformed", "incomplete", "timeout"} {
				want := 0.0
				if r == tt.reason {
					want = 1
				}
				wantMetric(t, s, want, rejected, "reason", r)
			}
		})
	}
}

// TestServerHeader checks the Server field of answers hostgate makes
// (404, redirect, 502) and of proxied ones, with and without a backend's
// own, on every protocol; and that DisableServerHeader leaves it out.
func TestServerHeader(t *testing.T) {
	f := newTLSFixture(t)
	for _, disabled := range []bool{false, true} {
		opts := testOptions()
		opts.DisableServerHeader = disabled
		s := startServer(t, opts)
		s.UpdateEndpoints(map[string][]Endpoint{
			"plain": {{Address: startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header()["Server"] = nil // net/http adds none, said plainly
			}))}},
			"named": {{Address: startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Server", "backend/1")
			}))}},
			"dead": {{Address: deadAddr(t)}},
		})
		routes := compile(t,
			route("plain", nil, router.Rule{Matches: prefix("/plain"), Backends: backends("plain")}),
			route("named", nil, router.Rule{Matches: prefix("/named"), Backends: backends("named")}),
			route("dead", nil, router.Rule{Matches: prefix("/dead"), Backends: backends("dead")}),
			route("redirect", nil, router.Rule{Matches: prefix("/redirect"), Filters: []router.Filter{{Type: router.FilterRequestRedirect, Redirect: &router.Redirect{Scheme: "https"}}}}),
		)
		secure := freeAddr(t)
		addrs := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: routes}, Listener{Address: secure, Protocol: HTTPS, TLS: f.store(t, "app.test"), Routes: routes})
		clients := map[string]struct {
			c    *http.Client
			base string
		}{
			"HTTP/1.1": {noRedirects, "http://" + addrs[0]},
			"h2c":      {&http.Client{Transport: h2cTransport(), CheckRedirect: noRedirects.CheckRedirect}, "http://" + addrs[0]},
			"h2":       {&http.Client{Transport: f.client(secure, true).Transport, CheckRedirect: noRedirects.CheckRedirect}, "https://app.test"},
			"HTTP/3":   {&http.Client{Transport: f.h3Transport(t, secure), CheckRedirect: noRedirects.CheckRedirect}, "https://app.test"},
		}
		for proto, cl := range clients {
			for path, want := range map[string]string{"/plain": "hostgate", "/named": "backend/1", "/none": "hostgate", "/dead": "hostgate", "/redirect": "hostgate"} {
				if disabled && want == "hostgate" {
					want = ""
				}
				resp, _ := get(t, cl.c, cl.base+path)
				if got := strings.Join(resp.Header.Values("Server"), ","); got != want {
					t.Errorf("disabled=%v %s %s (%d): Server %q, want %q", disabled, proto, path, resp.StatusCode, got, want)
				}
			}
		}
	}
}
