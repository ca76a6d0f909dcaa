package proxy

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAcceptedConnectionsKeepAlive: a connection accepted on a listener's
// socket probes an idle client as net's Accept would have it do, though
// Accept no longer sets it: the kernel copies it from the socket.
func TestAcceptedConnectionsKeepAlive(t *testing.T) {
	lc := listenConfig()
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ level, name, value int }{
		"SO_KEEPALIVE":  {unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
		"TCP_KEEPIDLE":  {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, int(keepAliveIdle / time.Second)},
		"TCP_KEEPINTVL": {unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, int(keepAliveInterval / time.Second)},
		"TCP_KEEPCNT":   {unix.IPPROTO_TCP, unix.TCP_KEEPCNT, keepAliveCount},
	}
	if err := raw.Control(func(fd uintptr) {
		for name, opt := range want {
			got, err := unix.GetsockoptInt(int(fd), opt.level, opt.name)
			if err != nil || got != opt.value {
				t.Errorf("accepted connection's %s = %d (%v), want %d", name, got, err, opt.value)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
}
