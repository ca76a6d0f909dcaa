package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/qpack"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/quicvarint"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/hostgate/hostgate/router"
)

// TestBridge sends HTTP/2 requests of every kind the bridge takes to an
// HTTP/1.1 backend: bodies, HEAD, a streamed response with a trailer,
// Early Hints, split cookies, a response cut short, a timeout, and clients
// that leave before the response and in mid-stream. The backend's
// connection serves them in turn.
func TestBridge(t *testing.T) {
	var conns atomic.Int64
	left := make(chan struct{}, 1)
	mux := framingMux()
	mux.HandleFunc("/cookie", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Join(r.Header.Values("Cookie"), "|"))
	})
	mux.HandleFunc("/open", func(w http.ResponseWriter, r *http.Request) {
		// Full duplex: net/http's server would otherwise wait for the
		// end of a body it was not asked to read before it answers.
		http.NewResponseController(w).EnableFullDuplex()
		w.Header().Set("Content-Length", "4")
		io.WriteString(w, "open")
	})
	mux.HandleFunc("/hints", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		io.WriteString(w, "done")
	})
	mux.HandleFunc("/cut", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "12345") // and the server closes the connection
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/hold", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		left <- struct{}{}
	})
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		left <- struct{}{}
	})
	srv := &http.Server{Handler: mux, ConnState: countConns(&conns)}
	backend := startBackendServer(t, srv)

	opts := testOptions()
	bridgingEngine(&opts)
	s := startServer(t, opts)
	// sink reads nothing of an upload for a second, and never answers: it
	// tells when the proxy closes the connection. (net/http's server
	// would not notice while its handler leaves the body unread.)
	sink := rawBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		time.Sleep(time.Second)
		c.SetReadDeadline(time.Now().Add(4 * time.Second))
		if _, err := io.Copy(io.Discard, br); !errors.Is(err, os.ErrDeadlineExceeded) {
			left <- struct{}{}
		}
	})
	// lines tells the request lines it gets, as a lenient backend would
	// take them.
	lines := make(chan string, 1)
	lineBackend := rawBackend(t, func(c net.Conn) {
		line, _ := bufio.NewReader(c).ReadString('\n')
		lines <- line
		io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
	})
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}, "sink": {{Address: sink}}, "lines": {{Address: lineBackend}}})
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t,
		route("all", nil, router.Rule{Matches: prefix("/"), Backends: backends("web")}),
		route("lines", nil, router.Rule{Matches: prefix("/lines"), Backends: backends("lines")}),
		route("sink", nil, router.Rule{Matches: prefix("/sink"), Backends: backends("sink")}),
		route("slow", nil, router.Rule{Matches: prefix("/slow"), Backends: backends("web"), Timeouts: router.Timeouts{Request: 200 * time.Millisecond}}),
	)})[0]
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	base := "http://" + addr

	// do fails only where the exchange breaks off: a failure of a
	// response cut short may come before its head or in its body.
	do := func(method, path, body string, header ...string) (*http.Response, string, error) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body == "" {
			req.Body = http.NoBody
		}
		req.Host = "a.test"
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Add(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			return &http.Response{}, "", err
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 {
			t.Errorf("%s %s: answered over %s", method, path, resp.Proto)
		}
		return resp, string(got), err
	}

	resp, body, _ := do("POST", "/echo?q=1", "hello", "X-Test", "kept", "Forwarded", "for=10.0.0.1")
	for _, want := range []string{"proto=HTTP/1.1 method=POST host=a.test path=/echo query=q=1 body=hello\n", "X-Forwarded-For=127.0.0.1\n", "X-Forwarded-Proto=http\n", "X-Forwarded-Host=a.test\n", "X-Test=kept\n", "Forwarded=\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("POST: backend saw no %q:\n%s", want, body)
		}
	}
	if resp.Header.Get("X-Backend") != "b" || resp.Header.Get("X-Hop") != "" {
		t.Errorf("POST: response fields %v, want X-Backend and no field the backend's Connection names", resp.Header)
	}
	resp, body, _ = do("GET", "/stream", "")
	if body != "one,two" || resp.Trailer.Get("X-Sum") != "2" {
		t.Errorf("stream: %q, trailer %v; want one,two and X-Sum: 2", body, resp.Trailer)
	}
	resp, body, _ = do("HEAD", "/head", "")
	if resp.StatusCode != 200 || resp.ContentLength != 7 || body != "" {
		t.Errorf("HEAD: %d, length %d, body %q", resp.StatusCode, resp.ContentLength, body)
	}
	if _, body, _ = do("GET", "/head", ""); body != "content" {
		t.Errorf("GET after HEAD: %q", body)
	}
	if _, body, _ = do("GET", "/cookie", "", "Cookie", "a=1", "Cookie", "b=2"); body != "a=1; b=2" {
		t.Errorf("cookies reached the backend as %q, want one field a=1; b=2", body)
	}

	var hints []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		hints = append(hints, fmt.Sprintf("%d %s", code, h.Get("Link")))
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", base+"/hints", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	final, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantHints := []string{"103 </style.css>; rel=preload"}
	if opts.HTTP2Engine == EngineStdlib {
		// net/http's HTTP/2 server relays none (relaysInformational).
		wantHints = nil
	}
	if !slices.Equal(hints, wantHints) || string(final) != "done" || resp.Header.Get("Link") != "" {
		t.Errorf("Early Hints: %q, then %q with Link %q; want %q, then done without", hints, final, resp.Header.Get("Link"), wantHints)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("the backend saw %d connections for requests one after another, want 1 kept alive", n)
	}
	if n := idleInPool(s, backend); n != 1 {
		t.Errorf("the engine's pool holds %d connections to the backend, want the one the bridge used (net/http's Transport would hold it otherwise)", n)
	}

	if _, body, err = do("GET", "/cut", ""); err == nil {
		t.Errorf("a response the backend cut short read whole: %q", body)
	}
	start := time.Now()
	if resp, _, _ = do("GET", "/slow", ""); resp.StatusCode != http.StatusGatewayTimeout || time.Since(start) > 3*time.Second {
		t.Errorf("past the rule's timeout: %d after %v, want 504 after 200ms", resp.StatusCode, time.Since(start))
	}

	ctx, cancel := context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx, "GET", base+"/events", nil)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-left:
	case <-time.After(5 * time.Second):
		t.Error("the backend still streams to a client that left 5s ago")
	}

	// A client that leaves while the backend has yet to answer.
	ctx, cancel = context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx, "GET", base+"/hold", nil)
	time.AfterFunc(300*time.Millisecond, cancel)
	if _, err := client.Do(req); err == nil {
		t.Error("a request canceled before its response got one")
	}
	select {
	case <-left:
	case <-time.After(5 * time.Second):
		t.Error("the backend still holds a request whose client left 5s ago")
	}

	// A GET whose client keeps its stream open, as one streaming a body
	// of unknown length does: the backend has the request at once (or
	// after the 200ms net/http's Transport waits for a body's end), not
	// when the client ends the stream.
	stream, keepOpen := io.Pipe()
	req, _ = http.NewRequest("GET", base+"/open", stream)
	req.Host = "a.test"
	start = time.Now()
	resp, err = client.Do(req)
	if err != nil {
		t.Errorf("GET with its stream left open: %v after %v", err, time.Since(start))
	} else {
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != "open" || time.Since(start) > 3*time.Second {
			t.Errorf("GET with its stream left open: %q after %v, want open at once", got, time.Since(start))
		}
	}
	keepOpen.Close()

	// A client that gives up on an upload the backend does not read.
	upload, feed := io.Pipe()
	ctx, cancel = context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx, "POST", base+"/sink", upload)
	req.ContentLength = 1 << 20
	go feed.Write(make([]byte, 256<<10))
	time.AfterFunc(300*time.Millisecond, cancel)
	client.Do(req)
	feed.Close()
	select {
	case <-left:
	case <-time.After(5 * time.Second):
		t.Error("the backend still waits on an upload whose client left 5s ago")
	}

	// A method net/http's HTTP/2 server lets through, which is no token:
	// written as it came it would be a request line of its own.
	c := dialH2(t, func(t *testing.T, _ string) net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	})
	c.hbuf.Reset()
	for _, f := range [][2]string{{":method", "GET /admin HTTP/1.1\tx"}, {":scheme", "http"}, {":authority", "a.test"}, {":path", "/lines"}} {
		c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.hbuf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	c.bw.Flush()
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	c.response(t, 1)
	select {
	case line := <-lines:
		t.Errorf("a method with a space and a tab in it reached the backend as the request line %q", line)
	default:
	}
}

