package h2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// FuzzServeConn serves one connection whose client is a program decoded
// from the fuzzer's bytes: a sequence of frames, well-formed or not, with
// valid HPACK header blocks so that requests reach a handler that reads
// the body, answers, flushes, sets trailers or aborts as the request asks.
//
// Raw bytes alone would rarely get past the preface, the first SETTINGS
// and HPACK; a frame-level program keeps most inputs inside the protocol,
// where the server's state lives.
//
// Besides panics, the target fails when:
//   - the server writes a frame the client's Framer rejects, or one that
//     breaks a response's sequence (DATA before the final header, a 1xx
//     after it, anything after END_STREAM or the server's RST_STREAM,
//     more DATA than the client's windows allowed, a body whose length
//     differs from its Content-Length);
//   - the server does not answer a PING in time while the connection is
//     up: its reader is stuck;
//   - its accounting breaks: a stream's receive window not matching the
//     bytes it holds for the handler, more request body buffered than the
//     connection's window, or the writer's queue growing past its bounds
//     while the client does not read;
//   - ServeConn does not return soon after the client closes, or
//     goroutines (handlers, the writer, timers) outlive the connection.
func FuzzServeConn(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(runFuzzProgram)
}

// The program's operations: a byte modulo numOps, followed by the bytes
// the operation reads (see fuzzClient.step). Bytes past the end of the
// input read as zero.
const (
	opHeaders = iota
	opData
	opReset
	opWindowUpdate
	opSettings
	opPing
	opGoAway
	opPriority
	opTrailers
	opContinuation
	opRawFrame
	opPushPromise
	opPause
	opResume
	opSync
	opRepeat
	opDrain       // Server.Drain
	opServerClose // Server.Close
	numOps
)

// Bits of the program's first byte, which configures the server and the
// client.
const (
	cfgStreamsMask = 3      // MaxConcurrentStreams: default, 1, 2 or 8
	cfgSmallHeader = 1 << 2 // MaxHeaderListSize 512: large requests get 431
	cfgIdle        = 1 << 3 // IdleTimeout 5ms
	cfgAutoWindow  = 1 << 4 // the client returns flow-control window at each sync
	cfgBigSettings = 1 << 5 // the client's first SETTINGS has huge frames and windows
	// cfgUpgrade serves the connection as upgraded from HTTP/1.1 to h2c:
	// stream 1 is a GET whose X-Act and HTTP2-Settings the next bytes
	// give (act, odd, the settings' length, the settings).
	cfgUpgrade = 1 << 6
)

// Limits of one input, so that each runs in milliseconds.
const (
	fuzzMaxOps     = 1000
	fuzzMaxWritten = 2 << 20
	// fuzzWait bounds every wait for the server; a healthy one answers
	// in microseconds, and ends a connection in goAwayLinger at most.
	fuzzWait = 5 * time.Second
)

func runFuzzProgram(t *testing.T, prog []byte) {
	baseline := runtime.NumGoroutine()

	cfg := byte(0)
	if len(prog) > 0 {
		cfg, prog = prog[0], prog[1:]
	}
	var handlers atomic.Int32
	srv := &Server{Handler: fuzzHandler(&handlers)}
	srv.MaxConcurrentStreams = [4]uint32{0, 1, 2, 8}[cfg&cfgStreamsMask]
	if cfg&cfgSmallHeader != 0 {
		srv.MaxHeaderListSize = 512
	}
	if cfg&cfgIdle != 0 {
		srv.IdleTimeout = 5 * time.Millisecond
	}

	var opts ConnOpts
	if cfg&cfgUpgrade != 0 {
		var up [3]byte
		prog = prog[copy(up[:], prog):]
		n := min(int(up[2]%16), len(prog))
		opts.Settings, prog = prog[:n], prog[n:]
		opts.Upgrade, _ = http.NewRequest("GET", "http://example.com/up", http.NoBody)
		opts.Upgrade.Header.Set("X-Act", fmt.Sprintf("%d,%d", up[0], up[1]))
	}

	cn, sn := net.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.ServeConn(sn, opts)
	}()
	c := newFuzzClient(srv, cn, prog, cfg)
	c.running = &handlers
	if opts.Upgrade != nil {
		c.next = 1
		c.streams[1] = &fuzzStream{length: -1}
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		c.drain()
	}()

	c.run()

	cn.Close()
	select {
	case <-served:
	case <-time.After(fuzzWait):
		t.Fatalf("ServeConn did not return %v after the client closed the connection\n%s", fuzzWait, goroutines())
	}
	<-drained
	// Handler goroutines kept for later streams are the Server's, not
	// the connection's: they end with it.
	srv.EndIdleHandlers()
	deadline := time.Now().Add(fuzzWait)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after the connection ended (%d handlers running), %d before it\n%s",
				runtime.NumGoroutine(), handlers.Load(), baseline, goroutines())
		}
		time.Sleep(time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.violations {
		t.Error(v)
	}
}

func goroutines() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// fuzzHandler serves what the request's X-Act asks: two numbers, the first
// a set of bits (the a* constants), the second one odd behaviour.
func fuzzHandler(running *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		running.Add(1)
		defer running.Add(-1)
		var act, odd int
		if a, b, ok := strings.Cut(r.Header.Get("X-Act"), ","); ok {
			act, _ = strconv.Atoi(a)
			odd, _ = strconv.Atoi(b)
		}
		odd %= 16
		rc := http.NewResponseController(w)
		switch odd {
		case 3:
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
		case 5:
			_ = rc.SetReadDeadline(time.Now().Add(time.Millisecond))
		case 6:
			_ = rc.SetWriteDeadline(time.Now().Add(time.Millisecond))
		case 8:
			// A reader the handler does not wait for: its reads
			// fail once the handler has returned.
			go func() { _, _ = io.Copy(io.Discard, r.Body) }()
		case 9:
			_ = rc.SetReadDeadline(time.Now().Add(-time.Second))
			_ = rc.SetWriteDeadline(time.Now().Add(-time.Second))
			_ = rc.SetReadDeadline(time.Time{})
			_ = rc.SetWriteDeadline(time.Time{})
		case 11:
			w.WriteHeader(http.StatusContinue)
		case 13:
			_ = rc.Flush()
		}
		readBody := func() {
			_, _ = io.Copy(io.Discard, r.Body)
			if odd == 14 {
				_, _ = r.Body.Read(make([]byte, 1))
				_ = r.Body.Close()
				_, _ = r.Body.Read(make([]byte, 1))
			}
		}
		var reader sync.WaitGroup
		switch {
		case act&aProxy != 0:
			reader.Go(readBody)
		case act&3 == aRead:
			readBody()
		case act&3 == aReadSome:
			_, _ = io.ReadFull(r.Body, make([]byte, 100))
			r.Body.Close()
		}
		size := [4]int{0, 10, 20 << 10, 200 << 10}[act>>4&3]
		status := http.StatusOK
		switch odd {
		case 1:
			// More than will be written: the stream is reset.
			w.Header().Set("Content-Length", strconv.Itoa(size+10))
		case 2:
			// Less than the handler writes: its writes fail.
			w.Header().Set("Content-Length", "1")
		case 4:
			status = http.StatusNoContent
		case 7:
			w.Header().Set("Connection", "close")
		case 10:
			status = http.StatusNotModified
		case 12:
			w.Header().Set("Content-Length", strconv.Itoa(size))
		}
		if act&aTrailer != 0 {
			w.Header().Set("Trailer", "X-T")
		}
		w.WriteHeader(status)
		if act&aFlush != 0 {
			_ = rc.Flush()
		}
		chunk := make([]byte, 8<<10)
		for size > 0 {
			n := min(size, len(chunk))
			if _, err := w.Write(chunk[:n]); err != nil {
				break
			}
			size -= n
			if act&aFlush != 0 {
				_ = rc.Flush()
			}
		}
		if act&(aProxy|3) == aReadLate {
			// A client expecting 100-continue gets no 100 after
			// the 200, and a stream reset meanwhile has its body
			// still read.
			readBody()
		}
		if act&aTrailer != 0 {
			w.Header().Set("X-T", "t")
			w.Header().Set(http.TrailerPrefix+"X-Late", "l")
		}
		reader.Wait()
		switch {
		case act&aAbort != 0:
			panic(http.ErrAbortHandler)
		case odd == 15:
			panic("handler bug")
		}
	})
}

