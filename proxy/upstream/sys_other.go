//go:build unix && !linux

package upstream

import "syscall"

// peerFinished cannot see a TCP socket's state here: a client that closed
// after sending bytes still unread (a TLS client's close_notify) is taken
// as still there.
func peerFinished(int) bool { return false }

// writeNow is FlushAwait's write.
func writeNow(fd int, p []byte) (int, error) { return syscall.Write(fd, p) }

// peekNow is socketState's look at the socket fd: one byte peeked without
// waiting.
func peekNow(fd int) (int, error) {
	var b [1]byte
	n, _, err := syscall.Recvfrom(fd, b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return n, err
}
