//go:build linux

package relay

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/tcptest"
)

// The worker over real loopback sockets: a client of Listen's listener,
// the Loop, and backends of the tests' own.

// handler gives the endpoints in turn and records what the worker said.
type handler struct {
	mu        sync.Mutex
	endpoints []netip.AddrPort
	failed    []error
	connected int
	// ended gets the bytes carried each way once the connection ended.
	ended chan [2]int64
}

func newHandler(endpoints ...netip.AddrPort) *handler {
	return &handler{endpoints: endpoints, ended: make(chan [2]int64, 1)}
}

func (h *handler) Next(failed error) (netip.AddrPort, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if failed != nil {
		h.failed = append(h.failed, failed)
	}
	if len(h.endpoints) == 0 {
		return netip.AddrPort{}, false
	}
	ap := h.endpoints[0]
	h.endpoints = h.endpoints[1:]
	return ap, true
}

func (h *handler) Connected() {
	h.mu.Lock()
	h.connected++
	h.mu.Unlock()
}

func (h *handler) Ended(in, out int64) { h.ended <- [2]int64{in, out} }

// waitEnded is what Ended said, failing the test if it is not said soon.
func (h *handler) waitEnded(t *testing.T) (in, out int64) {
	t.Helper()
	select {
	case b := <-h.ended:
		return b[0], b[1]
	case <-time.After(10 * time.Second):
		t.Fatal("the connection never ended")
		return 0, 0
	}
}

// peeker refuses or connects by what the client sent first, as a
// ClientHello's reader does: a line "go\n" connects, sending hdr first;
// "no\n" refuses, with alert.
type peeker struct {
	*handler
	hdr, alert []byte
	// errs are the errors Peek was given.
	mu   sync.Mutex
	errs []error
}

func (p *peeker) Peek(read []byte, err error) (Step, []byte) {
	p.mu.Lock()
	p.errs = append(p.errs, err)
	p.mu.Unlock()
	switch {
	case bytes.HasPrefix(read, []byte("go\n")):
		return Connect, p.hdr
	case bytes.HasPrefix(read, []byte("no\n")) || err != nil:
		return Refuse, p.alert
	}
	return More, nil
}

// fixture is a Loop and a listener whose sockets it relays.
type fixture struct {
	t    *testing.T
	loop *Loop
	ln   net.Listener
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	loop, err := New()
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Listen(tl)
	if ln == tl {
		t.Fatal("Listen left a TCP listener as it was")
	}
	t.Cleanup(func() {
		ln.Close()
		loop.Close()
	})
	return &fixture{t: t, loop: loop, ln: ln}
}

// accept dials the listener as a client and accepts the connection as a
// Socket.
func (f *fixture) accept(dial func(string) (net.Conn, error)) (client net.Conn, s *Socket) {
	f.t.Helper()
	if dial == nil {
		dial = func(addr string) (net.Conn, error) { return net.Dial("tcp", addr) }
	}
	client, err := dial(f.ln.Addr().String())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { client.Close() })
	c, err := f.ln.Accept()
	if err != nil {
		f.t.Fatal(err)
	}
	s, ok := c.(*Socket)
	if !ok {
		f.t.Fatalf("Accept gave a %T, not a *Socket", c)
	}
	if got, want := s.RemoteAddr().String(), client.LocalAddr().String(); got != want {
		f.t.Errorf("RemoteAddr %s, the client is %s", got, want)
	}
	return client, s
}

// backend listens, and gives each connection it accepts to the channel.
func backend(t *testing.T) (netip.AddrPort, <-chan *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var accepted []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range accepted {
			c.Close()
		}
	})
	conns := make(chan *net.TCPConn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted = append(accepted, c)
			mu.Unlock()
			conns <- c.(*net.TCPConn)
		}
	}()
	return ln.Addr().(*net.TCPAddr).AddrPort(), conns
}

func next(t *testing.T, conns <-chan *net.TCPConn) *net.TCPConn {
	t.Helper()
	select {
	case c := <-conns:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection reached the backend")
		return nil
	}
}

// refused is an address where nothing listens.
func refused(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close()
	return ap
}

// relayed is a client's connection that the loop relays to a backend of
// its own: the client's end, its Socket, its handler and the backend's end.
func relayed(t *testing.T) (client net.Conn, s *Socket, h *handler, b *net.TCPConn) {
	t.Helper()
	f := newFixture(t)
	ap, conns := backend(t)
	client, s = f.accept(nil)
	h = newHandler(ap)
	f.loop.Relay(s, h, nil, time.Second)
	return client, s, h, next(t, conns)
}

