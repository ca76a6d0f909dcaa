package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/hostgate/hostgate/proxy/guard"
)

// h2Client is a raw HTTP/2 client connection: h2c with prior knowledge,
// or h2 over TLS.
type h2Client struct {
	conn net.Conn
	bw   *bufio.Writer
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
	// rd reads what the server sends, decoding header blocks in order.
	rd *http2.Framer
}

func dialH2(t *testing.T, dial dialer) *h2Client {
	t.Helper()
	c := dial(t, "h2")
	cl := &h2Client{conn: c, bw: bufio.NewWriterSize(c, 64<<10)}
	cl.fr = http2.NewFramer(cl.bw, c)
	cl.rd = http2.NewFramer(io.Discard, c)
	cl.rd.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
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

// response reads frames until the response header of stream id, or of
// any stream if id is 0, failing the test on GOAWAY or a read error.
func (c *h2Client) response(t *testing.T, id uint32) *http2.MetaHeadersFrame {
	t.Helper()
	for {
		f, err := c.rd.ReadFrame()
		if err != nil {
			t.Fatalf("stream %d: %v", id, err)
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			t.Fatalf("stream %d: GOAWAY %v", id, f.ErrCode)
		case *http2.MetaHeadersFrame:
			if id == 0 || f.StreamID == id {
				return f
			}
		}
	}
}

// readUntilClosed reads frames until the connection ends, or stream 1 is
// answered, and returns the last GOAWAY, the RST_STREAM codes by stream,
// the status of stream 1 and whether the connection ended within d. After
// a GOAWAY it stops sending, as a client that got one does, so that the
// server need not wait to close.
func (c *h2Client) readUntilClosed(d time.Duration) (goAway *http2.GoAwayFrame, resets map[uint32]http2.ErrCode, status string, closed bool) {
	c.conn.SetReadDeadline(time.Now().Add(d))
	resets = map[uint32]http2.ErrCode{}
	for {
		f, err := c.rd.ReadFrame()
		if err != nil {
			return goAway, resets, status, !errors.Is(err, os.ErrDeadlineExceeded)
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			goAway = f
			if cw, ok := c.conn.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
		case *http2.RSTStreamFrame:
			resets[f.StreamID] = f.ErrCode
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 {
				return goAway, resets, f.PseudoValue("status"), false
			}
		}
	}
}

// TestH2MalformedHeaders sends requests with fields RFC 9113 section 8.2.2
// forbids in HTTP/2 (the H2.TE and H2.CL kind of request smuggling when a
// proxy downgrades to HTTP/1.1): each ends the connection with
// GOAWAY(PROTOCOL_ERROR) before a handler runs, so no backend sees it
// (h2spec 8.1.2.2). A lone "te: trailers", as gRPC sends, is served.
func TestH2MalformedHeaders(t *testing.T) {
	tests := []struct {
		name   string
		fields []string
	}{
		{"transfer-encoding", []string{"transfer-encoding", "chunked"}},
		{"connection", []string{"connection", "keep-alive"}},
		{"keep-alive", []string{"keep-alive", "timeout=5"}},
		{"proxy-connection", []string{"proxy-connection", "close"}},
		{"upgrade", []string{"upgrade", "websocket"}},
		{"te gzip", []string{"te", "gzip"}},
		{"te twice", []string{"te", "trailers", "te", "trailers"}},
		{"te list", []string{"te", "trailers, deflate"}},
	}
	protocols(t, func(t *testing.T, p Protocol) {
		dial, seen := guardedServer(t, p, nil)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				c := dialH2(t, dial)
				if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.headers(tt.fields...), EndStream: true, EndHeaders: true}); err != nil {
					t.Fatal(err)
				}
				c.bw.Flush()
				goAway, resets, status, closed := c.readUntilClosed(5 * time.Second)
				if goAway == nil || goAway.ErrCode != http2.ErrCodeProtocol || goAway.LastStreamID != 0 || status != "" || !closed {
					t.Errorf("GOAWAY %v, resets %v, status %q, closed %v; want GOAWAY(PROTOCOL_ERROR) after stream 0, no answer, closed", goAway, resets, status, closed)
				}
			})
		}
		c := dialH2(t, dial)
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.headers("te", "trailers"), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		c.bw.Flush()
		if goAway, _, status, _ := c.readUntilClosed(5 * time.Second); goAway != nil || status != "200" {
			t.Errorf("te: trailers: GOAWAY %v, status %q; want 200", goAway, status)
		}
		if n := seen.Load(); n != 1 {
			t.Errorf("backend saw %d requests, want 1", n)
		}
	})
}

