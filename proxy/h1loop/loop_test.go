//go:build linux

package h1loop

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/h1"
	"github.com/hostgate/hostgate/proxy/pipeline"
	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
)

// stack is a listener served as the proxy serves one: the loop, which
// hands what it does not serve to the netpoll engine (proxy/h1), which
// hands on to net/http.
type stack struct {
	addr string
	loop *Server
	path *pipeline.Listener

	mu      sync.Mutex
	records []pipeline.AccessRecord
	// handOffs counts the connections handed to the netpoll engine.
	handOffs atomic.Int32
}

type stackOpts struct {
	readHeaderTimeout, idleTimeout time.Duration
	maxConns                       int
	proxyProtocol                  bool
	// more are endpoints of app.test's backend after the first, tried as
	// attempts says; timeouts are its rule's.
	more     []string
	attempts int
	timeouts router.Timeouts
}

// serveStack serves a loopback socket with a table of three hosts:
// app.test goes to backend, moved.test is redirected, and no other
// host has a route.
func serveStack(t testing.TB, backend string, o stackOpts) *stack {
	t.Helper()
	if o.readHeaderTimeout == 0 {
		o.readHeaderTimeout = 5 * time.Second
	}
	if o.idleTimeout == 0 {
		o.idleTimeout = 5 * time.Second
	}
	st := &stack{}
	st.path = testPath(t, backend, o, func(a *pipeline.AccessRecord) {
		st.mu.Lock()
		st.records = append(st.records, *a)
		st.mu.Unlock()
	})

	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st.addr = raw.Addr().String()
	m, err := guard.NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener = raw
	if o.proxyProtocol {
		ln = guard.NewProxyListener(ln, guard.PrefixSet{netip.MustParsePrefix("127.0.0.0/8")}, o.readHeaderTimeout, m)
	}
	tracker := guard.NewTracker(Listen(ln), guard.NewRegistry(o.maxConns, 0, m), m)
	guarded := guard.Listener{Listener: tracker, WriteStall: o.idleTimeout}

	handoff := guard.NewHandoff(raw.Addr())
	hs := &http.Server{Handler: st.path, ReadHeaderTimeout: o.readHeaderTimeout, IdleTimeout: o.idleTimeout, MaxHeaderBytes: 16 << 10}
	go hs.Serve(handoff)
	netpoll := h1.New(h1.Config{Path: st.path, HandOff: handoff, ReadHeaderTimeout: o.readHeaderTimeout, IdleTimeout: o.idleTimeout, MaxHeaderBytes: 16 << 10, Metrics: m})
	st.loop, err = New(Config{
		Path: st.path,
		HandOff: func(c net.Conn) {
			st.handOffs.Add(1)
			netpoll.ServeConn(guarded.Guard(c))
		},
		ReadHeaderTimeout: o.readHeaderTimeout,
		IdleTimeout:       o.idleTimeout,
		MaxHeaderBytes:    16 << 10,
		ServerField:       true,
		Workers:           2,

		UpstreamIdleTimeout:     time.Minute,
		MaxIdleConnsPerEndpoint: 16,
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := tracker.Accept()
			if err != nil {
				return
			}
			st.loop.ServeConn(c)
		}
	}()
	t.Cleanup(func() {
		tracker.Close()
		st.loop.Close()
		hs.Close()
		handoff.Close()
	})
	return st
}

// testPath is the request path of serveStack's listener, which logs with
// record.
func testPath(t testing.TB, backend string, o stackOpts, record func(*pipeline.AccessRecord)) *pipeline.Listener {
	t.Helper()
	pool := upstream.NewPool(time.Second, 16, time.Minute)
	t.Cleanup(pool.Close)
	shared, err := pipeline.New(pipeline.Config{Pool: pool, ConnectAttempts: max(o.attempts, 1), DialTimeout: time.Second, Logger: slog.New(slog.DiscardHandler), AccessLog: record})
	if err != nil {
		t.Fatal(err)
	}
	registry := upstream.NewRegistry(upstream.RoundRobin, upstream.Health{FailureThreshold: 5, BaseEjection: time.Second, MaxEjection: time.Second})
	endpoints := []upstream.Endpoint{{Address: backend}}
	for _, a := range o.more {
		endpoints = append(endpoints, upstream.Endpoint{Address: a})
	}
	shared.SetEndpoints(registry.Sets(map[string][]upstream.Endpoint{"web": endpoints}))
	tbl, errs := router.Compile([]router.Route{{
		ID:        router.RouteID{Kind: router.KindHTTPRoute, Namespace: "ns", Name: "web"},
		Hostnames: []string{"app.test"},
		Rules:     []router.Rule{{Backends: []router.BackendRef{{Name: "web", Weight: 1}}, Timeouts: o.timeouts}},
	}, {
		ID:        router.RouteID{Kind: router.KindHTTPRoute, Namespace: "ns", Name: "moved"},
		Hostnames: []string{"moved.test"},
		Rules: []router.Rule{{Filters: []router.Filter{{
			Type:     router.FilterRequestRedirect,
			Redirect: &router.Redirect{Scheme: "https", StatusCode: http.StatusMovedPermanently},
		}}}},
	}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	path := shared.NewListener("test", "http", 0, nil, nil)
	path.Publish(tbl, nil)
	return path
}

// echoBackend answers with what it got.
func echoBackend(t testing.TB) string {
	t.Helper()
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Upgrade", r.Header.Get("Upgrade"))
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
	}))
	t.Cleanup(b.Close)
	return b.Listener.Addr().String()
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

