//go:build linux

package h1loop

// A client socket moves between Go's netpoller and a loop: the listeners
// accept and the caps admit it in Go (guard.Tracker, a PROXY header's
// read), the loop then takes its descriptor (detach), and gives it back
// (attach) when the connection is handed to the netpoll engine.
//
// The caps close a connection to make room from any goroutine, through
// the guard.TrackedConn wrapped around a Socket. On the loop that close
// only shuts the socket down: the loop sees the end of the stream and
// releases the descriptor itself, so that no other goroutine closes a
// descriptor number the loop may still use, or that the kernel may
// already have given to another socket.

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostgate/hostgate/proxy/evloop"
	"github.com/hostgate/hostgate/proxy/guard"
)

// Listen wraps ln, whose connections are TCP connections or a PROXY
// header's over them, so that a Server can take them onto its loops.
// Beneath the caps (guard.NewTracker), so that a connection the caps
// close is closed on the loop too.
func Listen(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &Socket{GoSide: evloop.GoSide{Inner: c, OnLoop: errOnLoop}, fd: -1, remote: c.RemoteAddr(), local: c.LocalAddr()}, nil
}

// Socket is a client connection that a loop may own. Between Listen and
// the loop, and after it is handed back, it is the net.Conn it was
// accepted as (GoSide.Inner); on the loop it is a bare descriptor (fd).
type Socket struct {
	// mu orders the caps' Close against detach, attach and the loop's
	// release; reads and writes take no lock: one owner at a time uses
	// them.
	mu sync.Mutex
	evloop.GoSide
	fd     int
	closed bool
	// remote and local are the addresses of the connection as accepted
	// (the client's a PROXY header gave), which a socket handed back
	// keeps.
	remote, local net.Addr
}

var errOnLoop = errors.New("h1loop: socket is served by a loop")

// Close closes the connection, or on the loop shuts it down for the loop
// to release.
func (s *Socket) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return net.ErrClosed
	}
	s.closed = true
	if s.Inner != nil {
		return s.Inner.Close()
	}
	return unix.Shutdown(s.fd, unix.SHUT_RDWR)
}

func (s *Socket) LocalAddr() net.Addr  { return s.local }
func (s *Socket) RemoteAddr() net.Addr { return s.remote }

// SyscallConn is the socket's, for the checks of whether a client hung
// up (upstream.SocketState) once it is back in Go.
func (s *Socket) SyscallConn() (syscall.RawConn, error) {
	if tcp := guard.SocketOf(s.Inner); tcp != nil {
		return tcp.SyscallConn()
	}
	return nil, errOnLoop
}

// detach takes the socket's descriptor for a loop, with the bytes read
// ahead of it above the socket (past a PROXY header), which come before
// any the loop reads. Go's copy of the descriptor closes, which takes it
// out of the netpoller.
func (s *Socket) detach() (fd int, ahead []byte, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return -1, nil, net.ErrClosed
	}
	tcp := guard.SocketOf(s.Inner)
	if tcp == nil {
		// A PROXY header's connection with bytes read past the header:
		// with a deadline in the past, reads return what was read ahead
		// and then fail without a system call.
		if err := s.Inner.SetReadDeadline(time.Unix(1, 0)); err != nil {
			return -1, nil, err
		}
		var buf [512]byte
		for {
			n, err := s.Inner.Read(buf[:])
			ahead = append(ahead, buf[:n]...)
			if err != nil {
				break
			}
		}
		if err := s.Inner.SetReadDeadline(time.Time{}); err != nil {
			return -1, nil, err
		}
		if tcp = guard.SocketOf(s.Inner); tcp == nil {
			return -1, nil, errors.New("h1loop: no TCP socket beneath the connection")
		}
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		return -1, nil, err
	}
	var dupErr error
	if err := raw.Control(func(f uintptr) { fd, dupErr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, nil, err
	}
	if dupErr != nil {
		return -1, nil, dupErr
	}
	// O_NONBLOCK belongs to the open file, which the copy shares with
	// Go's: the loop's descriptor is non-blocking already.
	_ = s.Inner.Close()
	s.Inner, s.fd = nil, fd
	return fd, ahead, nil
}

// attach gives the loop's descriptor back to Go, once the loop took it
// out of its epoll set (closing a copy of a descriptor leaves it there).
func (s *Socket) attach() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Attach(&s.fd, &s.closed)
}

// release closes the loop's descriptor, for good.
func (s *Socket) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
	s.closed = true
}
