package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Client is a raw HTTP/2 client connection: h2c with prior knowledge,
// or h2 over TLS.
type h2Client struct {
	conn net.Conn
	bw   *bufio.Writer
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
}

func dialH2(t *testing.T, dial dialer) *h2Client {
	t.Helper()
	c := dial(t, "h2")
	cl := &h2Client{conn: c, bw: bufio.NewWriterSize(c, 64<<10)}
	cl.fr = http2.NewFramer(cl.bw, c)
	cl.enc = hpack.NewEncoder(&cl.hbuf)
	io.WriteString(cl.bw, http2.ClientPreface)
	if err := cl.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return cl
}

// headers encodes a GET with extra fields as name, value pairs.
func (c *h2Client) headers(extra ...string) []byte {
	c.hbuf.Reset()
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"}, {Name: ":authority", Value: "a.test"}, {Name: ":path", Value: "/"}} {
		c.enc.WriteField(f)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		c.enc.WriteField(hpack.HeaderField{Name: extra[i], Value: extra[i+1]})
	}
	return bytes.Clone(c.hbuf.Bytes())
}

// readUntilClosed reads frames until the connection ends, or stream 1 is
// answered, and returns the last GOAWAY, the RST_STREAM codes by stream,
// the status of stream 1 and whether the connection ended within d.
func (c *h2Client) readUntilClosed(d time.Duration) (goAway *http2.GoAwayFrame, resets map[uint32]http2.ErrCode, status string, closed bool) {
	c.conn.SetReadDeadline(time.Now().Add(d))
	resets = map[uint32]http2.ErrCode{}
	fr := http2.NewFramer(io.Discard, c.conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return goAway, resets, status, !isTimeout(err)
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			goAway = f
		case *http2.RSTStreamFrame:
			resets[f.StreamID] = f.ErrCode
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 {
				return goAway, resets, f.PseudoValue("status"), false
			}
		}
	}
}

// TestH2TransferEncoding checks that HTTP/2 refuses Transfer-Encoding
// (RFC 9113 section 8.2.2) and forwards nothing. net/http answers such a
// malformed request 400 and ends the stream, which section 8.1.1 allows in
// place of RST_STREAM(PROTOCOL_ERROR); h2spec wants the reset.
func TestH2TransferEncoding(t *testing.T) {
	protocols(t, func(t *testing.T, p Protocol) {
		dial, seen := guardedServer(t, p, nil)
		c := dialH2(t, dial)
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.headers("transfer-encoding", "chunked"), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		c.bw.Flush()
		_, resets, status, _ := c.readUntilClosed(2 * time.Second)
		if code, ok := resets[1]; (!ok || code != http2.ErrCodeProtocol) && status != "400" {
			t.Errorf("stream 1: status %q, resets %v; want 400 or PROTOCOL_ERROR", status, resets)
		}
		if n := seen.Load(); n != 0 {
			t.Errorf("backend saw %d requests", n)
		}
	})
}

// TestH2RapidReset floods an h2c connection with HEADERS+RST_STREAM pairs,
// the backend answering slowly as a loaded one would: the connection gets
// GOAWAY(ENHANCE_YOUR_CALM) after resetBurst premature resets, and the
// backend sees at most that many requests.
func TestH2RapidReset(t *testing.T) {
	protocols(t, func(t *testing.T, p Protocol) {
		dial, seen := guardedServer(t, p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(50 * time.Millisecond)
		}))
		c := dialH2(t, dial)
		const pairs = 10000
		done := make(chan struct{})
		sent := 0
		go func() {
			defer close(done)
			hdr := c.headers()
			for i := range pairs {
				id := uint32(2*i + 1)
				// HPACK state is not updated by a repeated block of literals,
				// so the same block serves every stream.
				if c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdr, EndStream: true, EndHeaders: true}) != nil ||
					c.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
					return
				}
				if i%100 == 99 && c.bw.Flush() != nil {
					return
				}
				sent = i + 1
			}
			c.bw.Flush()
		}()
		goAway, _, _, closed := c.readUntilClosed(10 * time.Second)
		<-done
		if !closed {
			t.Fatal("connection not closed")
		}
		if goAway == nil || goAway.ErrCode != http2.ErrCodeEnhanceYourCalm {
			t.Fatalf("GOAWAY %v, want ENHANCE_YOUR_CALM", goAway)
		}
		// Streams up to the one that broke the budget may have reached a
		// handler; the limit is crossed at the (resetBurst+1)th reset (a few
		// more if the refill adds some while the flood runs).
		const bound = resetBurst + 10
		if last := goAway.LastStreamID; last > 2*bound+1 {
			t.Errorf("GOAWAY after stream %d, want at most %d", last, 2*bound+1)
		}
		time.Sleep(100 * time.Millisecond)
		n := seen.Load()
		// The client's writes mostly fit in the socket buffers (30 bytes a
		// pair), so how far it got says little; GOAWAY says where the server
		// stopped reading.
		t.Logf("client wrote %d of %d pairs; GOAWAY after stream %d (%d streams); backend saw %d requests", sent, pairs, goAway.LastStreamID, goAway.LastStreamID/2+1, n)
		if n > bound {
			t.Errorf("backend saw %d requests, want at most %d", n, bound)
		}
	})
}