// peeked is a client's connection that the loop relays to a backend of
// its own once p decided: the client's end and the backend's
// connections.
func peeked(t *testing.T, p *peeker, readTimeout time.Duration) (client net.Conn, conns <-chan *net.TCPConn) {
	t.Helper()
	f := newFixture(t)
	ap, conns := backend(t)
	client, s := f.accept(nil)
	p.handler = newHandler(ap)
	f.loop.RelayPeeked(s, p, readTimeout, time.Second)
	return client, conns
}

func readN(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return b
}

// readEOF reads what is left until the end of the stream.
func readEOF(t *testing.T, c net.Conn) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading to the end: %v", err)
	}
	return b
}

func write(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := c.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

// TestRelayBothWays: what the client sends reaches the backend after the
// header the handler gave, what the backend answers reaches the client,
// over several exchanges, and the bytes counted are those carried.
func TestRelayBothWays(t *testing.T) {
	f := newFixture(t)
	ap, conns := backend(t)
	client, s := f.accept(nil)
	h := newHandler(ap)
	f.loop.Relay(s, h, []byte("HEADER\n"), time.Second)
	b := next(t, conns)
	if got := string(readN(t, b, 7)); got != "HEADER\n" {
		t.Fatalf("the backend got %q first, want the header", got)
	}
	for _, x := range []struct{ ask, answer string }{{"ping\n", "pong\n"}, {"hello\n", "world, at length\n"}} {
		write(t, client, x.ask)
		if got := string(readN(t, b, len(x.ask))); got != x.ask {
			t.Fatalf("the backend got %q, want %q", got, x.ask)
		}
		write(t, b, x.answer)
		if got := string(readN(t, client, len(x.answer))); got != x.answer {
			t.Fatalf("the client got %q, want %q", got, x.answer)
		}
	}
	client.Close()
	if got := readEOF(t, b); len(got) != 0 {
		t.Fatalf("the backend got %q after the client closed", got)
	}
	b.Close()
	in, out := h.waitEnded(t)
	if in != int64(len("ping\nhello\n")) || out != int64(len("pong\nworld, at length\n")) {
		t.Errorf("Ended(%d, %d), want the client's 11 bytes and the backend's 22", in, out)
	}
	if h.connected != 1 || len(h.failed) != 0 {
		t.Errorf("connected %d times, failed %v; want once and none", h.connected, h.failed)
	}
}

// TestHalfClose: a client that shuts its side after its request still
// gets the whole of a long answer, and the backend sees the end of the
// request before it answers; then the connection ends on both sides.
func TestHalfClose(t *testing.T) {
	client, _, h, b := relayed(t)
	write(t, client, "request")
	if err := client.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got := string(readEOF(t, b)); got != "request" {
		t.Fatalf("the backend got %q then the end, want %q", got, "request")
	}
	answer := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	go func() {
		b.Write(answer)
		b.Close()
	}()
	if got := readEOF(t, client); !bytes.Equal(got, answer) {
		t.Fatalf("the client got %d bytes of the 1 MiB answer (or others)", len(got))
	}
	if in, out := h.waitEnded(t); in != 7 || out != int64(len(answer)) {
		t.Errorf("Ended(%d, %d), want (7, %d)", in, out, len(answer))
	}
}

// TestSlowReader: a client that reads nothing holds its backend back (the
// relay keeps a bounded amount, not the whole answer), and once it reads
// it gets every byte, in order.
func TestSlowReader(t *testing.T) {
	f := newFixture(t)
	ap, conns := backend(t)
	small := func(addr string) (net.Conn, error) {
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10) })
		}}
		return d.Dial("tcp", addr)
	}
	client, s := f.accept(small)
	h := newHandler(ap)
	f.loop.Relay(s, h, nil, time.Second)
	b := next(t, conns)
	b.SetWriteBuffer(64 << 10)

	// Above what the sockets on the way hold (5-9 MB were written before
	// the client read), and little enough to read within readEOF's
	// deadline on a loaded machine under the race detector.
	const total = 16 << 20
	answer := make([]byte, total)
	for i := range answer {
		answer[i] = byte(i % 251)
	}
	// The backend writes for as long as the relay takes its bytes.
	_ = b.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
	n, err := b.Write(answer)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the backend wrote %d of %d bytes to a client reading nothing (%v): the relay held them all", n, total, err)
	}
	t.Logf("the backend wrote %d bytes before the client read", n)
	_ = b.SetWriteDeadline(time.Time{})
	go func() {
		b.Write(answer[n:])
		b.Close()
	}()
	got := readEOF(t, client)
	if !bytes.Equal(got, answer) {
		t.Fatalf("the client got %d bytes, want the %d the backend sent, in order", len(got), total)
	}
	// The backend's end was passed on; the client's ends the connection.
	client.Close()
	if _, out := h.waitEnded(t); out != total {
		t.Errorf("Ended counted %d bytes to the client, want %d", out, total)
	}
}

