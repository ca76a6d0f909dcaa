package pipeline

// Who a request comes from, as ingress-nginx users expect it without an
// annotation: the real client's address (use-forwarded-headers with
// proxy-real-ip-cidr, nginx's real_ip_recursive on), X-Real-IP and
// X-Request-ID to backends, and a Server field on every answer.
//
// A connection's address is its TCP peer's, or the one its PROXY header
// gave (proxy/guard). When that address is one of TrustedProxies, the
// request's X-Forwarded-* are kept (X-Forwarded-For appended to) and the
// client is found in X-Forwarded-For, walking from the right past trusted
// addresses; otherwise the connection's address is the client's and what
// the request says of itself is replaced. The result is worked out once
// per request, without allocating, and is what the access log, X-Real-IP
// and the pipeline (view.client) use.

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/h1wire"
	"github.com/hostgate/hostgate/router"
)

// origin is who a request comes from.
type origin struct {
	// connText is the connection's address as text, what X-Forwarded-For
	// gets appended; trusted says that address is a trusted proxy's.
	connText string
	trusted  bool
	// client is the real client's address, and clientText its text
	// (X-Real-IP).
	client     netip.Addr
	clientText string
	// requestID is the X-Request-ID sent on, "" for none.
	requestID string
}

// originOf works out who a request with header h came over a connection
// from conn (connText) is.
func (s *Shared) originOf(conn netip.Addr, connText string, h router.Headers) origin {
	o := origin{connText: connText, client: conn, clientText: connText}
	if o.trusted = s.cfg.TrustedProxies.Contains(conn); o.trusted {
		o.client, o.clientText = realClient(s.cfg.TrustedProxies, conn, connText, h.Values("X-Forwarded-For"))
	}
	if ids := h.Values("X-Request-Id"); len(ids) > 0 && (o.trusted || s.cfg.DisableRequestID) {
		o.requestID = ids[0]
	}
	if o.requestID == "" && !s.cfg.DisableRequestID {
		o.requestID = newRequestID()
	}
	return o
}

// remoteOf is the address of a net/http request's connection and its
// text: net/http's RemoteAddr is "host:port".
func remoteOf(remoteAddr string) (netip.Addr, string) {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return netip.Addr{}, remoteAddr
	}
	addr, _ := netip.ParseAddr(host)
	return addr.Unmap(), host
}

// realClient walks X-Forwarded-For, whose field lines are xff, from the
// right past the trusted addresses: the first untrusted one is the client; a
// list of trusted ones only has its leftmost as the client. An element
// that is not an address stops the walk at the last one that was, as
// nginx's realip module does.
func realClient(trusted guard.PrefixSet, conn netip.Addr, connText string, xff []string) (netip.Addr, string) {
	client, text := conn, connText
	for i := len(xff) - 1; i >= 0; i-- {
		rest := xff[i]
		for rest != "" {
			elem := rest
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				elem, rest = rest[j+1:], rest[:j]
			} else {
				rest = ""
			}
			elem = strings.Trim(elem, " \t")
			if elem == "" {
				continue
			}
			addr, ok := forwardedAddr(elem)
			if !ok {
				return client, text
			}
			client, text = addr, addrText(addr, elem)
			if !trusted.Contains(addr) {
				return client, text
			}
		}
	}
	return client, text
}

// forwardedAddr parses an X-Forwarded-For element: an address, or an
// address and port as some proxies write it.
func forwardedAddr(elem string) (netip.Addr, bool) {
	addr, err := netip.ParseAddr(elem)
	if err != nil {
		ap, err := netip.ParseAddrPort(elem)
		if err != nil {
			return addr, false
		}
		addr = ap.Addr()
	}
	return addr.Unmap(), addr.Zone() == ""
}

// addrText is addr's text, elem when that is it already, as it is but for
// a port or an unusual spelling: then the text costs an allocation.
func addrText(addr netip.Addr, elem string) string {
	var buf [48]byte
	if string(addr.AppendTo(buf[:0])) == elem {
		return elem
	}
	return addr.String()
}

// Request IDs are 128 random bits in hex, as ingress-nginx's $req_id.
// They come from the runtime's per-thread ChaCha8 (math/rand/v2), which
// takes no system call and no lock, in blocks of idsPerBlock, so that a
// request costs no allocation of its own.
const (
	requestIDLen = 32
	idsPerBlock  = 64
)

type idBlock struct {
	hex  string
	next int
}

var idBlocks = sync.Pool{New: func() any { return new(idBlock) }}

func newRequestID() string {
	b := idBlocks.Get().(*idBlock)
	if b.next == len(b.hex) {
		b.fill()
	}
	id := b.hex[b.next : b.next+requestIDLen]
	b.next += requestIDLen
	idBlocks.Put(b)
	return id
}

func (b *idBlock) fill() {
	var sb strings.Builder
	sb.Grow(idsPerBlock * requestIDLen)
	var raw [8]byte
	var out [16]byte
	for range idsPerBlock * requestIDLen / len(out) {
		binary.LittleEndian.PutUint64(raw[:], rand.Uint64())
		hex.Encode(out[:], raw[:])
		sb.Write(out[:])
	}
	b.hex, b.next = sb.String(), 0
}

// ServerName is the Server field of answers hostgate makes, and of
// proxied ones whose backend sent none.
const ServerName = "hostgate"

// serverField adds the Server field to a backend's response fields that
// have none, before the response header modifiers, which may remove it.
func (s *Shared) serverField(fields *h1wire.Fields) {
	if s.server != nil && !fields.Has("Server") {
		*fields = append(*fields, h1wire.Field{Name: "Server", Value: ServerName})
	}
}