// idleInPool counts the idle connections to addr in the engine's pool.
func idleInPool(s *Server, addr string) int {
	return s.pool.IdleConns(addr)
}

// bridgingEngine keeps the HTTP/1.1 engine the tests run on (the
// default, the loop, or native) unless it is stdlib, which has no pool to
// bridge over.
func bridgingEngine(opts *Options) {
	if opts.HTTP1Engine == EngineStdlib {
		opts.HTTP1Engine = EngineNative
	}
}

// http3BridgeServer serves app.example.com over HTTPS and HTTP/3 with the
// native engine, from an echoing backend.
func http3BridgeServer(t *testing.T) (*tlsFixture, *Server, string, string) {
	f := newTLSFixture(t)
	opts := testOptions()
	bridgingEngine(&opts)
	s := startServer(t, opts)
	backend := startBackend(t, echo("web"))
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
	addr := apply(t, s, Listener{
		Address: "127.0.0.1:0", Protocol: HTTPS, TLS: f.store(t, "app.example.com"),
		Routes: compile(t, route("web", nil, router.Rule{Backends: backends("web")})),
	})[0]
	return f, s, backend, addr
}

// TestBridgeHTTP3 sends HTTP/3 requests through the bridge: a GET, which
// quic-go gives a body of unknown length, is found to have none and
// bridged; a GET and a POST with bodies of unknown length, announced by
// Content-Type, go through ReverseProxy with the body whole.
func TestBridgeHTTP3(t *testing.T) {
	f, s, backend, addr := http3BridgeServer(t)
	h3 := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool, MinVersion: tls.VersionTLS13},
		Dial: func(ctx context.Context, _ string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
			return quic.DialAddr(ctx, addr, tlsCfg, cfg)
		},
	}
	t.Cleanup(func() { h3.Close() })
	client := &http.Client{Transport: h3, Timeout: 10 * time.Second}

	resp, body := get(t, client, "https://app.example.com/x")
	if resp.ProtoMajor != 3 || !strings.Contains(body, "method=GET host=app.example.com path=/x query= body=\n") {
		t.Errorf("GET over %s: %q", resp.Proto, body)
	}
	if n := idleInPool(s, backend); n != 1 {
		t.Errorf("after an HTTP/3 GET the engine's pool holds %d connections to the backend, want the one the bridge used", n)
	}
	for _, method := range []string{"GET", "POST"} {
		// No length: the client streams it.
		req, _ := http.NewRequest(method, "https://app.example.com/x", io.MultiReader(strings.NewReader("pay"), strings.NewReader("load")))
		req.Header.Set("Content-Type", "text/plain")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(got), "method="+method+" host=app.example.com path=/x query= body=payload\n") {
			t.Errorf("%s with a body of unknown length: %d %q", method, resp.StatusCode, got)
		}
	}
}