// TestH2HeaderBlocksInStep sends many requests on one connection the way
// real encoders do, which the guard must decode as the server does to see
// their fields: HPACK's dynamic table with evictions and size updates,
// Huffman strings, never-indexed fields, blocks cut into CONTINUATION
// frames, padding and priority. Each is served with the field it carried.
// Then "te: gzip", whose name now comes from the dynamic table, is refused.
func TestH2HeaderBlocksInStep(t *testing.T) {
	protocols(t, func(t *testing.T, p Protocol) {
		dial, seen := guardedServer(t, p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Echo", r.Header.Get("X-Check"))
		}))
		c := dialH2(t, dial)
		rnd := rand.New(rand.NewPCG(1, 2))
		c.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		const requests = 300
		for i := range requests {
			id := uint32(2*i + 1)
			if i%37 == 0 {
				// A size update, sent at the start of the next block.
				c.enc.SetMaxDynamicTableSize(uint32(rnd.IntN(4097)))
			}
			check := fmt.Sprintf("%d-%s", i, strings.Repeat("v", rnd.IntN(300)))
			fields := []string{"te", "trailers", "x-check", check, "user-agent", "test/1.0"}
			for range rnd.IntN(6) {
				fields = append(fields, fmt.Sprintf("x-f%d", rnd.IntN(40)), strings.Repeat("Zz9", rnd.IntN(100)))
			}
			c.hbuf.Reset()
			for _, f := range []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"}, {Name: ":authority", Value: "a.test"}, {Name: ":path", Value: "/" + check[:4]}} {
				c.enc.WriteField(f)
			}
			for j := 0; j < len(fields); j += 2 {
				c.enc.WriteField(hpack.HeaderField{Name: fields[j], Value: fields[j+1], Sensitive: rnd.IntN(5) == 0})
			}
			block := c.hbuf.Bytes()
			cut := rnd.IntN(len(block) + 1)
			hp := http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:cut], EndStream: true, EndHeaders: cut == len(block)}
			if rnd.IntN(2) == 0 {
				hp.PadLength = uint8(rnd.IntN(256))
			}
			if rnd.IntN(3) == 0 {
				hp.Priority = http2.PriorityParam{Weight: uint8(rnd.IntN(256))}
			}
			if err := c.fr.WriteHeaders(hp); err != nil {
				t.Fatal(err)
			}
			for rest := block[cut:]; len(rest) > 0; {
				n := min(len(rest), 1+rnd.IntN(64))
				if err := c.fr.WriteContinuation(id, n == len(rest), rest[:n]); err != nil {
					t.Fatal(err)
				}
				rest = rest[n:]
			}
			c.bw.Flush()
			f := c.response(t, id)
			var echo string
			for _, hf := range f.RegularFields() {
				if hf.Name == "x-echo" {
					echo = hf.Value
				}
			}
			if status := f.PseudoValue("status"); status != "200" || echo != check {
				t.Fatalf("request %d: status %s, x-echo %q; want 200, %q", i, status, echo, check)
			}
		}
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2*requests + 1, BlockFragment: c.headers("te", "gzip"), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		c.bw.Flush()
		goAway, _, _, _ := c.readUntilClosed(5 * time.Second)
		if goAway == nil || goAway.ErrCode != http2.ErrCodeProtocol || goAway.LastStreamID != 2*requests-1 {
			t.Errorf("GOAWAY %v; want PROTOCOL_ERROR after stream %d", goAway, 2*requests-1)
		}
		if n := seen.Load(); n != requests {
			t.Errorf("backend saw %d requests, want %d", n, requests)
		}
	})
}

// TestH2RapidReset floods an h2c connection with HEADERS+RST_STREAM pairs,
// the backend answering slowly as a loaded one would: the connection gets
// GOAWAY(ENHANCE_YOUR_CALM) after resetBurst premature resets, the backend
// sees at most that many requests, and the flood costs the process about
// the CPU time of serving that many.
func TestH2RapidReset(t *testing.T) {
	protocols(t, func(t *testing.T, p Protocol) {
		dial, seen := guardedServer(t, p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(50 * time.Millisecond)
		}))
		yardstick := requestsCPU(t, dial, guard.ResetBurst)
		served := seen.Load()
		heap := watchHeap()
		cpu := cpuTime(t)
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
		const bound = guard.ResetBurst + 10
		if last := goAway.LastStreamID; last > 2*bound+1 {
			t.Errorf("GOAWAY after stream %d, want at most %d", last, 2*bound+1)
		}
		time.Sleep(100 * time.Millisecond)
		n := seen.Load() - served
		cpu = cpuTime(t) - cpu
		grown := heap()
		// The client's writes mostly fit in the socket buffers (30 bytes a
		// pair), so how far it got says little; GOAWAY says where the server
		// stopped reading.
		t.Logf("client wrote %d of %d pairs; GOAWAY after stream %d (%d streams); backend saw %d requests; CPU %v, %d requests take %v; heap in use rose by at most %d KiB", sent, pairs, goAway.LastStreamID, goAway.LastStreamID/2+1, n, cpu, guard.ResetBurst, yardstick, grown>>10)
		if grown > 16<<20 {
			t.Errorf("heap in use rose by %d MiB during the flood", grown>>20)
		}
		if n > bound {
			t.Errorf("backend saw %d requests, want at most %d", n, bound)
		}
		// Were each stream served, the flood would cost pairs/resetBurst
		// (100) times the yardstick.
		if limit := 3*yardstick + 100*time.Millisecond; cpu > limit {
			t.Errorf("the flood took %v of CPU, more than %v", cpu, limit)
		}
	})
}

