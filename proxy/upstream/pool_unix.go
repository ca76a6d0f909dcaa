//go:build unix

package upstream

import (
	"errors"
	"net"
	"os"
	"syscall"
	"time"
)

// SocketState peeks at a TCP connection without blocking or taking bytes:
// idle (open, nothing to read), data waiting, or closed by the peer (with
// or without data unread before the Close) or broken. It costs a system
// call or two, so the engine uses it only where waiting would cost more,
// or reading the wrong bytes: before sending a request on a pooled
// connection, and while a request or a stream waits long for its backend.
func SocketState(c net.Conn) socketStatus {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return socketUnknown
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return SocketClosed
	}
	st := SocketClosed
	if err := raw.Read(func(fd uintptr) bool { st = peek(int(fd)); return true }); err != nil {
		return SocketClosed
	}
	return st
}

// socketState is SocketState for a connection of the pool, as it is
// looked at before every request sent on one: a raw system call on the
// socket's descriptor, kept from when the connection was first used,
// without the netpoller's locks and the runtime's bookkeeping of a call
// that may block, which cost as much as the peek itself. The connection's
// owner is the one goroutine that may close it, so the descriptor is its
// own; a peek takes no bytes in any case.
func (uc *Conn) socketState() socketStatus {
	if !uc.rawConn() {
		return SocketState(uc.Conn)
	}
	return peek(uc.fd)
}

// peek is what SocketState sees of the socket fd.
func peek(fd int) socketStatus {
	n, err := peekNow(fd)
	switch {
	case err == syscall.EAGAIN:
		return socketIdle
	// Bytes the peer sent before it closed, such as a TLS client's
	// close_notify, hide the Close from the peek.
	case err == nil && n > 0 && !peerFinished(fd):
		return socketData
	}
	return SocketClosed
}

// staleAfterIdle is how long a connection waits in the pool before
// FlushAwait looks whether the backend closed it: backends close idle
// connections after seconds, and a busy pool reuses its connections
// within milliseconds, which then pay no look.
const staleAfterIdle = 100 * time.Millisecond

var errClosedWhileIdle = errors.New("the backend closed the pooled connection while it was idle")

// FlushAwait writes what Writer holds, the end of a request, and waits
// until the backend's answer can be read, or the read deadline passes: a
// read right after the write mostly finds nothing yet, a system call for
// nothing before the goroutine parks on the netpoller. The write is made
// from within the wait (RawConn.Read), once the netpoller has forgotten
// the readiness it saw before, so that every byte the backend sends after
// the request wakes the wait. What the socket does not take at once is
// written as Write writes; the wait ends at any error, which the read
// after it then meets. It reports the write's error.
func (uc *Conn) FlushAwait() error {
	if uc.readStall > 0 || !uc.rawConn() {
		// A read stall is measured from the read that waits.
		return uc.Writer.Flush()
	}
	// The wait forgets what the netpoller saw while the connection was
	// pooled: a backend's FIN then, with its socket still open (a
	// half-close, a host gone), would wake it only at the deadline. A
	// connection the pool held long enough for a backend's idle timeout
	// to end is looked at first, and one found closed fails before
	// anything is sent, for the request to go on a fresh one.
	if !uc.idleSince.IsZero() && uc.takenAt.Sub(uc.idleSince) >= staleAfterIdle && uc.Stale() {
		return errClosedWhileIdle
	}
	uc.holding = true
	err := uc.Writer.Flush()
	uc.holding = false
	uc.out, uc.held = uc.held, nil
	if err != nil || len(uc.out) == 0 {
		return err
	}
	uc.wrote, uc.writeErr = false, nil
	_ = uc.raw.Read(uc.step)
	out, wrote, err := uc.out, uc.wrote, uc.writeErr
	uc.out, uc.writeErr = nil, nil
	if err != nil || wrote && len(out) == 0 {
		return err
	}
	// Unwritten (the read deadline had passed, or the connection was
	// closed), or written in part.
	_, err = uc.Write(out)
	return err
}

// rawConn readies raw and step, reporting whether the connection has a
// socket of its own.
func (uc *Conn) rawConn() bool {
	if uc.step != nil {
		return true
	}
	sc, ok := uc.Conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	if raw.Control(func(fd uintptr) { uc.fd = int(fd) }) != nil {
		return false
	}
	uc.raw, uc.step = raw, uc.writeThenWait
	return true
}

// writeThenWait is FlushAwait's RawConn.Read function: the first call
// writes out, and asks to wait unless that failed or the socket took
// part of it; the next one, the wait over, ends the read.
func (uc *Conn) writeThenWait(fd uintptr) bool {
	if uc.wrote {
		return true
	}
	uc.wrote = true
	n, err := writeNow(int(fd), uc.out)
	if n > 0 {
		uc.out = uc.out[n:]
	}
	switch {
	case err == syscall.EAGAIN || err == syscall.EINTR:
		return true
	case err != nil:
		uc.writeErr = &net.OpError{Op: "write", Net: "tcp", Source: uc.LocalAddr(), Addr: uc.RemoteAddr(), Err: os.NewSyscallError("write", err)}
		return true
	}
	return len(uc.out) > 0
}