// fuzzClient runs a program against the server and checks what it answers.
type fuzzClient struct {
	srv *Server
	nc  net.Conn
	in  []byte
	cfg byte
	// running counts the handlers running.
	running *atomic.Int32

	// Owned by run.
	buf  bytes.Buffer
	fr   *http2.Framer // writes into buf
	henc *hpack.Encoder
	hbuf bytes.Buffer
	last []byte // the frames of the last operation, for opRepeat
	// grants are the WINDOW_UPDATEs of the operation under way, and
	// lastGrants those of last, which a repeat gives again.
	grants, lastGrants []fuzzGrant
	written            int
	next               uint32 // the newest stream opened
	seq                uint64 // of the sync PINGs

	mu   sync.Mutex
	cond sync.Cond
	// paused stops drain from reading.
	paused bool
	// gone says the server ends the connection: it closed it, or sent
	// GOAWAY for an error.
	gone  bool
	acked map[[8]byte]bool
	// The client's side of the protocol, which what the server sends
	// is checked against.
	streams     map[uint32]*fuzzStream
	maxFrame    uint32 // the largest SETTINGS_MAX_FRAME_SIZE sent
	maxWindow   int64  // the largest SETTINGS_INITIAL_WINDOW_SIZE sent
	connGranted int64  // the connection window the client gave
	connRecv    int64  // the DATA it got
	connUnacked int64  // the DATA not given back yet (cfgAutoWindow)
	goAwayID    int64  // the last GOAWAY's last stream, -1 before one
	frames      int    // but the answers to sync
	violations  []string
}

// fuzzStream is what the client knows of a stream it opened.
type fuzzStream struct {
	isHead  bool
	status  int   // of the final header, 0 before it
	length  int64 // its Content-Length, -1 without
	ended   bool  // the server sent END_STREAM
	reset   bool  // the server sent RST_STREAM
	granted int64 // WINDOW_UPDATE increments the client sent
	recv    int64 // DATA received
	body    int64 // DATA received after padding
	unacked int64
}

func newFuzzClient(srv *Server, nc net.Conn, in []byte, cfg byte) *fuzzClient {
	c := &fuzzClient{
		srv: srv, nc: nc, in: in, cfg: cfg,
		acked:       map[[8]byte]bool{},
		streams:     map[uint32]*fuzzStream{},
		maxFrame:    16 << 10,
		maxWindow:   65535,
		connGranted: 65535,
		goAwayID:    -1,
	}
	c.cond.L = &c.mu
	c.fr = http2.NewFramer(&c.buf, nil)
	c.fr.AllowIllegalWrites = true
	c.henc = hpack.NewEncoder(&c.hbuf)
	return c
}

func (c *fuzzClient) violation(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	if !slices.Contains(c.violations, v) {
		c.violations = append(c.violations, v)
	}
}

// Reading the program.

func (c *fuzzClient) byte() byte {
	if len(c.in) == 0 {
		return 0
	}
	b := c.in[0]
	c.in = c.in[1:]
	return b
}

func (c *fuzzClient) u16() uint16 { return uint16(c.byte())<<8 | uint16(c.byte()) }
func (c *fuzzClient) u32() uint32 { return uint32(c.u16())<<16 | uint32(c.u16()) }

// pick is one of values, or past them any 32-bit value.
func (c *fuzzClient) pick(values []uint32) uint32 {
	if i := int(c.byte() % 16); i < len(values) {
		return values[i]
	}
	return c.u32()
}

func (c *fuzzClient) bytes(n int) []byte {
	n = min(n, len(c.in))
	b := c.in[:n]
	c.in = c.in[n:]
	return b
}

// stream picks a stream ID: a new one, the newest, an older one or any
// 31-bit value (zero and even IDs included).
func (c *fuzzClient) stream(b byte) uint32 {
	switch b % 4 {
	case 0:
		return c.newStream()
	case 1:
		return max(c.next, 1)
	case 2:
		n := max((c.next+1)/2, 1)
		return 1 + 2*(uint32(b>>2)%n)
	}
	return c.u32() & 0x7fffffff
}

// openStream picks a stream the client opened: the newest or an older one.
func (c *fuzzClient) openStream(b byte) uint32 {
	if b&1 != 0 {
		return c.stream(b&^3 | 2)
	}
	return c.stream(b&^3 | 1)
}

func (c *fuzzClient) newStream() uint32 {
	if c.next == 0 {
		c.next = 1
	} else {
		c.next += 2
	}
	return c.next
}

// Writing.

// flush writes the frames of one operation.
func (c *fuzzClient) flush() bool {
	c.last = append(c.last[:0], c.buf.Bytes()...)
	c.lastGrants, c.grants = append(c.lastGrants[:0], c.grants...), c.grants[:0]
	c.buf.Reset()
	return c.budget(len(c.last)) && c.write(c.last)
}

// budget takes n bytes of what a program may write, false past it.
func (c *fuzzClient) budget(n int) bool {
	c.written += n
	return c.written <= fuzzMaxWritten
}

