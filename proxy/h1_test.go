package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

// engineServer serves every request on a cleartext listener of the
// native engine from the backend at addr, and returns the listener's
// address.
func engineServer(t *testing.T, opts Options, backend string) string {
	t.Helper()
	opts.HTTP1Engine = EngineNative
	s := startServer(t, opts)
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
	return apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, route("all", nil, router.Rule{Backends: backends("web")}))})[0]
}

// dialRaw opens a client connection for hand-written requests.
func dialRaw(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return c, bufio.NewReader(c)
}

// readResp reads one response to a request of method and its body.
func readResp(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, string(body)
}

// countConns counts the connections a backend server accepts.
func countConns(n *atomic.Int64) func(net.Conn, http.ConnState) {
	return func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			n.Add(1)
		}
	}
}

// framingMux serves echo("b") at /echo, a streamed response with the
// trailer X-Sum: 2 at /stream, and a declared length of 7 at /head, whose
// body GET gets and HEAD does not.
func framingMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/echo", echo("b"))
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "one,")
		w.(http.Flusher).Flush()
		io.WriteString(w, "two")
		w.Header().Set("X-Sum", "2")
	})
	mux.HandleFunc("/head", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "7")
		if r.Method != http.MethodHead {
			io.WriteString(w, "content")
		}
	})
	return mux
}

