package h2

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// stdlibH2C runs net/http's server on a loopback socket for h2c with prior
// knowledge only, and returns its base URL.
func stdlibH2C(t *testing.T, h http.Handler, configure func(*http.Server)) string {
	t.Helper()
	srv := &http.Server{Handler: h, Protocols: new(http.Protocols)}
	srv.Protocols.SetUnencryptedHTTP2(true)
	if configure != nil {
		configure(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// clientOf is an http.Client over a Transport of our own, closed with the
// test.
func clientOf(t *testing.T, tr *Transport) *http.Client {
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// TestClientExchanges sends every kind of request through the Transport,
// to net/http's server and to ours.
func TestClientExchanges(t *testing.T) {
	t.Run("net/http", func(t *testing.T) {
		exercise(t, clientOf(t, &Transport{}), stdlibH2C(t, kinds(t), nil))
	})
	t.Run("hostgate", func(t *testing.T) {
		_, base := serve(t, &Server{Handler: kinds(t)})
		exercise(t, clientOf(t, &Transport{}), base)
	})
}

// TestClientRespectsMaxStreams sends many requests at once to a server
// that takes two streams per connection: every one is answered, over
// more than one connection, and no connection carries more than two.
func TestClientRespectsMaxStreams(t *testing.T) {
	var (
		mu       sync.Mutex
		perConn  = map[string]int{}
		mostOpen int
	)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		perConn[r.RemoteAddr]++
		mostOpen = max(mostOpen, perConn[r.RemoteAddr])
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		perConn[r.RemoteAddr]--
		mu.Unlock()
		w.Write(b)
	})
	base := stdlibH2C(t, h, func(s *http.Server) { s.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 2} })
	client := clientOf(t, &Transport{})
	// The first request lets the server's SETTINGS arrive before the
	// burst: until then a connection assumes 100 streams.
	if resp, err := client.Get(base); err == nil {
		resp.Body.Close()
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			want := fmt.Sprint(i)
			resp, err := client.Post(base, "text/plain", strings.NewReader(want))
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != want {
				t.Errorf("request %d: got %q", i, b)
			}
		})
	}
	wg.Wait()
	if len(perConn) < 2 || mostOpen > 2 {
		t.Errorf("%d connections, at most %d streams open on one; want several, at most 2", len(perConn), mostOpen)
	}
}

// TestClientTLS speaks h2 over TLS, and refuses a backend that does not
// agree on h2 in ALPN.
func TestClientTLS(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s tls=%v", r.Proto, r.TLS != nil)
	})
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	client := clientOf(t, &Transport{TLSClientConfig: &tls.Config{RootCAs: roots}})
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "HTTP/2.0 tls=true" {
		t.Errorf("got %q", b)
	}

	h1 := httptest.NewTLSServer(h)
	defer h1.Close()
	roots.AddCert(h1.Certificate())
	if resp, err := client.Get(h1.URL); err == nil {
		resp.Body.Close()
		t.Errorf("a backend without h2 answered %s", resp.Proto)
	}
}

// rawServer accepts connections on a loopback socket and hands the first
// to first, after the preface and SETTINGS, the others to a Server of
// ours with h.
func rawServer(t *testing.T, first func(fr *http2.Framer, nc net.Conn), h http.Handler) (string, *atomic.Int32) {
	t.Helper()
	var mu sync.Mutex
	var raw []net.Conn
	addr, accepted := serveConns(t, &Server{Handler: h}, func(nc net.Conn) {
		mu.Lock()
		raw = append(raw, nc)
		mu.Unlock()
		defer nc.Close()
		preface := make([]byte, len(clientPreface))
		if _, err := io.ReadFull(nc, preface); err != nil {
			return
		}
		fr := http2.NewFramer(nc, nc)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		fr.WriteSettings()
		first(fr, nc)
	})
	// Before serveConns' cleanup waits for the connection's goroutine:
	// a client connection still open would leave it reading.
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, nc := range raw {
			nc.Close()
		}
	})
	return "http://" + addr, accepted
}

