//go:build linux

package relay

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostgate/hostgate/proxy/evloop"
)

// Supported says whether the loop runs on this system (other.go).
const Supported = true

const (
	// bufferSize is what one read takes: as much as a splice through
	// Go's pipe moved at a time.
	bufferSize = 64 << 10
	// events is how many readiness events one epoll_wait takes.
	events = 256
	// acceptBatch is how many connections a worker accepts before it
	// turns to those it relays, and back.
	acceptBatch = 64
	// acceptTag marks the listening socket's events among the
	// connections' (in the epoll data's upper half; a descriptor number
	// in the lower half could be another socket's by the time its event
	// is read).
	acceptTag = 1
)

// Loop relays connections on its workers.
type Loop struct {
	workers []*worker
	next    atomic.Uint32
	stopped atomic.Bool
	done    sync.WaitGroup
}

// New starts a Loop's workers, one per GOMAXPROCS.
func New() (*Loop, error) {
	l := &Loop{}
	for range runtime.GOMAXPROCS(0) {
		w, err := newWorker(l)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.workers = append(l.workers, w)
		l.done.Go(w.run)
	}
	return l, nil
}

// Relay relays s, a Socket of Listen's, to the endpoints h gives, sending
// first to the backend before any of the client's bytes (a PROXY
// header). A connect that has not succeeded within dialTimeout fails.
func (l *Loop) Relay(s *Socket, h Handler, first []byte, dialTimeout time.Duration) {
	l.enqueue(&pipe{sock: s, h: h, first: first, dialTimeout: dialTimeout})
}

// RelayPeeked relays s as Relay does, once h's Peek, given the client's
// first bytes, said where to; the client has readTimeout for them (not
// positive: no limit).
func (l *Loop) RelayPeeked(s *Socket, h Peeker, readTimeout, dialTimeout time.Duration) {
	l.enqueue(&pipe{sock: s, h: h, peek: h, readTimeout: readTimeout, dialTimeout: dialTimeout})
}

// Serve has the first worker accept the connections of ln, a listener of
// Listen's, and run accept, which takes one with Accept (beneath the caps,
// which admit it there) and relays it or not, each time one is waiting:
// accept, the ClientHello's read and the connect on one thread, with no
// goroutine woken and no hand-off for the connections that stay on that
// worker. accept relays what it took before it returns, and reports
// ErrNoneWaiting when none is left. Serve returns
// net.ErrClosed once ln is closed, or the error of accept's that made the
// worker give up accepting (out of descriptors, say): ln's Accept then
// waits on Go's netpoller again, for the caller to serve it as before.
//
// One worker accepts, and hands what it accepts round the workers as
// Relay does: a listening socket in every worker's epoll set, with
// EPOLLEXCLUSIVE, would wake one of the sets, not a worker that is idle
// (they wait in Go's netpoller, not in epoll_wait), and one listening
// socket per worker (SO_REUSEPORT) would let the kernel's hash pile
// connections on a busy worker, and reset those queued on a socket that
// closes when the listener is replaced.
func (l *Loop) Serve(ln net.Listener, accept func() error) error {
	rl, ok := ln.(*listener)
	if !ok {
		return errors.New("relay: Serve needs a listener of Listen's")
	}
	a := &acceptor{ln: rl, accept: accept, failed: make(chan error, 1)}
	rl.onLoop.Store(true)
	w := l.workers[0]
	w.mu.Lock()
	w.joined = append(w.joined, a)
	w.mu.Unlock()
	w.wakeUp()
	select {
	case err := <-a.failed:
		return err
	case <-rl.done:
		return net.ErrClosed
	}
}

// acceptor is a listener a worker accepts on.
type acceptor struct {
	ln     *listener
	accept func() error
	// failed gets the error that ended accepting on the worker.
	failed chan error
	// more says the last batch did not take all that waited: the edge
	// that said so will not come again.
	more, stopped bool
}

// enqueue hands p to a worker: at once to the worker that accepted it,
// when it is the one whose turn it is.
func (l *Loop) enqueue(p *pipe) {
	w := l.workers[l.next.Add(1)%uint32(len(l.workers))]
	p.w, p.cfd, p.bfd = w, p.sock.fd, -1
	p.timer.Of = p
	if p.sock.byWorker && w.accepting.Load() {
		// On w's goroutine, within its accept: only the accepting worker
		// accepts sockets byWorker, and accept relays each before it
		// returns. Another goroutine may call enqueue while w accepts (the
		// accept loop of a listener the worker gave up on): its sockets
		// go by the queue.
		w.adopt(p)
		return
	}
	w.mu.Lock()
	wake := len(w.queue) == 0
	w.queue = append(w.queue, p)
	w.mu.Unlock()
	// The worker takes the whole queue after each wake-up: one that
	// found it non-empty is already due.
	if wake {
		w.wakeUp()
	}
}

