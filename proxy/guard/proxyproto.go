package guard

// PROXY protocol (haproxy.org/download/2.9/doc/proxy-protocol.txt),
// versions 1 and 2, on the TCP listeners: a load balancer that forwards
// connections at layer 4 states the client's address in a header before
// the connection's first byte. The header is read beneath TLS and beneath
// the connection caps, so that the caps count real clients, the TLS
// handshake starts after it, and every engine (HTTP/1.1 native and
// net/http, HTTP/2) sees the client's address as the connection's.
// HTTP/3 runs over UDP, which has no such header: it is not covered.
//
// Every connection must start with a header, as on nginx's "listen ...
// proxy_protocol": a listener cannot tell a header-less client from a
// slow load balancer. A connection from outside the peers allowed to send
// one, a malformed or overlong header, or one that does not come within
// ReadHeaderTimeout, closes the connection, counted in
// hostgate_proxy_protocol_rejected_total.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	// ppV1MaxLen is the longest version 1 header, CRLF included.
	ppV1MaxLen = 107
	// ppV2HeadLen is version 2's fixed part: signature, version and
	// command, family and transport, length.
	ppV2HeadLen = 16
	// ppReadSize is what one read asks for: a whole version 1 header, or
	// version 2's fixed part and IPv6 addresses.
	ppReadSize = 128
)

const ppV2Signature = "\r\n\r\n\x00\r\nQUIT\n"

var (
	errPPShort     = errors.New("PROXY protocol header incomplete")
	errPPMalformed = errors.New("malformed PROXY protocol header")
)

// ppReason is why a connection's PROXY header was refused.
type ppReason uint8

const (
	ppUntrusted ppReason = iota
	ppMalformed
	ppIncomplete
	ppTimeout
	numPPReasons
)

var ppReasonNames = [numPPReasons]string{"untrusted_peer", "malformed", "incomplete", "timeout"}

// parseProxyHeader parses the PROXY header at the start of b. It returns
// the header's length and the client's address, invalid when the header
// says to keep the connection's own (version 1 UNKNOWN, version 2 LOCAL,
// or an address family other than IPv4 and IPv6). errPPShort asks for more
// bytes; a version 2 header's length may exceed len(b), its bytes past the
// addresses (TLVs) being the caller's to skip.
func parseProxyHeader(b []byte) (n int, src netip.AddrPort, err error) {
	switch {
	case hasPrefixOf(b, "PROXY "):
		return parseProxyV1(b)
	case hasPrefixOf(b, ppV2Signature):
		return parseProxyV2(b)
	}
	return 0, src, errPPMalformed
}

// hasPrefixOf reports whether b starts with prefix, or with as much of it
// as b holds.
func hasPrefixOf(b []byte, prefix string) bool {
	n := min(len(b), len(prefix))
	return string(b[:n]) == prefix[:n]
}

func parseProxyV1(b []byte) (int, netip.AddrPort, error) {
	var src netip.AddrPort
	end := bytes.Index(b[:min(len(b), ppV1MaxLen)], []byte("\r\n"))
	if end < 0 {
		if len(b) >= ppV1MaxLen || bytes.IndexByte(b, '\n') >= 0 {
			return 0, src, errPPMalformed
		}
		return 0, src, errPPShort
	}
	n := end + 2
	line := string(b[len("PROXY "):end])
	if proto, _, _ := strings.Cut(line, " "); proto == "UNKNOWN" {
		return n, src, nil
	}
	parts := strings.Split(line, " ")
	if len(parts) != 5 {
		return 0, src, errPPMalformed
	}
	addr, err := netip.ParseAddr(parts[1])
	if err != nil || addr.Zone() != "" {
		return 0, src, errPPMalformed
	}
	dst, err := netip.ParseAddr(parts[2])
	if err != nil || dst.Is4() != addr.Is4() {
		return 0, src, errPPMalformed
	}
	switch parts[0] {
	case "TCP4":
		if !addr.Is4() {
			return 0, src, errPPMalformed
		}
	case "TCP6":
		if !addr.Is6() {
			return 0, src, errPPMalformed
		}
	default:
		return 0, src, errPPMalformed
	}
	port, ok := ppPort(parts[3])
	if _, dstOK := ppPort(parts[4]); !ok || !dstOK {
		return 0, src, errPPMalformed
	}
	return n, netip.AddrPortFrom(addr.Unmap(), port), nil
}

// ppPort parses a version 1 port: decimal, without leading zeros.
func ppPort(s string) (uint16, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	p, err := strconv.ParseUint(s, 10, 16)
	return uint16(p), err == nil
}

