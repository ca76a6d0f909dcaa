package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

// dialer opens a client connection to a listener, asking for the given
// ALPN protocol over TLS.
type dialer func(t *testing.T, alpn string) net.Conn

// guardedServer serves every request from a backend that counts them, on
// a listener of protocol p, and returns how to connect to it.
func guardedServer(t *testing.T, p Protocol, backend http.Handler) (dial dialer, seen *atomic.Int64) {
	t.Helper()
	seen = new(atomic.Int64)
	b := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		if backend != nil {
			backend.ServeHTTP(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: b}}})
	l := Listener{Address: "127.0.0.1:0", Protocol: p, Routes: compile(t, route("all", nil, router.Rule{Backends: backends("web")}))}
	var roots *x509.CertPool
	if p == HTTPS {
		f := newTLSFixture(t)
		l.TLS, roots = f.store(t, "a.test!"), f.ca.Pool
	}
	return dialerTo(apply(t, s, l)[0], roots), seen
}

// dialerTo connects to addr, over TLS to a.test if roots is set.
func dialerTo(addr string, roots *x509.CertPool) dialer {
	return func(t *testing.T, alpn string) net.Conn {
		t.Helper()
		var c net.Conn
		var err error
		if roots == nil {
			c, err = net.Dial("tcp", addr)
		} else {
			c, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "a.test", NextProtos: []string{alpn}})
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// protocols runs f on a cleartext and a TLS listener.
func protocols(t *testing.T, f func(t *testing.T, p Protocol)) {
	for _, p := range []Protocol{HTTP, HTTPS} {
		t.Run(p.String(), func(t *testing.T) { f(t, p) })
	}
}

// rawExchange writes raw on a new connection and returns the statuses of the
// responses read, and whether the server closed the connection after them.
func rawExchange(t *testing.T, c net.Conn, raw string) (statuses []int, closed bool) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	br := bufio.NewReader(c)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			// EOF, or a reset once the server closed with unread input.
			var ne net.Error
			return statuses, !(errors.As(err, &ne) && ne.Timeout())
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
	}
}

// smugglingGet is a good request, sent before a bad one.
const smugglingGet = "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"

