package h2

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// serve runs a Server with h on a loopback socket and returns an HTTP/2
// (h2c, prior knowledge) client of net/http for it.
func serve(t *testing.T, srv *Server) (*http.Client, string) {
	t.Helper()
	addr, _ := serveConns(t, srv, nil)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, "http://" + addr
}

// serveConns serves the connections of a loopback socket with srv, all but
// the first when first is set, which gets that one. It returns the
// socket's address and the count of connections accepted.
func serveConns(t *testing.T, srv *Server, first func(net.Conn)) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var accepted atomic.Int32
	t.Cleanup(func() {
		ln.Close()
		srv.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if accepted.Add(1) == 1 && first != nil {
				wg.Go(func() { first(c) })
				continue
			}
			wg.Go(func() { srv.ServeConn(c, ConnOpts{}) })
		}
	})
	return ln.Addr().String(), &accepted
}

func TestServesRequests(t *testing.T) {
	client, base := serve(t, &Server{Handler: kinds(t)})
	exercise(t, client, base)
}

// kinds answers the requests exercise sends.
func kinds(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			w.Header().Set("Content-Type", "application/octet-stream")
			n, err := io.Copy(w, r.Body)
			if err != nil {
				t.Errorf("echo: read %d bytes: %v", n, err)
			}
		case "/trailer":
			w.Header().Set("Trailer", "Grpc-Status")
			w.WriteHeader(200)
			io.WriteString(w, "body")
			w.Header().Set("Grpc-Status", "0")
			w.Header().Set(http.TrailerPrefix+"Late", "yes")
		case "/nocontent":
			w.WriteHeader(http.StatusNoContent)
		case "/stream":
			for i := range 3 {
				fmt.Fprintf(w, "part %d\n", i)
				w.(http.Flusher).Flush()
			}
		case "/reqtrailer":
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, r.Trailer.Get("Checksum"))
		default:
			w.Header().Set("X-Path", r.URL.Path+"?"+r.URL.RawQuery)
			io.WriteString(w, "hello "+r.Host)
		}
	})
}

// exercise sends client requests of every kind kinds answers, and checks
// the answers: a server's or a client's test, whichever is under test.
func exercise(t *testing.T, client *http.Client, base string) {
	t.Helper()
	resp, err := client.Get(base + "/x/y?q=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(body) != "hello "+strings.TrimPrefix(base, "http://") || resp.Header.Get("X-Path") != "/x/y?q=1" || resp.ContentLength != int64(len(body)) || resp.Header.Get("Date") == "" {
		t.Errorf("GET: %s %d %q %v length %d", resp.Proto, resp.StatusCode, body, resp.Header, resp.ContentLength)
	}

	// A body larger than every window: flow control both ways.
	big := make([]byte, 5<<20)
	rand.Read(big)
	resp, err = client.Post(base+"/echo", "application/octet-stream", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(body, big) {
		t.Errorf("echo of %d bytes: got %d, %v", len(big), len(body), err)
	}

	resp, err = client.Get(base + "/trailer")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "body" || resp.Trailer.Get("Grpc-Status") != "0" || resp.Trailer.Get("Late") != "yes" {
		t.Errorf("trailer: %q %v", body, resp.Trailer)
	}

	resp, err = client.Get(base + "/nocontent")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("204: %d", resp.StatusCode)
	}

	resp, err = client.Get(base + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "part 0\npart 1\npart 2\n" {
		t.Errorf("streamed: %q", body)
	}

	resp, err = client.Head(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("HEAD: %d", resp.StatusCode)
	}

	req, _ := http.NewRequest("POST", base+"/reqtrailer", strings.NewReader("data"))
	req.Trailer = http.Header{"Checksum": {"c0ffee"}}
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "c0ffee" {
		t.Errorf("request trailer: the handler read %q", body)
	}
}

// TestConcurrentStreams runs many requests at once over one connection,
// each with a body, so that streams, windows and the writer interleave.
func TestConcurrentStreams(t *testing.T) {
	srv := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		w.Write(bytes.Repeat(b, 100))
	})}
	client, base := serve(t, srv)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			want := fmt.Sprintf("<%d>", i)
			resp, err := client.Post(base, "text/plain", strings.NewReader(want))
			if err != nil {
				t.Error(err)
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(b) != strings.Repeat(want, 100) {
				t.Errorf("stream %d: %d bytes, %v", i, len(b), err)
			}
		})
	}
	wg.Wait()
}

