package upstream

import "golang.org/x/sys/unix"

// tcpCloseWait is TCP_CLOSE_WAIT of include/net/tcp_states.h: the peer
// has closed its side.
const tcpCloseWait = 8

// peerFinished reports whether the peer of the TCP socket fd has closed its
// side of the connection, whatever it sent before that is still unread.
func peerFinished(fd int) bool {
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	return err == nil && info.State == tcpCloseWait
}
