package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hostgate/hostgate/internal/streamtest"
	"github.com/hostgate/hostgate/router"
)

// TestHTTP2EnginesAgree is a differential test of the two HTTP/2 server
// engines: the same requests, over h2 with TLS (ALPN) and over h2c with
// prior knowledge, through a Server on EngineNative and one on
// EngineStdlib that are otherwise alike (same options, routes and
// backends) must get the same answers: status, informational responses,
// header fields (but Date), body and trailers. The ports of the two
// servers' listeners differ, so they are written PORT wherever a header
// (Location, Alt-Svc) or a small body names them.
func TestHTTP2EnginesAgree(t *testing.T) {
	f := newTLSFixture(t)
	web := startBackend(t, diffBackend())
	grpcBackend := streamtest.StartGRPC(t, "127.0.0.1:0")
	down := deadAddr(t)

	rule := func(path string, filters ...router.Filter) router.Rule {
		return router.Rule{Matches: prefix(path), Filters: filters, Backends: backends("web")}
	}
	grpcRoute := func(name, service, backend string) router.Route {
		return router.Route{
			ID:        router.RouteID{Kind: router.KindGRPCRoute, Namespace: "ns", Name: name},
			Hostnames: []string{"grpc.test"},
			Rules:     []router.Rule{{Matches: []router.Match{{GRPC: &router.GRPCMatch{Service: service}}}, Backends: backends(backend)}},
		}
	}
	hosts := []string{"diff.test"}
	routes := []router.Route{
		route("web", hosts, rule("/")),
		route("hdr", hosts, rule("/hdr",
			router.Filter{Type: router.FilterRequestHeaderModifier, RequestHeaders: &router.HeaderModifier{
				Set: []router.Header{{Name: "X-Test", Value: "set"}}, Add: []router.Header{{Name: "X-Added", Value: "added"}}, Remove: []string{"X-Remove"},
			}},
			router.Filter{Type: router.FilterResponseHeaderModifier, ResponseHeaders: &router.HeaderModifier{
				Set: []router.Header{{Name: "X-Resp", Value: "yes"}}, Add: []router.Header{{Name: "X-Multi", Value: "three"}}, Remove: []string{"X-Drop"},
			}})),
		route("redirect", hosts, rule("/redirect", router.Filter{Type: router.FilterRequestRedirect, Redirect: &router.Redirect{
			Hostname: "elsewhere.test", StatusCode: 301,
		}})),
		route("redirect-path", hosts, rule("/moved", router.Filter{Type: router.FilterRequestRedirect, Redirect: &router.Redirect{
			Scheme: "https", Path: &router.PathModifier{Type: router.ReplacePrefixMatch, Value: "/new"},
		}})),
		route("down", hosts, router.Rule{Matches: prefix("/down"), Backends: backends("down")}),
		grpcRoute("echo", "test.Echo", "grpc"),
		grpcRoute("grpc-down", "test.Down", "down"),
	}
	tbl := compile(t, routes...)

	// One client per engine and listener, in the order requests are sent:
	// each server sees the same sequence.
	var clients []*diffClient
	for _, engine := range []Engine{EngineNative, EngineStdlib} {
		opts := testOptions()
		opts.HTTP2Engine = engine
		s := startServer(t, opts)
		s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: web}}, "grpc": {{Address: grpcBackend}}, "down": {{Address: down}}})
		addrs := apply(t, s,
			Listener{Address: freeAddr(t), Protocol: HTTPS, Routes: tbl, TLS: f.store(t, "diff.test!", "grpc.test", "nohost.test")},
			Listener{Address: freeAddr(t), Protocol: HTTP, Routes: tbl},
		)
		for i, scheme := range []string{"https", "http"} {
			clients = append(clients, newDiffClient(t, f, engine, scheme, addrs[i]))
		}
	}

	large := diffBytes(1<<20+12345, 1)
	upload := diffBytes(3<<20+777, 2)
	for _, tc := range diffCases(large, upload) {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]*diffOutcome{}
			for _, c := range clients {
				got[c.name] = c.do(t, &tc)
				if tc.check != nil {
					tc.check(t, c.name, got[c.name])
				}
			}
			if tc.differs != "" {
				t.Logf("not compared: %s", tc.differs)
				return
			}
			for _, scheme := range []string{"https", "http"} {
				native, stdlib := got[string(EngineNative)+"/"+scheme], got[string(EngineStdlib)+"/"+scheme]
				t.Logf("%s: native %s", scheme, native)
				if diffs := native.diff(stdlib); len(diffs) > 0 {
					t.Errorf("%s: the engines differ (native, then stdlib):\n\t%s", scheme, strings.Join(diffs, "\n\t"))
				}
			}
		})
	}

	t.Run("grpc-go unary calls", func(t *testing.T) {
		got := map[string]string{}
		for _, c := range clients {
			got[c.name] = c.grpcCalls(t, f)
		}
		for _, scheme := range []string{"https", "http"} {
			native, stdlib := got[string(EngineNative)+"/"+scheme], got[string(EngineStdlib)+"/"+scheme]
			if native != stdlib {
				t.Errorf("%s: the engines differ:\nnative:\n%s\nstdlib:\n%s", scheme, native, stdlib)
			}
		}
	})
}

