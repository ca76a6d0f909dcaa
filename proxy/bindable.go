package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
)

// Bindable says why a listener cannot bind ip on this host, or nil when it
// can: the address is a loopback one, is assigned to an interface, or the
// kernel lets sockets bind addresses that are not (ip_nonlocal_bind, which
// VIP managers such as keepalived set so that a listener may open before
// its address arrives). Translation asks it for each Gateway's
// spec.addresses, so that an address the node does not hold is reported
// (AddressNotUsable) rather than failing when its listener opens.
//
// It looks at the host as it is when asked: an address added to an
// interface later is seen at the next change of the configuration.
func Bindable(ip netip.Addr) error {
	ip = ip.Unmap()
	if ip.IsLoopback() {
		return nil
	}
	if nonlocalBind(ip) {
		return nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return fmt.Errorf("list the addresses of this host: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if local, ok := netip.AddrFromSlice(n.IP); ok && local.Unmap() == ip {
				return nil
			}
		}
	}
	return errors.New("not an address of this node (no interface holds it)")
}

// nonlocalBind reports whether the kernel lets sockets bind an address of
// ip's family that no interface holds.
func nonlocalBind(ip netip.Addr) bool {
	family := "ipv4"
	if ip.Is6() {
		family = "ipv6"
	}
	data, err := os.ReadFile("/proc/sys/net/" + family + "/ip_nonlocal_bind")
	return err == nil && strings.TrimSpace(string(data)) == "1"
}
