//go:build linux

package relay

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hostgate/hostgate/proxy/evloop"
)

// Listen wraps ln so that its connections are Sockets, accepted without
// Go's netpoller. A listener that is not a *net.TCPListener (a PROXY
// header's, whose bytes must be read in Go) is returned as it is.
func Listen(ln net.Listener) net.Listener {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return ln
	}
	// A listener's own RawConn waits for nothing (its Read fails): a
	// copy of its descriptor as a File does, on the netpoller. The copy
	// shares the listener's open file, non-blocking already.
	rc, err := tl.SyscallConn()
	if err != nil {
		return ln
	}
	fd, dupErr := -1, error(nil)
	if err := rc.Control(func(lfd uintptr) { fd, dupErr = unix.FcntlInt(lfd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil || dupErr != nil {
		return ln
	}
	f := os.NewFile(uintptr(fd), "")
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return ln
	}
	return &listener{TCPListener: tl, file: f, raw: raw, done: make(chan struct{})}
}

type listener struct {
	*net.TCPListener
	file   *os.File
	raw    syscall.RawConn
	closed atomic.Bool
	// onLoop says a worker accepts (Loop.Serve): Accept then takes a
	// connection waiting, or fails with ErrNoneWaiting, and never waits.
	onLoop atomic.Bool
	// budget is what the worker's batch has left to accept (onLoop),
	// the worker's alone.
	budget int
	// done is closed by Close.
	done      chan struct{}
	closeOnce sync.Once
}

func (l *listener) Close() error {
	l.closed.Store(true)
	l.closeOnce.Do(func() { close(l.done) })
	l.file.Close()
	return l.TCPListener.Close()
}

// ErrNoneWaiting is what the Accept of a listener that a worker accepts
// on (Loop.Serve) returns when no connection is waiting.
var ErrNoneWaiting = errors.New("relay: no connection waiting")

// errBatchTaken is what such a listener's Accept returns once the worker's
// batch is taken, before it accepts another.
var errBatchTaken = errors.New("relay: accept batch taken")

// Accept waits on the netpoller for the listening socket alone, and
// accepts with accept4 itself, as Go's Accept does but without
// registering the connection with the netpoller or asking its local
// address: the loop takes it, and a PROXY header towards a backend is the
// only user of the address.
func (l *listener) Accept() (net.Conn, error) {
	var fd int
	var sa syscall.Sockaddr
	var err error
	accept := func(lfd uintptr) bool {
		for {
			// syscall's, not x/sys/unix's, which asks each socket's
			// protocol (for L2TP) with a system call more.
			fd, sa, err = syscall.Accept4(int(lfd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
			// A connection reset before it was taken is no error of the
			// listener's, as in Go's Accept.
			if err != unix.EINTR && err != unix.ECONNABORTED {
				return err != unix.EAGAIN
			}
		}
	}
	var rerr error
	byWorker := l.onLoop.Load()
	if byWorker {
		// On the worker, which waits for the listening socket itself.
		if l.budget <= 0 {
			return nil, errBatchTaken
		}
		rerr = l.raw.Control(func(lfd uintptr) { accept(lfd) })
		if rerr == nil && err == unix.EAGAIN {
			return nil, ErrNoneWaiting
		}
		l.budget--
	} else {
		rerr = l.raw.Read(accept)
	}
	if rerr != nil && l.closed.Load() {
		// The file's "use of closed file" is no net.ErrClosed, which
		// the accept loop takes for a listener closed.
		rerr = net.ErrClosed
	}
	if rerr != nil {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: rerr}
	}
	if err != nil {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", err)}
	}
	// As Go's TCP connections: no Nagle delay on what the relay writes.
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	return &Socket{GoSide: evloop.GoSide{OnLoop: errRelayed}, fd: fd, remote: tcpAddr(sa), byWorker: byWorker}, nil
}

func tcpAddr(sa syscall.Sockaddr) *net.TCPAddr {
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		return &net.TCPAddr{IP: a.Addr[:], Port: a.Port}
	case *syscall.SockaddrInet6:
		return &net.TCPAddr{IP: a.Addr[:], Port: a.Port}
	}
	return &net.TCPAddr{}
}

// Socket is an accepted client connection, a bare descriptor for a Loop
// to relay, which reads and writes nothing itself; or, once Go made it
// one, a connection of Go's that a goroutine serves.
type Socket struct {
	// mu orders Close, from any goroutine, against the worker that
	// takes the socket and the one that ends it, and against Go.
	mu     sync.Mutex
	fd     int
	closed bool
	// p is the connection relaying it once a worker took it; Close then
	// asks the worker to end it.
	p *pipe
	// GoSide's Inner is the connection Go made of the socket (Go), nil
	// for a loop.
	evloop.GoSide
	remote *net.TCPAddr
	local  net.Addr
	// byWorker says a worker accepted the socket (Loop.Serve): Relay on
	// that worker then takes it at once, with no queue.
	byWorker bool
}

var errRelayed = errors.New("relay: socket is read and written by a relay loop")

func (s *Socket) RemoteAddr() net.Addr { return s.remote }

// Go makes the socket a connection on Go's netpoller, for a goroutine to
// serve: one whose TLS ends here, in crypto/tls. Before a loop took it.
func (s *Socket) Go() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Attach(&s.fd, &s.closed)
}

// LocalAddr asks the system the first time, which a socket accepted on a
// wildcard address needs; nil once the socket is closed.
func (s *Socket) LocalAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Inner != nil {
		return s.Inner.LocalAddr()
	}
	if s.local == nil && !s.closed {
		if sa, err := syscall.Getsockname(s.fd); err == nil {
			s.local = tcpAddr(sa)
		}
	}
	return s.local
}

// Close closes the socket, or, once a worker relays it, has the worker
// end the connection.
func (s *Socket) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return net.ErrClosed
	}
	if s.p != nil {
		s.p.w.kill(s.p)
		return nil
	}
	s.closed = true
	if s.Inner != nil {
		return s.Inner.Close()
	}
	return unix.Close(s.fd)
}

// Control calls f with the socket's descriptor, as a syscall.RawConn's
// Control does: while a worker relays it, its Close cannot come between.
func (s *Socket) Control(f func(fd uintptr)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return net.ErrClosed
	case s.Inner != nil:
		sc, ok := s.Inner.(syscall.Conn)
		if !ok {
			return errors.ErrUnsupported
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return err
		}
		return rc.Control(f)
	}
	f(uintptr(s.fd))
	return nil
}

// take gives the socket's descriptor to p, false if it was closed.
func (s *Socket) take(p *pipe) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.p = p
	return true
}

// release gives up the socket for the worker that took it, which closes
// the descriptor itself.
func (s *Socket) release() {
	s.mu.Lock()
	s.closed, s.p = true, nil
	s.mu.Unlock()
}
