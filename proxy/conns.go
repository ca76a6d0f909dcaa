package proxy

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
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quic-go/quic-go"

	"github.com/hostgate/hostgate/proxy/l4"
)

// connTracker is a net.Listener that registers the connections it accepts
// (connRegistry), refusing those past a cap: http.Server forgets hijacked
// ones, and those must be closed when the grace period ends.
type connTracker struct {
	net.Listener
	reg    *connRegistry
	gauges *[numConnProtocols]prometheus.Gauge
}

func newConnTracker(ln net.Listener, reg *connRegistry, m *metrics) *connTracker {
	return &connTracker{Listener: ln, reg: reg, gauges: &m.conns}
}

func (t *connTracker) Accept() (net.Conn, error) {
	for {
		c, err := t.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, tracker: t, addr: clientAddr(c.RemoteAddr())}
		if t.reg.admit(tc) {
			return tc, nil
		}
		c.Close()
	}
}

func (t *connTracker) closeConns() {
	for _, c := range t.reg.of(t) {
		c.Close()
	}
}

type trackedConn struct {
	net.Conn
	tracker *connTracker
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
	serverName, clientCert string
	// peer is the client's certificate chain, for the rules that check
	// it themselves.
	peer clientPeer
	// unknownSNI says the TLS handshake failed for want of a certificate,
	// which was counted as such and must not count as an error again.
	unknownSNI atomic.Bool
}

func (c *trackedConn) Close() error {
	c.tracker.reg.release(c)
	return c.Conn.Close()
}

// setProtocol moves c to the gauge of p.
func (c *trackedConn) setProtocol(p connProtocol) {
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

// connContext is the http.Server's ConnContext: it lets a request find the
// connection it came on.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if t, ok := beneath[*trackedConn](c); ok {
		return context.WithValue(ctx, connKey{}, t)
	}
	return ctx
}

// beneath finds the connection of type T in c or in what c wraps: net/http
// and the HTTP/1.1 engine see connections wrapped by the guard, TLS and,
// after a hand-over or an h2c upgrade, a bufferedConn; beneath those are
// the connection caps' trackedConn and a PROXY header's proxiedConn, then
// the socket (which lingerClose needs). An l4.ReplayConn sits above
// trackedConn on an HTTPS socket shared with TLS listeners.
func beneath[T net.Conn](c net.Conn) (T, bool) {
	for {
		if t, ok := c.(T); ok {
			return t, true
		}
		switch w := c.(type) {
		case *bufferedConn:
			c = w.Conn
		case *guardConn:
			c = w.Conn
		case *tls.Conn:
			c = w.NetConn()
		case *trackedConn:
			c = w.Conn
		case *proxiedConn:
			c = w.Conn
		case *l4.ReplayConn:
			c = w.Conn
		default:
			var none T
			return none, false
		}
	}
}

// connState is the http.Server's ConnState hook: it tells the registry
// when net/http's connections wait for a request, and counts failed
// handshakes on HTTPS listeners, as net/http closes a connection whose
// handshake failed without telling anyone else.
func (l *listener) connState(c net.Conn, state http.ConnState) {
	switch state {
	case http.StateActive:
		// A claim that fails is seen again by ServeHTTP.
		if t, ok := beneath[*trackedConn](c); ok {
			t.claim()
		}
	case http.StateIdle:
		if t, ok := beneath[*trackedConn](c); ok {
			t.markIdle(time.Now())
		}
	case http.StateClosed:
		if l.scheme == "https" {
			l.srv.metrics.failedHandshake(c)
		}
	}
}

// noteHTTP2 counts c, the connection of an HTTP/2 request, as h2, or h2c
// on a cleartext listener.
func (l *listener) noteHTTP2(c *trackedConn) {
	if l.h2c != nil {
		c.setProtocol(protoH2C)
	} else {
		c.setProtocol(protoH2)
	}
}

// serverNameOf is the server name (SNI) of the TLS connection r came on:
// HTTP/3's from quic-go, the others' from the connection the guard
// terminated TLS on.
func serverNameOf(r *http.Request) string {
	if r.TLS != nil {
		return r.TLS.ServerName
	}
	if c, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
		return c.serverName
	}
	return ""
}

// countQUICConn is the http3.Server's ConnContext: it counts a QUIC
// connection until quic-go cancels the connection's context on close.
func (m *metrics) countQUICConn(ctx context.Context, c *quic.Conn) context.Context {
	g := m.conns[protoH3]
	g.Inc()
	context.AfterFunc(c.Context(), g.Dec)
	return ctx
}

// countHandshakes wraps the certificate choice of cfg to count handshakes.
// A handshake counts as ok once the server has done its part and is about
// to finish (VerifyConnection runs there, for TCP and QUIC alike), as
// unknown_sni when no certificate serves the name, and, on TCP, as error
// when its connection closes without either. A client that rejects the
// certificate after the server's part therefore counts as ok and error.
// A TCP handshake that validates the client's certificate (the Config of
// cfg's GetConfigForClient) also leaves the identity it verified on the
// connection.
func (m *metrics) countHandshakes(cfg *tls.Config) *tls.Config {
	getCertificate := cfg.GetCertificate
	cfg.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		cert, err := getCertificate(hello)
		c, tracked := beneath[*trackedConn](hello.Conn)
		if tracked {
			c.serverName = hello.ServerName
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
			c, tracked := beneath[*trackedConn](hello.Conn)
			if validating == nil || !tracked {
				return validating, err
			}
			// validating is this handshake's own copy of cfg.
			validating.VerifyConnection = func(cs tls.ConnectionState) error {
				c.clientCert = clientCertValue(cs.VerifiedChains)
				c.peer.certs = cs.PeerCertificates
				return cfg.VerifyConnection(cs)
			}
			return validating, err
		}
	}
	return cfg
}

// failedHandshake counts the handshake of the TLS connection beneath c as
// failed if it did not complete, when its connection ends, unless it was
// counted already or closed to make room.
func (m *metrics) failedHandshake(c net.Conn) {
	tc, ok := beneath[*tls.Conn](c)
	if !ok || tc.ConnectionState().HandshakeComplete {
		return
	}
	if t, ok := beneath[*trackedConn](tc.NetConn()); ok && (t.unknownSNI.Load() || t.evicted()) {
		return
	}
	m.handshakes[handshakeError].Inc()
}