// write writes b to the server, false once it cannot. While the client
// does not read, a server ending the connection stops reading too until
// its writer is done, goAwayLinger at most: rather than stall the input
// that long, a paused client reads again after a short wait.
func (c *fuzzClient) write(b []byte) bool {
	for len(b) > 0 {
		c.mu.Lock()
		paused, gone := c.paused, c.gone
		c.mu.Unlock()
		if gone {
			return false
		}
		wait := fuzzWait
		if paused {
			wait = 20 * time.Millisecond
		}
		_ = c.nc.SetWriteDeadline(time.Now().Add(wait))
		n, err := c.nc.Write(b)
		b = b[n:]
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded) && paused:
			c.resume()
		case errors.Is(err, os.ErrDeadlineExceeded):
			c.mu.Lock()
			if !c.gone {
				c.violation("the server read nothing for %v", wait)
			}
			c.mu.Unlock()
			return false
		default:
			return false
		}
	}
	return true
}

func (c *fuzzClient) pause() {
	c.mu.Lock()
	c.paused = true
	c.mu.Unlock()
}

// resume has drain read again, checking first that the server's queue
// stayed bounded while the client did not read.
func (c *fuzzClient) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.paused {
		return
	}
	c.checkQueue()
	c.paused = false
	c.cond.Broadcast()
}

// run writes the preface and the program, then lets the server finish
// what it can before the connection is closed.
func (c *fuzzClient) run() {
	var settings []http2.Setting
	if c.cfg&cfgBigSettings != 0 {
		settings = []http2.Setting{{ID: http2.SettingMaxFrameSize, Val: 1<<24 - 1}, {ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}}
		c.noteSettings(settings)
	}
	c.buf.WriteString(clientPreface)
	_ = c.fr.WriteSettings(settings...)
	if !c.flush() {
		return
	}
	for ops := 0; len(c.in) > 0 && ops < fuzzMaxOps; ops++ {
		if !c.step() {
			break
		}
	}
	// Handlers started last may not have run yet: the connection stays
	// up while they make progress, so that what they do is checked
	// rather than cut short by the close.
	for range 32 {
		c.mu.Lock()
		before := c.frames
		c.mu.Unlock()
		if !c.sync() || c.running.Load() == 0 || !c.moreFrames(before, 2*time.Millisecond) {
			break
		}
	}
}

// moreFrames reports whether the server has sent frames past the first
// n, waiting up to d for them.
func (c *fuzzClient) moreFrames(n int, d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waitFor(d, func() bool { return c.frames != n })
	return c.frames != n
}

// waitFor waits, with c.mu held, until done, the connection is gone or d
// has passed, and reports whether d passed.
func (c *fuzzClient) waitFor(d time.Duration, done func() bool) (expired bool) {
	timer := time.AfterFunc(d, func() {
		c.mu.Lock()
		expired = true
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer timer.Stop()
	for !done() && !c.gone && !expired {
		c.cond.Wait()
	}
	return expired
}

// step runs one operation of the program, false once the connection is
// gone.
func (c *fuzzClient) step() bool {
	switch c.byte() % numOps {
	case opHeaders:
		c.headers()
	case opData:
		id := c.stream(c.byte())
		fl := c.byte()
		size := [8]int{0, 1, 100, -1, 1000, 16 << 10, 16<<10 + 1, -2}[c.byte()%8]
		switch size {
		case -1:
			size = int(c.byte())
		case -2:
			size = int(c.u16())
		}
		var pad []byte
		if fl&2 != 0 {
			pad = make([]byte, c.byte())
		}
		data := make([]byte, size)
		reps := 1 + int(fl>>2)
		for i := range reps {
			_ = c.fr.WriteDataPadded(id, fl&1 != 0 && i == reps-1, data, pad)
		}
	case opReset:
		id := c.stream(c.byte())
		_ = c.fr.WriteRSTStream(id, http2.ErrCode(c.byte()%14))
	case opWindowUpdate:
		b := c.byte()
		id := uint32(0)
		if b&1 != 0 {
			id = c.stream(b >> 1)
		}
		inc := c.pick([]uint32{0, 1, 1024, 65535, 1 << 20, 1 << 30, 1<<31 - 1}) & 0x7fffffff
		c.grant(fuzzGrant{id, int64(inc)})
		_ = c.fr.WriteWindowUpdate(id, inc)
	case opSettings:
		fl := c.byte()
		if fl&1 != 0 {
			_ = c.fr.WriteSettingsAck()
			break
		}
		settings := make([]http2.Setting, int(fl>>1)%5)
		for i := range settings {
			id := [8]http2.SettingID{1, 2, 3, 4, 5, 6, 8, 0x99}[c.byte()%8]
			val := c.pick([]uint32{0, 1, 100, 4095, 16383, 16384, 65535, 65536, 1<<24 - 1, 1 << 24, 1<<31 - 1, 1 << 31, 1<<32 - 1})
			settings[i] = http2.Setting{ID: id, Val: val}
		}
		c.noteSettings(settings)
		_ = c.fr.WriteSettings(settings...)
	case opPing:
		ack := c.byte()&1 != 0
		var data [8]byte
		binary.BigEndian.PutUint64(data[:], uint64(c.u32())<<32|uint64(c.u32()))
		data[0] &^= 0x80 // not a sync PING's
		_ = c.fr.WritePing(ack, data)
	case opGoAway:
		_ = c.fr.WriteGoAway(c.stream(c.byte()), http2.ErrCode(c.byte()%14), c.bytes(int(c.byte()%16)))
	case opPriority:
		id := c.stream(c.byte())
		b := c.byte()
		dep := id
		if b&1 == 0 {
			dep = uint32(c.byte())
		}
		_ = c.fr.WritePriority(id, http2.PriorityParam{StreamDep: dep, Exclusive: b&2 != 0, Weight: c.byte()})
	case opTrailers:
		id := c.openStream(c.byte())
		fl := c.byte()
		fields := []hpack.HeaderField{{Name: "x-t", Value: "done"}}
		if fl&2 != 0 {
			fields = append(fields, hpack.HeaderField{Name: ":path", Value: "/"})
		}
		if fl&4 != 0 {
			fields = append(fields, hpack.HeaderField{Name: "content-length", Value: "0"})
		}
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.encode(fields), EndStream: fl&1 != 0, EndHeaders: fl&8 == 0})
	case opContinuation:
		id := c.openStream(c.byte())
		fl := c.byte()
		var block []byte
		if fl&2 != 0 {
			block = c.encode([]hpack.HeaderField{{Name: "x-c", Value: "c"}})
		} else {
			block = c.bytes(int(c.byte() % 32))
		}
		_ = c.fr.WriteContinuation(id, fl&1 != 0, block)
	case opRawFrame:
		typ, flags := http2.FrameType(c.byte()), http2.Flags(c.byte())
		id := c.stream(c.byte())
		_ = c.fr.WriteRawFrame(typ, flags, id, c.bytes(int(c.byte()%64)))
	case opPushPromise:
		id := c.stream(c.byte())
		_ = c.fr.WritePushPromise(http2.PushPromiseParam{StreamID: id, PromiseID: c.u32() & 0x7fffffff, BlockFragment: c.encode(c.request("GET")), EndHeaders: true})
	case opPause:
		c.pause()
		return true
	case opResume:
		c.resume()
		return true
	case opSync:
		return c.sync()
	case opDrain:
		c.srv.Drain()
		return true
	case opServerClose:
		c.srv.Close()
		return true
	case opRepeat:
		// Mostly a few, at most 32768: long floods are slow to run.
		n := 1 + int(c.byte())<<(c.byte()%8)
		for range n {
			for _, g := range c.lastGrants {
				c.grant(g)
			}
			if !c.budget(len(c.last)) || !c.write(c.last) {
				return false
			}
		}
		c.grants = c.grants[:0]
		return true
	}
	return c.flush()
}