// TestBridgeHTTP3OpenStream sends HTTP/3 GETs on request streams the
// client opens itself. One whose client keeps its side open until it has
// the response (HEADERS without FIN) is answered, bodiless, without the
// 200ms the bridge waits for a body announced by Content-Type. One whose
// announced body follows the HEADERS later in DATA frames of their own,
// and one whose unannounced body came with the HEADERS, reach the backend
// whole.
func TestBridgeHTTP3OpenStream(t *testing.T) {
	f, _, _, addr := http3BridgeServer(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := f.h3Transport(t, addr)
	qc, err := quic.DialAddr(ctx, addr, &tls.Config{
		ServerName: "app.example.com", RootCAs: f.ca.Pool, MinVersion: tls.VersionTLS13,
		NextProtos: []string{http3.NextProtoH3},
	}, &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	cc := tr.NewClientConn(qc)

	for _, tt := range []struct {
		name        string
		contentType string
		body        string // written after the HEADERS, then FIN; "" leaves the stream open
	}{
		{"stream left open", "", ""},
		{"announced body after the header", "text/plain", "payload"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A failing case fails within this bound rather than hanging.
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			deadline, _ := ctx.Deadline()
			str, err := cc.OpenRequestStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer str.CancelWrite(0)
			_ = str.SetReadDeadline(deadline)
			req, _ := http.NewRequest(http.MethodGet, "https://app.example.com/open", nil)
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			start := time.Now()
			if err := str.SendRequestHeader(req); err != nil {
				t.Fatal(err)
			}
			if tt.body != "" {
				// Past the packet that carried the HEADERS.
				time.Sleep(20 * time.Millisecond)
				if _, err := io.WriteString(str, tt.body); err != nil {
					t.Fatal(err)
				}
				if err := str.Close(); err != nil {
					t.Fatal(err)
				}
			}
			resp, err := str.ReadResponse()
			if err != nil {
				t.Fatalf("no response (the stream still open): %v", err)
			}
			elapsed := time.Since(start)
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("reading the response body: %v", err)
			}
			want := "method=GET host=app.example.com path=/open query= body=" + tt.body + "\n"
			if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Backend") != "web" || !strings.Contains(string(got), want) {
				t.Errorf("got %d %q, want 200 from the backend with %q", resp.StatusCode, got, want)
			}
			t.Logf("response after %v", elapsed)
			if tt.body == "" && elapsed > 100*time.Millisecond {
				t.Errorf("the response to a GET on an open stream came after %v: the bridge waited for a body nothing announced", elapsed)
			}
		})
	}

	t.Run("unannounced body with the header", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		status, got := rawH3Get(t, ctx, qc, "/open", "payload")
		want := "method=GET host=app.example.com path=/open query= body=payload\n"
		if status != "200" || !strings.Contains(got, want) {
			t.Errorf("got %s %q, want 200 from the backend with %q", status, got, want)
		}
	})
}