// smugglingCases are ambiguous or malformed HTTP/1.1 requests, which
// every HTTP/1.1 engine refuses alike (TestRequestSmuggling,
// TestHTTP1EnginesAgree).
var smugglingCases = []struct {
	name string
	raw  string
	// want is the statuses in order; the last request is refused,
	// with 400 unless it is the first and not HTTP/1.x.
	want []int
	// forwarded is how many requests the backend must see.
	forwarded int64
}{
	{"CL and TE", "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", []int{400}, 0},
	{"TE and CL", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", []int{400}, 0},
	{"CL and TE after a good request", smugglingGet + "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", []int{200, 400}, 1},
	{"duplicate CL", "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", []int{400}, 0},
	{"conflicting CL", "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", []int{400}, 0},
	{"CL list", "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5, 5\r\n\r\nhello", []int{400}, 0},
	{"CL sign", "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: +5\r\n\r\nhello", []int{400}, 0},
	{"CL empty", "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: \r\n\r\n", []int{400}, 0},
	{"TE gzip", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: gzip\r\n\r\n", []int{400}, 0},
	{"TE list", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", []int{400}, 0},
	{"TE with inner space", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chun ked\r\n\r\n0\r\n\r\n", []int{400}, 0},
	{"TE twice", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", []int{400}, 0},
	{"TE on HTTP/1.0", "POST / HTTP/1.0\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", []int{400}, 0},
	{"obs-fold", "GET / HTTP/1.1\r\nHost: a.test\r\nX-A: a\r\n b\r\n\r\n", []int{400}, 0},
	{"obs-fold tab", "GET / HTTP/1.1\r\nHost: a.test\r\nX-A: a\r\n\tb\r\n\r\n", []int{400}, 0},
	{"bare LF in request line", "GET / HTTP/1.1\nHost: a.test\r\n\r\n", []int{400}, 0},
	{"bare LF after a field", "GET / HTTP/1.1\r\nHost: a.test\nX-A: b\r\n\r\n", []int{400}, 0},
	{"bare LF ending the head", "GET / HTTP/1.1\r\nHost: a.test\r\n\n", []int{400}, 0},
	{"bare CR in a value", "GET / HTTP/1.1\r\nHost: a.test\r\nX-A: a\rb\r\n\r\n", []int{400}, 0},
	{"chunk size not hex", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", []int{400}, 0},
	{"chunk size empty", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n\r\nhello\r\n0\r\n\r\n", []int{400}, 0},
	{"chunk size overflow", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000005\r\nhello\r\n0\r\n\r\n", []int{400}, 0},
	{"chunk size 0x", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n", []int{400}, 0},
	{"chunk line bare LF", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", []int{400}, 0},
	{"chunk data too long", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello!\r\n0\r\n\r\n", []int{400}, 0},
	{"chunk extension with LF", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\nb\r\nhello\r\n0\r\n\r\n", []int{400}, 0},
	{"space in a name", "GET / HTTP/1.1\r\nHost: a.test\r\nX A: b\r\n\r\n", []int{400}, 0},
	{"space before the colon", "GET / HTTP/1.1\r\nHost: a.test\r\nX-A : b\r\n\r\n", []int{400}, 0},
	{"control character in a name", "GET / HTTP/1.1\r\nHost: a.test\r\nX\x01A: b\r\n\r\n", []int{400}, 0},
	{"NUL in a value", "GET / HTTP/1.1\r\nHost: a.test\r\nX-A: a\x00b\r\n\r\n", []int{400}, 0},
	{"space before the first field", "GET / HTTP/1.1\r\n Host: a.test\r\n\r\n", []int{400}, 0},
	{"not HTTP/1.x", "GET / HTTP/3.0\r\nHost: a.test\r\n\r\n", nil, 0},
	{"broken HTTP/2 preface (h2spec 3.5/2)", "INVALID CONNECTION PREFACE\r\n\r\n", nil, 0},
	{"not HTTP/1.x after a good request", smugglingGet + "GET / HTTP/3.0\r\nHost: a.test\r\n\r\n", []int{200, 400}, 1},
	{"broken HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n", []int{400}, 0},
	{"pipelined before an upgrade answer", "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n" + smugglingGet, []int{200, 400}, 1},
	{"oversized head", "GET / HTTP/1.1\r\nHost: a.test\r\nX-Big: " + strings.Repeat("a", 80<<10) + "\r\n\r\n", []int{431}, 0},
}

// TestRequestSmuggling sends ambiguous or malformed HTTP/1.1 requests: each
// is answered 400 (431 for an oversized head), the connection is closed,
// and the backend sees nothing of it.
func TestRequestSmuggling(t *testing.T) {
	protocols(t, func(t *testing.T, p Protocol) {
		dial, seen := guardedServer(t, p, nil)
		for _, tt := range smugglingCases {
			t.Run(tt.name, func(t *testing.T) {
				before := seen.Load()
				statuses, closed := rawExchange(t, dial(t, "http/1.1"), tt.raw)
				if !equalInts(statuses, tt.want) {
					t.Errorf("statuses %v, want %v", statuses, tt.want)
				}
				if !closed {
					t.Error("connection left open")
				}
				if got := seen.Load() - before; got != tt.forwarded {
					t.Errorf("backend saw %d requests, want %d", got, tt.forwarded)
				}
			})
		}
	})
}

// TestRequestGuardPasses sends well-formed requests the guard must let
// through, split at every byte to exercise its state across reads, and
// keeps the connection for a last request.
func TestRequestGuardPasses(t *testing.T) {
	const get = "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"
	tests := []struct {
		name string
		raw  string
		n    int // requests in raw
	}{
		{"GET", get, 1},
		{"Content-Length", "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\nhello", 1},
		{"Content-Length with white space", "POST / HTTP/1.1\r\nHost: a.test\r\ncontent-length:\t5 \r\n\r\nhello", 1},
		{"chunked with white space", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding:  chunked \r\n\r\n0\r\n\r\n", 1},
		{"chunked with extension and trailer", "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: Chunked\r\n\r\n5;a=b\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n", 1},
		{"HTTP/1.0", "GET / HTTP/1.0\r\nHost: a.test\r\nConnection: keep-alive\r\n\r\n", 1},
		{"pipelined", get + "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 2\r\n\r\nhi" + get, 3},
		{"HTTP/2-like method", "PRIX / HTTP/1.1\r\nHost: a.test\r\n\r\n", 1},
	}
	protocols(t, func(t *testing.T, p Protocol) {
		dial, seen := guardedServer(t, p, nil)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := seen.Load()
				c := dial(t, "http/1.1")
				if tc, ok := c.(*net.TCPConn); ok {
					tc.SetNoDelay(true)
				}
				// One byte per write, so that the server reads them apart
				// (most of the time; coalesced reads are fine as well).
				for i := range len(tt.raw) {
					if _, err := io.WriteString(c, tt.raw[i:i+1]); err != nil {
						t.Fatal(err)
					}
				}
				io.WriteString(c, get)
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				br := bufio.NewReader(c)
				for i := range tt.n + 1 {
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Fatalf("response %d: %v", i, err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("response %d: %s", i, resp.Status)
					}
				}
				if got := seen.Load() - before; got != int64(tt.n+1) {
					t.Errorf("backend saw %d requests, want %d", got, tt.n+1)
				}
			})
		}
	})
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestGuardUpgrade checks that a declined Upgrade goes back to HTTP/1.1
// inspection and that an accepted one (h2c) carries on as HTTP/2.
func TestGuardUpgrade(t *testing.T) {
	dial, _ := guardedServer(t, HTTP, nil)
	// Declined: the backend answers 200 to a WebSocket upgrade, so the
	// next request is HTTP/1.1 again and is inspected.
	statuses, closed := exchangeSlow(t, dial(t, ""),
		"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
	if !equalInts(statuses, []int{200, 400}) || !closed {
		t.Errorf("statuses %v closed %v, want [200 400] closed", statuses, closed)
	}
	addr := dial(t, "").RemoteAddr().String()
	out := curl(t, "--http2", "-H", "Host: a.test", "http://"+addr+"/", "http://"+addr+"/")
	if out != "okok" {
		t.Errorf("h2c upgrade: %q", out)
	}
}

// exchangeSlow is rawExchange with a response read after each request.
func exchangeSlow(t *testing.T, c net.Conn, raws ...string) (statuses []int, closed bool) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	br := bufio.NewReader(c)
	for _, raw := range raws {
		if _, err := io.WriteString(c, raw); err != nil {
			return statuses, true
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return statuses, true
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
	}
	_, err := br.ReadByte()
	return statuses, err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// TestPlaintextToTLS sends HTTP to a TLS listener, which says so.
func TestPlaintextToTLS(t *testing.T) {
	dial, _ := guardedServer(t, HTTPS, nil)
	addr := dial(t, "http/1.1").RemoteAddr().String()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	statuses, closed := rawExchange(t, c, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
	if !equalInts(statuses, []int{400}) || !closed {
		t.Errorf("statuses %v closed %v, want [400] closed", statuses, closed)
	}
}

// TestHTTP1AfterALPNH2 sends HTTP/1.1 on a connection that chose h2: it
// is closed without an answer, which the client would not understand.
func TestHTTP1AfterALPNH2(t *testing.T) {
	dial, seen := guardedServer(t, HTTPS, nil)
	statuses, closed := rawExchange(t, dial(t, "h2"), "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
	if len(statuses) != 0 || !closed || seen.Load() != 0 {
		t.Errorf("statuses %v closed %v backend saw %d, want none, closed, none", statuses, closed, seen.Load())
	}
}

// TestSilentClientsClosed opens connections that send nothing, or a part
// of a TLS handshake or request head: each is closed after
// ReadHeaderTimeout, now that the guard's listener terminates TLS.
func TestSilentClientsClosed(t *testing.T) {
	addrs, _ := timeoutListeners(t, 200*time.Millisecond, 0)
	for _, tt := range []struct {
		name, addr, send string
	}{
		{"cleartext, nothing", addrs[0], ""},
		{"cleartext, part of a head", addrs[0], "GET / HTTP/1.1\r\nHost: a"},
		{"TLS, nothing", addrs[1], ""},
		{"TLS, part of a ClientHello", addrs[1], "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", tt.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, tt.send)
			start := time.Now()
			c.SetReadDeadline(start.Add(3 * time.Second))
			_, err = io.Copy(io.Discard, c)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("connection still open after 3s")
			}
			if d := time.Since(start); d < 150*time.Millisecond {
				t.Errorf("closed after %v, before ReadHeaderTimeout", d)
			}
		})
	}
}
