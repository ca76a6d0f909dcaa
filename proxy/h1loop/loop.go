//go:build linux

package h1loop

import (
	"bufio"
	"errors"
	"golang.org/x/sys/unix"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/proxy/evloop"
	"github.com/hostgate/hostgate/proxy/guard"
)

const (
	// readBufferSize bounds the request heads the loop serves, as the
	// netpoll engine's: a longer one goes to net/http, which enforces
	// MaxHeaderBytes.
	readBufferSize = 8 << 10
	// writeBufferSize holds the answers to one read's requests, which
	// then leave in one write.
	writeBufferSize = 32 << 10
	// events is how many readiness events one epoll_wait takes.
	events = 256
)

// Supported says whether the loop runs on this system (other.go).
const Supported = true

// Server serves the HTTP/1.1 connections of one listener on its loops.
type Server struct {
	cfg     Config
	workers []*worker
	next    atomic.Uint32
	// closing says the listener drains: idle connections close, answers
	// close theirs.
	closing atomic.Bool
	stopped atomic.Bool
	done    sync.WaitGroup
}

// New starts a Server's loops, each on an OS thread of its own.
func New(cfg Config) (*Server, error) {
	n := cfg.Workers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	s := &Server{cfg: cfg}
	for range n {
		w, err := newWorker(s)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.workers = append(s.workers, w)
		s.done.Go(w.run)
	}
	return s, nil
}

// ServeConn serves c, a connection the listener's guard.Tracker accepted
// from a Listen listener, on one of the loops.
func (s *Server) ServeConn(c net.Conn) {
	w := s.workers[s.next.Add(1)%uint32(len(s.workers))]
	w.mu.Lock()
	w.queue = append(w.queue, c)
	w.mu.Unlock()
	w.wakeUp()
}

// CloseIdle makes the loops' connections close once idle, and closes
// those idle now: the listener drains.
func (s *Server) CloseIdle() {
	s.closing.Store(true)
	for _, w := range s.workers {
		w.wakeUp()
	}
}

// Close stops the loops, closing every connection on them, and returns
// once they are stopped.
func (s *Server) Close() {
	s.stopped.Store(true)
	for _, w := range s.workers {
		w.wakeUp()
	}
	s.done.Wait()
}

// worker is one loop: a goroutine with its own epoll set and its own
// connections.
type worker struct {
	s *Server
	// poll wakes up for ServeConn, CloseIdle and Close too.
	poll evloop.Poller
	// conns are the loop's connections by descriptor.
	conns  []*conn
	wheel  evloop.Wheel[*conn]
	events [events]unix.EpollEvent
	// tags is the tag of the latest socket registered.
	tags int32
	// bw builds the answers to the connection served (cur), and writes
	// them to it (Write).
	bw  *bufio.Writer
	cur *conn
	// free are read buffers of connections that went idle with nothing
	// buffered, for the next that reads.
	free [][]byte
	now  time.Time

	// ups are the worker's connections to backends by descriptor, idle
	// those waiting for a request by address, the most recently used
	// last (backend.go); freeUp their read buffers. ubw builds a request
	// and writes it to ucur, leaving a failure in uerr.
	ups    []*upConn
	idle   map[string][]*upConn
	freeUp [][]byte
	ubw    *bufio.Writer
	ucur   *upConn
	uerr   error
	swept  time.Time

	mu    sync.Mutex
	queue []net.Conn
	taken []net.Conn
}

func newWorker(s *Server) (*worker, error) {
	poll, err := evloop.NewPoller()
	if err != nil {
		return nil, err
	}
	w := &worker{s: s, poll: poll, idle: map[string][]*upConn{}}
	w.bw = bufio.NewWriterSize(w, writeBufferSize)
	w.ubw = bufio.NewWriterSize(upSink{w}, writeBufferSize)
	w.now = time.Now()
	w.wheel.Start(w.now)
	return w, nil
}

func (w *worker) wakeUp() { w.poll.WakeUp() }

// run is the loop: it waits for readiness without blocking first, and
// blocks, until the next tick of its timers, only when nothing is ready.
func (w *worker) run() {
	for !w.s.stopped.Load() {
		n := w.poll.WaitNow(w.events[:])
		if n == 0 {
			n = w.poll.Wait(w.events[:], w.wheel.Wait(time.Now()))
		}
		w.now = time.Now()
		w.dispatch(w.events[:n])
		w.wheel.Advance(w.now, w.expire)
		// A loop that never blocks holds its P until the scheduler
		// preempts it after 10 ms: the goroutines that need the P (the
		// collector's workers, the native engine's, timers) then run in
		// one long stretch that every request on the loop waits out.
		// Yielding at each turn gives them short, frequent ones.
		if n > 0 {
			runtime.Gosched()
		}
		if w.now.Sub(w.swept) >= time.Second {
			w.sweepIdle()
			w.swept = w.now
		}
	}
	for _, c := range w.conns {
		if c != nil {
			w.close(c)
		}
	}
	for _, u := range w.ups {
		if u != nil {
			w.closeUp(u)
		}
	}
	w.mu.Lock()
	queued := w.queue
	w.queue = nil
	w.mu.Unlock()
	for _, c := range queued {
		c.Close()
	}
	w.poll.Close()
}