// writeOK writes a response header of status 200 on stream id, ending it
// if end.
func writeOK(fr *http2.Framer, id uint32, end bool) {
	var block bytes.Buffer
	hpack.NewEncoder(&block).WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true, EndStream: end})
}

// readHeadersOf reads frames until a request's HEADERS, reporting its
// stream.
func readHeadersOf(fr *http2.Framer) (uint32, error) {
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return 0, err
		}
		if hf, ok := f.(*http2.MetaHeadersFrame); ok {
			return hf.StreamID, nil
		}
	}
}

// TestClientRetriesUnprocessed has a backend refuse a request, and another
// go away without it: both are sent again, the second on a new
// connection, as the backend cannot have acted on them; a request whose
// body was being sent, and is not kept whole, is not.
func TestClientRetriesUnprocessed(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "second %s", b)
	})
	t.Run("refused", func(t *testing.T) {
		base, accepted := rawServer(t, func(fr *http2.Framer, nc net.Conn) {
			// Every other stream is refused; the retries come on this
			// connection.
			for refuse := true; ; refuse = !refuse {
				id, err := readHeadersOf(fr)
				if err != nil {
					return
				}
				if refuse {
					fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
					continue
				}
				writeOK(fr, id, false)
				fr.WriteData(id, true, []byte("second"))
			}
		}, ok)
		client := clientOf(t, &Transport{})
		for _, body := range []string{"", "kept"} {
			resp, err := client.Post(base, "text/plain", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "second" || accepted.Load() != 1 {
				t.Errorf("got %q after %d connections", b, accepted.Load())
			}
		}
	})
	t.Run("goaway", func(t *testing.T) {
		base, accepted := rawServer(t, func(fr *http2.Framer, nc net.Conn) {
			id, err := readHeadersOf(fr)
			if err != nil {
				return
			}
			fr.WriteGoAway(id-1, http2.ErrCodeNo, nil)
			io.Copy(io.Discard, nc)
		}, ok)
		resp, err := clientOf(t, &Transport{}).Post(base, "text/plain", strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "second body" || accepted.Load() != 2 {
			t.Errorf("got %q after %d connections", b, accepted.Load())
		}
	})
	// The client sends half the body, and the rest, or an error, only
	// once the backend, having seen the first half, has gone away: the
	// whole body goes to the next connection, or the request fails.
	cut := errors.New("client went away")
	for _, rest := range []error{io.EOF, cut} {
		t.Run(fmt.Sprintf("goaway while the body is read, then %v", rest), func(t *testing.T) {
			gone := make(chan struct{})
			base, accepted := rawServer(t, func(fr *http2.Framer, nc net.Conn) {
				id, err := readHeadersOf(fr)
				if err != nil {
					return
				}
				for {
					f, err := fr.ReadFrame()
					if err != nil {
						return
					}
					if _, ok := f.(*http2.DataFrame); ok {
						break
					}
				}
				fr.WriteGoAway(id-1, http2.ErrCodeNo, nil)
				close(gone)
				io.Copy(io.Discard, nc)
			}, ok)
			body := io.MultiReader(strings.NewReader("bo"), readerFunc(func(p []byte) (int, error) {
				<-gone
				if rest != io.EOF {
					return 0, rest
				}
				return copy(p, "dy"), io.EOF
			}))
			req, _ := http.NewRequest(http.MethodPost, base, body)
			req.ContentLength = 4
			resp, err := clientOf(t, &Transport{}).Do(req)
			if rest == cut {
				if !errors.Is(err, cut) || accepted.Load() != 1 {
					t.Errorf("got %v after %d connections", err, accepted.Load())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "second body" || accepted.Load() != 2 {
				t.Errorf("got %q after %d connections", b, accepted.Load())
			}
		})
	}

	base, _ := rawServer(t, func(fr *http2.Framer, nc net.Conn) {
		id, err := readHeadersOf(fr)
		if err != nil {
			return
		}
		// The body is on its way: wait for its first bytes.
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if _, ok := f.(*http2.DataFrame); ok {
				break
			}
		}
		fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		io.Copy(io.Discard, nc)
	}, ok)
	client := clientOf(t, &Transport{})
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("part"))
		time.Sleep(time.Second)
		pw.Close()
	}()
	if _, err := client.Post(base, "text/plain", pr); err == nil {
		t.Error("a request refused after its body was read from was sent again")
	}
}