// Close stops the workers, ending every connection on them, and returns
// once they are stopped.
func (l *Loop) Close() {
	l.stopped.Store(true)
	for _, w := range l.workers {
		w.wakeUp()
	}
	l.done.Wait()
}

// worker is one loop: a goroutine with its own epoll set and its own
// connections.
type worker struct {
	l *Loop
	// poll wakes up for Relay, kill and Close too. Its epoll set waits
	// as a file on Go's netpoller (park).
	poll    evloop.Poller
	file    *os.File
	raw     syscall.RawConn
	waitFor time.Time
	// fds are the connections by descriptor, client's and backend's.
	fds    []*pipe
	events [events]unix.EpollEvent
	buf    []byte
	// wheel holds the deadlines of the client's first bytes (peek) and
	// of the connects under way.
	wheel evloop.Wheel[*pipe]
	// closing are descriptors to close once the events of the current
	// wait are handled: a number closed and reused within them would
	// have the events left of the old socket taken for the new one's.
	closing []int
	now     time.Time

	// acceptors are the listeners this worker accepts on (Serve); more
	// counts those with connections left waiting after a batch, for
	// which the worker must not wait.
	acceptors []*acceptor
	more      int
	// accepting is set while the worker runs an acceptor's accept.
	accepting atomic.Bool

	mu     sync.Mutex
	queue  []*pipe
	kills  []*pipe
	taken  []*pipe
	killed []*pipe
	joined []*acceptor
}

func newWorker(l *Loop) (*worker, error) {
	poll, err := evloop.NewPoller()
	if err != nil {
		return nil, err
	}
	// Non-blocking, so that os.NewFile puts it on the netpoller.
	if err := unix.SetNonblock(poll.FD, true); err != nil {
		poll.Close()
		return nil, err
	}
	w := &worker{l: l, poll: poll, file: os.NewFile(uintptr(poll.FD), "relay"), buf: make([]byte, bufferSize)}
	w.wheel.Start(time.Now())
	if w.raw, err = w.file.SyscallConn(); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *worker) close() {
	// The file closes the epoll set.
	w.file.Close()
	unix.Close(w.poll.Wake)
}

func (w *worker) wakeUp() { w.poll.WakeUp() }

// kill has the worker end p, from any goroutine.
func (w *worker) kill(p *pipe) {
	w.mu.Lock()
	w.kills = append(w.kills, p)
	w.mu.Unlock()
	w.wakeUp()
}

// run is the loop: it takes what is ready, and waits, until the next
// tick of its deadlines, only when nothing is.
func (w *worker) run() {
	for !w.l.stopped.Load() {
		n := w.park()
		w.now = time.Now()
		for i := range n {
			ev := &w.events[i]
			fd := int(ev.Fd)
			if ev.Pad == acceptTag {
				w.acceptFrom(w.acceptors[fd])
			} else if fd == w.poll.Wake {
				w.woken()
			} else if p := w.pipe(fd); p != nil {
				w.event(p, fd, ev.Events)
			}
		}
		for _, a := range w.acceptors {
			if a.more {
				w.acceptFrom(a)
			}
		}
		w.wheel.Advance(w.now, w.expire)
		w.closeAll()
		// As proxy/h1loop's: a loop that never blocks would hold its P
		// until preempted, and the goroutines that need it (the
		// collector, TLS that ends here) would run in long stretches
		// that every connection waits out.
		if n > 0 || w.more > 0 {
			runtime.Gosched()
		}
	}
	for _, p := range w.fds {
		if p != nil {
			w.end(p)
		}
	}
	w.mu.Lock()
	queued := w.queue
	w.queue = nil
	w.mu.Unlock()
	for _, p := range queued {
		if w.own(p) {
			w.end(p)
		}
	}
	for _, a := range w.acceptors {
		w.stopAccepting(a, net.ErrClosed)
	}
	w.closeAll()
	w.close()
}

// acceptFrom accepts a batch of a's connections.
func (w *worker) acceptFrom(a *acceptor) {
	if a.stopped {
		return
	}
	if a.more {
		a.more = false
		w.more--
	}
	w.accepting.Store(true)
	defer w.accepting.Store(false)
	// The budget counts the connections the listener hands out, not the
	// calls: the caps refuse and accept again within one call, and a
	// flood at a cap would hold the worker until none is left waiting.
	a.ln.budget = acceptBatch
batch:
	for range acceptBatch {
		switch err := a.accept(); {
		case err == nil:
		case errors.Is(err, ErrNoneWaiting):
			return
		case errors.Is(err, errBatchTaken):
			break batch
		default:
			w.stopAccepting(a, err)
			return
		}
	}
	a.more = true
	w.more++
}

