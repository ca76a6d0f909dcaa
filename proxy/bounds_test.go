package proxy

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// requestsCPU is the CPU time the process (client, proxy and backend)
// spends on n HTTP/2 requests sent at once on a new connection: the
// yardstick the flood tests measure their cost against, so that the bound
// holds with and without the race detector.
func requestsCPU(t *testing.T, dial dialer, n int) time.Duration {
	t.Helper()
	c := dialH2(t, dial)
	c.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	start := cpuTime(t)
	hdr := c.headers()
	for i := range n {
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hdr, EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	c.bw.Flush()
	for range n {
		c.response(t, 0)
	}
	return cpuTime(t) - start
}

// heapInUse is the live heap: in use after a garbage collection.
func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// watchHeap samples the heap in use, garbage included, every 5ms until the
// function it returns is called, which returns how far the highest sample
// rose above the live heap at the start.
func watchHeap() func() int64 {
	base := heapInUse()
	var peak uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return int64(peak) - int64(base)
	}
}

// timeoutListeners starts a server with the given ReadHeaderTimeout and
// IdleTimeout (0: the default) and returns the addresses of its cleartext
// and TLS (a.test) listeners, and the TLS fixture.
func timeoutListeners(t *testing.T, readHeaderTimeout, idleTimeout time.Duration) ([]string, *tlsFixture) {
	t.Helper()
	opts := testOptions()
	opts.ReadHeaderTimeout = readHeaderTimeout
	opts.IdleTimeout = idleTimeout
	s := startServer(t, opts)
	f := newTLSFixture(t)
	routes := compile(t, route("all", nil, router.Rule{Backends: backends("web")}))
	return apply(t, s,
		Listener{Address: freeAddr(t), Routes: routes},
		Listener{Address: freeAddr(t), Protocol: HTTPS, Routes: routes, TLS: f.store(t, "a.test!")}), f
}

// TestSlowloris holds many connections that send a request head a byte at
// a time, on cleartext and TLS listeners: each costs the server a goroutine
// and its buffers until ReadHeaderTimeout closes it, however the bytes
// trickle, and then nothing.
func TestSlowloris(t *testing.T) {
	const (
		conns = 200 // every tenth over TLS
		// Long enough to open them all well within it: twenty TLS
		// handshakes under the race detector took up to 2 s on a loaded
		// machine.
		timeout = 6 * time.Second
		// Per connection, measured: one goroutine (net/http's) and at
		// most 18 KiB of heap (its 4 KiB read and write buffers, the
		// guard's state, TLS state on both ends for some). The bounds are
		// about twice that.
		goroutinesPerConn = 2
		heapPerConn       = 32 << 10
	)
	addrs, f := timeoutListeners(t, timeout, 0)

	before := heapInUse()
	goroutines := runtime.NumGoroutine()
	start := time.Now()
	cs := make([]net.Conn, conns)
	for i := range cs {
		tlsConn := i%10 == 9
		c, err := net.Dial("tcp", addrs[map[bool]int{false: 0, true: 1}[tlsConn]])
		if err != nil {
			t.Fatal(err)
		}
		if tlsConn {
			tc := tls.Client(c, &tls.Config{RootCAs: f.ca.Pool, ServerName: "a.test"})
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			c = tc
		}
		cs[i] = c
		defer c.Close()
	}
	// One byte per connection every 50ms, from one goroutine, so that the
	// goroutines counted are the server's.
	if d := time.Since(start); d > timeout/3 {
		t.Fatalf("opening the connections took %v, too long to watch them before ReadHeaderTimeout", d)
	}
	head := "GET / HTTP/1.1\r\nHost: a.test\r\nX-Slow: " + strings.Repeat("a", 1000)
	var peakGoroutines int
	var peakHeap uint64
	for i := 0; time.Since(start) < timeout*2/3; i++ {
		for j, c := range cs {
			c.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := io.WriteString(c, head[i%len(head):i%len(head)+1]); err != nil {
				c.SetReadDeadline(time.Now().Add(time.Second))
				got, _ := io.ReadAll(c)
				t.Fatalf("connection %d, byte %d, before ReadHeaderTimeout: %v; read %q", j, i, err, got)
			}
		}
		time.Sleep(50 * time.Millisecond)
		peakHeap = max(peakHeap, heapInUse())
		peakGoroutines = max(peakGoroutines, runtime.NumGoroutine())
	}
	grown := int64(peakHeap) - int64(before)
	t.Logf("%d connections: %d more goroutines, heap in use grew by %d KiB (%d B per connection)", conns, peakGoroutines-goroutines, grown>>10, grown/conns)
	if n := peakGoroutines - goroutines; n > goroutinesPerConn*conns {
		t.Errorf("%d more goroutines for %d connections", n, conns)
	}
	if grown > heapPerConn*conns {
		t.Errorf("heap in use grew by %d KiB for %d connections", grown>>10, conns)
	}

	// Each is closed once ReadHeaderTimeout has passed, the trickle
	// notwithstanding.
	deadline := start.Add(timeout + 3*time.Second)
	for i, c := range cs {
		c.SetReadDeadline(deadline)
		if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("connection %d open after %v", i, time.Since(start))
		}
	}
	if d := time.Since(start); d < timeout {
		t.Errorf("closed after %v, before ReadHeaderTimeout", d)
	}
	for end := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > goroutines+10; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d goroutines after the connections closed, %d before they opened", runtime.NumGoroutine(), goroutines)
		}
	}
}