// TestClientEndsStreams checks that the backend hears of a request given
// up: a canceled context, and a response body closed before its end.
func TestClientEndsStreams(t *testing.T) {
	gone := make(chan error, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		gone <- r.Context().Err()
	})
	for name, base := range map[string]string{"net/http": stdlibH2C(t, h, nil), "hostgate": func() string { _, b := serve(t, &Server{Handler: h}); return b }()} {
		t.Run(name, func(t *testing.T) {
			client := clientOf(t, &Transport{})
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "GET", base, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
				t.Errorf("a read after cancel: %v", err)
			}
			resp, err = client.Get(base)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			for range 2 {
				select {
				case <-gone:
				case <-time.After(5 * time.Second):
					t.Fatal("the handler's context did not end after the client gave the request up")
				}
			}
		})
	}
}

// TestClientIdleTimeout closes a connection that stays idle.
func TestClientIdleTimeout(t *testing.T) {
	closed := make(chan struct{}, 1)
	base := stdlibH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), func(s *http.Server) {
		s.ConnState = func(_ net.Conn, cs http.ConnState) {
			if cs == http.StateClosed {
				closed <- struct{}{}
			}
		}
	})
	client := clientOf(t, &Transport{IdleTimeout: 50 * time.Millisecond})
	resp, err := client.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the idle connection stayed open")
	}
	// A request after the close dials again.
	resp, err = client.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// TestClientInformational relays 103 Early Hints to the caller's trace, as
// ReverseProxy passes them on to its client.
func TestClientInformational(t *testing.T) {
	base := stdlibH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "final")
	}), nil)
	var got []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		got = append(got, fmt.Sprint(code, " ", h.Get("Link")))
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", base, nil)
	resp, err := clientOf(t, &Transport{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "final" || len(got) != 1 || got[0] != "103 </style.css>; rel=preload" {
		t.Errorf("body %q, informational %q", b, got)
	}
}

// TestClientMalformedResponse fails a request whose response is not
// HTTP/2 as it must be, and the connection goes on for others.
func TestClientMalformedResponse(t *testing.T) {
	base, _ := rawServer(t, func(fr *http2.Framer, nc net.Conn) {
		for {
			id, err := readHeadersOf(fr)
			if err != nil {
				return
			}
			var block bytes.Buffer
			enc := hpack.NewEncoder(&block)
			if id == 1 {
				enc.WriteField(hpack.HeaderField{Name: ":status", Value: "abc"})
			} else {
				enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			}
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true, EndStream: true})
		}
	}, nil)
	client := clientOf(t, &Transport{})
	if resp, err := client.Get(base); err == nil {
		resp.Body.Close()
		t.Errorf("a response with :status abc: %d", resp.StatusCode)
	}
	resp, err := client.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("the next request: %d", resp.StatusCode)
	}
}

// TestClientBackendTakesNoStreams has a backend allow no concurrent
// streams at all: requests fail after a few connections, rather than the
// Transport dialling without end.
func TestClientBackendTakesNoStreams(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer nc.Close()
				if _, err := io.ReadFull(nc, make([]byte, len(clientPreface))); err != nil {
					return
				}
				fr := http2.NewFramer(nc, nc)
				fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 0})
				for {
					f, err := fr.ReadFrame()
					if err != nil {
						return
					}
					if h, ok := f.(*http2.HeadersFrame); ok {
						fr.WriteRSTStream(h.StreamID, http2.ErrCodeRefusedStream)
					}
				}
			}()
		}
	}()
	client := clientOf(t, &Transport{})
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+ln.Addr().String(), nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("a backend that takes no streams answered %d", resp.StatusCode)
		} else if ctx.Err() != nil {
			t.Errorf("the request waited for its deadline: %v", err)
		}
		cancel()
	}
	if n := accepted.Load(); n > 3*(maxRetries+1) {
		t.Errorf("%d connections for 3 requests", n)
	}
}