// rawH3Get sends a GET for path on a stream of qc with body in the same
// write as the HEADERS, so that both arrive in one STREAM frame, and ends
// the stream; it returns the response's status and body. http3's request
// streams write the HEADERS on their own.
func rawH3Get(t *testing.T, ctx context.Context, qc *quic.Conn, path, body string) (status, respBody string) {
	t.Helper()
	str, err := qc.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer str.CancelRead(0)
	deadline, _ := ctx.Deadline()
	_ = str.SetReadDeadline(deadline)
	var fields bytes.Buffer
	enc := qpack.NewEncoder(&fields)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "app.example.com"}, {":path", path}} {
		if err := enc.WriteField(qpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	const frameData, frameHeaders = 0x0, 0x1
	msg := quicvarint.Append(nil, frameHeaders)
	msg = quicvarint.Append(msg, uint64(fields.Len()))
	msg = append(msg, fields.Bytes()...)
	msg = quicvarint.Append(msg, frameData)
	msg = quicvarint.Append(msg, uint64(len(body)))
	msg = append(msg, body...)
	if _, err := str.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := str.Close(); err != nil {
		t.Fatal(err)
	}
	r := quicvarint.NewReader(str)
	var got []byte
	for {
		typ, err := quicvarint.Read(r)
		if err == io.EOF {
			return status, string(got)
		}
		if err != nil {
			t.Fatalf("reading the response: %v", err)
		}
		n, err := quicvarint.Read(r)
		if err != nil {
			t.Fatalf("reading the response: %v", err)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(str, payload); err != nil {
			t.Fatalf("reading the response: %v", err)
		}
		switch typ {
		case frameHeaders:
			next := qpack.NewDecoder().Decode(payload)
			for {
				hf, err := next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("decoding the response's fields: %v", err)
				}
				if hf.Name == ":status" {
					status = hf.Value
				}
			}
		case frameData:
			got = append(got, payload...)
		}
	}
}
