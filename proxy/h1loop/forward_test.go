//go:build linux

package h1loop

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

// countedBackend serves h and counts the connections made to it.
func countedBackend(t *testing.T, h http.HandlerFunc) (string, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	b := httptest.NewUnstartedServer(h)
	b.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	b.Start()
	t.Cleanup(b.Close)
	return b.Listener.Addr().String(), &conns
}

// TestForward: requests with and without bodies go to the backend and
// back on the loop, over one backend connection kept alive, with the
// fields a backend gets from the proxy, and are logged.
func TestForward(t *testing.T) {
	backend, conns := countedBackend(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Got-Forwarded-For", r.Header.Get("X-Forwarded-For"))
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
	})
	st := serveStack(t, backend, stackOpts{})
	c, br := dial(t, st.addr)
	for i := range 20 {
		method, body := "GET", ""
		if i%2 == 1 {
			method, body = "POST", fmt.Sprintf("body %d", i)
		}
		fmt.Fprintf(c, "%s /r%d HTTP/1.1\r\nHost: app.test\r\nContent-Length: %d\r\n\r\n%s", method, i, len(body), body)
		got := readAnswer(t, br, method)
		if want := fmt.Sprintf("%s /r%d %s", method, i, body); got.status != 200 || got.body != want || got.header.Get("X-Got-Forwarded-For") != "127.0.0.1" || got.close {
			t.Fatalf("request %d: %d %q %v, close %v; want 200 %q", i, got.status, got.body, got.header, got.close, want)
		}
	}
	if n := st.handOffs.Load(); n != 0 {
		t.Errorf("%d connections handed off, want none", n)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d backend connections for 20 requests in turn, want 1", n)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.records) != 20 || st.records[3].Status != 200 || st.records[3].Method != "POST" || st.records[3].Path != "/r3" || st.records[3].BytesSent != int64(len("POST /r3 body 3")) {
		t.Errorf("access log: %d records, the fourth %+v", len(st.records), st.records[min(3, len(st.records)-1)])
	}
}

// TestForwardBodies: chunked responses, a large one to a client that
// reads only later (the backend is read as the client reads), and one
// to an HTTP/1.0 client, which ends its connection.
func TestForwardBodies(t *testing.T) {
	large := strings.Repeat("0123456789abcdef", 256<<10) // 4 MiB
	backend, _ := countedBackend(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			for i := range 3 {
				fmt.Fprintf(w, "piece %d;", i)
				w.(http.Flusher).Flush()
			}
		case "/large":
			io.WriteString(w, large)
		}
	})
	st := serveStack(t, backend, stackOpts{})
	c, br := dial(t, st.addr)
	io.WriteString(c, "GET /chunked HTTP/1.1\r\nHost: app.test\r\n\r\n")
	got := readAnswer(t, br, "GET")
	if got.body != "piece 0;piece 1;piece 2;" || got.close {
		t.Errorf("chunked: %q, close %v", got.body, got.close)
	}
	io.WriteString(c, "GET /large HTTP/1.1\r\nHost: app.test\r\n\r\n")
	// Unread, the answer fills the sockets; then it comes whole.
	time.Sleep(100 * time.Millisecond)
	if got := readAnswer(t, br, "GET"); len(got.body) != len(large) || got.body != large {
		t.Errorf("large: %d bytes, want %d", len(got.body), len(large))
	}
	io.WriteString(c, "GET /chunked HTTP/1.1\r\nHost: app.test\r\n\r\n")
	if got := readAnswer(t, br, "GET"); got.body != "piece 0;piece 1;piece 2;" {
		t.Errorf("chunked after large: %q", got.body)
	}

	c10, br10 := dial(t, st.addr)
	io.WriteString(c10, "GET /chunked HTTP/1.0\r\nHost: app.test\r\nConnection: keep-alive\r\n\r\n")
	if got := readAnswer(t, br10, "GET"); got.body != "piece 0;piece 1;piece 2;" || !closed(br10) {
		t.Errorf("HTTP/1.0: %q", got.body)
	}
	if n := st.handOffs.Load(); n != 0 {
		t.Errorf("%d connections handed off, want none", n)
	}
}