// diffCase is a request sent to every client.
type diffCase struct {
	name, host, method, path string
	header                   []string // name, value pairs
	body                     func() io.Reader
	// unknownLength sends the body without Content-Length.
	unknownLength bool
	// trailer is sent after the body (which then has no length).
	trailer http.Header
	// knownLength sends a trailer after a body of declared length.
	knownLength bool
	// raw sends the request (a GET) in frames written here rather than
	// with net/http's client.
	raw bool
	// stream reads the body in step with /stream's flushes.
	stream bool
	// check, if set, checks an outcome on its own.
	check func(t *testing.T, client string, o *diffOutcome)
	// differs, if set, says why the engines' outcomes are not compared:
	// check alone says what both must do.
	differs string
}

func diffCases(large, upload []byte) []diffCase {
	bodyOf := func(b []byte) func() io.Reader { return func() io.Reader { return bytes.NewReader(b) } }
	status := func(code int) func(t *testing.T, client string, o *diffOutcome) {
		return func(t *testing.T, client string, o *diffOutcome) {
			if o.status != code {
				t.Errorf("%s: status %d, want %d", client, o.status, code)
			}
		}
	}
	grpcFrame := func(msg string) func() io.Reader {
		b := make([]byte, 5+len(msg))
		binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
		copy(b[5:], msg)
		return bodyOf(b)
	}
	grpcHeader := []string{"Content-Type", "application/grpc", "Te", "trailers", "Grpc-Timeout", "10S"}
	return []diffCase{
		{name: "GET small", path: "/small", check: status(200)},
		{name: "GET large with length", path: "/large", check: status(200)},
		{name: "GET large chunked", path: "/large-chunked", check: status(200)},
		{name: "GET echo", path: "/echo/a%2Fb?x=1&y=%20", header: []string{"X-Test", "client", "Accept", "text/plain", "Cookie", "a=1", "Cookie", "b=2"}, check: status(200)},
		{name: "HEAD small", method: http.MethodHead, path: "/small", check: status(200)},
		{name: "HEAD large", method: http.MethodHead, path: "/large", check: status(200)},
		{name: "HEAD large chunked", method: http.MethodHead, path: "/large-chunked", check: status(200)},
		{name: "POST small", method: http.MethodPost, path: "/echo", header: []string{"Content-Type", "text/plain"}, body: bodyOf([]byte("hello, backend")), check: status(200)},
		{name: "POST 3 MiB", method: http.MethodPost, path: "/echo", header: []string{"Content-Type", "application/octet-stream"}, body: bodyOf(upload), check: status(200)},
		{name: "POST 3 MiB unknown length", method: http.MethodPost, path: "/echo", header: []string{"Content-Type", "application/octet-stream"}, body: bodyOf(upload), unknownLength: true, check: status(200)},
		{name: "POST empty", method: http.MethodPost, path: "/echo", body: bodyOf(nil), check: status(200)},
		{name: "POST with request trailers", method: http.MethodPost, path: "/echo", header: []string{"Content-Type", "text/plain"}, body: bodyOf([]byte("body before trailers")),
			trailer: http.Header{"X-Req-Trailer": {"sent"}}, check: status(200)},
		{name: "POST with request trailers, known length", method: http.MethodPost, path: "/echo", header: []string{"Content-Type", "text/plain"}, body: bodyOf([]byte("body before trailers")),
			knownLength: true, trailer: http.Header{"X-Req-Trailer": {"sent"}}, check: status(200)},
		{name: "GET with a 20 KB request field", path: "/echo", header: []string{"X-Big", strings.Repeat("r", 20000)}, check: status(200)},
		// Sent frame by frame: net/http's client refuses to send what the
		// server's SETTINGS forbid, if they arrived in time.
		{name: "GET with a request field past MaxHeaderBytes", path: "/echo", header: []string{"X-Big", strings.Repeat("r", 100000)}, raw: true,
			differs: "the GOAWAY names the last stream handled: none on hostgate's engine, the refused one on net/http's",
			check: func(t *testing.T, client string, o *diffOutcome) {
				if !strings.Contains(o.err, "COMPRESSION_ERROR") {
					t.Errorf("%s: %s, want the connection closed with GOAWAY(COMPRESSION_ERROR)", client, o)
				}
			}},
		{name: "GET with request fields past MaxHeaderBytes in all", path: "/echo", header: slices.Repeat([]string{"X-Many", strings.Repeat("m", 8000)}, 10), raw: true,
			differs: "each engine answers 431 itself, without the proxy's handler; net/http's with an HTML body",
			check:   status(http.StatusRequestHeaderFieldsTooLarge)},
		{name: "GET in raw frames", path: "/small", raw: true, check: status(200)},
		{name: "PUT Expect 100-continue", method: http.MethodPut, path: "/echo", header: []string{"Content-Type", "text/plain", "Expect", "100-continue"}, body: bodyOf([]byte("after continue")),
			check: func(t *testing.T, client string, o *diffOutcome) {
				if o.status != 200 || !slices.Equal(o.got100, []int{100}) {
					t.Errorf("%s: status %d, informational %v; want 200 after 100", client, o.status, o.got100)
				}
			}},
		{name: "PUT Expect 100-continue large", method: http.MethodPut, path: "/echo", header: []string{"Content-Type", "application/octet-stream", "Expect", "100-continue"}, body: bodyOf(large), check: status(200)},
		{name: "Expect 100-continue to no route", host: "nohost.test", method: http.MethodPut, path: "/x", header: []string{"Content-Type", "text/plain", "Expect", "100-continue"}, body: bodyOf([]byte("never read")), check: status(404)},
		{name: "204", path: "/status/204", check: status(204)},
		{name: "304", path: "/status/304", header: []string{"If-None-Match", `"v1"`}, check: status(304)},
		{name: "500 with body", path: "/status/500", check: status(500)},
		{name: "299", path: "/status/299", check: status(299)},
		{name: "418", path: "/status/418", check: status(418)},
		{name: "empty body", path: "/empty", check: status(200)},
		{name: "20 KB response field", path: "/bigheader", check: status(200)},
		{name: "hop-by-hop response fields", path: "/hop", check: status(200)},
		{name: "backend cuts the body short", path: "/truncated"},
		{name: "103 early hints", path: "/early-hints",
			differs: "net/http's server relays no 1xx (relaysInformational)",
			check: func(t *testing.T, client string, o *diffOutcome) {
				want := 1
				if strings.HasPrefix(client, string(EngineStdlib)+"/") {
					want = 0
				}
				if o.status != 200 || len(o.informational) != want || want > 0 && !strings.Contains(o.informational[0], "Link:[</style.css>; rel=preload; as=style]") {
					t.Errorf("%s: %s, want 200 after %d Early Hints with their Link", client, o, want)
				}
			}},
		{name: "streamed with flushes", path: "/stream", stream: true, check: func(t *testing.T, client string, o *diffOutcome) {
			if o.status != 200 || string(o.body) != "chunk 0\nchunk 1\nchunk 2\nchunk 3\n" {
				t.Errorf("%s: status %d, body %q: a flushed chunk did not reach the client before the backend wrote the next", client, o.status, o.body)
			}
		}},
		{name: "backend trailers, TE trailers", path: "/trailers", header: []string{"Te", "trailers"}, check: status(200)},
		{name: "backend trailers, no TE", path: "/trailers", check: status(200)},
		{name: "backend trailers, large body", path: "/trailers?size=200000", header: []string{"Te", "trailers"}, check: status(200)},
		{name: "request header modifiers", path: "/hdr/x", header: []string{"X-Test", "client", "X-Added", "first", "X-Remove", "gone"}, check: status(200)},
		{name: "redirect hostname", path: "/redirect/a?q=1", check: status(301)},
		{name: "redirect scheme and prefix", path: "/moved/x/y", check: status(302)},
		{name: "route-less host", host: "nohost.test", path: "/", check: status(404)},
		{name: "route-less host POST", host: "nohost.test", method: http.MethodPost, path: "/", body: bodyOf(upload)},
		{name: "backend down", path: "/down"},
		{name: "backend down POST", method: http.MethodPost, path: "/down", body: bodyOf([]byte("lost"))},
		{name: "gRPC unary OK", host: "grpc.test", method: http.MethodPost, path: "/test.Echo/Say", header: grpcHeader, body: grpcFrame("hi"), check: status(200)},
		{name: "gRPC unary unimplemented by the backend", host: "grpc.test", method: http.MethodPost, path: "/test.Echo/Nope", header: grpcHeader, body: grpcFrame("hi"), check: status(200)},
		{name: "gRPC unary without route", host: "grpc.test", method: http.MethodPost, path: "/test.Missing/Any", header: grpcHeader, body: grpcFrame("hi")},
		{name: "gRPC unary backend down", host: "grpc.test", method: http.MethodPost, path: "/test.Down/Any", header: grpcHeader, body: grpcFrame("hi")},
	}
}