func parseProxyV2(b []byte) (int, netip.AddrPort, error) {
	var src netip.AddrPort
	if len(b) < ppV2HeadLen {
		return 0, src, errPPShort
	}
	version, command := b[12]>>4, b[12]&0xf
	family, transport := b[13]>>4, b[13]&0xf
	if version != 2 || command > 1 || family > 3 || transport > 2 {
		return 0, src, errPPMalformed
	}
	size := int(binary.BigEndian.Uint16(b[14:16]))
	n := ppV2HeadLen + size
	var need int
	switch family {
	case 1:
		need = 12
	case 2:
		need = 36
	}
	if command == 0 || need == 0 {
		// LOCAL (the load balancer's own health check), or a family
		// without an IP address: the connection's address stands.
		return n, src, nil
	}
	if size < need {
		return 0, src, errPPMalformed
	}
	if len(b) < ppV2HeadLen+need {
		return 0, src, errPPShort
	}
	a := b[ppV2HeadLen:]
	var addr netip.Addr
	var port uint16
	if family == 1 {
		addr = netip.AddrFrom4([4]byte(a[0:4]))
		port = binary.BigEndian.Uint16(a[8:10])
	} else {
		addr = netip.AddrFrom16([16]byte(a[0:16])).Unmap()
		port = binary.BigEndian.Uint16(a[32:34])
	}
	return n, netip.AddrPortFrom(addr, port), nil
}

// readProxyHeader reads the PROXY header at the start of c. It returns
// the client's address (invalid when the connection's own stands) and the
// bytes read past the header, which belong to what follows it.
func readProxyHeader(c net.Conn) (netip.AddrPort, []byte, error) {
	buf := make([]byte, 0, ppReadSize)
	for {
		m, readErr := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		n, src, err := parseProxyHeader(buf)
		switch {
		case err == nil && n <= len(buf):
			return src, buf[n:], nil
		case err == nil:
			// TLVs, which nothing here uses, past what was read.
			if _, err := io.CopyN(io.Discard, c, int64(n-len(buf))); err != nil {
				return src, nil, err
			}
			return src, nil, nil
		case err != errPPShort:
			return src, nil, err
		case readErr != nil:
			return src, nil, readErr
		}
	}
}

// proxyListener reads the PROXY header of each connection before Accept
// returns it, each on a goroutine of its own, so that one slow load
// balancer connection holds up no other.
type proxyListener struct {
	net.Listener
	from    PrefixSet
	timeout time.Duration
	// rejected counts refusals by reason.
	rejected *[numPPReasons]prometheus.Counter
	// ready hands on the connections whose header was read.
	ready *Handoff
}

func NewProxyListener(ln net.Listener, from PrefixSet, timeout time.Duration, m *Metrics) net.Listener {
	l := &proxyListener{Listener: ln, from: from, timeout: timeout, rejected: &m.ppRejected, ready: NewHandoff(ln.Addr())}
	go l.acceptLoop()
	return l
}

func (l *proxyListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Out of descriptors: wait for some to close, as
				// net/http does.
				time.Sleep(10 * time.Millisecond)
				continue
			}
			l.ready.Close()
			return
		}
		if !l.from.Contains(AddrOf(c.RemoteAddr())) {
			l.rejected[ppUntrusted].Inc()
			c.Close()
			continue
		}
		go l.handshake(c)
	}
}

// handshake reads c's header and hands c on, or closes it.
func (l *proxyListener) handshake(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(l.timeout))
	src, rest, err := readProxyHeader(c)
	if err == nil {
		err = c.SetReadDeadline(time.Time{})
	}
	if err != nil {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			l.rejected[ppTimeout].Inc()
		case errors.Is(err, errPPMalformed):
			l.rejected[ppMalformed].Inc()
		default:
			l.rejected[ppIncomplete].Inc()
		}
		c.Close()
		return
	}
	pc := &proxiedConn{Conn: c, rest: rest, remote: c.RemoteAddr()}
	if src.IsValid() {
		pc.remote = net.TCPAddrFromAddrPort(src)
	}
	if !l.ready.Deliver(pc) {
		c.Close()
	}
}

func (l *proxyListener) Accept() (net.Conn, error) { return l.ready.Accept() }

func (l *proxyListener) Close() error {
	l.ready.Close()
	return l.Listener.Close()
}

// proxiedConn is a connection whose PROXY header was read: its remote
// address is the client's the header gave, and rest the bytes read past
// the header.
type proxiedConn struct {
	net.Conn
	rest   []byte
	remote net.Addr
}

func (c *proxiedConn) RemoteAddr() net.Addr { return c.remote }

func (c *proxiedConn) Read(p []byte) (int, error) {
	if len(c.rest) > 0 {
		n := copy(p, c.rest)
		c.rest = c.rest[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// SyscallConn lets socketState look at the socket beneath.
func (c *proxiedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// PrefixSet is a list of address ranges; a few, so a scan beats a trie.
type PrefixSet []netip.Prefix

func (s PrefixSet) Contains(a netip.Addr) bool {
	for _, p := range s {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// AddrOf is the IP address of a TCP address, IPv4 unmapped.
func AddrOf(a net.Addr) netip.Addr {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	return ta.AddrPort().Addr().Unmap()
}