// stopAccepting takes a's listening socket out of the epoll set, and has
// Serve return err.
func (w *worker) stopAccepting(a *acceptor, err error) {
	if a.stopped {
		return
	}
	a.stopped = true
	if a.more {
		a.more = false
		w.more--
	}
	_ = a.ln.raw.Control(func(lfd uintptr) { _ = unix.EpollCtl(w.poll.FD, unix.EPOLL_CTL_DEL, int(lfd), nil) })
	a.ln.onLoop.Store(false)
	a.failed <- err
}

// join registers a's listening socket, edge-triggered: the worker accepts
// until none is left waiting, as the edge comes once.
func (w *worker) join(a *acceptor) {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(len(w.acceptors)), Pad: acceptTag}
	w.acceptors = append(w.acceptors, a)
	var err error
	if cerr := a.ln.raw.Control(func(lfd uintptr) { err = unix.EpollCtl(w.poll.FD, unix.EPOLL_CTL_ADD, int(lfd), &ev) }); cerr != nil {
		err = cerr
	}
	if err != nil {
		w.stopAccepting(a, err)
		return
	}
	// Connections that waited before the registration come with its
	// edge.
}

// park takes the events of the epoll set, waiting for some when there are
// none until the wheel's next tick is due, or not at all while
// connections wait to be accepted. The netpoller's Read asks first
// (WaitNow), once it forgot what readiness it knew of the set: a wait of
// our own before it would be a system call for nothing each time the
// worker parks (0.8 a passthrough connection), and could not stand in for
// it, as events that came between the two would be missed. It waits on
// Go's netpoller, not in epoll_wait: a worker blocked in a system call
// has its P handed to another thread for other goroutines, and then must
// wait for it back, a few futex wake-ups and thread switches per
// connection that cost more than the relay itself (strace, perf).
func (w *worker) park() int {
	if w.more > 0 {
		// Connections wait to be accepted: no waiting for more.
		return w.poll.WaitNow(w.events[:])
	}
	until := w.wheel.Next()
	if !until.Equal(w.waitFor) {
		_ = w.file.SetReadDeadline(until)
		w.waitFor = until
	}
	n := 0
	// Fails once the deadline passed, with no events: then the wheel
	// turns, and the deadline is set again however it turned, so that a
	// wheel that did not (a tick not yet due by its reckoning) has the
	// worker wait for it again rather than find the deadline passed at
	// every turn. The passed deadline is cleared too: the netpoller's
	// Read fails before it calls its function while one is set, and a
	// wheel left with no timer (the last peek timed out) would not set
	// another, so the worker spun on failing Reads and never read its
	// set again.
	if w.raw.Read(func(uintptr) bool {
		n = w.poll.WaitNow(w.events[:])
		return n > 0
	}) != nil {
		_ = w.file.SetReadDeadline(time.Time{})
		w.waitFor = time.Time{}
	}
	return n
}

func (w *worker) pipe(fd int) *pipe {
	if fd < len(w.fds) {
		return w.fds[fd]
	}
	return nil
}

func (w *worker) set(fd int, p *pipe) {
	for fd >= len(w.fds) {
		w.fds = append(w.fds, nil)
	}
	w.fds[fd] = p
}

// woken takes the connections handed in and ends those asked to.
func (w *worker) woken() {
	w.poll.Woken()
	w.mu.Lock()
	w.taken, w.queue = w.queue, w.taken[:0]
	w.killed, w.kills = w.kills, w.killed[:0]
	joined := w.joined
	w.joined = nil
	w.mu.Unlock()
	for _, a := range joined {
		w.join(a)
	}
	for i, p := range w.taken {
		w.taken[i] = nil
		w.adopt(p)
	}
	for i, p := range w.killed {
		w.killed[i] = nil
		if !p.ended {
			w.end(p)
		}
	}
}

func (w *worker) closeAll() {
	for _, fd := range w.closing {
		unix.Close(fd)
	}
	w.closing = w.closing[:0]
}

// own takes p's socket, or ends p if it was closed on its way here (a
// drain, the caps).
func (w *worker) own(p *pipe) bool {
	if !p.sock.take(p) {
		p.ended = true
		p.h.Ended(0, 0)
		return false
	}
	return true
}

