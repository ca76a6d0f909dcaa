package h1wire

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

func TestValidPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/a/b%2Fc": true, "/~x(y)*!$&'+,;=:@": true,
		"": false, "a": false, "/%": false, "/%zz": false, "/a b": false, "/é": false, "/a\"b": false, "/{x}": false,
	} {
		if got := ValidPath(p); got != want {
			t.Errorf("validPath(%q) = %v", p, got)
		}
	}
}

// FuzzParseRequest checks the engine's request parser against net/http's:
// whatever the engine takes, net/http reads the same way.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /p?q=1 HTTP/1.1\r\nHost: a:80\r\nContent-Length: 3\r\nX-A: b\r\n\r\n",
		"PUT /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close, X-A\r\nX-A: 1\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
		"GET / HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\n\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var h Head
		if !ParseRequest(raw, &h) {
			return
		}
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			t.Fatalf("engine took %q, net/http refuses it: %v", raw, err)
		}
		if r.Method != h.Method || r.URL.EscapedPath() != h.Path || r.URL.RawQuery != h.Query || r.Host != h.Host {
			t.Fatalf("%q: net/http reads %s %s ? %s host %s, engine %s %s ? %s host %s", raw, r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Host, h.Method, h.Path, h.Query, h.Host)
		}
		if (r.ProtoMinor == 0) != h.HTTP10 || r.Close != (h.Close || h.HTTP10 && !h.KeepAlive) {
			t.Fatalf("%q: version or close differs", raw)
		}
		wantLength := r.ContentLength
		if h.Chunked {
			wantLength = -1
		} else if wantLength == 0 && h.ContentLength < 0 {
			wantLength = -1 // net/http reads "no length" as 0 for requests
		}
		if h.ContentLength != wantLength && !h.Chunked || h.Chunked != (len(r.TransferEncoding) > 0) {
			t.Fatalf("%q: framing differs: net/http length %d %v, engine %d %v", raw, r.ContentLength, r.TransferEncoding, h.ContentLength, h.Chunked)
		}
		for name, vals := range r.Header {
			if got := h.Values(name); len(got) == 0 || got[0] != vals[0] {
				t.Fatalf("%q: %s is %q to net/http, %q to the engine", raw, name, vals, got)
			}
		}
	})
}

// BenchmarkParseHeads parses a request head as a browser sends it and a
// response head as nginx sends a small file, then looks fields up as the
// request path does: the parser's cost per proxied request.
func BenchmarkParseHeads(b *testing.B) {
	const request = "GET /api/users?page=2 HTTP/1.1\r\nHost: a.example.com\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n" +
		"Accept: text/html,application/xhtml+xml\r\nAccept-Encoding: gzip, deflate, br\r\nAccept-Language: en-US,en;q=0.9\r\n" +
		"Cookie: session=abc\r\nConnection: keep-alive\r\n\r\n"
	const response = "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Wed, 25 Nov 2026 15:00:00 GMT\r\nContent-Type: text/plain\r\n" +
		"Content-Length: 5\r\nLast-Modified: Wed, 25 Nov 2026 14:00:00 GMT\r\nConnection: keep-alive\r\nETag: \"6925c1e0-5\"\r\nAccept-Ranges: bytes\r\n\r\n"
	var req, resp Head
	b.ReportAllocs()
	for b.Loop() {
		if !ParseRequest(request, &req) || !ParseResponse(response, &resp) {
			b.Fatal("heads refused")
		}
		if req.Get("X-Forwarded-For") != "" || req.Get("Idempotency-Key") != "" || !resp.Fields.Has("Date") {
			b.Fatal("fields misread")
		}
	}
}