// diffBackend serves the answers the cases ask for. Every body has a
// Content-Type, which net/http would otherwise sniff.
func diffBackend() http.Handler {
	mux := http.NewServeMux()
	small := []byte("hello, small\n")
	large := diffBytes(1<<20+12345, 1)
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h["X-Multi"] = []string{"one", "two"}
		h.Set("Cache-Control", "max-age=60")
		h.Set("Set-Cookie", "s=1; Path=/")
		h.Add("Set-Cookie", "t=2; Path=/")
		w.Write(small)
	})
	mux.HandleFunc("/large", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(large)))
		w.Write(large)
	})
	mux.HandleFunc("/large-chunked", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		for b := large; len(b) > 0; {
			n := min(len(b), 100_000)
			w.Write(b[:n])
			b = b[n:]
		}
	})
	echo := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header()["X-Multi"] = []string{"one", "two"}
		w.Header().Set("X-Drop", "dropped by the response filter")
		var info strings.Builder
		fmt.Fprintf(&info, "method=%s proto=%s host=%s uri=%s\n", r.Method, r.Proto, r.Host, r.RequestURI)
		fmt.Fprintf(&info, "content-length=%d transfer-encoding=%q read-error=%v body-bytes=%d body-sha256=%x\n", r.ContentLength, r.TransferEncoding, err, len(body), sha256.Sum256(body))
		for _, k := range slices.Sorted(maps.Keys(r.Header)) {
			if k != "X-Request-Id" {
				fmt.Fprintf(&info, "header %s=%q\n", k, r.Header[k])
			}
		}
		for _, k := range slices.Sorted(maps.Keys(r.Trailer)) {
			fmt.Fprintf(&info, "trailer %s=%q\n", k, r.Trailer[k])
		}
		if len(body) <= 1024 {
			fmt.Fprintf(&info, "body=%q\n", body)
		}
		io.WriteString(w, info.String())
		w.Write(body)
	}
	mux.HandleFunc("/echo", echo)
	mux.HandleFunc("/echo/", echo)
	mux.HandleFunc("/hdr/", echo)
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		w.Header().Set("X-Status", r.PathValue("code"))
		switch code {
		case http.StatusNoContent:
		case http.StatusNotModified:
			w.Header().Set("Etag", `"v1"`)
			w.Header().Set("Cache-Control", "max-age=60")
		default:
			w.Header().Set("Content-Type", "text/plain")
		}
		w.WriteHeader(code)
		if code != http.StatusNoContent && code != http.StatusNotModified {
			io.WriteString(w, "status body\n")
		}
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
	})
	mux.HandleFunc("/bigheader", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Big", strings.Repeat("b", 20000))
		w.Header().Set("X-After-Big", "still here")
		io.WriteString(w, "big header\n")
	})
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/plain")
		h.Set("Connection", "keep-alive, X-Hop")
		h.Set("X-Hop", "must not pass")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Proxy-Connection", "keep-alive")
		h.Set("Upgrade", "h2c")
		io.WriteString(w, "hop\n")
	})
	mux.HandleFunc("/truncated", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "100000")
		w.Write(bytes.Repeat([]byte("c"), 50000))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	})
	mux.HandleFunc("/early-hints", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "after hints\n")
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		next := diffStreamStep(r.URL.Query().Get("token"))
		for i := range 4 {
			fmt.Fprintf(w, "chunk %d\n", i)
			w.(http.Flusher).Flush()
			if i < 3 {
				select {
				case <-next:
				case <-time.After(3 * time.Second):
					io.WriteString(w, "(the client did not see the chunk)\n")
				}
			}
		}
	})
	mux.HandleFunc("/trailers", func(w http.ResponseWriter, r *http.Request) {
		size, _ := strconv.Atoi(r.URL.Query().Get("size"))
		h := w.Header()
		h.Set("Content-Type", "text/plain")
		h.Set("Trailer", "X-Checksum, X-Count")
		h.Set("X-Req-Te", strings.Join(r.Header.Values("Te"), ","))
		io.WriteString(w, "body with trailers\n")
		if size > 0 {
			w.Write(bytes.Repeat([]byte("t"), size))
		}
		h.Set("X-Checksum", "abc123")
		h["X-Count"] = []string{"3", "4"}
		h.Set(http.TrailerPrefix+"X-Undeclared", "late")
	})
	return mux
}