// TestStalledUploadStallsNoOther holds one stream's whole request body
// unread, as a handler whose backend stopped reading does, and sends a
// larger body on a second stream of the same connection: it gets through.
// With one window for the connection and each stream, the first body took
// all of the connection's, and every upload on it waited.
func TestStalledUploadStallsNoOther(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stalled" {
			<-release
			return
		}
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			t.Error(err)
		}
		fmt.Fprint(w, n)
	})}
	addr, accepted := serveConns(t, srv, nil)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	sent := make(chan struct{})
	go func() {
		body := &signalEOF{Reader: bytes.NewReader(make([]byte, recvWindow)), eof: sent}
		resp, err := client.Post("http://"+addr+"/stalled", "application/octet-stream", body)
		if err == nil {
			resp.Body.Close()
		}
	}()
	// The whole stalled body is in frames on the connection, ahead of
	// the next request's.
	<-sent
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const size = 3 * recvWindow
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/upload", bytes.NewReader(make([]byte, size)))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("upload beside a stalled one: %v", err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(got) != fmt.Sprint(size) {
		t.Fatalf("upload beside a stalled one: the handler read %q bytes (%v), want %d", got, err, size)
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("%d connections, want both streams on one", n)
	}
}

// signalEOF closes eof when its Reader is read to the end.
type signalEOF struct {
	io.Reader
	eof  chan struct{}
	once sync.Once
}

func (s *signalEOF) Read(p []byte) (int, error) {
	n, err := s.Reader.Read(p)
	if err == io.EOF {
		s.once.Do(func() { close(s.eof) })
	}
	return n, err
}

// TestClientReset cancels a request whose handler waits: the handler's
// context ends.
func TestClientReset(t *testing.T) {
	gone := make(chan error, 1)
	srv := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		gone <- r.Context().Err()
	})}
	client, base := serve(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", base, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case err := <-gone:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("handler context: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context did not end after the client reset the stream")
	}
}

// TestNoStreamPastGoAway has the connection go away between the reader's
// check of a request's HEADERS and the start of its handler, as Drain,
// the idle timer or another handler's "Connection: close" can from
// their goroutines: the GOAWAY named the streams served, so the request
// must not be.
func TestNoStreamPastGoAway(t *testing.T) {
	sn, cn := net.Pipe()
	defer cn.Close()
	defer sn.Close()
	ran := make(chan struct{}, 1)
	c := newConn(&Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran <- struct{}{} })}, sn, ConnOpts{})
	st := c.newStream(1)
	st.req = httptest.NewRequestWithContext(&st.ctx, "GET", "/", nil)
	c.goAwayGracefully()
	c.startStream(st)
	c.mu.Lock()
	last := c.lastStarted
	c.mu.Unlock()
	if last != 0 || st.ctx.Err() == nil {
		t.Errorf("a stream started past the GOAWAY: last started %d, its context %v", last, st.ctx.Err())
	}
	select {
	case <-ran:
		t.Error("the handler of a stream past the GOAWAY ran")
	case <-time.After(10 * time.Millisecond):
	}
}

// TestRequestURL checks the allocation-free path of requestURL against
// url.ParseRequestURI, whose result it must equal.
func TestRequestURL(t *testing.T) {
	for _, path := range []string{
		"/", "/a/b", "/a?b=c", "/a?", "/a??", "/a?b?c", "/a%20b", "/a b", "/é", "/a!b", "/a(b)", "//x", "/a;b=c,d@e:f$&+",
		"/a?b c", "/a?\x00", "/\x7f", "*", "", "a", "/a#b", "/a?b#c", "/~user/./../x", "/?", "A://@",
	} {
		checkRequestURL(t, path)
	}
}

func FuzzRequestURL(f *testing.F) {
	for _, s := range []string{"/", "/a?b", "/a%2Fb?c", "/a b", "//x?"} {
		f.Add(s)
	}
	f.Fuzz(checkRequestURL)
}

func checkRequestURL(t *testing.T, path string) {
	var into url.URL
	got, gotErr := requestURL(path, &into)
	want, wantErr := url.ParseRequestURI(path)
	// DeepEqual, as a URL with user information points to it.
	if (gotErr == nil) != (wantErr == nil) || gotErr == nil && !reflect.DeepEqual(got, want) {
		t.Errorf("requestURL(%q) = %#v, %v; url.ParseRequestURI: %#v, %v", path, got, gotErr, want, wantErr)
	}
}

// TestGoAwayForMalformedFrames sends frames the Framer rejects (DATA or
// HEADERS on stream 0): the client gets GOAWAY(PROTOCOL_ERROR), not a
// connection closed without a word.
func TestGoAwayForMalformedFrames(t *testing.T) {
	for name, typ := range map[string]http2.FrameType{"DATA": http2.FrameData, "HEADERS": http2.FrameHeaders} {
		t.Run(name, func(t *testing.T) {
			addr, _ := serveConns(t, &Server{Handler: http.NotFoundHandler()}, nil)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, http2.ClientPreface)
			fr := http2.NewFramer(c, c)
			fr.WriteSettings()
			fr.WriteRawFrame(typ, http2.FlagDataEndStream, 0, []byte("x"))
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("connection ended without GOAWAY: %v", err)
				}
				if ga, ok := f.(*http2.GoAwayFrame); ok {
					if ga.ErrCode != http2.ErrCodeProtocol {
						t.Errorf("GOAWAY %v, want PROTOCOL_ERROR", ga.ErrCode)
					}
					return
				}
			}
		})
	}
}