// TestH2OversizedHeaders sends a header block larger than MaxHeaderBytes
// (64 KiB), as HTTP/1.1's oversized head gets 431 (TestRequestSmuggling):
// the stream is answered 431 and the connection serves on.
func TestH2OversizedHeaders(t *testing.T) {
	protocols(t, func(t *testing.T, p Protocol) {
		dial, seen := guardedServer(t, p, nil)
		c := dialH2(t, dial)
		c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		block := c.headers("x-big", strings.Repeat("a", 40<<10), "x-big2", strings.Repeat("b", 40<<10))
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:16<<10], EndStream: true}); err != nil {
			t.Fatal(err)
		}
		for rest := block[16<<10:]; len(rest) > 0; {
			n := min(len(rest), 16<<10)
			if err := c.fr.WriteContinuation(1, n == len(rest), rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		c.bw.Flush()
		if status := c.response(t, 1).PseudoValue("status"); status != "431" {
			t.Errorf("status %s, want 431", status)
		}
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: c.headers(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		c.bw.Flush()
		if status := c.response(t, 3).PseudoValue("status"); status != "200" {
			t.Errorf("next request: status %s, want 200", status)
		}
		if n := seen.Load(); n != 1 {
			t.Errorf("backend saw %d requests, want 1", n)
		}
	})
}

// TestH2SlowHeaderBlock trickles a header block on HTTP/2 connections, a
// byte every 50ms in CONTINUATION frames: slowloris inside HTTP/2, where
// ReadHeaderTimeout does not apply. The stream never opens, so the
// connection counts as idle, and IdleTimeout ends it (GOAWAY, then the
// close a second later) without an answer.
func TestH2SlowHeaderBlock(t *testing.T) {
	const idle = time.Second
	addrs, f := timeoutListeners(t, idle, idle)
	for i, roots := range []*x509.CertPool{nil, f.ca.Pool} {
		t.Run([]string{"h2c", "h2"}[i], func(t *testing.T) {
			c := dialH2(t, dialerTo(addrs[i], roots))
			start := time.Now()
			block := c.headers("x-slow", strings.Repeat("a", 2000))
			if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:10], EndStream: true}); err != nil {
				t.Fatal(err)
			}
			for j := 10; j < len(block) && time.Since(start) < idle+3*time.Second; j++ {
				if c.fr.WriteContinuation(1, false, block[j:j+1]) != nil || c.bw.Flush() != nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			goAway, _, status, closed := c.readUntilClosed(time.Second)
			d := time.Since(start)
			t.Logf("GOAWAY %v, closed after %v", goAway, d)
			if !closed || status != "" || d > idle+3*time.Second {
				t.Errorf("after %v: closed %v, status %q; want closed within IdleTimeout and a second, no answer", d, closed, status)
			}
		})
	}
}

// TestIdleHTTP2Memory holds many HTTP/2 connections over TLS, each idle
// after one request, and measures what each costs the process (heap and
// goroutine stacks, the clients' TLS state included, so an upper bound of
// the server's): the figure README gives for --max-connections.
func TestIdleHTTP2Memory(t *testing.T) {
	const (
		conns = 100
		// Measured 58 KiB (68–71 under -race), of which the clients'
		// side is about 8: the engine's read buffer (16 KiB) and two
		// goroutines, TLS record buffers and state on both ends. Before
		// the HTTP/1.1 reader and the guard's reset table were let go at
		// the hand-over to the engine, 75.
		perConn = 96 << 10
	)
	if testOptions().HTTP2Engine == EngineStdlib {
		t.Skip("measures hostgate's HTTP/2 engine")
	}
	dial, _ := guardedServer(t, HTTPS, nil)
	var m runtime.MemStats
	used := func() uint64 {
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse
	}
	// One connection first, so that what the first one builds once (the
	// route's pools, the TLS session machinery) is not counted.
	exchangeOnce := func() net.Conn {
		c := dial(t, "h2")
		io.WriteString(c, http2.ClientPreface)
		fr := http2.NewFramer(c, c)
		fr.WriteSettings()
		var block bytes.Buffer
		enc := hpack.NewEncoder(&block)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "a.test"}, {":path", "/"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			if f.Header().StreamID == 1 && f.Header().Flags.Has(http2.FlagDataEndStream) {
				return c
			}
		}
	}
	defer exchangeOnce().Close()
	before := used()
	cs := make([]net.Conn, conns)
	for i := range cs {
		cs[i] = exchangeOnce()
		defer cs[i].Close()
	}
	time.Sleep(100 * time.Millisecond)
	per := (int64(used()) - int64(before)) / conns
	t.Logf("%d idle HTTP/2 connections over TLS: %d KiB each, clients included", conns, per>>10)
	if per > perConn {
		t.Errorf("%d KiB per idle connection, want at most %d", per>>10, perConn>>10)
	}
}
