package upstream

import (
	"syscall"
	"unsafe"

	"github.com/hostgate/hostgate/proxy/evloop"
	"golang.org/x/sys/unix"
)

// tcpCloseWait is TCP_CLOSE_WAIT of include/net/tcp_states.h: the peer
// has closed its side.
const tcpCloseWait = 8

// peerFinished reports whether the peer of the TCP socket fd has closed its
// side of the connection, whatever it sent before that is still unread.
func peerFinished(fd int) bool {
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	return err == nil && info.State == tcpCloseWait
}

// writeNow is FlushAwait's write to the non-blocking socket fd, a raw
// system call: it never blocks, and the runtime's bookkeeping around a
// system call that may (entersyscall) is what has Go's sysmon hand the
// P of a write that lasts a tick to another thread. On loopback a write
// runs the backend's receive path too, often past a tick: with
// GOMAXPROCS=1 sysmon then took the P, woke a thread for it and kept
// waking every 20 µs itself.
func writeNow(fd int, p []byte) (int, error) {
	n, errno := evloop.Write(fd, p)
	if errno != 0 {
		return max(n, 0), syscall.Errno(errno)
	}
	return n, nil
}

// peekNow is socketState's look at the socket fd, a raw system call as
// writeNow is: one byte peeked without waiting.
func peekNow(fd int) (int, error) {
	var b byte
	for {
		n, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b)), 1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, syscall.Errno(errno)
	}
}
