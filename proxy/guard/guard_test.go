package guard

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestGuardPoison checks the premise of the guard on net/http alone: it
// answers 400 and closes wherever the poison lands in a request head.
func TestGuardPoison(t *testing.T) {
	const req = "GET /p HTTP/1.1\r\nHost: a.test\r\nX-A: b\r\n\r\n"
	var seen atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { seen.Add(1) }))
	defer backend.Close()
	addr := backend.Listener.Addr().String()
	for i := range len(req) - 1 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// The guard ends the stream after the poison.
		io.WriteString(c, req[:i]+poison)
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusBadRequest || resp.Close != true {
			t.Errorf("poison at %d (%q): %v %v", i, req[:i], resp, err)
		}
		c.Close()
	}
	if n := seen.Load(); n != 0 {
		t.Errorf("handler saw %d requests", n)
	}
}

// BenchmarkGuardHTTP1 is what the guard adds to a keep-alive request: one
// pass over a typical head, with a small body.
func BenchmarkGuardHTTP1(b *testing.B) {
	req := []byte("POST /api/users?page=2 HTTP/1.1\r\nHost: a.example.com\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n" +
		"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\nAccept-Encoding: gzip, deflate, br\r\n" +
		"Accept-Language: en-US,en;q=0.5\r\nCookie: session=0123456789abcdef0123456789abcdef\r\nContent-Type: application/json\r\n" +
		"Content-Length: 13\r\n\r\n{\"name\":\"a\"}\n")
	g := newGuardConn(nil)
	g.pre = -1
	b.SetBytes(int64(len(req)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := g.http1(req); !ok {
			b.Fatal("refused")
		}
	}
}

// FuzzGuardSplit checks that the guard's verdict on a byte stream does not
// depend on how the stream is cut into reads.
func FuzzGuardSplit(f *testing.F) {
	f.Add([]byte("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;x\r\nhello\r\n0\r\nT: 1\r\n\r\nGET / HTTP/1.1\r\n\r\n"), uint16(7), uint16(3))
	f.Add([]byte("GET / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc"), uint16(20), uint16(1))
	f.Add([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"), uint16(14), uint16(5))
	f.Add([]byte("GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n"), uint16(22), uint16(2))
	for _, fields := range [][]string{nil, {"te", "gzip"}, {"x-a", "b", "connection", "close"}} {
		f.Add(h2HeaderBlocks(fields...), uint16(30), uint16(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, first, step uint16) {
		verdict := func(pieces [][]byte) (bool, uint8) {
			// The client end takes the guard's GOAWAY, if any.
			server, client := net.Pipe()
			defer server.Close()
			go io.Copy(io.Discard, client)
			g := newGuardConn(server)
			for _, p := range pieces {
				var ok bool
				if g.st >= stPreface {
					ok = g.frames(bytes.Clone(p))
				} else {
					_, ok = g.http1(bytes.Clone(p))
				}
				if !ok {
					return false, 0
				}
			}
			return true, g.st
		}
		var pieces [][]byte
		rest, n := data, int(first)
		for len(rest) > 0 {
			n = max(1, min(n, len(rest)))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
			n = int(step)
		}
		okWhole, stWhole := verdict([][]byte{data})
		okSplit, stSplit := verdict(pieces)
		if okWhole != okSplit || stWhole != stSplit {
			t.Errorf("whole: ok %v state %d; in pieces of %d then %d: ok %v state %d", okWhole, stWhole, first, step, okSplit, stSplit)
		}
	})
}

// FuzzGuardAgreesWithNetHTTP checks that where the guard and net/http both
// accept a stream of HTTP/1.1 requests, they agree on where the requests
// end: the guard is between requests exactly when net/http is.
func FuzzGuardAgreesWithNetHTTP(f *testing.F) {
	f.Add([]byte("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;x\r\nhello\r\n0\r\nT: 1\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.0\r\nHost: a\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nab"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.HasPrefix(data, []byte("PRI")) {
			return
		}
		g := newGuardConn(nil)
		if _, ok := g.http1(bytes.Clone(data)); !ok || g.st == stUpgrading {
			return
		}
		between := g.st == stLine && !g.begun
		br := bufio.NewReader(bytes.NewReader(data))
		for {
			if _, err := br.Peek(1); err == io.EOF {
				if !between {
					t.Errorf("net/http read every request whole, the guard is inside one (state %d)", g.st)
				}
				return
			}
			req, err := http.ReadRequest(br)
			if err == nil {
				_, err = io.Copy(io.Discard, req.Body)
			}
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				if between {
					t.Errorf("net/http is inside a request, the guard between requests: %v", err)
				}
				return
			}
			if err != nil {
				return // net/http refuses: nothing is forwarded
			}
		}
	})
}

// h2HeaderBlocks is the start of an HTTP/2 connection with two requests,
// the second with extra fields: one in a padded HEADERS frame with
// priority, the other cut into CONTINUATION frames. A seed for fuzzing.
func h2HeaderBlocks(extra ...string) []byte {
	var out, hbuf bytes.Buffer
	out.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&out, nil)
	fr.WriteSettings()
	enc := hpack.NewEncoder(&hbuf)
	block := func(extra ...string) []byte {
		hbuf.Reset()
		fields := append([]string{":method", "GET", ":scheme", "http", ":authority", "a.test", ":path", "/", "te", "trailers"}, extra...)
		for i := 0; i+1 < len(fields); i += 2 {
			enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		return bytes.Clone(hbuf.Bytes())
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(), EndStream: true, EndHeaders: true, PadLength: 7, Priority: http2.PriorityParam{Weight: 9}})
	b := block(append([]string{"x-second", "1"}, extra...)...)
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: b[:3], EndStream: true})
	fr.WriteContinuation(3, false, b[3:6])
	fr.WriteContinuation(3, true, b[6:])
	return out.Bytes()
}