// TestH1Framing sends requests of every framing through the engine over
// one connection, pipelined, and reads the answers in order: bodies of
// known length and chunked both ways, HEAD, a streamed response, and
// Connection-listed fields that must not pass.
func TestH1Framing(t *testing.T) {
	var conns atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := framingMux()
	srv := &http.Server{Handler: mux, ConnState: countConns(&conns)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := engineServer(t, testOptions(), ln.Addr().String())

	c, br := dialRaw(t, addr)
	io.WriteString(c, "POST /echo?q=1 HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\nhello"+
		"POST /echo HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nConnection: X-Private\r\nX-Private: secret\r\nX-Test: kept\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n"+
		"HEAD /head HTTP/1.1\r\nHost: a.test\r\n\r\n"+
		"GET /stream HTTP/1.1\r\nHost: a.test\r\n\r\n"+
		"GET /head HTTP/1.1\r\nHost: a.test\r\n\r\n")

	resp, body := readResp(t, br, "POST")
	if resp.StatusCode != 200 || !strings.Contains(body, "method=POST host=a.test path=/echo query=q=1 body=hello\n") {
		t.Errorf("length body: %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("X-Hop") != "" || resp.Header.Get("X-Backend") != "b" {
		t.Errorf("response fields: %v", resp.Header)
	}
	_, body = readResp(t, br, "POST")
	if !strings.Contains(body, "body=abcde\n") || !strings.Contains(body, "X-Test=kept\n") {
		t.Errorf("chunked body: %q", body)
	}
	if strings.Contains(body, "secret") {
		t.Errorf("a field named in Connection reached the backend: %q", body)
	}
	resp, body = readResp(t, br, "HEAD")
	if resp.StatusCode != 200 || resp.ContentLength != 7 || body != "" {
		t.Errorf("HEAD: %d length %d body %q", resp.StatusCode, resp.ContentLength, body)
	}
	resp, body = readResp(t, br, "GET")
	if body != "one,two" || resp.TransferEncoding == nil || resp.Trailer.Get("X-Sum") != "2" {
		t.Errorf("stream: %q %v trailer %v", body, resp.TransferEncoding, resp.Trailer)
	}
	_, body = readResp(t, br, "GET")
	if body != "content" {
		t.Errorf("after HEAD: %q", body)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("backend saw %d connections, want 1 kept alive", n)
	}
}

// TestH1HTTP10 serves HTTP/1.0 clients: without keep-alive the connection
// ends after the response, with it the connection stays unless the body's
// length is unknown, which only closing can tell a 1.0 client.
func TestH1HTTP10(t *testing.T) {
	backend := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "a")
		if r.URL.Path == "/stream" {
			w.(http.Flusher).Flush()
			io.WriteString(w, "b")
		}
	}))
	addr := engineServer(t, testOptions(), backend)

	c, br := dialRaw(t, addr)
	io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
	resp, body := readResp(t, br, "GET")
	if resp.Proto != "HTTP/1.0" || body != "a" {
		t.Errorf("1.0: %s %q", resp.Proto, body)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("1.0 without keep-alive: connection open (%v)", err)
	}

	c, br = dialRaw(t, addr)
	io.WriteString(c, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	resp, body = readResp(t, br, "GET")
	if resp.Close || body != "a" {
		t.Errorf("1.0 keep-alive: close %v body %q", resp.Close, body)
	}
	io.WriteString(c, "GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	resp, body = readResp(t, br, "GET")
	if body != "ab" || resp.ContentLength != -1 {
		t.Errorf("1.0 stream: %q length %d", body, resp.ContentLength)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("1.0 body of unknown length: connection open (%v)", err)
	}
}

// TestH1ExpectContinue passes "Expect: 100-continue" through: the client
// gets 100 Continue when the backend asks for the body, and a backend that
// refuses it answers at once without the body being sent.
func TestH1ExpectContinue(t *testing.T) {
	backend := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refuse" {
			w.WriteHeader(http.StatusExpectationFailed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "got %d", len(body))
	}))
	addr := engineServer(t, testOptions(), backend)

	c, br := dialRaw(t, addr)
	io.WriteString(c, "PUT /take HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	// Well before the second after which a body goes anyway.
	c.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("first line %q, %v; want 100 Continue", line, err)
	}
	if blank, _ := br.ReadString('\n'); blank != "\r\n" {
		t.Fatalf("after 100: %q", blank)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "hello")
	if resp, body := readResp(t, br, "PUT"); resp.StatusCode != 200 || body != "got 5" {
		t.Errorf("after 100: %d %q", resp.StatusCode, body)
	}

	c, br = dialRaw(t, addr)
	io.WriteString(c, "PUT /refuse HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	if resp, _ := readResp(t, br, "PUT"); resp.StatusCode != http.StatusExpectationFailed {
		t.Errorf("refused: %d, want 417 without 100 first", resp.StatusCode)
	}

	// curl sends a large upload with Expect: 100-continue and waits for
	// the 100 before sending it.
	file := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(file, []byte(strings.Repeat("x", 2<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	out := curl(t, "-H", "Expect: 100-continue", "--expect100-timeout", "5", "-w", " %{time_total}", "-T", file, "http://"+addr+"/take")
	var got int
	var took float64
	if _, err := fmt.Sscanf(out, "got %d %g", &got, &took); err != nil || got != 2<<20 || took > 4 {
		t.Errorf("curl upload: %.100q (%v), want all 2 MiB taken without waiting for 100 Continue", out, err)
	}
}

// oneShotBackend answers each connection's first request and then closes
// it without saying so, as a backend with a short keep-alive timeout does
// between two requests. It returns its address and how many connections it
// accepted.
func oneShotBackend(t *testing.T) (string, *atomic.Int64) {
	var conns atomic.Int64
	addr := rawBackend(t, func(c net.Conn) {
		conns.Add(1)
		r, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", 3+len(body), "ok "+string(body))
	})
	return addr, &conns
}

// rawBackend serves each connection with serve, which writes responses by
// hand, then closes it.
func rawBackend(t *testing.T, serve func(net.Conn)) string {
	return rawBackendOn(t, net.ListenConfig{}, serve)
}

// rawBackendOn is rawBackend on a socket lc makes.
func rawBackendOn(t *testing.T, lc net.ListenConfig, serve func(net.Conn)) string {
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestH1StalePooledConnection sends requests one after another to a
// backend that closes each connection after its response: a pooled
// connection found closed is replaced, for a GET and for a POST, and the
// client never sees the failure.
func TestH1StalePooledConnection(t *testing.T) {
	backend, conns := oneShotBackend(t)
	addr := engineServer(t, testOptions(), backend)
	c, br := dialRaw(t, addr)
	for i, req := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\ndata",
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
	} {
		// Time for the backend's close to arrive.
		time.Sleep(20 * time.Millisecond)
		io.WriteString(c, req)
		resp, body := readResp(t, br, "GET")
		if resp.StatusCode != 200 || !strings.HasPrefix(body, "ok ") {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	if n := conns.Load(); n != 4 {
		t.Errorf("backend accepted %d connections, want 4", n)
	}
}

// TestH1BackendBreaksOff has the backend close in the middle of a body: the
// client's connection is closed too, the only way to tell it the body is
// cut short.
func TestH1BackendBreaksOff(t *testing.T) {
	backend := rawBackend(t, func(c net.Conn) {
		http.ReadRequest(bufio.NewReader(c))
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
	})
	addr := engineServer(t, testOptions(), backend)
	c, br := dialRaw(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != io.ErrUnexpectedEOF || string(body) != "only this" {
		t.Errorf("body %q, %v; want the part sent, then unexpected EOF", body, err)
	}
}

// TestH1Limits checks the limits on what a client sends: an oversized head
// gets 431 (from net/http, which the engine hands it to), and a client
// slower than the header timeout, or idle longer than the idle timeout, is
// disconnected.
func TestH1Limits(t *testing.T) {
	backend := startBackend(t, echo("b"))
	opts := testOptions()
	opts.MaxHeaderBytes = 4 << 10
	opts.ReadHeaderTimeout = 300 * time.Millisecond
	opts.IdleTimeout = 300 * time.Millisecond
	addr := engineServer(t, opts, backend)

	for _, size := range []int{12 << 10, 32 << 10} {
		c, br := dialRaw(t, addr)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nX-Big: "+strings.Repeat("b", size)+"\r\n\r\n")
		// Only the head: net/http closes with the request unread, which
		// may reset the connection before the body is read.
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%d-byte field: %v %v, want 431", size, resp, err)
		}
	}

	c, br := dialRaw(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\n")
	if d := closedAfter(t, br, "slow head"); d > 2*time.Second {
		t.Errorf("slow head closed after %v", d)
	}

	c, br = dialRaw(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	readResp(t, br, "GET")
	if d := closedAfter(t, br, "idle"); d < 200*time.Millisecond || d > 2*time.Second {
		t.Errorf("idle connection closed after %v, want about 300ms", d)
	}
}

// TestH1SlowNextHead checks that on a kept-alive connection the header
// timeout, not the longer idle timeout, bounds a request head whose first
// bytes came and whose rest does not.
func TestH1SlowNextHead(t *testing.T) {
	backend := startBackend(t, echo("b"))
	opts := testOptions()
	opts.ReadHeaderTimeout = 300 * time.Millisecond
	opts.IdleTimeout = 10 * time.Second
	addr := engineServer(t, opts, backend)

	c, br := dialRaw(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	readResp(t, br, "GET")
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n")
	if d := closedAfter(t, br, "slow second head"); d > 3*time.Second {
		t.Errorf("slow second head closed after %v, want about 300ms", d)
	}
}

// closedAfter waits for the server to close the connection br reads, and
// returns how long it took.
func closedAfter(t *testing.T, br *bufio.Reader, what string) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("%s: %v, want the connection closed", what, err)
	}
	return time.Since(start)
}

// TestH1HandsOver checks that what the engine leaves to net/http is still
// served on the same connection after requests the engine answered: an
// absolute-form target and a request the parser declines.
func TestH1HandsOver(t *testing.T) {
	backend := startBackend(t, echo("b"))
	addr := engineServer(t, testOptions(), backend)
	c, br := dialRaw(t, addr)
	io.WriteString(c, "GET /first HTTP/1.1\r\nHost: a\r\n\r\nGET http://a/second HTTP/1.1\r\nHost: a\r\n\r\nGET /third HTTP/1.1\r\nHost: a\r\n\r\n")
	for _, want := range []string{"path=/first", "path=/second", "path=/third"} {
		if resp, body := readResp(t, br, "GET"); resp.StatusCode != 200 || !strings.Contains(body, want) {
			t.Errorf("want %s: %d %q", want, resp.StatusCode, body)
		}
	}
}

// TestH1OverTLS pipelines requests on an HTTP/1.1 connection over TLS:
// the engine serves them with the listener's scheme and Alt-Svc.
func TestH1OverTLS(t *testing.T) {
	f := newTLSFixture(t)
	_, addr := tlsListener(t, f, "app.example.com")
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: f.ca.Pool, ServerName: "app.example.com", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET /one HTTP/1.1\r\nHost: app.example.com\r\n\r\n"+
		"POST /two HTTP/1.1\r\nHost: app.example.com\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n")
	br := bufio.NewReader(c)
	for _, want := range []string{"path=/one", "path=/two query= body=body"} {
		resp, body := readResp(t, br, "GET")
		if !strings.Contains(body, want) || !strings.Contains(body, "X-Forwarded-Proto=https\n") || !strings.HasPrefix(resp.Header.Get("Alt-Svc"), "h3=") {
			t.Errorf("want %s over https with Alt-Svc: %v %q", want, resp.Header, body)
		}
	}
}

// TestH1DrainClosesIdle stops a server with an idle keep-alive connection
// and one with a request in flight: the idle one is closed at once, the
// other after its response, and the stop does not wait for the grace
// period.
func TestH1DrainClosesIdle(t *testing.T) {
	backend := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(300 * time.Millisecond)
		}
		io.WriteString(w, "done")
	}))
	opts := testOptions()
	opts.ShutdownGrace = 10 * time.Second
	opts.HTTP1Engine = EngineNative
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, route("all", nil, router.Rule{Backends: backends("web")}))})[0]

	idle, idleR := dialRaw(t, addr)
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	readResp(t, idleR, "GET")
	busy, busyR := dialRaw(t, addr)
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	time.Sleep(50 * time.Millisecond)

	start := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- s.Shutdown(context.Background()) }()
	if _, err := idleR.ReadByte(); err != io.EOF {
		t.Errorf("idle connection: %v, want closed", err)
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("idle connection closed after %v", d)
	}
	if resp, body := readResp(t, busyR, "GET"); resp.StatusCode != 200 || body != "done" {
		t.Errorf("in flight: %d %q", resp.StatusCode, body)
	}
	if _, err := busyR.ReadByte(); err != io.EOF {
		t.Errorf("busy connection after its response: %v, want closed", err)
	}
	if err := <-stopped; err != nil || time.Since(start) > 2*time.Second {
		t.Errorf("Shutdown: %v after %v", err, time.Since(start))
	}
}