// headers opens a stream with a request, valid or not, whose X-Act tells
// the handler what to do.
func (c *fuzzClient) headers() {
	b := c.byte()
	var id uint32
	if b%8 < 5 {
		id = c.newStream()
	} else {
		id = c.stream(b)
	}
	fl, tmpl := c.byte(), c.byte()
	act, odd := c.byte(), c.byte()
	method := [8]string{"GET", "POST", "HEAD", "PUT", "CONNECT", "OPTIONS", "DELETE", ""}[tmpl&7]
	fields := c.request(method)
	if tmpl&8 != 0 {
		fields = malform(fields, c.byte())
	}
	fields = append(fields, hpack.HeaderField{Name: "x-act", Value: fmt.Sprintf("%d,%d", act, odd)})
	if tmpl&16 != 0 {
		fields = append(fields, hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(int(c.byte()))})
	}
	if tmpl&32 != 0 {
		fields = append(fields, hpack.HeaderField{Name: "expect", Value: "100-continue"})
	}
	if tmpl&64 != 0 {
		fields = append(fields, hpack.HeaderField{Name: "trailer", Value: "x-t"})
	}
	if tmpl&128 != 0 {
		big := c.byte()
		for i := range 1 + int(big>>5) {
			fields = append(fields, hpack.HeaderField{Name: "x-big" + strconv.Itoa(i), Value: strings.Repeat("b", 256*(1+int(big&31)))})
		}
	}
	block := c.encode(fields)
	p := http2.HeadersFrameParam{StreamID: id, EndStream: fl&1 != 0}
	if fl&16 != 0 {
		p.PadLength = c.byte()
	}
	if fl&8 != 0 {
		dep := id
		if fl&64 == 0 {
			dep = uint32(c.byte())
		}
		p.Priority = http2.PriorityParam{StreamDep: dep, Exclusive: fl&128 != 0, Weight: c.byte()}
	}
	// Split into fragments of the server's largest frame at most, and
	// into one to four in any case.
	parts := 1 + int(fl>>1&3)
	size := max(min((len(block)+parts-1)/parts, 16<<10-300), 1)
	first := min(size, len(block))
	p.BlockFragment, block = block[:first], block[first:]
	openEnd := fl&32 != 0 // the block is left open: what follows is not its CONTINUATION
	p.EndHeaders = len(block) == 0 && !openEnd
	_ = c.fr.WriteHeaders(p)
	for len(block) > 0 {
		n := min(size, len(block))
		_ = c.fr.WriteContinuation(id, n == len(block) && !openEnd, block[:n])
		block = block[n:]
	}
	c.mu.Lock()
	if c.streams[id] == nil {
		c.streams[id] = &fuzzStream{isHead: method == "HEAD", length: -1}
	}
	c.mu.Unlock()
}

func (c *fuzzClient) request(method string) []hpack.HeaderField {
	fields := []hpack.HeaderField{{Name: ":method", Value: method}}
	switch method {
	case "CONNECT":
		fields = append(fields, hpack.HeaderField{Name: ":authority", Value: "example.com:443"})
	case "OPTIONS":
		fields = append(fields, hpack.HeaderField{Name: ":scheme", Value: "https"}, hpack.HeaderField{Name: ":authority", Value: "example.com"}, hpack.HeaderField{Name: ":path", Value: "*"})
	default:
		fields = append(fields, hpack.HeaderField{Name: ":scheme", Value: "https"}, hpack.HeaderField{Name: ":authority", Value: "example.com"}, hpack.HeaderField{Name: ":path", Value: "/p?q=1"})
	}
	return append(fields, hpack.HeaderField{Name: "cookie", Value: "a=1"}, hpack.HeaderField{Name: "cookie", Value: "b=2"})
}

// malform breaks a request in one of the ways RFC 9113 section 8.1.1
// calls malformed, or bends it in a way that is not.
func malform(fields []hpack.HeaderField, how byte) []hpack.HeaderField {
	set := func(name, value string) {
		for i := range fields {
			if fields[i].Name == name {
				fields[i].Value = value
				return
			}
		}
		fields = append(fields, hpack.HeaderField{Name: name, Value: value})
	}
	switch how % 14 {
	case 0:
		fields = fields[:1] // pseudo-fields missing
	case 1:
		set(":path", "no-slash")
	case 2:
		set(":authority", "bad host")
	case 3:
		fields = append(fields, hpack.HeaderField{Name: "connection", Value: "close"})
	case 4:
		fields = append(fields, hpack.HeaderField{Name: "te", Value: "gzip"})
	case 5:
		fields = append(fields, hpack.HeaderField{Name: "content-length", Value: "+5"})
	case 6:
		fields = append(fields, hpack.HeaderField{Name: "content-length", Value: "1"}, hpack.HeaderField{Name: "content-length", Value: "2"})
	case 7:
		fields = append(fields, hpack.HeaderField{Name: ":path", Value: "/late"})
	case 8:
		fields = append(fields, hpack.HeaderField{Name: "X-Upper", Value: "1"})
	case 9:
		fields = append(fields, hpack.HeaderField{Name: ":protocol", Value: "websocket"})
	case 10:
		fields = append([]hpack.HeaderField{{Name: ":method", Value: "PUT"}}, fields...)
	case 11:
		fields = append(fields, hpack.HeaderField{Name: "x-bad", Value: "a\r\nb"})
	case 12:
		set(":authority", "")
		fields = append(fields, hpack.HeaderField{Name: "host", Value: "example.org"})
	case 13:
		fields = append(fields, hpack.HeaderField{Name: "te", Value: "trailers"}, hpack.HeaderField{Name: "content-length", Value: "0"})
	}
	return fields
}

