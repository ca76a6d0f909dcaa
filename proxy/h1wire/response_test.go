package h1wire

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httputil"
	"strings"
	"testing"
)

// FuzzResponse feeds a backend's answer, head and body, to ParseResponse
// and BodyReader, as the engines read it, and to net/http's client. A
// response the engines relay must be one net/http reads alike: the same
// status, framing and fields, and the same body bytes, or a backend could
// make the proxy see a message boundary its clients do not (response
// splitting, desynchronised keep-alive connections).
func FuzzResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: v\r\n\r\n",
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi",
		"HTTP/1.1 404 Not Found\r\n\r\nuntil close",
		"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nEtag: \"x\"\r\n\r\n",
		"HTTP/1.1 200 OK\nContent-Length: 1\n\nx",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
	} {
		f.Add(s, false)
	}
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true)
	f.Fuzz(func(t *testing.T, raw string, head bool) {
		end := HeadEnd([]byte(raw), 0)
		if end < 0 {
			return
		}
		var h Head
		if !ParseResponse(raw[:end], &h) || h.Status < 200 {
			return // refused, or an interim answer the engines read past
		}
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), &http.Request{Method: method})
		if err != nil {
			t.Fatalf("engines relay %q, net/http refuses it: %v", raw, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != h.Status || (resp.ProtoMinor == 0) != h.HTTP10 {
			t.Fatalf("%q: net/http reads %d HTTP/1.%d, the engines %d (HTTP/1.0 %t)", raw, resp.StatusCode, resp.ProtoMinor, h.Status, h.HTTP10)
		}
		for name, vals := range resp.Header {
			if got := h.Get(name); got != vals[0] {
				t.Fatalf("%q: %s is %q to net/http, %q to the engines", raw, name, vals[0], got)
			}
		}
		mode := h.BodyMode(method)
		chunked := len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
		// An answer to HEAD, a 204 or a 304 has no body whatever its
		// fields say; net/http still reports them.
		if mode != BodyNone && ((mode == BodyChunked) != chunked || mode == BodyLength && resp.ContentLength != h.ContentLength) {
			t.Fatalf("%q: framing differs: net/http length %d %v, engines mode %d length %d", raw, resp.ContentLength, resp.TransferEncoding, mode, h.ContentLength)
		}
		want, wantErr := io.ReadAll(resp.Body)
		var body BodyReader
		body.Start(bufio.NewReader(strings.NewReader(raw[end:])), mode, max(h.ContentLength, 0))
		got, gotErr := io.ReadAll(&body)
		switch {
		case wantErr == nil && gotErr == nil && !bytes.Equal(got, want):
			t.Fatalf("%q: body %q to net/http, %q to the engines", raw, want, got)
		case wantErr == nil && gotErr != nil && mode != BodyChunked:
			t.Fatalf("%q: net/http reads the body whole (%q), the engines fail: %v", raw, want, gotErr)
		case wantErr != nil && gotErr == nil:
			t.Fatalf("%q: the engines read the body whole (%q), net/http fails: %v", raw, got, wantErr)
		}
	})
}

// TestChunkedFraming: a chunked body is read as net/http reads it, or
// refused: what two readers of the same bytes may disagree on (a bare LF,
// a size with something else after it, a trailer line that is no field)
// is refused, on requests and responses alike.
func TestChunkedFraming(t *testing.T) {
	for _, tc := range []struct {
		body, want string
		ok         bool
	}{
		{"5\r\nhello\r\n0\r\n\r\n", "hello", true},
		{"5;name=value\r\nhello\r\n0\r\n\r\n", "hello", true},
		{"5 ;name\r\nhello\r\n0\r\n\r\n", "", false},
		{"5\t\r\nhello\r\n0\r\n\r\n", "hello", true},
		{"5\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\n", "hello", true},
		{"5\nhello\r\n0\r\n\r\n", "", false},
		{"5\r\nhello\n0\r\n\r\n", "", false},
		{"5 x\r\nhello\r\n0\r\n\r\n", "", false},
		{"5\r\nhello\r\n0\r\nnot a field\r\n\r\n", "", false},
		{"5\r\nhello\r\n0\r\nX-A: a\rb\r\n\r\n", "", false},
	} {
		var b BodyReader
		b.Start(bufio.NewReader(strings.NewReader(tc.body)), BodyChunked, 0)
		got, err := io.ReadAll(&b)
		_, netErr := io.ReadAll(httputil.NewChunkedReader(strings.NewReader(tc.body)))
		if (err == nil) != tc.ok || tc.ok && string(got) != tc.want {
			t.Errorf("%q: read %q, %v; want %q, ok %t", tc.body, got, err, tc.want, tc.ok)
		}
		// Its chunked reader stops at the last chunk: the trailer is
		// read, and checked, by net/http's message reader.
		if trailer := !strings.HasSuffix(tc.body, "0\r\n\r\n"); !trailer && tc.ok != (netErr == nil) {
			t.Errorf("%q: ok %t here, net/http: %v", tc.body, tc.ok, netErr)
		}
	}
}