// TestH1UpstreamPool checks the bounds of the engine's backend pool: of
// three connections opened at once only MaxIdleConnsPerEndpoint stay open
// after their requests, and those close once idle past
// UpstreamIdleTimeout.
func TestH1UpstreamPool(t *testing.T) {
	var open atomic.Int64
	backend := startBackendServer(t, &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(100 * time.Millisecond)
			io.WriteString(w, "ok")
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				open.Add(1)
			case http.StateClosed, http.StateHijacked:
				open.Add(-1)
			}
		},
	})
	opts := testOptions()
	opts.MaxIdleConnsPerEndpoint = 1
	opts.UpstreamIdleTimeout = 300 * time.Millisecond
	addr := engineServer(t, opts, backend)

	done := make(chan struct{})
	for range 3 {
		go func() {
			defer func() { done <- struct{}{} }()
			c, br := dialRaw(t, addr)
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
			if resp, _ := readResp(t, br, "GET"); resp.StatusCode != 200 {
				t.Errorf("status %d", resp.StatusCode)
			}
		}()
	}
	for range 3 {
		<-done
	}
	waitFor := func(want int64, within time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(within); open.Load() != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d backend connections open, want %d", open.Load(), want)
			}
		}
	}
	waitFor(1, 200*time.Millisecond)
	waitFor(0, 2*time.Second)
}

