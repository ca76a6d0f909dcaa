package guard

// Client connections: tracking them for the grace period and the caps
// (connlimit.go), counting them by protocol, and counting TLS handshakes by
// result.
//
// Counting happens at the socket: a connection counts from Accept to its
// Close, whether net/http, the h2 server or a hijacker closes it. What it
// speaks is only known later (ALPN, the h2c preface, an Upgrade), so it
// counts as http1 until its first HTTP/2 request moves it; HTTP/3
// connections are counted by quic-go's ConnContext hook.

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quic-go/quic-go"

	"github.com/hostgate/hostgate/proxy/l4"
)

// Tracker is a net.Listener that registers the connections it accepts
// (Registry), refusing those past a cap: http.Server forgets hijacked
// ones, and those must be closed when the grace period ends.
type Tracker struct {
	net.Listener
	reg    *Registry
	gauges *[numConnProtocols]prometheus.Gauge
}

func NewTracker(ln net.Listener, reg *Registry, m *Metrics) *Tracker {
	return &Tracker{Listener: ln, reg: reg, gauges: &m.conns}
}

func (t *Tracker) Accept() (net.Conn, error) {
	for {
		c, err := t.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &TrackedConn{Conn: c, tracker: t, addr: clientAddr(c.RemoteAddr())}
		if t.reg.admit(tc) {
			return tc, nil
		}
		c.Close()
	}
}

func (t *Tracker) CloseConns() {
	for _, c := range t.reg.of(t) {
		c.Close()
	}
}

type TrackedConn struct {
	net.Conn
	tracker *Tracker
	// addr is what the connection counts against the per-address cap.
	addr netip.Addr
	// slot is the connection's index among its address's in the
	// registry, -1 once out of it; guarded by the registry's lock.
	slot int
	// idleFrom is when the connection, waiting for a request, may be
	// closed to make room (unix nanoseconds), or connBusy, or
	// connEvicted once it was.
	idleFrom atomic.Int64
	// proto is the connProtocol whose gauge counts the connection; it
	// starts at protoHTTP1, the zero value.
	proto atomic.Uint32
	// serverName is the server name (SNI) the client's TLS handshake
	// asked for, and clientCert the X-Forwarded-Client-Cert value of the
	// client certificate it verified, if any. Written during the
	// handshake, before any request of the connection is read, and only
	// read after.
	ServerName, ClientCert string
	// peer is the client's certificate chain, for the rules that check
	// it themselves.
	Peer ClientPeer
	// unknownSNI says the TLS handshake failed for want of a certificate,
	// which was counted as such and must not count as an error again.
	unknownSNI atomic.Bool
}

func (c *TrackedConn) Close() error {
	c.tracker.reg.release(c)
	return c.Conn.Close()
}

// SetProtocol moves c to the gauge of p.
func (c *TrackedConn) SetProtocol(p ConnProtocol) {
	for {
		old := c.proto.Load()
		if old == uint32(p) || old == uint32(protoClosed) {
			return
		}
		if c.proto.CompareAndSwap(old, uint32(p)) {
			c.tracker.gauges[old].Dec()
			c.tracker.gauges[p].Inc()
			return
		}
	}
}

type connKey struct{}

// ConnOf is the connection a request came on, for the servers whose
// ConnContext is ConnContext.
func ConnOf(ctx context.Context) (*TrackedConn, bool) {
	c, ok := ctx.Value(connKey{}).(*TrackedConn)
	return c, ok
}

// ConnContext is the http.Server's ConnContext: it lets a request find the
// connection it came on.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if t, ok := Beneath[*TrackedConn](c); ok {
		return context.WithValue(ctx, connKey{}, t)
	}
	return ctx
}

// Beneath finds the connection of type T in c or in what c wraps: net/http
// and the HTTP/1.1 engine see connections wrapped by the guard, TLS and,
// after a hand-over or an h2c upgrade, a BufferedConn; beneath those are
// the connection caps' TrackedConn and a PROXY header's proxiedConn, then
// the socket (which lingerClose needs), or a loop's h1loop.Socket over it
// once the loop handed the connection back. An l4.ReplayConn sits above
// TrackedConn on an HTTPS socket shared with TLS listeners.
func Beneath[T net.Conn](c net.Conn) (T, bool) {
	for {
		if t, ok := c.(T); ok {
			return t, true
		}
		switch w := c.(type) {
		case *BufferedConn:
			c = w.Conn
		case *Conn:
			c = w.Conn
		case *TrackedConn:
			c = w.Conn
		case *proxiedConn:
			c = w.Conn
		case *l4.ReplayConn:
			c = w.Conn
		case netConner:
			c = w.NetConn()
		default:
			var none T
			return none, false
		}
	}
}