// TestClientUnreadBodyStallsNoOther leaves one response body unread, as a
// client reading slowly through the proxy does: another response on the
// same backend connection still comes whole.
func TestClientUnreadBodyStallsNoOther(t *testing.T) {
	base := stdlibH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Write(bytes.Repeat([]byte("x"), 2<<20))
			return
		}
		io.WriteString(w, "small")
	}), nil)
	client := clientOf(t, &Transport{})
	big, err := client.Get(base + "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer big.Body.Close()
	time.Sleep(200 * time.Millisecond) // the backend fills the windows
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/small", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "small" {
		t.Errorf("a response behind an unread one on the same connection: %q, %v", b, err)
	}
}

// TestClientNoTrailerAfterReset has the backend answer and reset a
// request whose body, with a trailer, is still on its way: the trailer
// must not follow on the closed stream, which net/http's server answers by
// ending the whole connection.
func TestClientNoTrailerAfterReset(t *testing.T) {
	got := make(chan string, 1)
	base, _ := rawServer(t, func(fr *http2.Framer, nc net.Conn) {
		id, err := readHeadersOf(fr)
		if err != nil {
			return
		}
		writeOK(fr, id, true)
		fr.WriteRSTStream(id, http2.ErrCodeNo)
		nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				got <- "nothing"
				return
			}
			if _, ok := f.(*http2.HeadersFrame); ok && f.Header().StreamID == id {
				got <- f.Header().String()
				return
			}
		}
	}, nil)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", base, pr)
	req.Trailer = http.Header{"X-Checksum": {"abc"}}
	resp, err := clientOf(t, &Transport{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	time.Sleep(100 * time.Millisecond)
	pw.Close()
	if s := <-got; s != "nothing" {
		t.Errorf("after RST_STREAM(NO_ERROR) the client sent %s", s)
	}
}

// TestClientInformationalRefused has the caller's Got1xxResponse fail: its
// request fails, and the other requests on the connection go on.
func TestClientInformationalRefused(t *testing.T) {
	slowDone := make(chan struct{})
	base := stdlibH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-slowDone
			io.WriteString(w, "slow")
			return
		}
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "final")
	}), nil)
	client := clientOf(t, &Transport{})
	slowErr := make(chan error, 1)
	go func() {
		resp, err := client.Get(base + "/slow")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		slowErr <- err
	}()
	time.Sleep(100 * time.Millisecond)
	trace := &httptrace.ClientTrace{Got1xxResponse: func(int, textproto.MIMEHeader) error { return errors.New("no thanks") }}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", base+"/hints", nil)
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
		t.Error("a request whose Got1xxResponse failed was answered")
	}
	close(slowDone)
	if err := <-slowErr; err != nil {
		t.Errorf("an unrelated request on the connection failed: %v", err)
	}
}

// TestClientDialFailureShared sends a burst of requests to a backend that
// cannot be reached: those waiting for the one dial share its failure
// rather than dial again one after another.
func TestClientDialFailureShared(t *testing.T) {
	var dials atomic.Int32
	tr := &Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		time.Sleep(200 * time.Millisecond) // a connect timeout
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("i/o timeout")}
	}}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", "http://backend:80/", nil)
			if _, err := tr.RoundTrip(req); err == nil {
				t.Error("a request to an unreachable backend succeeded")
			}
		})
	}
	wg.Wait()
	if n := dials.Load(); n > 2 {
		t.Errorf("10 requests waiting together dialled %d times", n)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.pools) != 0 {
		t.Errorf("the unreachable address keeps a pool entry")
	}
}