// TestH1BodilessStatuses relays an informational 103 ahead of its final
// response, and 204 and 304 without bodies, on one connection that stays
// usable after each.
func TestH1BodilessStatuses(t *testing.T) {
	backend := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hints":
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			io.WriteString(w, "page")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/cached":
			w.Header().Set("Etag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
		}
	}))
	addr := engineServer(t, testOptions(), backend)
	c, br := dialRaw(t, addr)
	io.WriteString(c, "GET /hints HTTP/1.1\r\nHost: a\r\n\r\nGET /empty HTTP/1.1\r\nHost: a\r\n\r\nGET /cached HTTP/1.1\r\nHost: a\r\n\r\nGET /hints HTTP/1.1\r\nHost: a\r\n\r\n")
	for i, want := range []struct {
		status int
		body   string
	}{{103, ""}, {200, "page"}, {204, ""}, {304, ""}, {103, ""}, {200, "page"}} {
		resp, body := readResp(t, br, "GET")
		if resp.StatusCode != want.status || body != want.body {
			t.Fatalf("response %d: %d %q, want %d %q", i, resp.StatusCode, body, want.status, want.body)
		}
		if want.status == 103 && resp.Header.Get("Link") == "" {
			t.Errorf("103 without its Link field: %v", resp.Header)
		}
		if want.status == 304 && resp.Header.Get("Etag") != `"v1"` {
			t.Errorf("304 without its Etag: %v", resp.Header)
		}
	}
}