// countQUICConn is the http3.Server's ConnContext: it counts a QUIC
// connection until quic-go cancels the connection's context on close.
func (m *Metrics) CountQUICConn(ctx context.Context, c *quic.Conn) context.Context {
	g := m.conns[protoH3]
	g.Inc()
	context.AfterFunc(c.Context(), g.Dec)
	return ctx
}

// CountHandshakes wraps the certificate choice of cfg to count handshakes.
// A handshake counts as ok once the server has done its part and is about
// to finish (VerifyConnection runs there, for TCP and QUIC alike), as
// unknown_sni when no certificate serves the name, and, on TCP, as error
// when its connection closes without either. A client that rejects the
// certificate after the server's part therefore counts as ok and error.
// A TCP handshake that validates the client's certificate (the Config of
// cfg's GetConfigForClient) also leaves the identity it verified on the
// connection.
func (m *Metrics) CountHandshakes(cfg *tls.Config) *tls.Config {
	getCertificate := cfg.GetCertificate
	cfg.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		cert, err := getCertificate(hello)
		c, tracked := Beneath[*TrackedConn](hello.Conn)
		if tracked {
			c.ServerName = hello.ServerName
		}
		if cert == nil {
			m.handshakes[handshakeUnknownSNI].Inc()
			if tracked {
				c.unknownSNI.Store(true)
			}
		}
		return cert, err
	}
	cfg.VerifyConnection = func(tls.ConnectionState) error {
		m.handshakes[handshakeOK].Inc()
		return nil
	}
	if getConfig := cfg.GetConfigForClient; getConfig != nil {
		cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			validating, err := getConfig(hello)
			c, tracked := Beneath[*TrackedConn](hello.Conn)
			if validating == nil || !tracked {
				return validating, err
			}
			// validating is this handshake's own copy of cfg.
			validating.VerifyConnection = func(cs tls.ConnectionState) error {
				c.ClientCert = ClientCertValue(cs.VerifiedChains)
				c.Peer.Certs = cs.PeerCertificates
				return cfg.VerifyConnection(cs)
			}
			return validating, err
		}
	}
	return cfg
}

// FailedHandshake counts the handshake of the TLS connection beneath c as
// failed if it did not complete, when its connection ends, unless it was
// counted already or closed to make room.
func (m *Metrics) FailedHandshake(c net.Conn) {
	tc, ok := Beneath[*tls.Conn](c)
	if !ok || tc.ConnectionState().HandshakeComplete {
		return
	}
	if t, ok := Beneath[*TrackedConn](tc.NetConn()); ok && (t.unknownSNI.Load() || t.Evicted()) {
		return
	}
	m.handshakes[handshakeError].Inc()
}

// ClientCertValue is the X-Forwarded-Client-Cert value for a client whose
// certificate verified with chains: the SHA-256 of the certificate and its
// subject, "" when nothing verified.
func ClientCertValue(chains [][]*x509.Certificate) string {
	if len(chains) == 0 || len(chains[0]) == 0 {
		return ""
	}
	leaf := chains[0][0]
	sum := sha256.Sum256(leaf.Raw)
	return "Hash=" + hex.EncodeToString(sum[:]) + `;Subject="` + quotedValue.Replace(leaf.Subject.String()) + `"`
}

// quotedValue escapes what ends a quoted value of the field.
var quotedValue = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// ClientPeer is the certificate chain a client presented in the handshake
// of a connection, and the last check made of it.
type ClientPeer struct {
	// certs are written during the handshake, before any request of the
	// connection is read, and only read after.
	Certs []*x509.Certificate
	// checked is the request path's last check of certs (a *certCheck),
	// kept for the requests that follow on the connection: the same
	// filter gives the same answer while a configuration lasts.
	Checked atomic.Value
}

// SocketOf is the socket beneath an accepted connection, through the
// connection caps' wrapper and a PROXY header's once the bytes read past
// the header are consumed; nil when reading the socket directly would lose
// bytes.
func SocketOf(c net.Conn) *net.TCPConn {
	for {
		switch w := c.(type) {
		case *net.TCPConn:
			return w
		case *TrackedConn:
			c = w.Conn
		case *proxiedConn:
			if len(w.rest) > 0 {
				return nil
			}
			c = w.Conn
		case netConner:
			c = w.NetConn()
		default:
			return nil
		}
	}
}

// netConner is a connection over another that it names: a *tls.Conn, or
// an h1loop.Socket handed back to Go by a loop (nil while on the loop),
// which this package cannot name without a cycle.
type netConner interface{ NetConn() net.Conn }