func (w *worker) adopt(p *pipe) {
	if !w.own(p) {
		return
	}
	w.set(p.cfd, p)
	if err := w.poll.Add(p.cfd, 0); err != nil {
		w.end(p)
		return
	}
	if p.peek == nil {
		w.dial(p, nil)
		return
	}
	// The first bytes come with the edge of the registration when they
	// are there already: no read before it.
	if p.readTimeout > 0 {
		w.wheel.Arm(&p.timer, w.now.Add(p.readTimeout))
	}
}

// expire ends what p waited for too long: the client's first bytes, or a
// connect.
func (w *worker) expire(p *pipe) {
	switch {
	case p.peek != nil:
		w.decide(p, os.ErrDeadlineExceeded)
	case p.connecting:
		w.connectFailed(p, os.ErrDeadlineExceeded)
	}
}

// peekRead reads what the client sent for p's Peeker, until it decides
// or the socket is drained.
func (w *worker) peekRead(p *pipe) {
	for {
		n, errno := evloop.Read(p.cfd, w.buf)
		switch {
		case errno == unix.EAGAIN:
			return
		case errno != 0:
			w.decide(p, errno)
			return
		case n == 0:
			w.decide(p, io.EOF)
			return
		}
		p.in += int64(n)
		p.got = append(p.got, w.buf[:n]...)
		// Once connected, the relay reads on if bytes may be left that
		// no edge will announce again.
		more := n == len(w.buf) || p.dirs[0].hup
		p.dirs[0].ready = more
		if w.decide(p, nil) || !more {
			return
		}
	}
}

// decide asks p's Peeker what the bytes read so far say, read failing
// with err, and goes on as it says; false while it wants more.
func (w *worker) decide(p *pipe, err error) bool {
	step, send := p.peek.Peek(p.got, err)
	if step == More && err == nil {
		return false
	}
	w.wheel.Disarm(&p.timer)
	if step != Connect || err != nil {
		// The client reads the alert or not: the connection closes
		// next either way.
		if step == Refuse && len(send) > 0 {
			_, _ = evloop.Write(p.cfd, send)
		}
		w.end(p)
		return true
	}
	p.peek = nil
	p.first = p.got
	if len(send) > 0 {
		p.first = append(send[:len(send):len(send)], p.got...)
	}
	p.got = nil
	w.dial(p, nil)
	return true
}

// pipe is a relayed connection.
type pipe struct {
	w    *worker
	sock *Socket
	h    Handler
	// cfd is the client's descriptor, bfd the backend's (-1 before a
	// connect).
	cfd, bfd int
	// first goes to the backend before the client's bytes.
	first       []byte
	dialTimeout time.Duration
	// peek, until it decided, is the Peeker that got reads for, the
	// client's bytes so far, within readTimeout.
	peek        Peeker
	got         []byte
	readTimeout time.Duration
	// connecting says a connect is under way.
	connecting bool
	// timer is p's deadline on the worker's wheel: the peek's or the
	// connect's.
	timer evloop.Timer[*pipe]
	// dirs are the two directions: from the client to the backend (0)
	// and back (1).
	dirs    [2]direction
	in, out int64
	ended   bool
}

// direction is one way of a pipe.
type direction struct {
	// pending is what the destination has yet to take; the source is not
	// read while there is some.
	pending []byte
	// ready says the source may hold bytes that no edge will announce
	// again: a read was held back (pending, a connect) or cut short by a
	// full buffer. hup says an edge told the source sends no more: reads
	// go on to the end of the stream.
	ready, hup bool
	// eof says the source ended, done that its end was passed on.
	eof, done bool
}

func (p *pipe) fds(d int) (src, dst int) {
	if d == 0 {
		return p.cfd, p.bfd
	}
	return p.bfd, p.cfd
}

// dial connects p to the next endpoint its handler gives, after failed.
func (w *worker) dial(p *pipe, failed error) {
	for {
		ap, ok := p.h.Next(failed)
		if !ok {
			w.end(p)
			return
		}
		fd, inProgress, err := w.poll.Connect(ap, 0)
		if err != nil {
			failed = &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(ap), Err: err}
			continue
		}
		p.bfd = fd
		w.set(fd, p)
		if !inProgress {
			w.connected(p)
			return
		}
		p.connecting = true
		w.wheel.Arm(&p.timer, w.now.Add(p.dialTimeout))
		return
	}
}

// connectFailed drops p's connect under way and tries the next endpoint.
func (w *worker) connectFailed(p *pipe, err error) {
	w.wheel.Disarm(&p.timer)
	p.connecting = false
	w.fds[p.bfd] = nil
	w.closing = append(w.closing, p.bfd)
	p.bfd = -1
	w.dial(p, err)
}