func (c *fuzzClient) encode(fields []hpack.HeaderField) []byte {
	c.hbuf.Reset()
	for _, f := range fields {
		_ = c.henc.WriteField(f)
	}
	return bytes.Clone(c.hbuf.Bytes())
}

// noteSettings keeps the bounds the server's frames must keep to; a
// setting is taken as soon as it is sent, which can only widen them.
func (c *fuzzClient) noteSettings(settings []http2.Setting) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range settings {
		if s.Valid() != nil {
			continue
		}
		switch s.ID {
		case http2.SettingMaxFrameSize:
			c.maxFrame = max(c.maxFrame, s.Val)
		case http2.SettingInitialWindowSize:
			c.maxWindow = max(c.maxWindow, int64(s.Val))
		}
	}
}

// fuzzGrant is a WINDOW_UPDATE the client sent.
type fuzzGrant struct {
	id uint32
	n  int64
}

func (c *fuzzClient) grant(g fuzzGrant) {
	c.grants = append(c.grants, g)
	c.mu.Lock()
	defer c.mu.Unlock()
	if g.id == 0 {
		c.connGranted += g.n
	} else if st := c.streams[g.id]; st != nil {
		st.granted += g.n
	}
}

// sync has the server answer a PING, which it does after acting on every
// frame sent before, then checks its state. With cfgAutoWindow, the window
// the server's DATA took is given back first. False once the connection
// is gone.
func (c *fuzzClient) sync() bool {
	c.resume()
	if c.cfg&cfgAutoWindow != 0 {
		c.mu.Lock()
		for id, st := range c.streams {
			if st.unacked > 0 && !st.ended && !st.reset {
				_ = c.fr.WriteWindowUpdate(id, uint32(st.unacked))
				st.granted += st.unacked
				st.unacked = 0
			}
		}
		if c.connUnacked > 0 {
			_ = c.fr.WriteWindowUpdate(0, uint32(c.connUnacked))
			c.connGranted += c.connUnacked
			c.connUnacked = 0
		}
		c.mu.Unlock()
	}
	c.seq++
	var data [8]byte
	binary.BigEndian.PutUint64(data[:], 0xff<<56|c.seq)
	_ = c.fr.WritePing(false, data)
	frames := bytes.Clone(c.buf.Bytes())
	c.buf.Reset()
	if !c.write(frames) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	timedOut := c.waitFor(fuzzWait, func() bool { return c.acked[data] })
	if c.gone {
		return false
	}
	if timedOut {
		c.violation("no answer to PING in %v on a connection still open", fuzzWait)
		return false
	}
	c.checkServer()
	return true
}

// checkServer checks the accounting of the server's connections, at a
// point where the reader has acted on all the client sent. c.mu is held.
func (c *fuzzClient) checkServer() {
	c.srv.mu.Lock()
	conns := make([]*conn, 0, len(c.srv.conns))
	for sc := range c.srv.conns {
		conns = append(conns, sc)
	}
	c.srv.mu.Unlock()
	for _, sc := range conns {
		sc.mu.Lock()
		var buffered int64
		for id, st := range sc.streams {
			if st.aborted != nil || st.discard {
				continue
			}
			unread := int64(len(st.body) - st.bodyOff)
			buffered += unread
			// The window the stream's client has spent is what
			// the handler has yet to read, or has read and not
			// been given back yet: any other byte is never given
			// back, and the stream stalls once they add up.
			if held := int64(recvWindow - st.recvWindow); held != unread+int64(st.unacked) {
				c.violation("stream %d: %d bytes of its receive window spent, %d unread and %d read not given back", id, held, unread, st.unacked)
			}
		}
		if buffered > connRecvWindow {
			c.violation("%d bytes of request bodies buffered, past the connection's window of %d", buffered, connRecvWindow)
		}
		sc.mu.Unlock()
	}
	c.checkQueue()
}

// checkQueue checks that the server's writer queue holds no more than its
// bounds allow: frames answering the client's up to 4*maxQueued, DATA
// while under maxQueued, and the headers of the handlers. c.mu is held.
func (c *fuzzClient) checkQueue() {
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	for sc := range c.srv.conns {
		sc.mu.Lock()
		if n, bound := len(sc.out), 4*maxQueued+int(c.maxFrame)+128<<10; n > bound {
			c.violation("the server queued %d bytes for a client that does not read, past %d", n, bound)
		}
		sc.mu.Unlock()
	}
}

