package proxy

import (
	"net"
	"net/netip"
	"testing"
)

func TestBindable(t *testing.T) {
	for _, ip := range []string{"127.0.0.5", "::1", "127.255.0.1"} {
		if err := Bindable(netip.MustParseAddr(ip)); err != nil {
			t.Errorf("Bindable(%s) = %v; want nil: every loopback address can be bound", ip, err)
		}
	}
	// An address of an interface of this host can be bound.
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, _ := netip.AddrFromSlice(n.IP)
		if err := Bindable(ip); err != nil {
			t.Errorf("Bindable(%s), an interface's address: %v", ip, err)
		}
	}
	// TEST-NET-1 is never assigned; unless the kernel binds any address,
	// it cannot be bound, and Bindable must agree with a real bind.
	doc := netip.MustParseAddr("192.0.2.1")
	l, bindErr := net.Listen("tcp", netip.AddrPortFrom(doc, 0).String())
	if bindErr == nil {
		l.Close()
	}
	if err := Bindable(doc); (err == nil) != (bindErr == nil) {
		t.Errorf("Bindable(%s) = %v, but binding it gave %v", doc, err, bindErr)
	}
}