// diffStreams are the steps of /stream's requests in flight, by token: the
// client sends one when it has read a chunk.
var diffStreams sync.Map

func diffStreamStep(token string) chan struct{} {
	ch, _ := diffStreams.LoadOrStore(token, make(chan struct{}, 4))
	return ch.(chan struct{})
}

// diffBytes is n pseudo-random bytes, the same for the same seed.
func diffBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 42))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(b[i:], w[:])
	}
	return b
}

// diffClient speaks HTTP/2 to one listener of one engine's server.
type diffClient struct {
	name, scheme, addr, port string
	engine                   Engine
	client                   *http.Client
	roots                    *x509.CertPool
}

func newDiffClient(t *testing.T, f *tlsFixture, engine Engine, scheme, addr string) *diffClient {
	_, port, _ := net.SplitHostPort(addr)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		DisableCompression:    true,
		ExpectContinueTimeout: 5 * time.Second,
		Protocols:             new(http.Protocols),
	}
	if scheme == "https" {
		tr.TLSClientConfig = &tls.Config{RootCAs: f.ca.Pool, MinVersion: tls.VersionTLS12}
		tr.Protocols.SetHTTP2(true)
	} else {
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &diffClient{
		name: string(engine) + "/" + scheme, scheme: scheme, addr: addr, port: port, engine: engine, roots: f.ca.Pool,
		client: &http.Client{Transport: tr, Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
}

// streamIDs are named by the client's errors: which one a request gets
// depends on the requests before it on the connection.
var streamIDs = regexp.MustCompile(`stream ID [0-9]+`)

// diffOutcome is what a client got, ports written PORT.
type diffOutcome struct {
	err           string
	proto         string
	status        int
	got100        []int    // 100 Continue, seen by Got100Continue
	informational []string // other 1xx responses, with their fields
	header        http.Header
	// announced are the trailer names the header announced.
	announced     []string
	contentLength int64
	body          []byte
	trailer       http.Header
}

func (c *diffClient) do(t *testing.T, tc *diffCase) *diffOutcome {
	t.Helper()
	method, host := tc.method, tc.host
	if method == "" {
		method = http.MethodGet
	}
	if host == "" {
		host = "diff.test"
	}
	path := tc.path
	token := ""
	if tc.stream {
		token = t.Name() + "/" + c.name
		path += "?token=" + url.QueryEscape(token)
	}
	var body io.Reader
	if tc.body != nil {
		body = tc.body()
		if tc.unknownLength || tc.trailer != nil && !tc.knownLength {
			body = struct{ io.Reader }{body}
		}
	}
	if tc.raw {
		return c.doRaw(t, host, path, tc.header)
	}
	o := &diffOutcome{}
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got100Continue: func() { o.got100 = append(o.got100, 100) },
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			if code != http.StatusContinue {
				o.informational = append(o.informational, fmt.Sprintf("%d %v", code, c.normalizeHeader(http.Header(h))))
			}
			return nil
		},
	})
	req, err := http.NewRequestWithContext(ctx, method, c.scheme+"://"+host+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(tc.header); i += 2 {
		req.Header.Add(tc.header[i], tc.header[i+1])
	}
	if tc.trailer != nil {
		req.Trailer = http.Header{}
		for k := range tc.trailer {
			req.Trailer[k] = nil
		}
		req.Body = trailerSetter{req.Body, req, tc.trailer}
	}
	start := time.Now()
	resp, err := c.client.Do(req)
	if d := time.Since(start); d > time.Second {
		t.Logf("%s: the answer took %v", c.name, d)
	}
	if err != nil {
		o.err = "request: " + c.normalize(err.Error())
		return o
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Errorf("%s: %s, want HTTP/2", c.name, resp.Proto)
	}
	o.proto, o.status, o.contentLength = resp.Proto, resp.StatusCode, resp.ContentLength
	o.header = c.normalizeHeader(resp.Header)
	delete(o.header, "Date")
	o.announced = slices.Sorted(maps.Keys(resp.Trailer))
	if tc.stream {
		next := diffStreamStep(token)
		for i := range 3 {
			chunk := make([]byte, len("chunk 0\n"))
			if _, err := io.ReadFull(resp.Body, chunk); err != nil {
				o.err = fmt.Sprintf("read chunk %d: %v", i, err)
				return o
			}
			o.body = append(o.body, chunk...)
			next <- struct{}{}
		}
	}
	rest, err := io.ReadAll(resp.Body)
	o.body = append(o.body, rest...)
	if err != nil {
		o.err = "read body: " + c.normalize(err.Error())
	}
	if len(o.body) <= 64<<10 {
		o.body = []byte(c.normalize(string(o.body)))
	}
	o.trailer = c.normalizeHeader(resp.Trailer)
	return o
}