// drain reads what the server writes, unless paused, and checks it.
func (c *fuzzClient) drain() {
	fr := http2.NewFramer(nil, c.nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.SetMaxReadFrameSize(1<<24 - 1)
	for {
		c.mu.Lock()
		for c.paused {
			c.cond.Wait()
		}
		c.mu.Unlock()
		f, err := fr.ReadFrame()
		c.mu.Lock()
		if err != nil {
			var ce http2.ConnectionError
			var se http2.StreamError
			if errors.As(err, &ce) || errors.As(err, &se) || errors.Is(err, http2.ErrFrameTooLarge) {
				c.violation("the server wrote a frame the client rejects: %v", err)
			}
			c.gone = true
			c.cond.Broadcast()
			c.mu.Unlock()
			return
		}
		c.check(f)
		c.cond.Broadcast()
		c.mu.Unlock()
	}
}

// check checks a frame of the server against what came before. c.mu is
// held.
func (c *fuzzClient) check(f http2.Frame) {
	c.frames++
	id := f.Header().StreamID
	if c.frames == 1 {
		if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
			c.violation("the server's first frame is %v, not SETTINGS", f.Header())
		}
	}
	st := c.streams[id]
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		if st == nil {
			c.violation("HEADERS on stream %d, which the client did not open", id)
			return
		}
		if st.ended || st.reset {
			c.violation("HEADERS on stream %d after it ended (END_STREAM %v, RST_STREAM %v)", id, st.ended, st.reset)
		}
		status := f.PseudoValue("status")
		switch {
		case status == "":
			if st.status == 0 || !f.StreamEnded() {
				c.violation("stream %d: a header section without :status that is not a trailer ending the stream", id)
			}
		case st.status != 0:
			c.violation("stream %d: :status %s after the final %d", id, status, st.status)
		default:
			code, err := strconv.Atoi(status)
			switch {
			case err != nil || code < 100 || code > 999:
				c.violation("stream %d: :status %q", id, status)
			case code < 200 && f.StreamEnded():
				c.violation("stream %d: END_STREAM on a %d", id, code)
			case code >= 200:
				st.status = code
				for _, hf := range f.RegularFields() {
					if hf.Name == "content-length" {
						st.length, _ = strconv.ParseInt(hf.Value, 10, 64)
					}
				}
			}
		}
		if f.StreamEnded() {
			c.endStream(id, st)
		}
	case *http2.DataFrame:
		if st == nil {
			c.violation("DATA on stream %d, which the client did not open", id)
			return
		}
		if st.ended || st.reset || st.status == 0 {
			c.violation("DATA on stream %d before its header or after it ended (status %d, END_STREAM %v, RST_STREAM %v)", id, st.status, st.ended, st.reset)
		}
		n := int64(f.Length)
		if f.Length > c.maxFrame {
			c.violation("DATA of %d bytes on stream %d, past the client's SETTINGS_MAX_FRAME_SIZE of %d", n, id, c.maxFrame)
		}
		if len(f.Data()) > 0 && (st.isHead || st.status == http.StatusNoContent || st.status == http.StatusNotModified) {
			c.violation("stream %d: a body for a HEAD or a %d", id, st.status)
		}
		c.connRecv += n
		c.connUnacked += n
		st.recv += n
		st.unacked += n
		st.body += int64(len(f.Data()))
		if c.connRecv > c.connGranted {
			c.violation("%d bytes of DATA on the connection, past the window of %d the client gave", c.connRecv, c.connGranted)
		}
		if st.recv > c.maxWindow+st.granted {
			c.violation("%d bytes of DATA on stream %d, past the window of %d the client gave", st.recv, id, c.maxWindow+st.granted)
		}
		if f.StreamEnded() {
			c.endStream(id, st)
		}
	case *http2.RSTStreamFrame:
		if st == nil {
			// An idle stream: one the client opens later must
			// not be answered either.
			st = &fuzzStream{length: -1}
			c.streams[id] = st
		}
		st.reset = true
	case *http2.WindowUpdateFrame:
		if st != nil && st.reset {
			c.violation("WINDOW_UPDATE on stream %d after the server reset it", id)
		}
	case *http2.PingFrame:
		if f.IsAck() && f.Data[0] == 0xff {
			c.acked[f.Data] = true
			c.frames--
		}
	case *http2.GoAwayFrame:
		if c.goAwayID >= 0 && int64(f.LastStreamID) > c.goAwayID {
			c.violation("GOAWAY's last stream went up from %d to %d", c.goAwayID, f.LastStreamID)
		}
		c.goAwayID = int64(f.LastStreamID)
		if f.ErrCode != http2.ErrCodeNo {
			c.gone = true
		}
	case *http2.PushPromiseFrame:
		c.violation("PUSH_PROMISE from the server")
	}
}

// endStream checks a response the server ended. c.mu is held.
func (c *fuzzClient) endStream(id uint32, st *fuzzStream) {
	st.ended = true
	bodyless := st.isHead || st.status == http.StatusNoContent || st.status == http.StatusNotModified
	if st.length >= 0 && !bodyless && st.body != st.length {
		c.violation("stream %d: a body of %d bytes, with Content-Length %d", id, st.body, st.length)
	}
}

// Builders of the seed programs, which mirror what step reads.

// Stream selectors (fuzzClient.stream).
const (
	selNew    = 0
	selNewest = 1
	selAny    = 3 // followed by the ID's 4 bytes, before the operation's next
)

func selOlder(i byte) byte { return 2 | i<<2 }

// HEADERS flags, templates and handler acts (fuzzClient.headers; the odd
// behaviours are fuzzHandler's cases).
const (
	hEnd      = 1
	hPriority = 8
	hPadded   = 16
	hOpen     = 32
	hSelfDep  = 64

	tGET     = 0
	tPOST    = 1
	tHEAD    = 2
	tCONNECT = 4
	tOPTIONS = 5
	tMalform = 8
	tLength  = 16
	tExpect  = 32
	tTrailer = 64
	tBig     = 128

	aRead     = 1 // the body before the response
	aReadSome = 2 // 100 bytes, then Close
	aReadLate = 3 // the body after the response
	aFlush    = 4
	aTrailer  = 8
	aSmall    = 1 << 4 // 10 bytes of response body
	aMedium   = 2 << 4 // 20 KiB
	aLarge    = 3 << 4 // 200 KiB, past the initial window
	aAbort    = 64     // panic(http.ErrAbortHandler) at the end
	aProxy    = 128    // the body read by a goroutine while the response is written, as a proxy does
)

func hSplit(n byte) byte { return n << 1 }

// sHeaders opens a new stream; extra are the bytes the flags and the
// template ask for, in the order headers reads them: the malformation,
// the Content-Length, the big fields, the padding, the priority.
func sHeaders(fl, tmpl, act, odd byte, extra ...byte) []byte {
	return append([]byte{opHeaders, selNew, fl, tmpl, act, odd}, extra...)
}

// DATA: flags, then the size: an index of {0, 1, 100, next byte, 1000,
// 16384, 16385, next 2 bytes}.
const (
	dEnd     = 1
	dPadded  = 2 // followed by the padding's length
	size0    = 0
	size100  = 2
	size1000 = 4
	size16K  = 5
	sizeOver = 6
)

func dReps(n byte) byte { return (n - 1) << 2 }

func sData(sel, fl, size byte, extra ...byte) []byte {
	return append([]byte{opData, sel, fl, size}, extra...)
}

func sReset(sel byte, code http2.ErrCode) []byte { return []byte{opReset, sel, byte(code)} }

// sWindowUpdate's inc is an index of {0, 1, 1024, 65535, 1<<20, 1<<30,
// 1<<31-1}.
func sWindowUpdate(sel byte, connection bool, inc byte) []byte {
	if connection {
		return []byte{opWindowUpdate, 0, inc}
	}
	return []byte{opWindowUpdate, 1 | sel<<1, inc}
}

// Setting IDs and values (indexes of fuzzClient.step's tables).
const (
	setTableSize  = 0
	setEnablePush = 1
	setMaxStreams = 2
	setWindow     = 3
	setFrameSize  = 4
	setHeaderList = 5
	setConnect    = 6
	setUnknown    = 7

	val0       = 0
	val1       = 1
	val100     = 2
	val16383   = 4
	val65535   = 6
	valMaxSize = 8  // 1<<24-1
	valOver24  = 9  // 1<<24
	valMaxWin  = 10 // 1<<31-1
	valOver31  = 11 // 1<<31
	valMax32   = 12
)

func sSettings(pairs ...byte) []byte {
	return append([]byte{opSettings, byte(len(pairs)/2) << 1}, pairs...)
}

func sPing(ack bool) []byte {
	b := []byte{opPing, 0, 1, 2, 3, 4, 5, 6, 7, 8}
	if ack {
		b[1] = 1
	}
	return b
}

func sGoAway(sel byte, code http2.ErrCode) []byte {
	return []byte{opGoAway, sel, byte(code), 4, 'b', 'y', 'e', '!'}
}

