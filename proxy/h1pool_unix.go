//go:build unix

package proxy

import (
	"errors"
	"syscall"
)

// alive reports whether a pooled connection still looks open: a peek that
// would block says so, where end of stream or unexpected data says the
// backend closed it or broke the exchange. It costs a system call, so only
// requests that could not be sent again on another connection pay for it.
func (uc *upConn) alive() bool {
	if uc.br.Buffered() > 0 {
		return false
	}
	sc, ok := uc.Conn.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var b [1]byte
	var peekErr error
	if err := raw.Read(func(fd uintptr) bool {
		_, _, peekErr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil {
		return false
	}
	return errors.Is(peekErr, syscall.EAGAIN)
}