// TestConnectRefused: an endpoint that refuses the connect is reported to
// the handler, and the next one serves the client; with none left the
// client's connection is closed, nothing having reached anyone.
func TestConnectRefused(t *testing.T) {
	t.Run("next", func(t *testing.T) {
		f := newFixture(t)
		ap, conns := backend(t)
		client, s := f.accept(nil)
		h := newHandler(refused(t), ap)
		f.loop.Relay(s, h, nil, time.Second)
		b := next(t, conns)
		write(t, client, "hi")
		if got := string(readN(t, b, 2)); got != "hi" {
			t.Fatalf("the backend got %q", got)
		}
		b.Close()
		readEOF(t, client)
		client.Close()
		h.waitEnded(t)
		if len(h.failed) != 1 || !errors.Is(h.failed[0], syscall.ECONNREFUSED) {
			t.Errorf("Next was told %v, want one connection refused", h.failed)
		}
		if h.connected != 1 {
			t.Errorf("connected %d times, want once", h.connected)
		}
	})
	t.Run("none left", func(t *testing.T) {
		f := newFixture(t)
		client, s := f.accept(nil)
		h := newHandler(refused(t), refused(t))
		f.loop.Relay(s, h, nil, time.Second)
		if got := readEOF(t, client); len(got) != 0 {
			t.Fatalf("the client got %q", got)
		}
		if in, out := h.waitEnded(t); in != 0 || out != 0 {
			t.Errorf("Ended(%d, %d), want nothing carried", in, out)
		}
		if len(h.failed) != 2 || h.connected != 0 {
			t.Errorf("failed %v, connected %d: want two refusals and no connection", h.failed, h.connected)
		}
	})
}

// TestPeek: the client's first bytes, in pieces, decide: the backend gets
// the Peeker's header and then every byte read so far; or the client gets
// the refusal's bytes and the end, and nothing is connected; or a client
// that sends too little is refused past the read timeout.
func TestPeek(t *testing.T) {
	t.Run("connect", func(t *testing.T) {
		p := &peeker{hdr: []byte("PROXY\n")}
		client, conns := peeked(t, p, 5*time.Second)
		write(t, client, "g")
		time.Sleep(20 * time.Millisecond)
		write(t, client, "o\nrest")
		b := next(t, conns)
		if got := string(readN(t, b, len("PROXY\ngo\nrest"))); got != "PROXY\ngo\nrest" {
			t.Fatalf("the backend got %q", got)
		}
		write(t, b, "answer")
		if got := string(readN(t, client, 6)); got != "answer" {
			t.Fatalf("the client got %q", got)
		}
		client.Close()
		b.Close()
		if in, _ := p.waitEnded(t); in != int64(len("go\nrest")) {
			t.Errorf("Ended counted %d bytes from the client, want %d", in, len("go\nrest"))
		}
	})
	t.Run("refuse", func(t *testing.T) {
		p := &peeker{alert: []byte("ALERT")}
		client, conns := peeked(t, p, 5*time.Second)
		write(t, client, "no\n")
		if got := string(readEOF(t, client)); got != "ALERT" {
			t.Fatalf("the client got %q then the end, want the alert", got)
		}
		p.waitEnded(t)
		select {
		case <-conns:
			t.Fatal("a refused connection reached the backend")
		default:
		}
	})
	t.Run("timeout", func(t *testing.T) {
		p := &peeker{alert: []byte("ALERT")}
		start := time.Now()
		client, _ := peeked(t, p, 200*time.Millisecond)
		write(t, client, "g")
		if got := string(readEOF(t, client)); got != "ALERT" {
			t.Fatalf("the client got %q then the end, want the alert", got)
		}
		if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
			t.Errorf("refused after %v, want the 200ms read timeout (up to a tick of the wheel after)", d)
		}
		p.waitEnded(t)
		p.mu.Lock()
		defer p.mu.Unlock()
		if last := p.errs[len(p.errs)-1]; !errors.Is(last, os.ErrDeadlineExceeded) {
			t.Errorf("Peek was last told %v, want the deadline", last)
		}
	})
}