// TestH2ContinuationFlood sends one endless header block in CONTINUATION
// frames: the server closes the connection once the block passes its
// header limit, with memory and CPU time bounded.
func TestH2ContinuationFlood(t *testing.T) {
	protocols(t, func(t *testing.T, p Protocol) {
		dial, seen := guardedServer(t, p, nil)
		const requests = 100
		yardstick := requestsCPU(t, dial, requests)
		served := seen.Load()
		cpu := cpuTime(t)
		heap := watchHeap()
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
		cpu = cpuTime(t) - cpu
		grown := heap()
		t.Logf("heap in use rose by at most %d KiB; CPU %v, %d requests take %v", grown>>10, cpu, requests, yardstick)
		if grown > 16<<20 {
			t.Errorf("heap in use rose by %d MiB during the flood", grown>>20)
		}
		// Decoding all 64 MiB, twice (guard and server), would take
		// seconds.
		if limit := 3*yardstick + 100*time.Millisecond; cpu > limit {
			t.Errorf("the flood took %v of CPU, more than %v", cpu, limit)
		}
		if n := seen.Load() - served; n != 0 {
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
		for i := range 3 * guard.ResetBurst {
			id := uint32(2*i + 1)
			if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdr, EndStream: true, EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
			c.bw.Flush()
			c.response(t, id)
			if err := c.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
				t.Fatal(err)
			}
		}
	})
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

// assertServed has a well-behaved client get a request answered on a
// connection of its own, as it must while another connection floods.
func assertServed(t *testing.T, dial dialer) {
	t.Helper()
	c := dialH2(t, dial)
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.headers(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	c.bw.Flush()
	if goAway, _, status, _ := c.readUntilClosed(5 * time.Second); goAway != nil || status != "200" {
		t.Errorf("another connection: GOAWAY %v, status %q; want 200", goAway, status)
	}
}

// TestH2EmptyFrameFlood sends frames that carry nothing and do nothing
// (CVE-2019-9518), twice the budget of them, then a PING: the server ends
// the connection with GOAWAY(ENHANCE_YOUR_CALM) before it reaches the PING,
// so within the budget. The same frames between frames that do work, as
// a client flushing an empty buffer now and then sends them, are served.
func TestH2EmptyFrameFlood(t *testing.T) {
	const flood = 2 * guard.EmptyFrameBurst
	tests := []struct {
		name  string
		frame func(c *h2Client) error
	}{
		{"data", func(c *h2Client) error { return c.fr.WriteData(1, false, nil) }},
		{"continuation", func(c *h2Client) error { return c.fr.WriteContinuation(1, false, nil) }},
		{"priority", func(c *h2Client) error {
			return c.fr.WritePriority(3, http2.PriorityParam{StreamDep: 1, Weight: 15})
		}},
	}
	protocols(t, func(t *testing.T, p Protocol) {
		dial, _ := guardedServer(t, p, nil)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				c := dialH2(t, dial)
				// The block of stream 1 stays open for CONTINUATION
				// frames, its body for DATA frames.
				continuation := tt.name == "continuation"
				if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.headers(), EndHeaders: !continuation}); err != nil {
					t.Fatal(err)
				}
				for range flood {
					if err := tt.frame(c); err != nil {
						t.Fatal(err)
					}
				}
				// Within a header block the PING is a protocol error:
				// a server that took the flood ends with PROTOCOL_ERROR.
				ping := [8]byte{'f', 'l', 'o', 'o', 'd', 'e', 'n', 'd'}
				if err := c.fr.WritePing(false, ping); err != nil {
					t.Fatal(err)
				}
				c.bw.Flush()
				c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				var goAway *http2.GoAwayFrame
				pinged := false
				var err error
				for err == nil {
					var f http2.Frame
					f, err = c.rd.ReadFrame()
					switch f := f.(type) {
					case *http2.GoAwayFrame:
						goAway = f
					case *http2.PingFrame:
						pinged = pinged || f.IsAck() && f.Data == ping
					}
				}
				if goAway == nil || goAway.ErrCode != http2.ErrCodeEnhanceYourCalm || pinged || errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("GOAWAY %v, PING answered %v, read ended by %v; want GOAWAY(ENHANCE_YOUR_CALM) within %d frames, the PING after them unanswered, the connection closed", goAway, pinged, err, flood)
				}
			})
		}
		t.Run("data between data", func(t *testing.T) {
			c := dialH2(t, dial)
			if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.headers(), EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
			for range flood {
				if c.fr.WriteData(1, false, nil) != nil || c.fr.WriteData(1, false, []byte("x")) != nil {
					t.Fatal("write failed")
				}
			}
			if err := c.fr.WriteData(1, true, nil); err != nil {
				t.Fatal(err)
			}
			c.bw.Flush()
			if goAway, _, status, _ := c.readUntilClosed(10 * time.Second); goAway != nil || status != "200" {
				t.Errorf("GOAWAY %v, status %q; want 200", goAway, status)
			}
		})
		assertServed(t, dial)
	})
}