// TestH1ClientHangsUp has a client leave while its request waits for a
// slow backend, and another while the stream it reads waits for its next
// piece, over plain TCP and over TLS (whose client sends close_notify
// before it closes): each exchange is abandoned, which the backend sees as
// its request cancelled, and the first counts as aborted, as on net/http.
func TestH1ClientHangsUp(t *testing.T) {
	f := newTLSFixture(t)
	for _, protocol := range []Protocol{HTTP, HTTPS} {
		t.Run(protocol.String(), func(t *testing.T) {
			cancelled := make(chan struct{}, 1)
			backend := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/events" {
					w.Header().Set("Content-Type", "text/event-stream")
					io.WriteString(w, "data: one\n\n")
					w.(http.Flusher).Flush()
				}
				select {
				case <-r.Context().Done():
					cancelled <- struct{}{}
				case <-time.After(5 * time.Second):
					io.WriteString(w, "too late")
				}
			}))
			opts := testOptions()
			opts.HTTP1Engine = EngineNative
			s := startServer(t, opts)
			s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
			ln := Listener{Address: "127.0.0.1:0", Protocol: protocol, Routes: compile(t, route("all", nil, router.Rule{Backends: backends("web")}))}
			dial := func() (net.Conn, *bufio.Reader) { return dialRaw(t, ln.Address) }
			if protocol == HTTPS {
				ln.TLS = f.store(t, "app.example.com")
				dial = func() (net.Conn, *bufio.Reader) {
					c, err := tls.Dial("tcp", ln.Address, &tls.Config{RootCAs: f.ca.Pool, ServerName: "app.example.com", NextProtos: []string{"http/1.1"}})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { c.Close() })
					c.SetDeadline(time.Now().Add(5 * time.Second))
					return c, bufio.NewReader(c)
				}
			}
			ln.Address = apply(t, s, ln)[0]

			c, _ := dial()
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
			time.Sleep(100 * time.Millisecond)
			c.Close()
			select {
			case <-cancelled:
			case <-time.After(3 * time.Second):
				t.Fatal("the backend still works for a client that left")
			}
			eventuallyMetric(t, s, 1, "hostgate_http_requests_total", "route", "HTTPRoute ns/all", "code", "aborted")

			c, br := dial()
			io.WriteString(c, "GET /events HTTP/1.1\r\nHost: a\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if event, err := bufio.NewReader(resp.Body).ReadString('\n'); event != "data: one\n" {
				t.Fatalf("first event %q, %v", event, err)
			}
			c.Close()
			select {
			case <-cancelled:
			case <-time.After(4 * time.Second):
				t.Fatal("the backend still streams to a client that left 4s ago")
			}
		})
	}
}