// wantRelayed has f's loop relay a connection to ap for each worker,
// whichever takes which, and checks that each reaches the backend.
func wantRelayed(t *testing.T, f *fixture, ap netip.AddrPort, conns <-chan *net.TCPConn) {
	t.Helper()
	for i := range 2 * runtime.GOMAXPROCS(0) {
		client, s := f.accept(nil)
		f.loop.Relay(s, newHandler(ap), nil, time.Second)
		b := next(t, conns)
		write(t, client, "ping")
		if got := string(readN(t, b, 4)); got != "ping" {
			t.Fatalf("connection %d: the backend got %q", i, got)
		}
		client.Close()
		b.Close()
	}
}

// TestRelayAfterTimeouts: a worker whose last deadline passed (a peek that
// timed out, with nothing else armed) goes on relaying: the deadline left
// on its epoll set's file once had every later wait fail before it read
// the set, and the worker spun, serving nothing, for good.
func TestRelayAfterTimeouts(t *testing.T) {
	f := newFixture(t)
	ap, conns := backend(t)
	// One timed out on every worker, whichever takes which.
	for range 2 * runtime.GOMAXPROCS(0) {
		p := &peeker{handler: newHandler(ap)}
		client, s := f.accept(nil)
		f.loop.RelayPeeked(s, p, 100*time.Millisecond, time.Second)
		readEOF(t, client)
		p.waitEnded(t)
	}
	// Past the wheel's next tick, so that each worker waited since.
	time.Sleep(300 * time.Millisecond)
	wantRelayed(t, f, ap, conns)
}

// TestCloseEnds: closing a relayed Socket from another goroutine (a
// drain, the caps) ends the connection on both sides; closing one before
// the loop took it ends it without a connect.
func TestCloseEnds(t *testing.T) {
	t.Run("relaying", func(t *testing.T) {
		client, s, h, b := relayed(t)
		write(t, client, "x")
		readN(t, b, 1)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		h.waitEnded(t)
		readEOF(t, client)
		readEOF(t, b)
		if err := s.Close(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("a second Close gave %v, want net.ErrClosed", err)
		}
	})
	t.Run("before", func(t *testing.T) {
		f := newFixture(t)
		ap, conns := backend(t)
		client, s := f.accept(nil)
		s.Close()
		h := newHandler(ap)
		f.loop.Relay(s, h, nil, time.Second)
		if in, out := h.waitEnded(t); in != 0 || out != 0 {
			t.Errorf("Ended(%d, %d), want nothing carried", in, out)
		}
		readEOF(t, client)
		select {
		case <-conns:
			t.Fatal("a closed socket was connected")
		case <-time.After(50 * time.Millisecond):
		}
	})
}

