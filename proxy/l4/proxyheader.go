package l4

// The PROXY protocol towards backends (haproxy.org's proxy-protocol.txt):
// a backend behind hostgate sees hostgate's address as its peer, so one
// that must know its clients (a mail server's allow list, a database's
// host-based authentication, HAProxy or nginx behind us) asks for a header
// at the start of each connection that names the client. Version 2 is
// binary, version 1 text.

import (
	"encoding/binary"
	"net/netip"
	"strconv"
)

// proxyV2Signature starts every version 2 header.
const proxyV2Signature = "\r\n\r\n\x00\r\nQUIT\n"

// proxyHeader is the header of version 1 or 2 for a connection from src
// to dst. Addresses of different families (an IPv4 client on an IPv6
// socket) are both given as IPv6; an address not known (a test's pipe)
// makes a header without addresses: version 1's UNKNOWN, version 2's
// LOCAL, which backends take as "the peer is the client".
func proxyHeader(version uint8, src, dst netip.AddrPort) []byte {
	known := src.IsValid() && dst.IsValid()
	srcAddr, dstAddr := src.Addr().Unmap(), dst.Addr().Unmap()
	if known && srcAddr.Is4() != dstAddr.Is4() {
		srcAddr, dstAddr = netip.AddrFrom16(srcAddr.As16()), netip.AddrFrom16(dstAddr.As16())
	}
	if version == 1 {
		if !known {
			return []byte("PROXY UNKNOWN\r\n")
		}
		family := "TCP6"
		if srcAddr.Is4() {
			family = "TCP4"
		}
		b := make([]byte, 0, 108)
		b = append(b, "PROXY "+family+" "...)
		b = srcAddr.AppendTo(b)
		b = append(b, ' ')
		b = dstAddr.AppendTo(b)
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(src.Port()), 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(dst.Port()), 10)
		return append(b, "\r\n"...)
	}
	b := make([]byte, 0, 16+36)
	b = append(b, proxyV2Signature...)
	if !known {
		// Version 2, LOCAL; family and length 0.
		return append(b, 0x20, 0x00, 0, 0)
	}
	// Version 2, PROXY; then the family: TCP over IPv4 or over IPv6.
	b = append(b, 0x21)
	if srcAddr.Is4() {
		b = append(b, 0x11, 0, 12)
		s, d := srcAddr.As4(), dstAddr.As4()
		b = append(append(b, s[:]...), d[:]...)
	} else {
		b = append(b, 0x21, 0, 36)
		s, d := srcAddr.As16(), dstAddr.As16()
		b = append(append(b, s[:]...), d[:]...)
	}
	b = binary.BigEndian.AppendUint16(b, src.Port())
	return binary.BigEndian.AppendUint16(b, dst.Port())
}
