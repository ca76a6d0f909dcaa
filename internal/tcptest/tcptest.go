//go:build unix

// Package tcptest is test support only: TCP endpoints on loopback that
// behave as a broken backend does. It must never be imported by non-test
// code.
package tcptest

import (
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// Unreachable is a loopback address whose connects never complete: a
// listener that accepts nothing, its backlog filled, so that the system
// drops the SYNs that come after and a connect waits until it times out.
// The test is skipped where the backlog does not fill.
func Unreachable(t testing.TB) netip.AddrPort {
	t.Helper()
	fd, ap := bound(t)
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		c, err := net.DialTimeout("tcp", ap.String(), 200*time.Millisecond)
		if err != nil {
			return ap
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("the listener's backlog never filled: connects there would not time out")
	return ap
}

// Refused is a loopback address whose connects are refused: a socket
// bound to it that never listens, held until the test ends. A closed
// listener's port could be given to the next listener of the test
// process, whose connects would then succeed.
func Refused(t testing.TB) netip.AddrPort {
	t.Helper()
	_, ap := bound(t)
	return ap
}

// bound is a TCP socket bound to a port of 127.0.0.1, closed when the test
// ends, and its address.
func bound(t testing.TB) (int, netip.AddrPort) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	// SOCK_CLOEXEC is Linux's and the BSDs', not macOS's.
	syscall.CloseOnExec(fd)
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	in4 := sa.(*syscall.SockaddrInet4)
	return fd, netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port))
}
