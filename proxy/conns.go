package proxy

// Client connections: tracking them for the grace period, counting them by
// protocol, and counting TLS handshakes by result.
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
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quic-go/quic-go"
)

// connTracker is a net.Listener that remembers its open connections, as
// http.Server forgets hijacked ones, and those must be closed when the
// grace period ends.
type connTracker struct {
	net.Listener
	gauges *[numConnProtocols]prometheus.Gauge
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
}

func newConnTracker(ln net.Listener, m *metrics) *connTracker {
	return &connTracker{Listener: ln, gauges: &m.conns, conns: map[*trackedConn]struct{}{}}
}

func (t *connTracker) Accept() (net.Conn, error) {
	c, err := t.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, tracker: t}
	t.gauges[protoHTTP1].Inc()
	t.mu.Lock()
	t.conns[tc] = struct{}{}
	t.mu.Unlock()
	return tc, nil
}

func (t *connTracker) closeConns() {
	t.mu.Lock()
	conns := make([]*trackedConn, 0, len(t.conns))
	for c := range t.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

type trackedConn struct {
	net.Conn
	tracker *connTracker
	once    sync.Once
	// proto is the connProtocol whose gauge counts the connection; it
	// starts at protoHTTP1, the zero value.
	proto atomic.Uint32
	// serverName is the server name (SNI) the client's TLS handshake
	// asked for, and clientCert the X-Forwarded-Client-Cert value of the
	// client certificate it verified, if any. Written during the
	// handshake, before any request of the connection is read, and only
	// read after.
	serverName, clientCert string
	// unknownSNI says the TLS handshake failed for want of a certificate,
	// which was counted as such and must not count as an error again.
	unknownSNI atomic.Bool
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.tracker.gauges[c.proto.Swap(uint32(protoClosed))].Dec()
		c.tracker.mu.Lock()
		delete(c.tracker.conns, c)
		c.tracker.mu.Unlock()
	})
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
// connection it came on. Connections reach it wrapped by TLS or the guard.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if bc, ok := c.(*bufferedConn); ok {
		c = bc.Conn
	}
	if gc, ok := c.(*guardConn); ok {
		c = gc.Conn
	}
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	return context.WithValue(ctx, connKey{}, c)
}

// noteHTTP2 counts the connection of an HTTP/2 request as h2, or h2c on a
// cleartext listener. Only HTTP/2 requests pay for the context lookup.
func (l *listener) noteHTTP2(r *http.Request) {
	c, ok := r.Context().Value(connKey{}).(*trackedConn)
	if !ok {
		return
	}
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
		c, tracked := hello.Conn.(*trackedConn)
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
			c, tracked := hello.Conn.(*trackedConn)
			if validating == nil || !tracked {
				return validating, err
			}
			// validating is this handshake's own copy of cfg.
			validating.VerifyConnection = func(cs tls.ConnectionState) error {
				c.clientCert = clientCertValue(cs.VerifiedChains)
				return cfg.VerifyConnection(cs)
			}
			return validating, err
		}
	}
	return cfg
}

// countFailedHandshake is the http.Server's ConnState hook on HTTPS
// listeners: net/http closes a connection whose handshake failed without
// telling anyone else.
func (m *metrics) countFailedHandshake(c net.Conn, state http.ConnState) {
	if state != http.StateClosed {
		return
	}
	if bc, ok := c.(*bufferedConn); ok {
		c = bc.Conn
	}
	if gc, ok := c.(*guardConn); ok {
		c = gc.Conn
	}
	m.failedHandshake(c)
}

// failedHandshake counts the handshake of c, the TLS connection beneath
// the guard, as failed if it did not complete, when its connection ends.
func (m *metrics) failedHandshake(c net.Conn) {
	tc, ok := c.(*tls.Conn)
	if !ok || tc.ConnectionState().HandshakeComplete {
		return
	}
	if t, ok := tc.NetConn().(*trackedConn); ok && t.unknownSNI.Load() {
		return
	}
	m.handshakes[handshakeError].Inc()
}