// deadConn is a backend connection its backend closed at once.
type deadConn struct{ net.Conn }

func (deadConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (deadConn) Write(p []byte) (int, error)      { return len(p), nil }
func (deadConn) Close() error                     { return nil }
func (deadConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (deadConn) SetDeadline(time.Time) error      { return nil }
func (deadConn) SetReadDeadline(time.Time) error  { return nil }
func (deadConn) SetWriteDeadline(time.Time) error { return nil }

// TestClientLostConnNotPooled dials connections that end at once, some
// before they could be pooled: none stays in the pool.
func TestClientLostConnNotPooled(t *testing.T) {
	tr := &Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return deadConn{}, nil }}
	for range 2000 {
		req, _ := http.NewRequest("GET", "http://backend:80/", nil)
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	time.Sleep(100 * time.Millisecond)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if p := tr.pools["backend:80"]; p != nil && len(p.conns) > 0 {
		t.Errorf("%d lost connections left in the pool", len(p.conns))
	}
}

// TestClientBodyTaken: when a request fails with its body unread by the
// caller's count, either nothing reads it later, or the error says the
// Transport took it (ErrBodyTaken), so that the caller does not send it
// elsewhere while a goroutine of the Transport still reads it.
func TestClientBodyTaken(t *testing.T) {
	for range 2000 {
		wrote := make(chan struct{})
		var once sync.Once
		tr := &Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
			return endsAfterWrite{wrote: wrote, once: &once}, nil
		}}
		body := &watchedBody{}
		req, _ := http.NewRequest("PUT", "http://backend:80/", body)
		req.ContentLength = 5
		_, err := tr.RoundTrip(req)
		if err == nil || errors.Is(err, ErrBodyTaken) || body.reads.Load() > 0 {
			continue
		}
		body.decided.Store(true)
		time.Sleep(time.Millisecond)
		if body.late.Load() {
			t.Fatalf("the body was read after RoundTrip failed with %v, saying nothing of it", err)
		}
	}
}

// endsAfterWrite is a backend connection that ends once the client wrote.
type endsAfterWrite struct {
	deadConn
	wrote chan struct{}
	once  *sync.Once
}

func (c endsAfterWrite) Read([]byte) (int, error) {
	<-c.wrote
	return 0, io.EOF
}

func (c endsAfterWrite) Write(p []byte) (int, error) {
	c.once.Do(func() { close(c.wrote) })
	return len(p), nil
}

// watchedBody counts its reads, and notes one after decided is set.
type watchedBody struct {
	reads         atomic.Int32
	decided, late atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if b.decided.Load() {
		b.late.Store(true)
	}
	b.reads.Add(1)
	return copy(p, "hello"), io.EOF
}

func (b *watchedBody) Close() error { return nil }

// TestClientStreamEndsWithResponse has the backend answer whole while the
// request body is still coming (and no RST_STREAM of its own): the stream
// ends with the response, RST_STREAM(CANCEL) tells the backend so, and the
// connection is idle at once rather than once the body's next read
// returns.
func TestClientStreamEndsWithResponse(t *testing.T) {
	frames := make(chan string, 8)
	base, _ := rawServer(t, func(fr *http2.Framer, nc net.Conn) {
		id, err := readHeadersOf(fr)
		if err != nil {
			return
		}
		writeOK(fr, id, true)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				frames <- "closed"
				return
			}
			if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.StreamID == id {
				frames <- rst.ErrCode.String()
			}
		}
	}, nil)
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequest("POST", base, pr)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case got := <-frames:
		if got != http2.ErrCodeCancel.String() {
			t.Fatalf("after the response the backend got %s, want RST_STREAM(CANCEL)", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream stayed open after its response, the request body unread")
	}
	tr.CloseIdleConnections()
	select {
	case got := <-frames:
		if got != "closed" {
			t.Errorf("backend got %s", got)
		}
	case <-time.After(5 * time.Second):
		t.Error("the connection was not idle with the request body still unread")
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
