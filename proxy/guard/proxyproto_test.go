package guard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
)

// ppV2 builds a version 2 header: command, family and transport byte,
// then the address block and anything after it.
func ppV2(command, famTransport byte, block ...byte) []byte {
	b := []byte(ppV2Signature)
	b = append(b, 0x20|command, famTransport, 0, 0)
	binary.BigEndian.PutUint16(b[14:], uint16(len(block)))
	return append(b, block...)
}

func v4Block(src, dst [4]byte, sport, dport uint16) []byte {
	b := append(append([]byte{}, src[:]...), dst[:]...)
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(b, sport), dport)
}

func TestParseProxyHeader(t *testing.T) {
	v6src := netip.MustParseAddr("2001:db8::7").As16()
	v6dst := netip.MustParseAddr("2001:db8::1").As16()
	v6 := append(append(v6src[:], v6dst[:]...), 0x30, 0x39, 0x01, 0xbb)
	withTLV := ppV2(1, 0x11, append(v4Block([4]byte{192, 0, 2, 9}, [4]byte{10, 0, 0, 1}, 1, 443), 0x04, 0, 1, 'x')...)
	long := "PROXY TCP6 " + "2001:0db8:0000:0000:0000:0000:0000:0001 2001:0db8:0000:0000:0000:0000:0000:0002 65535 65535\r\n"
	for _, tt := range []struct {
		name string
		in   []byte
		n    int
		src  string // "" for the connection's own
		err  error
	}{
		{"v1 TCP4", []byte("PROXY TCP4 203.0.113.7 10.0.0.1 56324 443\r\nGET"), 43, "203.0.113.7:56324", nil},
		{"v1 TCP6", []byte("PROXY TCP6 2001:db8::7 2001:db8::1 1 80\r\n"), 41, "[2001:db8::7]:1", nil},
		{"v1 UNKNOWN", []byte("PROXY UNKNOWN ff ff\r\n"), 21, "", nil},
		{"v1 longest", []byte(long), len(long), "[2001:db8::1]:65535", nil},
		{"v1 partial", []byte("PROXY TCP4 203.0"), 0, "", errPPShort},
		{"v1 first bytes", []byte("PRO"), 0, "", errPPShort},
		{"v1 too long", bytes.Repeat([]byte("PROXY "), 20), 0, "", errPPMalformed},
		{"v1 bare LF", []byte("PROXY TCP4 1.2.3.4 1.2.3.4 1 1\n"), 0, "", errPPMalformed},
		{"v1 family mismatch", []byte("PROXY TCP4 2001:db8::7 2001:db8::1 1 80\r\n"), 0, "", errPPMalformed},
		{"v1 mixed families", []byte("PROXY TCP4 1.2.3.4 2001:db8::1 1 80\r\n"), 0, "", errPPMalformed},
		{"v1 leading zero port", []byte("PROXY TCP4 1.2.3.4 1.2.3.4 01 1\r\n"), 0, "", errPPMalformed},
		{"v1 port too large", []byte("PROXY TCP4 1.2.3.4 1.2.3.4 65536 1\r\n"), 0, "", errPPMalformed},
		{"v1 double space", []byte("PROXY TCP4  1.2.3.4 1.2.3.4 1 1\r\n"), 0, "", errPPMalformed},
		{"v1 UDP", []byte("PROXY UDP4 1.2.3.4 1.2.3.4 1 1\r\n"), 0, "", errPPMalformed},
		{"v2 TCP4", ppV2(1, 0x11, v4Block([4]byte{192, 0, 2, 9}, [4]byte{10, 0, 0, 1}, 40000, 443)...), 28, "192.0.2.9:40000", nil},
		{"v2 TCP6", ppV2(1, 0x21, v6...), 52, "[2001:db8::7]:12345", nil},
		{"v2 TLVs", withTLV, len(withTLV), "192.0.2.9:1", nil},
		{"v2 LOCAL", ppV2(0, 0x00), 16, "", nil},
		{"v2 LOCAL with addresses", ppV2(0, 0x11, v4Block([4]byte{1, 1, 1, 1}, [4]byte{2, 2, 2, 2}, 1, 1)...), 28, "", nil},
		{"v2 UNSPEC", ppV2(1, 0x00), 16, "", nil},
		{"v2 unix", ppV2(1, 0x31, make([]byte, 216)...), 232, "", nil},
		{"v2 addresses short", ppV2(1, 0x11, 1, 2, 3), 0, "", errPPMalformed},
		{"v2 fixed part only", ppV2(1, 0x11, v4Block([4]byte{1, 1, 1, 1}, [4]byte{2, 2, 2, 2}, 1, 1)...)[:16], 0, "", errPPShort},
		{"v2 version 1", append([]byte(ppV2Signature), 0x11, 0x11, 0, 0), 0, "", errPPMalformed},
		{"v2 command 2", append([]byte(ppV2Signature), 0x22, 0x11, 0, 0), 0, "", errPPMalformed},
		{"v2 family 4", append([]byte(ppV2Signature), 0x21, 0x41, 0, 0), 0, "", errPPMalformed},
		{"v2 signature start", []byte("\r\n\r\n\x00"), 0, "", errPPShort},
		{"HTTP", []byte("GET / HTTP/1.1\r\n"), 0, "", errPPMalformed},
		{"TLS", []byte{0x16, 0x03, 0x01}, 0, "", errPPMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, src, err := parseProxyHeader(tt.in)
			if !errors.Is(err, tt.err) || err != nil && tt.err == nil {
				t.Fatalf("error %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			got := ""
			if src.IsValid() {
				got = src.String()
			}
			if n != tt.n || got != tt.src {
				t.Errorf("length %d, source %q; want %d, %q", n, got, tt.n, tt.src)
			}
		})
	}
}

// FuzzProxyProtocol checks that no input panics the parser or gives a
// length it could not have read, and that a header parsed is still one
// with anything after it.
func FuzzProxyProtocol(f *testing.F) {
	for _, seed := range [][]byte{
		[]byte("PROXY TCP4 203.0.113.7 10.0.0.1 56324 443\r\n"),
		[]byte("PROXY TCP6 2001:db8::7 2001:db8::1 1 80\r\nGET / HTTP/1.1\r\n"),
		[]byte("PROXY UNKNOWN\r\n"),
		ppV2(1, 0x11, v4Block([4]byte{192, 0, 2, 9}, [4]byte{10, 0, 0, 1}, 40000, 443)...),
		ppV2(0, 0x00),
		ppV2(1, 0x21, make([]byte, 40)...),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, src, err := parseProxyHeader(b)
		if err != nil {
			return
		}
		if n < 15 || n > ppV2HeadLen+0xffff || hasPrefixOf(b, "PROXY ") && n > len(b) {
			t.Fatalf("length %d of %q", n, b)
		}
		if src.IsValid() && (src.Addr().Is4In6() || src.Addr().Zone() != "") {
			t.Fatalf("source %v of %q", src, b)
		}
		n2, src2, err := parseProxyHeader(append(b[:len(b):len(b)], "more"...))
		if err != nil || n2 != n || src2 != src {
			t.Fatalf("%q: %d %v; with more: %d %v %v", b, n, src, n2, src2, err)
		}
	})
}
