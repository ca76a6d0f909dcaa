//go:build unix

package upstream

import (
	"errors"
	"net"
	"syscall"
)

// SocketState peeks at a TCP connection without blocking or taking bytes:
// idle (open, nothing to read), data waiting, or closed by the peer (with
// or without data unread before the Close) or broken. It costs a system
// call or two, so the engine uses it only where waiting would cost more:
// before sending a request that cannot be sent twice on a pooled
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
	var b [1]byte
	var n int
	var peekErr error
	finished := false
	if err := raw.Read(func(fd uintptr) bool {
		n, _, peekErr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Bytes the peer sent before it closed, such as a TLS client's
		// close_notify, hide the Close from the peek.
		finished = n > 0 && peerFinished(int(fd))
		return true
	}); err != nil {
		return SocketClosed
	}
	switch {
	case errors.Is(peekErr, syscall.EAGAIN):
		return socketIdle
	case peekErr == nil && n > 0 && !finished:
		return socketData
	}
	return SocketClosed
}