func (w *worker) connected(p *pipe) {
	w.wheel.Disarm(&p.timer)
	p.connecting = false
	p.h.Connected()
	if len(p.first) > 0 {
		first := p.first
		p.first = nil
		if !w.send(p, 0, first) {
			return
		}
	}
	if p.dirs[0].ready {
		w.pump(p, 0)
	}
}

// event handles the readiness of fd, one of p's descriptors.
func (w *worker) event(p *pipe, fd int, ev uint32) {
	if p.peek != nil {
		// Only the client's descriptor is there yet.
		if ev&(unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			p.dirs[0].hup = true
		}
		if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			w.peekRead(p)
		}
		return
	}
	if p.connecting && fd == p.bfd {
		if ev&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			w.connectFailed(p, evloop.ConnectError(fd))
			return
		}
		if ev&unix.EPOLLOUT == 0 {
			return
		}
		// Writable without an error: connected, with no system call to
		// ask.
		w.connected(p)
		if p.ended || w.pipe(fd) != p {
			return
		}
	}
	// The client's descriptor is the source of direction 0 and the
	// destination of 1, the backend's the other way round.
	d := 0
	if fd == p.bfd {
		d = 1
	}
	if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) != 0 && len(p.dirs[1-d].pending) > 0 {
		w.flush(p, 1-d)
		if p.ended {
			return
		}
	}
	if ev&(unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		p.dirs[d].hup = true
	}
	if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		w.pump(p, d)
	}
}

// pump reads direction d's source and writes what it read on, until the
// source is drained, ends, or the destination takes no more.
func (w *worker) pump(p *pipe, d int) {
	x := &p.dirs[d]
	if x.eof {
		return
	}
	if p.connecting || len(x.pending) > 0 {
		x.ready = true
		return
	}
	x.ready = false
	src, _ := p.fds(d)
	for {
		n, errno := evloop.Read(src, w.buf)
		switch {
		case errno == unix.EAGAIN:
			return
		case errno != 0:
			// A reset: nothing more goes either way.
			w.end(p)
			return
		case n == 0:
			x.eof = true
			w.shut(p, d)
			return
		}
		if d == 0 {
			p.in += int64(n)
		} else {
			p.out += int64(n)
		}
		if !w.send(p, d, w.buf[:n]) {
			x.ready = true
			return
		}
		if n < len(w.buf) && !x.hup {
			// Edge-triggered: a short read drained the socket.
			return
		}
	}
}

// send writes b to direction d's destination, keeping what it does not
// take; it reports whether all was taken.
func (w *worker) send(p *pipe, d int, b []byte) bool {
	_, dst := p.fds(d)
	if evloop.SendNow(dst, b, &p.dirs[d].pending) != 0 {
		w.end(p)
		return false
	}
	return len(p.dirs[d].pending) == 0
}

// flush writes what direction d's destination had not taken, now that it
// may, and goes on with the direction once it is all taken.
func (w *worker) flush(p *pipe, d int) {
	x := &p.dirs[d]
	pending := x.pending
	x.pending = nil
	if !w.send(p, d, pending) {
		// send kept what is left, or ended p.
		return
	}
	switch {
	case x.eof:
		w.shut(p, d)
	case x.ready:
		w.pump(p, d)
	}
}

// shut passes on the end of direction d, whose source ended and whose
// bytes were all taken: by a half-close, or, when the other direction
// ended too, by closing both.
func (w *worker) shut(p *pipe, d int) {
	if len(p.dirs[d].pending) > 0 {
		return
	}
	p.dirs[d].done = true
	if p.dirs[1-d].done {
		w.end(p)
		return
	}
	_, dst := p.fds(d)
	_ = unix.Shutdown(dst, unix.SHUT_WR)
}

// end closes both of p's descriptors (which takes them out of the epoll
// set) and tells its handler.
func (w *worker) end(p *pipe) {
	if p.ended {
		return
	}
	p.ended = true
	w.wheel.Disarm(&p.timer)
	p.peek, p.got = nil, nil
	if p.bfd >= 0 {
		w.fds[p.bfd] = nil
		w.closing = append(w.closing, p.bfd)
		p.bfd = -1
	}
	if w.pipe(p.cfd) == p {
		w.fds[p.cfd] = nil
	}
	p.sock.release()
	w.closing = append(w.closing, p.cfd)
	p.dirs = [2]direction{}
	p.h.Ended(p.in, p.out)
}