func sPriority(sel byte, selfDep bool, dep byte) []byte {
	if selfDep {
		return []byte{opPriority, sel, 1, 16}
	}
	return []byte{opPriority, sel, 0, dep, 16}
}

// Trailer flags (opTrailers).
const (
	trEnd    = 1
	trPseudo = 2
	trBadKey = 4
	trOpen   = 8
)

func sTrailers(fl byte) []byte { return []byte{opTrailers, 0, fl} }

func sContinuation(end bool) []byte {
	if end {
		return []byte{opContinuation, 0, 3}
	}
	return []byte{opContinuation, 0, 2}
}

// sRepeat repeats the last operation's frames 1+n<<shift times.
func sRepeat(n, shift byte) []byte { return []byte{opRepeat, n, shift} }

var sSync = []byte{opSync}

func prog(cfg byte, ops ...[]byte) []byte {
	return append([]byte{cfg}, bytes.Join(ops, nil)...)
}

func fuzzSeeds() [][]byte {
	return [][]byte{
		// A GET.
		prog(0, sHeaders(hEnd, tGET, aSmall, 0), sSync),
		// A POST whose body comes in DATA frames and matches its
		// Content-Length, echoed in a large response the client
		// gives window for.
		prog(cfgAutoWindow, sHeaders(0, tPOST|tLength, aRead|aLarge, 0, 200), sData(selNewest, dEnd|dReps(2), size100), sSync),
		// A POST sending more than its Content-Length.
		prog(0, sHeaders(0, tPOST|tLength, aRead|aSmall, 0, 50), sData(selNewest, dEnd, size100), sSync),
		// A stream reset while its handler reads, and one while it
		// waits for window to write.
		prog(0, sHeaders(0, tPOST, aRead|aSmall, 0), sData(selNewest, 0, size1000), sReset(selNewest, http2.ErrCodeCancel), sSync),
		prog(0, sHeaders(hEnd, tGET, aLarge|aFlush, 0), sSync, sReset(selNewest, http2.ErrCodeCancel), sSync),
		// WINDOW_UPDATEs: for a large response, one past 2^31-1 on a
		// stream, and one of zero on the connection.
		prog(0, sHeaders(hEnd, tGET, aLarge, 0), sWindowUpdate(selNewest, false, 4), sWindowUpdate(0, true, 4), sSync),
		prog(0, sHeaders(hEnd, tGET, aLarge, 0), sWindowUpdate(selNewest, false, 6), sWindowUpdate(selNewest, false, 6), sSync),
		prog(0, sWindowUpdate(0, true, 0), sSync),
		// SETTINGS with odd values: valid extremes, then invalid ones.
		prog(0, sSettings(setTableSize, val0, setFrameSize, valMaxSize, setWindow, valMaxWin, setUnknown, valMax32), sHeaders(hEnd, tGET, aMedium, 0), sSync),
		prog(0, sHeaders(hEnd, tGET, aLarge, 0), sSync, sSettings(setWindow, val0), sSync, sSettings(setWindow, val65535), sSync),
		prog(0, sSettings(setEnablePush, valOver31), sSync),
		prog(0, sSettings(setWindow, valOver31), sSync),
		prog(0, sSettings(setFrameSize, val100), sSync),
		prog(0, sSettings(setFrameSize, valOver24), sSync),
		prog(0, []byte{opSettings, 1}, sSync), // an unsolicited ACK
		// Header blocks in HEADERS and CONTINUATION frames; a block
		// left open, closed by a CONTINUATION, or interrupted.
		prog(0, sHeaders(hEnd|hSplit(3), tGET|tBig, aSmall, 0, 0x47), sSync),
		prog(0, sHeaders(hEnd|hOpen, tGET, aSmall, 0), sContinuation(true), sSync),
		prog(0, sHeaders(hEnd|hOpen|hSplit(2), tGET, aSmall, 0), sPing(false), sSync),
		prog(cfgSmallHeader, sHeaders(hEnd|hSplit(1), tGET|tBig, aSmall, 0, 0x2f), sSync),
		prog(0, sContinuation(true), sSync),
		// PINGs, and their ACKs the server does not expect.
		prog(0, sPing(false), sPing(true), sSync),
		// GOAWAY from the client with streams open, and without.
		prog(0, sHeaders(0, tPOST, aRead|aSmall, 0), sGoAway(selNewest, http2.ErrCodeNo), sData(selNewest, dEnd, size100), sSync),
		prog(0, sGoAway(selNew, http2.ErrCodeProtocol), sPing(false), sSync),
		// PRIORITY on an idle stream, one depending on itself, and
		// HEADERS with priority.
		prog(0, []byte{opPriority, selAny, 0, 0, 0, 7, 0, 1, 16}, sHeaders(hEnd|hPriority, tGET, aSmall, 0, 3, 200), sPriority(selNewest, true, 0), sSync),
		prog(0, sHeaders(hEnd|hPriority|hSelfDep, tGET, aSmall, 0, 16), sSync),
		// Trailers: allowed, and with fields a trailer may not have.
		prog(0, sHeaders(0, tPOST|tTrailer, aRead|aTrailer|aSmall, 0), sData(selNewest, 0, size100), sTrailers(trEnd), sSync),
		prog(0, sHeaders(0, tPOST, aRead|aSmall, 0), sTrailers(trEnd|trBadKey), sHeaders(0, tPOST, aRead, 0), sTrailers(trEnd|trPseudo), sTrailers(0), sSync),
		// 100-continue, for a handler that reads the body before its
		// answer and one that answers first.
		prog(0, sHeaders(0, tPOST|tExpect, aRead|aSmall, 0), sSync, sData(selNewest, dEnd, size100), sSync),
		prog(0, sHeaders(0, tPOST|tExpect, aReadLate|aFlush|aSmall, 0), sSync, sData(selNewest, dEnd, size100), sSync),
		// HEAD, CONNECT, OPTIONS *, a handler that aborts, a 204
		// written to, a 103, a short Content-Length, deadlines,
		// "Connection: close".
		prog(0, sHeaders(hEnd, tHEAD, aMedium, 0), sHeaders(hEnd, tCONNECT, aSmall, 0), sHeaders(hEnd, tOPTIONS, aSmall, 0), sSync),
		prog(0, sHeaders(0, tPOST, aRead|aMedium|aFlush|aAbort, 0), sData(selNewest, dEnd, size1000), sSync),
		prog(0, sHeaders(hEnd, tGET, aSmall, 4), sHeaders(hEnd, tGET, aSmall, 3), sHeaders(hEnd, tGET, aSmall, 1), sHeaders(hEnd, tGET, aSmall, 2), sSync),
		prog(0, sHeaders(0, tPOST, aRead|aSmall, 5), sHeaders(hEnd, tGET, aLarge, 6), sSync, sHeaders(hEnd, tGET, aSmall, 7), sSync),
		prog(0, sHeaders(hEnd, tGET, aSmall, 9), sHeaders(hEnd, tGET, aSmall, 10), sHeaders(hEnd, tGET, aSmall, 11), sHeaders(hEnd, tGET, aSmall|aFlush, 12), sHeaders(hEnd, tGET, aSmall, 13), sHeaders(hEnd, tGET, aSmall, 15), sSync),
		// Body readers: one the handler does not wait for, one that
		// reads past the end and after Close, and one reading while
		// the response is written.
		prog(0, sHeaders(0, tPOST, aSmall, 8), sSync, sData(selNewest, dEnd, size100), sSync),
		prog(0, sHeaders(0, tPOST, aRead|aSmall, 14), sData(selNewest, dEnd, size100), sSync),
		prog(cfgAutoWindow, sHeaders(0, tPOST, aProxy|aLarge|aFlush, 0), sData(selNewest, dReps(8), size16K), sSync, sData(selNewest, dEnd, size100), sSync),
		// A connection upgraded from HTTP/1.1, with HTTP2-Settings
		// and with a malformed one.
		prog(cfgUpgrade, []byte{aSmall | aRead, 0, 6, 0, 4, 0, 0, 0xff, 0xff}, sHeaders(hEnd, tGET, aSmall, 0), sSync),
		prog(cfgUpgrade, []byte{aSmall, 0, 5, 1, 2, 3, 4, 5}, sSync),
		// The server drains with a request under way, and closes.
		prog(0, sHeaders(0, tPOST, aRead|aSmall, 0), []byte{opDrain}, sData(selNewest, dEnd, size100), sHeaders(hEnd, tGET, aSmall, 0), sSync),
		prog(0, sHeaders(0, tPOST, aRead|aLarge, 0), sSync, []byte{opServerClose}, sSync),
		// Malformed requests, each way malform knows.
		prog(0,
			sHeaders(hEnd, tGET|tMalform, aSmall, 0, 0), sHeaders(hEnd, tGET|tMalform, aSmall, 0, 1),
			sHeaders(hEnd, tGET|tMalform, aSmall, 0, 2), sHeaders(hEnd, tGET|tMalform, aSmall, 0, 3),
			sHeaders(hEnd, tGET|tMalform, aSmall, 0, 4), sHeaders(hEnd, tGET|tMalform, aSmall, 0, 5),
			sHeaders(hEnd, tGET|tMalform, aSmall, 0, 6), sHeaders(hEnd, tGET|tMalform, aSmall, 0, 7),
			sHeaders(hEnd, tGET|tMalform, aSmall, 0, 8), sHeaders(hEnd, tGET|tMalform, aSmall, 0, 9),
			sHeaders(hEnd, tGET|tMalform, aSmall, 0, 10), sHeaders(hEnd, tGET|tMalform, aSmall, 0, 11),
			sHeaders(hEnd, tGET|tMalform, aSmall, 0, 12), sHeaders(hEnd, tGET|tMalform, aSmall, 0, 13),
			sSync),
		// More streams than the server takes at once.
		prog(1, sHeaders(0, tPOST, aRead, 0), sHeaders(0, tPOST, aRead, 0), sHeaders(hEnd, tGET, aSmall, 0), sSync),
		// DATA on an idle stream, on stream 0, padded, and too large.
		prog(0, sData(selNew, dEnd, size100), sSync),
		prog(0, sHeaders(0, tPOST, aRead, 0), []byte{opData, selAny, 0, 0, 0, 0, 0, size100}, sSync),
		prog(0, sHeaders(0, tPOST, aRead|aSmall, 0), sData(selNewest, dEnd|dPadded, size100, 7), sSync),
		prog(0, sHeaders(0, tPOST, aRead, 0), sData(selNewest, 0, sizeOver), sSync),
		// The client stops reading while its requests are answered
		// and its PINGs pile up.
		prog(0, []byte{opPause}, sHeaders(hEnd, tGET, aLarge, 0), sPing(false), sRepeat(249, 3), []byte{opResume}, sSync),
		// The server's idle timeout, with a stream and after it.
		prog(cfgIdle, sHeaders(hEnd, tGET, aSmall, 0), sSync, sSync),
		// Unknown and malformed frames of every type.
		prog(0, []byte{opRawFrame, 0xbe, 0xff, selNew, 3, 'x', 'y', 'z'}, []byte{opRawFrame, byte(http2.FrameRSTStream), 0, selNewest, 2, 0, 0}, sSync),
		prog(0, []byte{opPushPromise, selNew, 0, 0, 0, 2}, sSync),

		// Regressions, besides testdata/fuzz/FuzzServeConn.
		//
		// A goroutine reading the body, blocked when its handler
		// returns.
		prog(cfgAutoWindow, sHeaders(0, tPOST, aLarge, 8), sSync),
		// A padded DATA frame, on a stream whose handler reads: the
		// padding is spent window too.
		prog(0, sHeaders(0, tPOST, aRead|aSmall, 0), sData(selNewest, dPadded|dReps(13), size0, 0), sSync),
		// After the server's GOAWAY, a request it drops, then a
		// connection error: its GOAWAY must not name the dropped stream.
		prog(0, sGoAway(selNewest, http2.ErrCodeNo), sHeaders(hEnd, tGET, aSmall, 0), sWindowUpdate(0, true, 0), sSync),
		// A PRIORITY depending on itself on an idle stream, which the
		// server resets, then HEADERS opening that stream.
		prog(0, sPriority(selNew, true, 0), []byte{opHeaders, 5, hEnd, tGET, aSmall, 0}, sSync),
		// Three streams, each within its window, past the connection's
		// together.
		prog(0, sHeaders(0, tPOST, aLarge, 0), sHeaders(0, tPOST, aLarge, 0), sHeaders(0, tPOST, aLarge, 0), sData(selOlder(0), dReps(48), size16K), sData(selOlder(1), dReps(48), size16K), sData(selOlder(2), dReps(48), size16K), sSync),
		// Resets, for a client that does not read them.
		prog(0, sHeaders(hEnd, tGET, aSmall, 0), sSync, []byte{opPause}, sPriority(selNewest, true, 0), sRepeat(255, 7), sRepeat(255, 7), sRepeat(255, 7), []byte{opResume}, sSync),
		// A handler reading, after its answer, the body of a stream the
		// server reset meanwhile.
		prog(0, sHeaders(0, tPOST, aReadLate|aLarge, 0), sData(selNewest, dReps(20), size16K), sPriority(selNewest, true, 0), sSync),
	}
}