type answer struct {
	status int
	body   string
	header http.Header
	// close says the answer closes its connection.
	close bool
}

func readAnswer(t *testing.T, br *bufio.Reader, method string) answer {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading an answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading an answer's body: %v", err)
	}
	return answer{resp.StatusCode, string(body), resp.Header, resp.Close}
}

// closed reports whether the server ended the connection.
func closed(br *bufio.Reader) bool {
	_, err := br.ReadByte()
	return err == io.EOF
}

// TestOwnAnswers: the answers the proxy makes itself, on one connection
// kept alive, as a net/http client sees them.
func TestOwnAnswers(t *testing.T) {
	st := serveStack(t, echoBackend(t), stackOpts{})
	conns := 0
	client := &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conns++
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}},
	}
	for _, tc := range []struct {
		method, url  string
		status       int
		location     string
		bodyContains string
	}{
		{"GET", "http://nowhere.test/a", http.StatusNotFound, "", "no route"},
		{"GET", "http://moved.test/b?q=1", http.StatusMovedPermanently, "https://moved.test/b?q=1", ""},
		{"HEAD", "http://nowhere.test/", http.StatusNotFound, "", ""},
		{"GET", "http://nowhere.test/c", http.StatusNotFound, "", "no route"},
	} {
		req, _ := http.NewRequest(tc.method, tc.url, nil)
		// One host for the client, so that it keeps one connection.
		req.URL.Host = st.addr
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Location") != tc.location || !strings.Contains(string(body), tc.bodyContains) {
			t.Errorf("%s %s: %d, Location %q, body %q; want %d, %q, %q", tc.method, tc.url, resp.StatusCode, resp.Header.Get("Location"), body, tc.status, tc.location, tc.bodyContains)
		}
		if resp.Header.Get("Server") != "hostgate" || resp.Header.Get("Date") == "" {
			t.Errorf("%s %s: Server %q, Date %q", tc.method, tc.url, resp.Header.Get("Server"), resp.Header.Get("Date"))
		}
	}
	if conns != 1 {
		t.Errorf("%d connections for four requests, want one kept alive", conns)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.records) != 4 || st.records[1].Status != http.StatusMovedPermanently || st.records[1].Host != "moved.test" || st.records[1].Path != "/b" {
		t.Errorf("access log: %+v", st.records)
	}
}

// TestPipelining: requests sent at once are answered in order, those
// the loop answers itself and those the netpoll engine takes over alike.
func TestPipelining(t *testing.T) {
	st := serveStack(t, echoBackend(t), stackOpts{})
	c, br := dial(t, st.addr)
	io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: nowhere.test\r\n\r\n"+
		"GET /2 HTTP/1.1\r\nHost: moved.test\r\n\r\n"+
		"POST /3 HTTP/1.1\r\nHost: app.test\r\nContent-Length: 5\r\n\r\nhello"+
		"GET /4 HTTP/1.1\r\nHost: nowhere.test\r\n\r\n")
	want := []answer{{status: 404}, {status: 301}, {status: 200, body: "POST /3 hello"}, {status: 404}}
	for i, w := range want {
		got := readAnswer(t, br, "GET")
		if got.status != w.status || w.body != "" && got.body != w.body {
			t.Errorf("answer %d: %d %q, want %d %q", i+1, got.status, got.body, w.status, w.body)
		}
	}
	// The connection stays open, on the netpoll engine now.
	io.WriteString(c, "GET /5 HTTP/1.1\r\nHost: app.test\r\n\r\n")
	if got := readAnswer(t, br, "GET"); got.status != 200 || got.body != "GET /5 " {
		t.Errorf("after the hand-off: %d %q", got.status, got.body)
	}
}

