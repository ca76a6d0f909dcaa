package l4

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"

	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
)

// TestProxyHeader checks the headers against the bytes
// haproxy.org's proxy-protocol.txt lays out.
func TestProxyHeader(t *testing.T) {
	v4src, v4dst := netip.MustParseAddrPort("192.0.2.10:51000"), netip.MustParseAddrPort("198.51.100.1:5432")
	v6src, v6dst := netip.MustParseAddrPort("[2001:db8::10]:51000"), netip.MustParseAddrPort("[2001:db8::1]:5432")
	mapped := netip.MustParseAddrPort("[::ffff:192.0.2.10]:51000")
	sig := "0d0a0d0a000d0a515549540a"
	for _, tc := range []struct {
		name     string
		version  uint8
		src, dst netip.AddrPort
		want     string // text for version 1, hex for version 2
	}{
		{"v1 IPv4", 1, v4src, v4dst, "PROXY TCP4 192.0.2.10 198.51.100.1 51000 5432\r\n"},
		{"v1 IPv6", 1, v6src, v6dst, "PROXY TCP6 2001:db8::10 2001:db8::1 51000 5432\r\n"},
		{"v1 IPv4 client on an IPv6 socket, mapped", 1, mapped, v4dst, "PROXY TCP4 192.0.2.10 198.51.100.1 51000 5432\r\n"},
		{"v1 families differ", 1, v4src, v6dst, "PROXY TCP6 ::ffff:192.0.2.10 2001:db8::1 51000 5432\r\n"},
		{"v1 unknown", 1, netip.AddrPort{}, v4dst, "PROXY UNKNOWN\r\n"},
		{"v2 IPv4", 2, v4src, v4dst, sig + "21" + "11" + "000c" + "c000020a" + "c6336401" + "c738" + "1538"},
		{"v2 IPv6", 2, v6src, v6dst, sig + "21" + "21" + "0024" + "20010db8000000000000000000000010" + "20010db8000000000000000000000001" + "c738" + "1538"},
		{"v2 unknown: LOCAL", 2, v4src, netip.AddrPort{}, sig + "20" + "00" + "0000"},
	} {
		got := proxyHeader(tc.version, tc.src, tc.dst)
		want := []byte(tc.want)
		if tc.version == 2 {
			var err error
			if want, err = hex.DecodeString(tc.want); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %q, want %q", tc.name, got, want)
		}
	}
}

// TestBackendProxyProtocol: a backend asking for the PROXY protocol gets
// a header naming the client and the address it connected to before the
// client's bytes; a backend that does not gets none.
func TestBackendProxyProtocol(t *testing.T) { paths(t, testBackendProxyProtocol) }

func testBackendProxyProtocol(t *testing.T, path func(*Options)) {
	headers := make(chan string, 4)
	readHeader := func(version uint8) func(net.Conn) net.Conn {
		return func(c net.Conn) net.Conn {
			r := bufio.NewReader(c)
			var header string
			if version == 1 {
				header, _ = r.ReadString('\n')
			} else {
				b := make([]byte, 16+12)
				if _, err := io.ReadFull(r, b); err != nil {
					t.Errorf("reading the version 2 header: %v", err)
				}
				header = hex.EncodeToString(b)
			}
			headers <- header
			return &readerConn{Conn: c, r: r}
		}
	}
	plain := func(c net.Conn) net.Conn { return c }
	v1 := startBackend(t, readHeader(1), "v1")
	v2 := startBackend(t, readHeader(2), "v2")
	none := startBackend(t, plain, "none")
	for _, tc := range []struct {
		backend string
		version uint8
	}{{"v1", 1}, {"v2", 2}, {"none", 0}} {
		r := route(router.KindTCPRoute, "app", []string{tc.backend})
		r.Rules[0].Backends[0].ProxyProtocol = tc.version
		_, addr, _ := serveL4With(t, TCP, compile(t, r), map[string]*backend{"v1": v1, "v2": v2, "none": none}, path)
		c := dialTCP(t, addr)
		// The echo says the client's bytes came whole after the header.
		if got := roundTrip(t, c, "hello"); got != tc.backend+" hello\n" {
			t.Fatalf("%s: answer %q", tc.backend, got)
		}
		client, listener := c.LocalAddr().(*net.TCPAddr).AddrPort(), c.RemoteAddr().(*net.TCPAddr).AddrPort()
		if tc.version == 0 {
			continue
		}
		want := fmt.Sprintf("PROXY TCP4 %s %s %d %d\r\n", client.Addr(), listener.Addr(), client.Port(), listener.Port())
		if tc.version == 2 {
			want = hex.EncodeToString(proxyHeader(2, client, listener))
		}
		if got := <-headers; got != want {
			t.Errorf("%s: header %q, want %q", tc.backend, got, want)
		}
	}
	if len(headers) > 0 {
		t.Errorf("a backend without the PROXY protocol got a header: %q", <-headers)
	}
}

// readerConn reads c through r, which may hold bytes read past a header.
type readerConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestPassthroughProxyProtocol: a passthrough backend asking for version
// 2 of the PROXY protocol gets the header, then the client's TLS
// unchanged: the client verifies the backend's certificate.
func TestPassthroughProxyProtocol(t *testing.T) { paths(t, testPassthroughProxyProtocol) }

func testPassthroughProxyProtocol(t *testing.T, path func(*Options)) {
	ca := tlstest.NewCA(t)
	serveTLS := tlsServer(t, ca, "db.example.com")
	headers := make(chan []byte, 1)
	db := startBackend(t, func(c net.Conn) net.Conn {
		r := bufio.NewReader(c)
		b := make([]byte, 16+12)
		if _, err := io.ReadFull(r, b); err != nil {
			t.Errorf("reading the version 2 header: %v", err)
		}
		headers <- b
		return serveTLS(&readerConn{Conn: c, r: r})
	}, "db")
	r := route(router.KindTLSRoute, "db", []string{"db"}, "db.example.com")
	r.Rules[0].Backends[0].ProxyProtocol = 2
	_, addr, _ := serveL4With(t, Passthrough, compile(t, r), map[string]*backend{"db": db}, path)
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "db.example.com", RootCAs: ca.Pool})
	if err != nil {
		t.Fatalf("handshake through hostgate: %v", err)
	}
	defer c.Close()
	if got := roundTrip(t, c, "hello"); got != "db hello\n" {
		t.Errorf("answer %q", got)
	}
	client, listener := c.LocalAddr().(*net.TCPAddr).AddrPort(), c.RemoteAddr().(*net.TCPAddr).AddrPort()
	if got, want := <-headers, proxyHeader(2, client, listener); !bytes.Equal(got, want) {
		t.Errorf("header %x, want %x", got, want)
	}
}