// dispatch handles the events of one wait.
//
// An event is its socket's, not its descriptor number's: a socket closed
// while the batch is handled (a client's end closes its backend
// connection, a stale pooled one is dropped) frees its number, which the
// next socket the worker adopts or dials takes, and what the batch has
// left of the old socket's events would be the new one's (a backend's
// reset making a new client look hung up). The tag each socket is
// registered with, a counter of the worker's, tells them apart, with no
// system call and nothing to do at each close.
func (w *worker) dispatch(evs []unix.EpollEvent) {
	w.dropStale(evs)
	for i := range evs {
		ev := &evs[i]
		fd := int(ev.Fd)
		if fd == w.poll.Wake {
			w.woken()
			continue
		}
		c := w.conn(fd)
		if c == nil || c.tag != ev.Pad {
			if u := w.up(fd); u != nil && u.tag == ev.Pad {
				w.upEvent(u, ev.Events)
			}
			continue
		}
		if ev.Events&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) != 0 && len(c.out) > 0 {
			w.flushOut(c)
		}
		if ev.Events&(unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			c.hup = true
		}
		if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 && w.conn(fd) == c {
			w.readable(c)
		}
	}
}

// dropStale closes, before any event of the batch is handled, the pooled
// backend connections that the wait found with bytes to read or their
// end. A request that may be sent twice takes a pooled connection without
// a look at its socket (takeIdle), a system call a request saved; handled
// in turn, a client's request before such an event in the same batch took
// the connection and was sent on it, and the bytes, a response no
// request asked for (a body to a HEAD, bytes past Content-Length, a
// response split in two), were read as its answer: another client's.
// Idle since before the wait, the connection was read by no one since the
// kernel found it readable: what it holds is stray, or its end, and no
// peek is needed to tell.
//
// What remains: bytes that come after the wait returned, while its batch
// is handled, are seen at the next wait, and a connection a request of
// the batch takes carries them to it. Every proxy that keeps backend
// connections alive runs that race with a backend that sends past its
// responses: bytes sent just after the netpoll engine's peek before each
// reuse (upstream.Conn's Stale), or just after the request, are read as
// its answer all the same. The loop's window is wider, the rest of a
// batch rather than the moment between a peek and a write, and that is
// the price of no system call a request.
func (w *worker) dropStale(evs []unix.EpollEvent) {
	for i := range evs {
		ev := &evs[i]
		if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			continue
		}
		if u := w.up(int(ev.Fd)); u != nil && u.tag == ev.Pad && u.c == nil {
			w.dropIdle(u)
		}
	}
}

// tag is the tag of the next socket registered (dispatch).
func (w *worker) tag() int32 {
	w.tags++
	return w.tags
}

func (w *worker) conn(fd int) *conn {
	if fd < len(w.conns) {
		return w.conns[fd]
	}
	return nil
}

// woken takes the connections handed in, and closes the idle ones when
// the listener drains.
func (w *worker) woken() {
	w.poll.Woken()
	w.mu.Lock()
	w.taken, w.queue = w.queue, w.taken[:0]
	w.mu.Unlock()
	for i, c := range w.taken {
		w.taken[i] = nil
		w.adopt(c)
	}
	if w.s.closing.Load() {
		for _, c := range w.conns {
			if c != nil && c.waiting && c.start == c.n && len(c.out) == 0 {
				w.close(c)
			}
		}
	}
}

// adopt takes nc onto the loop, or hands it over when it cannot be.
func (w *worker) adopt(nc net.Conn) {
	tc, ok := nc.(*guard.TrackedConn)
	var sock *Socket
	if ok {
		sock, ok = tc.Conn.(*Socket)
	}
	if !ok {
		go w.s.cfg.HandOff(nc)
		return
	}
	fd, ahead, err := sock.detach()
	if err != nil {
		if errors.Is(err, net.ErrClosed) {
			nc.Close()
		} else {
			go w.s.cfg.HandOff(nc)
		}
		return
	}
	c := &conn{fd: fd, tag: w.tag(), tc: tc, sock: sock, remote: tc.RemoteAddr().String(), waiting: true}
	c.timer.Of = c
	c.peer = guard.AddrOf(tc.RemoteAddr())
	c.client = c.remote
	if ap, err := netip.ParseAddrPort(c.remote); err == nil {
		c.client = ap.Addr().String()
	}
	for fd >= len(w.conns) {
		w.conns = append(w.conns, nil)
	}
	w.conns[fd] = c
	if err := w.poll.Add(fd, c.tag); err != nil {
		w.close(c)
		return
	}
	w.wheel.Arm(&c.timer, w.now.Add(w.s.cfg.ReadHeaderTimeout))
	if len(ahead) > 0 {
		if len(ahead) > readBufferSize {
			c.buf = ahead
			c.n = len(ahead)
			w.handOff(c)
			return
		}
		c.buf = w.buffer()
		c.n = copy(c.buf, ahead)
		w.process(c)
	}
}

func (w *worker) buffer() []byte {
	if n := len(w.free); n > 0 {
		b := w.free[n-1]
		w.free = w.free[:n-1]
		return b
	}
	return make([]byte, readBufferSize)
}

// putBuffer takes c's read buffer back, once nothing is in it.
func (w *worker) putBuffer(c *conn) {
	if c.buf != nil && len(c.buf) == readBufferSize {
		w.free = append(w.free, c.buf)
	}
	c.buf, c.start, c.n = nil, 0, 0
}

func (w *worker) expire(c *conn) {
	if c.forwarding {
		w.expireForward(c)
		return
	}
	w.close(c)
}

// close ends c: its descriptor closes on the loop (which takes it out of
// the epoll set), and the caps forget it.
func (w *worker) close(c *conn) {
	if w.conns[c.fd] != c {
		return
	}
	w.conns[c.fd] = nil
	if c.forwarding {
		w.abort(c)
	}
	w.wheel.Disarm(&c.timer)
	w.putBuffer(c)
	c.out = nil
	c.sock.release()
	c.tc.Close()
}
