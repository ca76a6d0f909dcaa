package proxy

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// listenConfig sets TCP keep-alive once, on the listening socket, where
// Linux copies it to every connection accepted: net's Accept would set
// it with four system calls per connection, a tenth of those a short
// Layer 4 connection costs (docs/benchmarks.md, sixteenth round). The
// probes are net's defaults.
func listenConfig() net.ListenConfig {
	return net.ListenConfig{KeepAlive: -1, Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			for _, opt := range []struct{ level, name, value int }{
				{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
				{unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, int(keepAliveIdle / time.Second)},
				{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, int(keepAliveInterval / time.Second)},
				{unix.IPPROTO_TCP, unix.TCP_KEEPCNT, keepAliveCount},
			} {
				if err == nil {
					err = unix.SetsockoptInt(int(fd), opt.level, opt.name, opt.value)
				}
			}
		}); cerr != nil {
			return cerr
		}
		return err
	}}
}
