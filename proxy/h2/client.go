package h2

// The backend side: Transport, an http.RoundTripper that speaks HTTP/2 to
// backends over connections of the same shape as the server's (wire.go):
// a reader that acts on each frame at once under the connection's mutex,
// and a writer that writes what every stream queued since its last write
// in one write. A call's HEADERS and the first DATA frames of its body
// leave together; net/http's Transport wrote them in two flushed writes
// per gRPC call, a third of the core in bench/run.sh's grpc.

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// Transport sends requests to backends over HTTP/2: h2c with prior
// knowledge when TLSClientConfig is nil, TLS with ALPN h2 otherwise.
// Connections are pooled by address and carry as many streams at once as
// the backend's SETTINGS_MAX_CONCURRENT_STREAMS allows; a request is sent
// again, on another connection, only where the backend cannot have acted
// on it (refused, or past its GOAWAY) and its body is still unread.
type Transport struct {
	// DialContext dials the backend; net.Dialer's by default.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLSClientConfig, when set, has connections use TLS with it; its
	// NextProtos are replaced with h2.
	TLSClientConfig     *tls.Config
	TLSHandshakeTimeout time.Duration
	// IdleTimeout closes a connection that has carried no stream for
	// that long. Zero: never.
	IdleTimeout time.Duration
	// MaxResponseHeaderBytes bounds a response's header section. Default
	// 1 MiB.
	MaxResponseHeaderBytes uint32

	mu    sync.Mutex
	pools map[string]*pool
}

// pool is the connections to one address.
type pool struct {
	conns []*clientConn
	// maxStreams is the backend's SETTINGS_MAX_CONCURRENT_STREAMS last
	// heard, which a new connection assumes until its own SETTINGS come:
	// a burst of requests would otherwise be refused on each.
	maxStreams atomic.Uint32
	// dialing is closed when the dial under way ends: those who found
	// no connection with room wait for it rather than dial too.
	dialing *dialCall
}

// dialCall is a dial under way; err is its outcome once done is closed.
type dialCall struct {
	done chan struct{}
	err  error
}

// maxRetries bounds the times a request the backend did not act on is
// sent again.
const maxRetries = 3

// errUnprocessed is a request the backend did not act on: refused, or
// past the last stream of its GOAWAY, with the body unread.
var errUnprocessed = errors.New("http2: request not processed by the backend")

// RoundTrip is http.RoundTripper's.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	addr := req.URL.Host
	if _, _, err := net.SplitHostPort(addr); err != nil {
		port := "80"
		if t.TLSClientConfig != nil {
			port = "443"
		}
		addr = net.JoinHostPort(addr, port)
	}
	for tries := 0; ; tries++ {
		cc, err := t.conn(req.Context(), addr)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, err := cc.roundTrip(req)
		ue, unprocessed := errors.AsType[*unprocessedError](err)
		if !unprocessed || tries >= maxRetries || req.Context().Err() != nil {
			if err != nil && !errors.Is(err, ErrBodyTaken) {
				// A body sendBody took, it closes.
				closeBody(req)
			}
			return resp, err
		}
		if ue.body != nil {
			again := *req
			again.Body = io.NopCloser(bytes.NewReader(ue.body))
			req = &again
		}
	}
}

// closeBody closes the body of a request that failed, as a RoundTripper
// must.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// conn is a connection to addr with room for a stream, reserved for the
// caller: one found in the pool, or one dialled.
func (t *Transport) conn(ctx context.Context, addr string) (*clientConn, error) {
	for {
		t.mu.Lock()
		if t.pools == nil {
			t.pools = map[string]*pool{}
		}
		p := t.pools[addr]
		if p == nil {
			p = &pool{}
			p.maxStreams.Store(defaultMaxStreams)
			t.pools[addr] = p
		}
		for _, cc := range p.conns {
			if cc.reserve() {
				t.mu.Unlock()
				return cc, nil
			}
		}
		if wait := p.dialing; wait != nil {
			t.mu.Unlock()
			select {
			case <-wait.done:
				// The dial's failure is every waiter's, unless it was
				// only its caller's context that ended.
				if wait.err != nil && !errors.Is(wait.err, context.Canceled) && !errors.Is(wait.err, context.DeadlineExceeded) {
					return nil, wait.err
				}
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		call := &dialCall{done: make(chan struct{})}
		p.dialing = call
		t.mu.Unlock()
		cc, err := t.dial(ctx, addr, p)
		t.mu.Lock()
		p.dialing = nil
		call.err = err
		close(call.done)
		if err != nil {
			if len(p.conns) == 0 && t.pools[addr] == p {
				// Endpoints come and go: an address that could not be
				// reached keeps no entry.
				delete(t.pools, addr)
			}
			t.mu.Unlock()
			return nil, err
		}
		if !cc.forgotten {
			p.conns = append(p.conns, cc)
		}
		ok := !cc.forgotten && cc.reserve()
		t.mu.Unlock()
		if !ok {
			// Lost already, or the backend takes no stream at all: a
			// new connection would fare no better.
			return nil, errors.New("http2: backend " + addr + " takes no request on a new connection")
		}
		return cc, nil
	}
}

// forget takes cc out of its pool: it takes no new streams.
func (t *Transport) forget(cc *clientConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cc.forgotten = true
	p := t.pools[cc.addr]
	if p != cc.pool {
		return
	}
	for i, c := range p.conns {
		if c == cc {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			break
		}
	}
	if len(p.conns) == 0 && p.dialing == nil {
		delete(t.pools, cc.addr)
	}
}

func (t *Transport) dial(ctx context.Context, addr string, p *pool) (*clientConn, error) {
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if t.TLSClientConfig != nil {
		if nc, err = t.handshake(ctx, nc, addr); err != nil {
			return nil, err
		}
	}
	return newClientConn(t, nc, addr, p), nil
}

// handshake runs TLS over nc, which must agree on h2.
func (t *Transport) handshake(ctx context.Context, nc net.Conn, addr string) (net.Conn, error) {
	cfg := t.TLSClientConfig.Clone()
	cfg.NextProtos = []string{"h2"}
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	if t.TLSHandshakeTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.TLSHandshakeTimeout)
		defer cancel()
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("http2: TLS handshake with backend %s: %w", addr, err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		nc.Close()
		return nil, errors.New("http2: backend " + addr + " did not agree on h2 in ALPN")
	}
	return tc, nil
}

// CloseIdleConnections closes the connections that carry no stream.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	var conns []*clientConn
	for _, p := range t.pools {
		conns = append(conns, p.conns...)
	}
	t.mu.Unlock()
	for _, cc := range conns {
		if cc.closeIfIdle() {
			t.forget(cc)
		}
	}
}

func (t *Transport) maxHeaderList() uint32 {
	if t.MaxResponseHeaderBytes == 0 {
		return 1 << 20
	}
	return t.MaxResponseHeaderBytes
}

// clientSettings are what a connection to a backend announces: no server
// push, and the receive window the server side offers too.
func clientSettings(maxHeaderList uint32) []http2.Setting {
	return []http2.Setting{
		{ID: http2.SettingEnablePush, Val: 0},
		{ID: http2.SettingInitialWindowSize, Val: recvWindow},
		{ID: http2.SettingMaxHeaderListSize, Val: maxHeaderList},
	}
}