// TestForwardPipelined: requests to the backend sent at once are
// answered in order.
func TestForwardPipelined(t *testing.T) {
	st := serveStack(t, echoBackend(t), stackOpts{})
	c, br := dial(t, st.addr)
	io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: app.test\r\n\r\n"+
		"POST /2 HTTP/1.1\r\nHost: app.test\r\nContent-Length: 2\r\n\r\nhi"+
		"GET /3 HTTP/1.1\r\nHost: nowhere.test\r\n\r\n"+
		"GET /4 HTTP/1.1\r\nHost: app.test\r\n\r\n")
	for i, want := range []string{"GET /1 ", "POST /2 hi", "", "GET /4 "} {
		got := readAnswer(t, br, "GET")
		if want == "" && got.status != 404 || want != "" && got.body != want {
			t.Errorf("answer %d: %d %q, want %q", i+1, got.status, got.body, want)
		}
	}
	if n := st.handOffs.Load(); n != 0 {
		t.Errorf("%d connections handed off, want none", n)
	}
}

// TestForwardFailures: a backend that refuses connections makes the
// next endpoint tried, or 502 when none is left; one that does not
// answer in time 504; one that closes mid-response ends the client's
// connection.
func TestForwardFailures(t *testing.T) {
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := down.Addr().String()
	down.Close()
	up := echoBackend(t)

	st := serveStack(t, refused, stackOpts{more: []string{up}, attempts: 2})
	for i := range 4 {
		c, br := dial(t, st.addr)
		io.WriteString(c, "GET /x HTTP/1.1\r\nHost: app.test\r\n\r\n")
		if got := readAnswer(t, br, "GET"); got.status != 200 || got.body != "GET /x " {
			t.Errorf("request %d with one endpoint down: %d %q", i, got.status, got.body)
		}
	}

	st = serveStack(t, refused, stackOpts{})
	c, br := dial(t, st.addr)
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: app.test\r\n\r\n")
	if got := readAnswer(t, br, "GET"); got.status != http.StatusBadGateway || got.close {
		t.Errorf("backend down: %d, close %v", got.status, got.close)
	}

	release := make(chan struct{})
	slow, _ := countedBackend(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			<-release
		case "/cut":
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, "only ten.")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
	})
	// Before the backend's Close, which waits for its handlers.
	t.Cleanup(func() { close(release) })
	st = serveStack(t, slow, stackOpts{timeouts: router.Timeouts{BackendRequest: 200 * time.Millisecond}})
	c, br = dial(t, st.addr)
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: app.test\r\n\r\n")
	if got := readAnswer(t, br, "GET"); got.status != http.StatusGatewayTimeout {
		t.Errorf("backend too slow: %d", got.status)
	}
	c, br = dial(t, st.addr)
	io.WriteString(c, "GET /cut HTTP/1.1\r\nHost: app.test\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if body, err := io.ReadAll(resp.Body); resp.StatusCode != 200 || err != io.ErrUnexpectedEOF {
		t.Errorf("backend closing mid-response: %d %q, %v; want the connection cut", resp.StatusCode, body, err)
	}
	if n := st.handOffs.Load(); n != 0 {
		t.Errorf("%d connections handed off, want none", n)
	}
}

// TestForwardDrain: a request forwarded when the listener drains is
// answered, and its connection closes after it.
func TestForwardDrain(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	backend, _ := countedBackend(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		io.WriteString(w, "late")
	})
	st := serveStack(t, backend, stackOpts{})
	c, br := dial(t, st.addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: app.test\r\n\r\n")
	<-arrived
	st.loop.CloseIdle()
	close(release)
	if got := readAnswer(t, br, "GET"); got.status != 200 || got.body != "late" || !got.close {
		t.Errorf("request under way at the drain: %d %q, close %v", got.status, got.body, got.close)
	}
	if !closed(br) {
		t.Errorf("connection left open after its answer in the drain")
	}
}

