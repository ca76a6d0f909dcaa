// Package udptest serves UDP on loopback for tests: the backends of UDP
// listeners. It owns nothing else.
package udptest

import (
	"net"
	"testing"
)

// Serve answers each datagram sent to a new socket on 127.0.0.1 with what
// answer returns for it and its sender, until the test ends, and returns
// the socket's address.
func Serve(t testing.TB, answer func(from net.Addr, p []byte) []byte) *net.UDPAddr {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(answer(from, buf[:n]), from)
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr)
}

// Prefixed answers each datagram with prefix and the datagram.
func Prefixed(prefix string) func(net.Addr, []byte) []byte {
	return func(_ net.Addr, p []byte) []byte { return append([]byte(prefix), p...) }
}