// controlFlood sends frames that each ask for an answer (PING, SETTINGS)
// of answerSize bytes and reads none of them until it has sent them all.
// The answers must not pile up: the heap stays bounded, the client gets
// a bounded number of them, and other clients are still served.
// hostgate's engine ends the connection, queueing
// GOAWAY(ENHANCE_YOUR_CALM) behind 1 MiB of answers; net/http's closes it
// past 10,000 queued control frames unless stdlibCloses is false: it
// answers SETTINGS frames not yet answered with one acknowledgement, and
// reads on. A GOAWAY behind answers the client does not read may never
// reach it, so the test asserts its code when one came.
func controlFlood(t *testing.T, answerSize int, stdlibCloses bool, frame func(c *h2Client) error) {
	closes := stdlibCloses || testOptions().HTTP2Engine != EngineStdlib
	protocols(t, func(t *testing.T, p Protocol) {
		dial, _ := guardedServer(t, p, nil)
		heap := watchHeap()
		c := dialH2(t, dial)
		// 34 MiB of PING answers, 18 MiB of SETTINGS ones, if nothing
		// stops them.
		const frames = 2 << 20
		c.conn.SetWriteDeadline(time.Now().Add(60 * time.Second))
		sent := 0
		var writeErr error
		for sent < frames && writeErr == nil {
			if writeErr = frame(c); writeErr == nil && sent%1024 == 1023 {
				writeErr = c.bw.Flush()
			}
			sent++
		}
		if writeErr == nil {
			writeErr = c.bw.Flush()
		}
		wait := 2 * time.Second
		if closes {
			wait = 10 * time.Second
		}
		c.conn.SetReadDeadline(time.Now().Add(wait))
		answers := 0
		var goAway *http2.GoAwayFrame
		var readErr error
		for readErr == nil {
			var f http2.Frame
			f, readErr = c.rd.ReadFrame()
			switch f := f.(type) {
			case *http2.PingFrame, *http2.SettingsFrame:
				if f.Header().Flags.Has(http2.FlagPingAck) {
					answers++
				}
			case *http2.GoAwayFrame:
				goAway = f
			}
		}
		grown := heap()
		t.Logf("client wrote %d of %d frames (%v), read %d answers, GOAWAY %v (%v); heap in use rose by at most %d KiB", sent, frames, writeErr, answers, goAway, readErr, grown>>10)
		if errors.Is(writeErr, os.ErrDeadlineExceeded) {
			t.Error("the server stopped reading and kept the connection")
		}
		if closes && errors.Is(readErr, os.ErrDeadlineExceeded) {
			t.Error("connection not closed")
		}
		// The socket buffers between server and client held up to 5 MiB
		// of answers (measured), 1 MiB more waits in hostgate's queue.
		if answers*answerSize > 12<<20 {
			t.Errorf("the server answered %d of %d frames, %d MiB; want the connection ended within 12 MiB", answers, frames, answers*answerSize>>20)
		}
		if goAway != nil && goAway.ErrCode != http2.ErrCodeEnhanceYourCalm {
			t.Errorf("GOAWAY %v; want ENHANCE_YOUR_CALM", goAway)
		}
		if grown > 16<<20 {
			t.Errorf("heap in use rose by %d MiB during the flood", grown>>20)
		}
		assertServed(t, dial)
	})
}

// TestH2PingFlood sends PINGs and never reads their acknowledgements
// (CVE-2019-9512).
func TestH2PingFlood(t *testing.T) {
	controlFlood(t, 17, true, func(c *h2Client) error { return c.fr.WritePing(false, [8]byte{}) })
}

// TestH2SettingsFlood sends empty SETTINGS frames and never reads their
// acknowledgements (CVE-2019-9515).
func TestH2SettingsFlood(t *testing.T) {
	controlFlood(t, 9, false, func(c *h2Client) error { return c.fr.WriteSettings() })
}