// TestForwardEarlyHintsAlone: an informational response (103 Early
// Hints) whose final response has yet to come goes to its own client, and
// to no other: left in the worker's writer, it went out with the next
// answer the worker wrote, another client's.
func TestForwardEarlyHintsAlone(t *testing.T) {
	hinted, release := make(chan struct{}), make(chan struct{})
	backend, _ := countedBackend(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hint" {
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			close(hinted)
			<-release
		}
		io.WriteString(w, "done")
	})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	// Before the backend's Close, which waits for its handlers.
	t.Cleanup(free)
	st := serveStack(t, backend, stackOpts{})
	a, abr := dial(t, st.addr)
	io.WriteString(a, "GET /hint HTTP/1.1\r\nHost: app.test\r\n\r\n")
	select {
	case <-hinted:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the backend")
	}
	// The loop reads the 103; then a client on each worker asks for an
	// answer the loop makes itself.
	time.Sleep(100 * time.Millisecond)
	for i := range 2 {
		c, br := dial(t, st.addr)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: moved.test\r\n\r\n")
		if got := readAnswer(t, br, "GET"); got.status != http.StatusMovedPermanently {
			t.Errorf("client %d: %d %v first, want its redirect", i, got.status, got.header)
		}
	}
	free()
	if got := readAnswer(t, abr, "GET"); got.status != http.StatusEarlyHints || got.header.Get("Link") == "" {
		t.Errorf("the hinted client: %d %v first, want the 103 with its Link", got.status, got.header)
	}
	if got := readAnswer(t, abr, "GET"); got.status != 200 || got.body != "done" {
		t.Errorf("the hinted client: %d %q, want 200 done", got.status, got.body)
	}
}

// TestForwardCutShortAlone: what the worker's writer still holds of a
// response whose client went away while it was relayed (the write that
// failed was one of several, a long head's) goes to no one: left there,
// it went out in front of the next answer the worker wrote, another
// client's.
func TestForwardCutShortAlone(t *testing.T) {
	arrived, respond := make(chan struct{}), make(chan struct{})
	backend, _ := countedBackend(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-respond
		// A head longer than the worker's writer holds.
		w.Header().Set("X-Long", strings.Repeat("h", 40<<10))
		io.WriteString(w, strings.Repeat("b", 8<<10))
	})
	var once sync.Once
	free := func() { once.Do(func() { close(respond) }) }
	// Before the backend's Close, which waits for its handlers.
	t.Cleanup(free)
	st := serveStack(t, backend, stackOpts{})
	a, _ := dial(t, st.addr)
	io.WriteString(a, "GET /long HTTP/1.1\r\nHost: app.test\r\n\r\n")
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the backend")
	}
	// The client resets its connection: relaying the response fails.
	a.(*net.TCPConn).SetLinger(0)
	a.Close()
	time.Sleep(50 * time.Millisecond)
	free()
	time.Sleep(100 * time.Millisecond)
	// A client on each worker asks for an answer the loop makes itself.
	for i := range 2 {
		c, br := dial(t, st.addr)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: moved.test\r\n\r\n")
		line, err := br.ReadString('\n')
		if want := "HTTP/1.1 301 "; !strings.HasPrefix(line, want) {
			t.Errorf("client %d: %.40q..., %v first, want %q", i, line, err, want)
		}
	}
}

// TestForwardClients: net/http's client and curl, with bodies.
func TestForwardClients(t *testing.T) {
	st := serveStack(t, echoBackend(t), stackOpts{})
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, st.addr)
	}}}
	for i := range 5 {
		resp, err := client.Post("http://app.test/p", "text/plain", strings.NewReader(fmt.Sprint("n=", i)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprint("POST /p n=", i); string(body) != want {
			t.Errorf("net/http: %q, want %q", body, want)
		}
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	out, err := exec.Command("curl", "-sS", "--resolve", "app.test:"+port(st.addr)+":127.0.0.1", "--data", "a=b", "http://app.test:"+port(st.addr)+"/c", "http://app.test:"+port(st.addr)+"/d").CombinedOutput()
	if err != nil || string(out) != "POST /c a=bPOST /d a=b" {
		t.Errorf("curl: %q, %v", out, err)
	}
}

// BenchmarkForward: a GET forwarded to a backend with a small response,
// one request at a time on one connection. The backend answers each read
// with one response, allocating nothing, so that allocs/op are the
// proxy's and the client's.
func BenchmarkForward(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello")
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	st := serveStack(b, ln.Addr().String(), stackOpts{})
	c, err := net.Dial("tcp", st.addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := []byte("GET /bench HTTP/1.1\r\nHost: app.test\r\n\r\n")
	buf := make([]byte, 4096)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		// The answer ends with its 5-byte body, and comes in one piece.
		n, err := c.Read(buf)
		if err != nil || !bytes.HasSuffix(buf[:n], []byte("hello")) {
			b.Fatalf("answer %q, %v", buf[:n], err)
		}
	}
}