// echoBackend is a backend that sends back what it gets.
func echoBackend(t *testing.T) netip.AddrPort {
	ap, conns := backend(t)
	go func() {
		for c := range conns {
			go func() {
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	return ap
}

// echoes checks that connection i, through the relay to an echoBackend,
// gets back what it sends.
func echoes(t *testing.T, i int, c net.Conn) {
	msg := []byte{byte('a' + i%26), byte(i)}
	c.Write(msg)
	b := make([]byte, 2)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, b); err != nil || !bytes.Equal(b, msg) {
		t.Errorf("connection %d: got %q (%v), want its own %q", i, b, err, msg)
	}
}

// TestManyConnections: connections spread over the workers, all at once,
// each gets its own backend's bytes.
func TestManyConnections(t *testing.T) {
	f := newFixture(t)
	ap := echoBackend(t)
	const n = 32
	var wg sync.WaitGroup
	for i := range n {
		client, s := f.accept(nil)
		h := newHandler(ap)
		f.loop.Relay(s, h, nil, time.Second)
		wg.Go(func() {
			echoes(t, i, client)
			client.Close()
		})
	}
	wg.Wait()
}

// TestServe: a worker accepts the connections waiting (more than one
// batch of them, all there before it began) and those that come after,
// each relayed to its backend; Serve returns net.ErrClosed once the
// listener is closed.
func TestServe(t *testing.T) {
	f := newFixture(t)
	ap := echoBackend(t)
	accept := func() error {
		c, err := f.ln.Accept()
		if err != nil {
			return err
		}
		f.loop.Relay(c.(*Socket), newHandler(ap), nil, time.Second)
		return nil
	}
	all := func(clients []net.Conn) {
		for i, c := range clients {
			echoes(t, i, c)
		}
	}
	dial := func(n int) []net.Conn {
		var clients []net.Conn
		for range n {
			c, err := net.Dial("tcp", f.ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			clients = append(clients, c)
		}
		return clients
	}
	waiting := dial(acceptBatch*2 + 5)
	served := make(chan error, 1)
	go func() { served <- f.loop.Serve(f.ln, accept) }()
	all(waiting)
	all(dial(3))
	f.ln.Close()
	select {
	case err := <-served:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve returned %v once the listener closed, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve went on after the listener closed")
	}
}

// TestServeGivesUp: an accept that fails otherwise than with none waiting
// (out of descriptors) ends Serve with its error, and the listener's
// Accept then waits for connections in Go as before.
func TestServeGivesUp(t *testing.T) {
	f := newFixture(t)
	failure := errors.New("out of descriptors")
	client, err := net.Dial("tcp", f.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := f.loop.Serve(f.ln, func() error { return failure }); err != failure {
		t.Fatalf("Serve returned %v, want the accept's failure", err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := f.ln.Accept()
		accepted <- c
	}()
	select {
	case c := <-accepted:
		if c == nil {
			t.Fatal("Accept failed")
		}
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("Accept took no connection after Serve gave up")
	}
}

// TestRelayWhileAccepting: a connection another goroutine hands to the
// loop while its worker accepts (the accept loop of a listener that the
// worker gave up accepting on, or of another listener) is queued for the
// worker, not set up on the caller's goroutine: there it would touch the
// worker's connections, epoll set and wheel while the worker does.
func TestRelayWhileAccepting(t *testing.T) {
	// One worker, so that every connection goes to the one that accepts.
	prev := runtime.GOMAXPROCS(1)
	f := newFixture(t)
	runtime.GOMAXPROCS(prev)
	ap := echoBackend(t)
	inside, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	accept := func() error {
		c, err := f.ln.Accept()
		if err != nil {
			return err
		}
		// The worker stays within its accept while the test relays.
		once.Do(func() { close(inside); <-release })
		f.loop.Relay(c.(*Socket), newHandler(ap), nil, time.Second)
		return nil
	}
	served := make(chan error, 1)
	go func() { served <- f.loop.Serve(f.ln, accept) }()
	accepted, err := net.Dial("tcp", f.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()
	select {
	case <-inside:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the worker accepted nothing")
	}

	// A connection of another listener, accepted on this goroutine.
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other := &fixture{t: t, loop: f.loop, ln: Listen(tl)}
	defer other.ln.Close()
	client, s := other.accept(nil)
	h := newHandler(ap)
	f.loop.Relay(s, h, nil, time.Second)
	h.mu.Lock()
	connecting := len(h.endpoints) == 0
	h.mu.Unlock()
	close(release)
	if connecting {
		t.Error("Relay, called while the worker accepted, connected on the caller's goroutine")
	}
	echoes(t, 0, client)
	echoes(t, 1, accepted)
	f.ln.Close()
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve returned %v, want net.ErrClosed", err)
	}
}

// TestServeBoundsRefusals: an accept that refuses connections and accepts
// again within one call, as the caps' does, takes no more than a batch
// before the worker turns to its connections; those left are taken in
// the batches after, every client refused.
func TestServeBoundsRefusals(t *testing.T) {
	f := newFixture(t)
	var clients []net.Conn
	for range 3 * acceptBatch {
		c, err := net.Dial("tcp", f.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
	}
	var mu sync.Mutex
	most := 0 // the most one call took
	refuse := func() error {
		n := 0
		defer func() {
			mu.Lock()
			most = max(most, n)
			mu.Unlock()
		}()
		for {
			c, err := f.ln.Accept()
			if err != nil {
				return err
			}
			n++
			c.Close()
		}
	}
	served := make(chan error, 1)
	go func() { served <- f.loop.Serve(f.ln, refuse) }()
	for _, c := range clients {
		readEOF(t, c)
	}
	f.ln.Close()
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve returned %v, want net.ErrClosed", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if most > acceptBatch {
		t.Errorf("one accept took %d connections, more than a batch (%d)", most, acceptBatch)
	}
}

// TestRelayAfterConnectTimeouts: as TestRelayAfterTimeouts, with connects
// that time out (a backend whose backlog is full) as the last deadlines
// on the workers.
func TestRelayAfterConnectTimeouts(t *testing.T) {
	f := newFixture(t)
	hole := tcptest.Unreachable(t)
	ap, conns := backend(t)
	for range 2 * runtime.GOMAXPROCS(0) {
		client, s := f.accept(nil)
		h := newHandler(hole)
		f.loop.Relay(s, h, nil, 100*time.Millisecond)
		readEOF(t, client)
		h.waitEnded(t)
		if len(h.failed) != 1 || !errors.Is(h.failed[0], os.ErrDeadlineExceeded) {
			t.Skipf("the connect to a full backlog failed with %v, not a timeout", h.failed)
		}
	}
	time.Sleep(300 * time.Millisecond)
	wantRelayed(t, f, ap, conns)
}
