package h2

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// BenchmarkMemory reports what an idle connection holds (heap and
// goroutine stacks), and what each open stream adds while its handler
// waits, over loopback TCP. The clients' side is in the same process, so
// the figures are upper bounds of the server's.
func BenchmarkMemory(b *testing.B) {
	for b.Loop() {
		perIdle, perStream := memoryUse(b)
		b.ReportMetric(perIdle, "B/idle-conn")
		b.ReportMetric(perStream, "B/open-stream")
	}
}

// TestMemoryBounds holds the engine to what BenchmarkMemory measured (24
// to 26 KiB per idle h2c connection and 3.4 to 4.7 KiB per open stream,
// clients included), with room for the race detector and the collector's
// timing: a stream's state or buffers that grew by a multiple would show.
func TestMemoryBounds(t *testing.T) {
	const idleBound, streamBound = 48 << 10, 12 << 10
	perIdle, perStream := memoryUse(t)
	t.Logf("%.1f KiB per idle connection, %.1f KiB per open stream", perIdle/1024, perStream/1024)
	if perIdle > idleBound {
		t.Errorf("%.1f KiB per idle connection, want at most %d", perIdle/1024, idleBound>>10)
	}
	if perStream > streamBound {
		t.Errorf("%.1f KiB per open stream, want at most %d", perStream/1024, streamBound>>10)
	}
}

// memoryUse opens 200 idle connections, then 100 streams on the last of
// them whose handlers wait, and returns the heap and stacks in use each
// connection and each stream added.
func memoryUse(tb testing.TB) (perIdle, perStream float64) {
	const conns, streams = 200, 100
	wait := make(chan struct{})
	srv := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-wait })}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go srv.ServeConn(c, ConnOpts{})
		}
	}()
	open := func() (net.Conn, *http2.Framer) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			tb.Fatal(err)
		}
		fr := http2.NewFramer(c, c)
		io.WriteString(c, http2.ClientPreface)
		fr.WriteSettings()
		// The server's SETTINGS and WINDOW_UPDATE, then the ack of ours.
		for range 3 {
			if _, err := fr.ReadFrame(); err != nil {
				tb.Fatal(err)
			}
		}
		return c, fr
	}
	used := func() uint64 {
		time.Sleep(100 * time.Millisecond)
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse
	}
	before := used()
	var cs []net.Conn
	var last *http2.Framer
	for range conns {
		c, fr := open()
		cs = append(cs, c)
		last = fr
	}
	idle := used()
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "a.test"}, {":path", "/"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := range streams {
		last.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hbuf.Bytes(), EndStream: true, EndHeaders: true})
	}
	busy := used()
	close(wait)
	for _, c := range cs {
		c.Close()
	}
	return float64(int64(idle)-int64(before)) / conns, float64(int64(busy)-int64(idle)) / streams
}

// BenchmarkServeRequest is a GET answered by a handler that writes a
// small body, 16 streams at a time over one loopback connection. The
// client is a bare Framer that neither decodes nor allocates per
// response, so allocations per op are the server's.
func BenchmarkServeRequest(b *testing.B) {
	body := []byte("hello")
	srv := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = []string{"text/plain"}
		w.Write(body)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	defer srv.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go srv.ServeConn(c, ConnOpts{})
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "example.com"}, {":path", "/index.html"}, {"user-agent", "bench"}, {"accept", "*/*"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	const inFlight = 16
	slots := make(chan struct{}, inFlight)
	done := make(chan error, 1)
	var w bytes.Buffer
	wfr := http2.NewFramer(&w, nil)
	io.WriteString(c, http2.ClientPreface)
	wfr.WriteSettings()
	c.Write(w.Bytes())
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		rfr := http2.NewFramer(nil, c)
		rfr.SetReuseFrames()
		var unacked uint32
		var ended int
		for ended < b.N {
			f, err := rfr.ReadFrame()
			if err != nil {
				done <- err
				return
			}
			end := false
			switch f := f.(type) {
			case *http2.DataFrame:
				end = f.StreamEnded()
				unacked += f.Length
			case *http2.HeadersFrame:
				end = f.StreamEnded()
			}
			if end {
				ended++
				<-slots
			}
			if unacked > 16<<10 {
				// Only this goroutine writes once the requests are
				// all sent: the window comes back from here.
				var u bytes.Buffer
				http2.NewFramer(&u, nil).WriteWindowUpdate(0, unacked)
				c.Write(u.Bytes())
				unacked = 0
			}
		}
		done <- nil
	}()
	for i := range b.N {
		select {
		case slots <- struct{}{}:
		default:
			// Flush what is queued before waiting for a slot.
			c.Write(w.Bytes())
			w.Reset()
			slots <- struct{}{}
		}
		wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
	}
	c.Write(w.Bytes())
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// TestIdleHandlerKeepsStack: a handler goroutine waiting in next for its
// next stream keeps the 8 KiB stack that serving one grew, through
// collections, where one waiting in a plain receive has it halved. What
// keeps it is a frame nothing uses, which a compiler could drop: this is
// what would tell.
func TestIdleHandlerKeepsStack(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's frames are not the build's")
	}
	const n = 500
	perGoroutine := func(wait func(s *Server)) uint64 {
		s := &Server{}
		s.init()
		stacks := func() uint64 {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.StackInuse
		}
		for range 4 {
			runtime.GC()
		}
		before := stacks()
		var waiting atomic.Int32
		for range n {
			go func() {
				growStack(12)
				waiting.Add(1)
				wait(s)
			}()
		}
		for waiting.Load() < n {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		for range 4 {
			runtime.GC()
		}
		after := stacks()
		for range n {
			s.work <- nil
		}
		return (after - before) / n
	}
	plain := perGoroutine(func(s *Server) { <-s.work })
	if plain >= 8<<10 {
		t.Skipf("the runtime kept %d bytes of stack per goroutine waiting in a plain receive: it shrinks none", plain)
	}
	if kept := perGoroutine(func(s *Server) { s.next(false) }); kept < 8<<10 {
		t.Fatalf("a goroutine waiting in next holds %d bytes of stack after collections, want 8 KiB (in a plain receive: %d)", kept, plain)
	}
}

// raceEnabled is set in race_test.go.
var raceEnabled bool

//go:noinline
func growStack(depth int) byte {
	var b [512]byte
	b[depth%len(b)] = byte(depth)
	if depth == 0 {
		return b[0]
	}
	return growStack(depth-1) + b[depth%len(b)]
}