func TestResetBudget(t *testing.T) {
	now := time.Unix(0, 0)
	g := newGuardConn(nil)
	g.now = func() time.Time { return now }
	g.startFrames()
	for i := range ResetBurst {
		if !g.spendReset() {
			t.Fatalf("reset %d refused", i)
		}
	}
	if g.spendReset() {
		t.Fatal("reset past the burst allowed")
	}
	now = now.Add(time.Second)
	for i := range ResetRate {
		if !g.spendReset() {
			t.Fatalf("reset %d after a second refused", i)
		}
	}
	if g.spendReset() {
		t.Fatal("reset past the rate allowed")
	}
	// A steady trickle at the rate never runs out.
	for range 10 * ResetBurst {
		now = now.Add(time.Second / ResetRate)
		if !g.spendReset() {
			t.Fatal("reset at the rate refused")
		}
	}
}

func TestDedupeSettings(t *testing.T) {
	setting := func(id uint16, v uint32) []byte {
		return []byte{byte(id >> 8), byte(id), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
	}
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name    string
		in, out []byte
	}{
		{"no repeat", join(setting(4, 1), setting(5, 1<<14)), join(setting(4, 1), setting(5, 1<<14))},
		{"repeat", join(setting(4, 1), setting(3, 9), setting(4, 2)), join(setting(0xf000, 1), setting(3, 9), setting(4, 2))},
		{"three times", join(setting(4, 1), setting(4, 2), setting(4, 3)), join(setting(0xf000, 1), setting(0xf001, 2), setting(4, 3))},
		{"invalid earlier value kept", join(setting(2, 7), setting(2, 0)), join(setting(2, 7), setting(2, 0))},
		{"not whole settings", append(join(setting(4, 1), setting(4, 2)), 0), append(join(setting(4, 1), setting(4, 2)), 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dedupeSettings(tt.in)
			if !bytes.Equal(tt.in, tt.out) {
				t.Errorf("got %x, want %x", tt.in, tt.out)
			}
		})
	}
}

// BenchmarkGuardHTTP2 is what the guard adds to an HTTP/2 request: the
// frame header and an HPACK decoding of a browser's header block, as the
// first request of a connection sends it (literals, and a new decoder) and
// as the following ones do (indexed).
func BenchmarkGuardHTTP2(b *testing.B) {
	fields := []string{":method", "GET", ":scheme", "https", ":authority", "a.example.com", ":path", "/api/users?page=2",
		"user-agent", "Mozilla/5.0 (X11; Linux x86_64)", "accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
		"accept-encoding", "gzip, deflate, br", "accept-language", "en-US,en;q=0.5", "cookie", "session=0123456789abcdef0123456789abcdef"}
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	frame := func() []byte {
		hbuf.Reset()
		for i := 0; i+1 < len(fields); i += 2 {
			enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		var out bytes.Buffer
		http2.NewFramer(&out, nil).WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hbuf.Bytes(), EndStream: true, EndHeaders: true})
		return out.Bytes()
	}
	literal, indexed := frame(), frame()
	run := func(b *testing.B, frame []byte, each func(g *Conn)) {
		g := newGuardConn(nil)
		g.startFrames()
		g.frames(literal)
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			each(g)
			if !g.frames(frame) {
				b.Fatal("refused")
			}
		}
	}
	b.Run("literal", func(b *testing.B) { run(b, literal, func(g *Conn) { g.hb.dec = nil }) })
	b.Run("indexed", func(b *testing.B) { run(b, indexed, func(*Conn) {}) })
}