// TestH2ContinuationFlood sends one endless header block in CONTINUATION
// frames: the server closes the connection once the block passes its
// header limit, with memory bounded.
func TestH2ContinuationFlood(t *testing.T) {
	protocols(t, func(t *testing.T, p Protocol) {
		dial, seen := guardedServer(t, p, nil)
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := dialH2(t, dial)
		hdr := c.headers()
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdr, EndStream: true}); err != nil {
			t.Fatal(err)
		}
		c.enc.SetMaxDynamicTableSizeLimit(0)
		chunk := c.headers("x-flood", strings.Repeat("a", 16<<10-100))
		const frames = 4096 // 64 MiB if nothing stops it
		go func() {
			for range frames {
				if c.fr.WriteContinuation(1, false, chunk) != nil || c.bw.Flush() != nil {
					return
				}
			}
		}()
		_, _, _, closed := c.readUntilClosed(10 * time.Second)
		if !closed {
			t.Fatal("connection not closed")
		}
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		grown := int64(after.HeapInuse) - int64(before.HeapInuse)
		t.Logf("heap in use grew by %d KiB", grown>>10)
		if grown > 16<<20 {
			t.Errorf("heap in use grew by %d MiB", grown>>20)
		}
		if n := seen.Load(); n != 0 {
			t.Errorf("backend saw %d requests", n)
		}
	})
}

// TestH2ResetAfterResponse resets streams after their response started,
// as a client giving up on a long download does: that costs no budget and
// the connection stays.
func TestH2ResetAfterResponse(t *testing.T) {
	protocols(t, func(t *testing.T, p Protocol) {
		dial, _ := guardedServer(t, p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}))
		c := dialH2(t, dial)
		hdr := c.headers()
		c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		fr := http2.NewFramer(io.Discard, c.conn)
		for i := range 3 * resetBurst {
			id := uint32(2*i + 1)
			if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdr, EndStream: true, EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
			c.bw.Flush()
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("stream %d: %v", id, err)
				}
				if f, ok := f.(*http2.GoAwayFrame); ok {
					t.Fatalf("stream %d: GOAWAY %v", id, f.ErrCode)
				}
				if f.Header().Type == http2.FrameHeaders && f.Header().StreamID == id {
					break
				}
			}
			if err := c.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestResetBudget(t *testing.T) {
	now := time.Unix(0, 0)
	g := newGuardConn(nil)
	g.now = func() time.Time { return now }
	g.startFrames()
	for i := range resetBurst {
		if !g.spendReset() {
			t.Fatalf("reset %d refused", i)
		}
	}
	if g.spendReset() {
		t.Fatal("reset past the burst allowed")
	}
	now = now.Add(time.Second)
	for i := range resetRate {
		if !g.spendReset() {
			t.Fatalf("reset %d after a second refused", i)
		}
	}
	if g.spendReset() {
		t.Fatal("reset past the rate allowed")
	}
	// A steady trickle at the rate never runs out.
	for range 10 * resetBurst {
		now = now.Add(time.Second / resetRate)
		if !g.spendReset() {
			t.Fatal("reset at the rate refused")
		}
	}
}

// TestH2RepeatedSettings sends a setting twice in one SETTINGS frame, which
// RFC 9113 section 6.5.3 has processed in order: the connection stays and
// serves.
func TestH2RepeatedSettings(t *testing.T) {
	protocols(t, func(t *testing.T, p Protocol) {
		dial, seen := guardedServer(t, p, nil)
		c := dialH2(t, dial)
		if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 16}); err != nil {
			t.Fatal(err)
		}
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.headers(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		c.bw.Flush()
		goAway, _, status, _ := c.readUntilClosed(5 * time.Second)
		if goAway != nil || status != "200" || seen.Load() != 1 {
			t.Errorf("GOAWAY %v, status %q, backend saw %d; want none, 200, 1", goAway, status, seen.Load())
		}
	})
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