// trailerSetter fills in the request's trailer when its body ends, as
// net/http's client reads it then.
type trailerSetter struct {
	io.ReadCloser
	req     *http.Request
	trailer http.Header
}

func (b trailerSetter) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		maps.Copy(b.req.Trailer, b.trailer)
	}
	return n, err
}

// doRaw sends a GET in HTTP/2 frames on a new connection and reads the
// answer, or the connection's end, frame by frame.
func (c *diffClient) doRaw(t *testing.T, host, path string, fields []string) *diffOutcome {
	t.Helper()
	var conn net.Conn
	var err error
	if c.scheme == "https" {
		conn, err = tls.Dial("tcp", c.addr, &tls.Config{RootCAs: c.roots, ServerName: host, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
	} else {
		conn, err = net.Dial("tcp", c.addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fr := http2.NewFramer(conn, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = 1 << 20
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", c.scheme}, {":authority", host}, {":path", path}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := 0; i+1 < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: strings.ToLower(fields[i]), Value: fields[i+1]})
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	const maxFrame = 16384 // the least SETTINGS_MAX_FRAME_SIZE
	b := block.Bytes()
	first := b[:min(len(b), maxFrame)]
	b = b[len(first):]
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndStream: true, EndHeaders: len(b) == 0}); err != nil {
		t.Fatal(err)
	}
	for len(b) > 0 {
		n := min(len(b), maxFrame)
		if err := fr.WriteContinuation(1, n == len(b), b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}

	start := time.Now()
	o := &diffOutcome{}
	var events []string
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if err == io.EOF || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) {
				events = append(events, "connection closed")
			} else {
				events = append(events, "read: "+c.normalize(err.Error()))
			}
			break
		}
		end := false
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			if o.status != 0 {
				o.trailer = http.Header{}
				for _, hf := range f.RegularFields() {
					o.trailer.Add(hf.Name, c.normalize(hf.Value))
				}
			} else {
				o.proto, o.header = "HTTP/2.0", http.Header{}
				o.status, _ = strconv.Atoi(f.PseudoValue("status"))
				for _, hf := range f.RegularFields() {
					if hf.Name != "date" {
						o.header.Add(hf.Name, c.normalize(hf.Value))
					}
				}
			}
			end = f.StreamEnded()
		case *http2.DataFrame:
			o.body = append(o.body, f.Data()...)
			end = f.StreamEnded()
		case *http2.RSTStreamFrame:
			events = append(events, fmt.Sprintf("RST_STREAM %v", f.ErrCode))
			end = true
		case *http2.GoAwayFrame:
			events = append(events, fmt.Sprintf("GOAWAY last stream %d, %v, debug %q", f.LastStreamID, f.ErrCode, f.DebugData()))
		}
		if end {
			break
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("%s: the answer took %v", c.name, d)
	}
	o.err = strings.Join(events, "; ")
	return o
}

func (c *diffClient) normalize(s string) string {
	s = streamIDs.ReplaceAllString(s, "stream ID N")
	s = strings.ReplaceAll(s, c.addr, "ADDR")
	return strings.ReplaceAll(s, ":"+c.port, ":PORT")
}

func (c *diffClient) normalizeHeader(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for k, vv := range h {
		nv := make([]string, len(vv))
		for i, v := range vv {
			nv[i] = c.normalize(v)
		}
		out[k] = nv
	}
	return out
}

// String summarizes o for the verbose log.
func (o *diffOutcome) String() string {
	short := func(b []byte) string {
		if len(b) > 600 {
			return fmt.Sprintf("%q... (%d bytes)", b[:600], len(b))
		}
		return fmt.Sprintf("%q", b)
	}
	header := make(http.Header, len(o.header))
	for k, vv := range o.header {
		for _, v := range vv {
			header[k] = append(header[k], short([]byte(v)))
		}
	}
	return fmt.Sprintf("error=%q %s %d 100=%v 1xx=%v header=%v announced=%v trailer=%v body=%s", o.err, o.proto, o.status, o.got100, o.informational, header, o.announced, o.trailer, short(o.body))
}

// diff lists how o and p differ.
func (o *diffOutcome) diff(p *diffOutcome) []string {
	var d []string
	cmp := func(what string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			d = append(d, fmt.Sprintf("%s: %v | %v", what, a, b))
		}
	}
	cmp("error", o.err, p.err)
	cmp("proto", o.proto, p.proto)
	cmp("status", o.status, p.status)
	cmp("100 Continue", o.got100, p.got100)
	cmp("informational responses", o.informational, p.informational)
	cmp("resp.ContentLength", o.contentLength, p.contentLength)
	d = append(d, diffHeaders("header", o.header, p.header)...)
	cmp("announced trailers", o.announced, p.announced)
	d = append(d, diffHeaders("trailer", o.trailer, p.trailer)...)
	if !bytes.Equal(o.body, p.body) {
		d = append(d, diffBodies(o.body, p.body))
	}
	return d
}