// TestHandOff: what the loop does not serve reaches the client as the
// netpoll engine and net/http serve it, bytes read ahead included.
func TestHandOff(t *testing.T) {
	st := serveStack(t, echoBackend(t), stackOpts{})
	long := strings.Repeat("x", 10<<10)
	for _, tc := range []struct {
		name, req string
		status    int
		body      string
		closes    bool
	}{
		{"forwarded", "GET /f HTTP/1.1\r\nHost: app.test\r\n\r\n", 200, "GET /f ", false},
		{"body in pieces", "POST /p HTTP/1.1\r\nHost: app.test\r\nContent-Length: 10\r\n\r\nhello", 200, "POST /p helloworld", false},
		{"chunked", "POST /c HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 200, "POST /c hello", false},
		{"upgrade", "GET /u HTTP/1.1\r\nHost: app.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 200, "GET /u ", false},
		{"head past the loop's buffer", "GET /l HTTP/1.1\r\nHost: nowhere.test\r\nX-Long: " + long + "\r\n\r\n", 404, "", false},
		{"head past MaxHeaderBytes", "GET /m HTTP/1.1\r\nHost: nowhere.test\r\nX-Long: " + long + long + "\r\n\r\n", 431, "", true},
		{"Content-Length with Transfer-Encoding", "POST /s HTTP/1.1\r\nHost: app.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "", true},
		{"obs-fold", "GET /o HTTP/1.1\r\nHost: app.test\r\nX-A: a\r\n b\r\n\r\n", 400, "", true},
		{"bare LF", "GET /n HTTP/1.1\nHost: app.test\n\n", 400, "", true},
		{"two Content-Lengths", "POST /d HTTP/1.1\r\nHost: app.test\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, br := dial(t, st.addr)
			if tc.name == "body in pieces" {
				io.WriteString(c, tc.req)
				time.Sleep(20 * time.Millisecond)
				io.WriteString(c, "world")
			} else {
				io.WriteString(c, tc.req)
			}
			got := readAnswer(t, br, "GET")
			if got.status != tc.status || tc.body != "" && got.body != tc.body {
				t.Fatalf("%d %q, want %d %q", got.status, got.body, tc.status, tc.body)
			}
			if tc.name == "upgrade" && got.header.Get("X-Upgrade") != "websocket" {
				t.Errorf("the backend got Upgrade %q", got.header.Get("X-Upgrade"))
			}
			if tc.closes {
				if !closed(br) {
					t.Errorf("connection open after a refused request")
				}
				return
			}
			io.WriteString(c, "GET /next HTTP/1.1\r\nHost: nowhere.test\r\n\r\n")
			if got := readAnswer(t, br, "GET"); got.status != 404 {
				t.Errorf("next request: %d", got.status)
			}
		})
	}
}

// TestClose: answers close the connection when the client asks, or is
// HTTP/1.0 without keep-alive, and keep it for an HTTP/1.0 client that
// asks.
func TestClose(t *testing.T) {
	st := serveStack(t, echoBackend(t), stackOpts{})
	for _, tc := range []struct {
		req    string
		closes bool
	}{
		{"GET / HTTP/1.1\r\nHost: x.test\r\nConnection: close\r\n\r\n", true},
		{"GET / HTTP/1.0\r\nHost: x.test\r\n\r\n", true},
		{"GET / HTTP/1.0\r\nHost: x.test\r\nConnection: keep-alive\r\n\r\n", false},
		{"GET / HTTP/1.1\r\nHost: x.test\r\n\r\n", false},
	} {
		c, br := dial(t, st.addr)
		io.WriteString(c, tc.req)
		got := readAnswer(t, br, "GET")
		if got.status != 404 || got.close != tc.closes {
			t.Errorf("%q: %d, closing %v, want 404, %v", tc.req, got.status, got.close, tc.closes)
		}
		if tc.closes && !closed(br) {
			t.Errorf("%q: connection left open", tc.req)
		}
		if !tc.closes {
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x.test\r\n\r\n")
			if got := readAnswer(t, br, "GET"); got.status != 404 {
				t.Errorf("%q: next request %d", tc.req, got.status)
			}
		}
	}
}

// TestTimeouts: a client that sends half a head, or nothing after an
// answer, loses its connection.
func TestTimeouts(t *testing.T) {
	st := serveStack(t, echoBackend(t), stackOpts{readHeaderTimeout: 300 * time.Millisecond, idleTimeout: 300 * time.Millisecond})
	c, br := dial(t, st.addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x.test\r\n\r\n")
	readAnswer(t, br, "GET")
	if !closed(br) {
		t.Errorf("idle connection left open")
	}

	c, br = dial(t, st.addr)
	// A byte now and then does not extend the head's time.
	io.WriteString(c, "GET / HTTP/1.1\r\n")
	for range 6 {
		time.Sleep(100 * time.Millisecond)
		io.WriteString(c, "X")
	}
	if !closed(br) {
		t.Errorf("slow head left open")
	}
}

// TestDrain: idle connections close when the listener drains, and an
// answer then closes its own.
func TestDrain(t *testing.T) {
	st := serveStack(t, echoBackend(t), stackOpts{})
	idle, idleBR := dial(t, st.addr)
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x.test\r\n\r\n")
	readAnswer(t, idleBR, "GET")
	busy, busyBR := dial(t, st.addr)
	// The second head, half sent, is read with the first request.
	io.WriteString(busy, "GET / HTTP/1.1\r\nHost: x.test\r\n\r\nGET / HTTP/1.1\r\nHost: x.test\r\n")
	readAnswer(t, busyBR, "GET")

	st.loop.CloseIdle()
	if !closed(idleBR) {
		t.Errorf("idle connection left open by the drain")
	}
	io.WriteString(busy, "\r\n")
	if got := readAnswer(t, busyBR, "GET"); got.status != 404 || !got.close {
		t.Errorf("request under way at the drain: %d, closing %v", got.status, got.close)
	}
	if !closed(busyBR) {
		t.Errorf("connection left open after its answer in the drain")
	}
}

// TestCapsCloseIdle: a connection past the node's cap closes the one on
// the loop that waits the longest, as on the netpoll engine.
func TestCapsCloseIdle(t *testing.T) {
	st := serveStack(t, echoBackend(t), stackOpts{maxConns: 1})
	first, firstBR := dial(t, st.addr)
	io.WriteString(first, "GET / HTTP/1.1\r\nHost: x.test\r\n\r\n")
	readAnswer(t, firstBR, "GET")
	time.Sleep(1100 * time.Millisecond) // the caps' grace for idle connections
	second, secondBR := dial(t, st.addr)
	io.WriteString(second, "GET / HTTP/1.1\r\nHost: x.test\r\n\r\n")
	if got := readAnswer(t, secondBR, "GET"); got.status != 404 {
		t.Errorf("new connection: %d", got.status)
	}
	if !closed(firstBR) {
		t.Errorf("idle connection left open past the cap")
	}
}

// TestProxyProtocol: the bytes read past a PROXY header are served on
// the loop, as coming from the address the header gave.
func TestProxyProtocol(t *testing.T) {
	st := serveStack(t, echoBackend(t), stackOpts{proxyProtocol: true})
	c, br := dial(t, st.addr)
	io.WriteString(c, "PROXY TCP4 192.0.2.7 192.0.2.1 4000 80\r\nGET /pp HTTP/1.1\r\nHost: x.test\r\n\r\n")
	if got := readAnswer(t, br, "GET"); got.status != 404 {
		t.Fatalf("%d", got.status)
	}
	io.WriteString(c, "GET /pp2 HTTP/1.1\r\nHost: x.test\r\n\r\n")
	readAnswer(t, br, "GET")
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.records) != 2 || st.records[0].RemoteAddr != "192.0.2.7:4000" || st.records[1].Path != "/pp2" {
		t.Errorf("access log: %+v", st.records)
	}
}

// TestCurl: curl's requests, kept alive across two URLs.
func TestCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	st := serveStack(t, echoBackend(t), stackOpts{})
	moved := "http://moved.test:" + port(st.addr)
	out, err := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{num_connects}\n",
		"--resolve", "moved.test:"+port(st.addr)+":127.0.0.1", moved+"/a", moved+"/b").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); got != "301 1\n301 0\n" {
		t.Errorf("curl: %q, want 404 on a new connection then 301 on the same", got)
	}
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// TestClientHalfClose: a client that sends its requests and closes its
// side gets its answers, then the connection ends, with nothing left
// for a timeout to end.
func TestClientHalfClose(t *testing.T) {
	st := serveStack(t, echoBackend(t), stackOpts{readHeaderTimeout: time.Minute, idleTimeout: time.Minute})
	c, br := dial(t, st.addr)
	io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: x.test\r\n\r\nGET /2 HTTP/1.1\r\nHost: moved.test\r\n\r\nGET /3 HTTP/1.1\r\n")
	c.(*net.TCPConn).CloseWrite()
	if a, b := readAnswer(t, br, "GET"), readAnswer(t, br, "GET"); a.status != 404 || b.status != 301 {
		t.Errorf("answers %d, %d; want 404, 301", a.status, b.status)
	}
	if !closed(br) {
		t.Errorf("connection left open after the client closed its side")
	}
}