func diffHeaders(what string, a, b http.Header) []string {
	var d []string
	keys := slices.Sorted(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		va, oka := a[k]
		vb, okb := b[k]
		if oka != okb || !slices.Equal(va, vb) {
			d = append(d, fmt.Sprintf("%s %s: %s | %s", what, k, fieldValues(va, oka), fieldValues(vb, okb)))
		}
	}
	return d
}

func fieldValues(vv []string, ok bool) string {
	if !ok {
		return "(absent)"
	}
	return fmt.Sprintf("%q", vv)
}

func diffBodies(a, b []byte) string {
	if len(a) <= 2048 && len(b) <= 2048 {
		return fmt.Sprintf("body:\n%q\n| %q", a, b)
	}
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	excerpt := func(p []byte) []byte { return p[i:min(len(p), i+64)] }
	return fmt.Sprintf("body: %d bytes (sha256 %x) | %d bytes (sha256 %x); first difference at offset %d: %q | %q",
		len(a), sha256.Sum256(a), len(b), sha256.Sum256(b), i, excerpt(a), excerpt(b))
}

// grpcCalls makes unary calls with grpc-go and describes their outcomes:
// codes, messages and metadata, but for the date.
func (c *diffClient) grpcCalls(t *testing.T, f *tlsFixture) string {
	creds := insecure.NewCredentials()
	if c.scheme == "https" {
		creds = credentials.NewTLS(&tls.Config{RootCAs: f.ca.Pool, ServerName: "grpc.test", MinVersion: tls.VersionTLS12})
	}
	conn, err := grpc.NewClient("passthrough:///"+c.addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithAuthority("grpc.test"),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(streamtest.RawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var b strings.Builder
	for _, method := range []string{"/test.Echo/Say", "/test.Echo/Nope", "/test.Missing/Any", "/test.Down/Any"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		in, out := []byte("hi"), []byte(nil)
		var header, trailer metadata.MD
		err := conn.Invoke(ctx, method, &in, &out, grpc.Header(&header), grpc.Trailer(&trailer))
		cancel()
		// A trailers-only answer (an error) has its Date among the
		// trailer: two calls a second apart differ there.
		delete(header, "date")
		delete(trailer, "date")
		st := status.Convert(err)
		fmt.Fprintf(&b, "%s: code=%v message=%q out=%q header=%v trailer=%v\n", method, st.Code(), c.normalize(st.Message()), out, c.normalizeMD(header), c.normalizeMD(trailer))
	}
	return b.String()
}

func (c *diffClient) normalizeMD(md metadata.MD) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(md)) {
		fmt.Fprintf(&b, "%s=%q ", k, c.normalize(strings.Join(md[k], ",")))
	}
	return b.String()
}
