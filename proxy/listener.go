package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/h2"
	"github.com/hostgate/hostgate/proxy/l4"
	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore"
)

// h2MaxFrameSize is SETTINGS_MAX_FRAME_SIZE's initial value (RFC 9113
// section 6.5.2).
const h2MaxFrameSize = 16 << 10

// listener is one open Listener: a TCP socket served by net/http and, for
// HTTPS, a UDP socket served by quic-go.
type listener struct {
	srv      *Server
	protocol Protocol
	addr     string
	port     int
	scheme   string

	state atomic.Pointer[listenerState]
	// inflight counts handlers running, hijacked ones (WebSocket, h2c
	// Upgrade) included, which http.Server.Shutdown does not wait for.
	inflight atomic.Int64

	tcp  *guard.Tracker
	http *http.Server
	h2c  *http2.Server // serves connections upgraded from HTTP/1.1 (EngineStdlib)
	// h2 serves HTTP/2 connections with EngineNative, nil with
	// EngineStdlib.
	h2    *h2.Server
	udp   net.PacketConn
	h3    *http3.Server
	alt   []string // Alt-Svc value, shared by every response
	stats *listenerMetrics

	// handoff feeds l.http the connections the HTTP/1.1 engine hands
	// over; nil when net/http serves them all (EngineStdlib).
	handoff *guard.Handoff
	// h1conns are the engine's connections, for draining to find the
	// idle ones; closing says the listener drains.
	h1mu    sync.Mutex
	h1conns map[*h1conn]struct{}
	closing atomic.Bool

	serving sync.WaitGroup
	// stream serves a Layer 4 listener, which has none of the above but
	// tcp and stats.
	stream *l4.Listener
	// flows serve a UDP listener, whose socket is udp.
	flows *l4.UDPListener
	// sharedTLS serves, on an HTTPS listener, the connections of the TLS
	// listeners (passthrough or terminate) that share its socket
	// (serveConn).
	sharedTLS *l4.Listener
}

// listenerState is what Apply swaps on a listener that stays.
type listenerState struct {
	routes *router.Table
	tls    *tlsstore.Store
	// backendTLS are the transports of the TLS identities of routes.
	backendTLS map[*router.BackendTLS]*tlsTransports
	// guards are the state of the access filters of routes.
	guards *guards
	// stats caches the series of each *router.Route of routes, which
	// routeStats fills on first use.
	stats sync.Map
}

func (l *listener) publish(cfg *Listener) {
	if l.flows != nil {
		l.flows.Publish(cfg.L4)
		return
	}
	if l.stream != nil {
		l.stream.Publish(cfg.L4, cfg.TLS)
		return
	}
	if l.sharedTLS != nil {
		// The one Store: HTTPS and TLS listeners in mode Terminate
		// differ by hostname, and so by certificate.
		l.sharedTLS.Publish(cfg.L4, cfg.TLS)
	}
	l.state.Store(&listenerState{routes: cfg.Routes, tls: cfg.TLS, backendTLS: l.srv.fwd.backendTransports(cfg.Routes), guards: l.srv.guards.resolve(cfg.Routes)})
	l.stats.prune(cfg.Routes)
}

func (l *listener) tlsStore() *tlsstore.Store { return l.state.Load().tls }

func (s *Server) openListener(cfg *Listener) (*listener, error) {
	if cfg.Protocol == UDP {
		return s.openUDPListener(cfg)
	}
	ln, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	o := &s.opts
	if o.ProxyProtocol {
		// Beneath the caps, which then count clients, not the load
		// balancer; the header has the time a request head has.
		ln = guard.NewProxyListener(ln, o.ProxyProtocolFrom, o.ReadHeaderTimeout, s.connMetrics)
	}
	if cfg.Protocol.l4() {
		return s.openL4Listener(cfg, ln, port), nil
	}
	l := &listener{
		srv:      s,
		protocol: cfg.Protocol,
		addr:     cfg.Address,
		port:     port,
		scheme:   "http",
		tcp:      guard.NewTracker(ln, s.conns, s.connMetrics),
		stats:    s.metrics.listener(cfg.Address),
	}
	if cfg.Protocol == HTTPS {
		// Always, since TLS listeners may join the socket
		// later; with no routes (cfg.L4 nil) it reads nothing.
		l.sharedTLS = l4.New(s.l4Options(cfg.Address, l4.Passthrough), nil, nil)
	}
	l.publish(cfg)
	// No ReadTimeout or WriteTimeout: they would cut gRPC streams and
	// WebSockets. Slow clients are bounded by the header timeout, the idle
	// timeout and, on h2, the write timeout per frame.
	l.http = &http.Server{
		Handler:           l,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: o.MaxConcurrentStreams,
			// The protocol's default rather than Go's 1 MiB: clients
			// send no larger frames, and a larger one is refused as
			// RFC 9113 section 4.2 says (h2spec 4.2/3).
			MaxReadFrameSize: h2MaxFrameSize,
			// A peer that stops reading would otherwise hold a stream's
			// buffers forever.
			WriteByteTimeout: o.IdleTimeout,
		},
		Protocols:   new(http.Protocols),
		ConnContext: guard.ConnContext,
		ConnState:   l.connState,
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	l.http.Protocols.SetHTTP1(true)
	// The guard reads what clients send before net/http does (proxy/guard),
	// so it terminates TLS itself: net/http sees plaintext, HTTP/1.1 or,
	// after ALPN h2, HTTP/2 with prior knowledge, hence UnencryptedHTTP2
	// on both kinds of listener. The handshake runs on net/http's first
	// read, under ReadHeaderTimeout.
	l.http.Protocols.SetUnencryptedHTTP2(true)
	// A client that reads nothing of an answer for IdleTimeout loses its
	// connection, as HTTP/2's WriteByteTimeout already does.
	guarded := guard.Listener{Listener: l.tcp, WriteStall: o.IdleTimeout}
	if cfg.Protocol == HTTPS {
		l.scheme = "https"
		guarded.TLS = s.connMetrics.CountHandshakes(tlsstore.ServerConfig(l.tlsStore, "h2", "http/1.1"))
		if !o.DisableHTTP3 {
			if err := l.openHTTP3(); err != nil {
				ln.Close()
				return nil, err
			}
		}
	} else {
		l.h2c = &http2.Server{
			MaxConcurrentStreams: uint32(o.MaxConcurrentStreams),
			MaxReadFrameSize:     h2MaxFrameSize,
			IdleTimeout:          o.IdleTimeout,
			WriteByteTimeout:     o.IdleTimeout,
		}
	}
	if o.HTTP2Engine == EngineNative {
		l.h2 = &h2.Server{
			Handler:              l,
			MaxConcurrentStreams: uint32(o.MaxConcurrentStreams),
			MaxHeaderListSize:    uint32(o.MaxHeaderBytes),
			ResetBurst:           guard.ResetBurst,
			ResetRate:            guard.ResetRate,
			IdleTimeout:          o.IdleTimeout,
			PrefaceTimeout:       o.ReadHeaderTimeout,
			ConnState:            l.connState,
			Logger:               s.log,
		}
	}
	serve := func() error { return l.http.Serve(guarded) }
	// HTTPS sockets too, whatever the engines: serveConn chooses between
	// TLS listeners and the HTTP engines.
	if o.HTTP1Engine == EngineNative || l.h2 != nil || l.sharedTLS != nil {
		l.handoff = guard.NewHandoff(l.tcp.Addr())
		l.h1conns = map[*h1conn]struct{}{}
		serve = func() error { return l.http.Serve(l.handoff) }
		l.serving.Go(func() { l.acceptH1(guarded) })
	}
	l.serving.Go(func() {
		// stopAccepting closes the socket before Shutdown, hence ErrClosed.
		if err := serve(); !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.log.Error("listener stopped", "listener", l.addr, "error", err)
		}
	})
	s.log.Info("listener opened", "listener", l.addr, "protocol", cfg.Protocol.String(), "port", port)
	return l, nil
}

// openHTTP3 listens on the UDP port of the same number as the TCP one, so
// that Alt-Svc can name it.
func (l *listener) openHTTP3() error {
	host, _, err := net.SplitHostPort(l.addr)
	if err != nil {
		return err
	}
	udp, err := net.ListenPacket("udp", net.JoinHostPort(host, strconv.Itoa(l.port)))
	if err != nil {
		return fmt.Errorf("listen for HTTP/3: %w", err)
	}
	o := &l.srv.opts
	l.udp = udp
	l.h3 = &http3.Server{
		Handler:        l,
		TLSConfig:      http3.ConfigureTLSConfig(l.srv.connMetrics.CountHandshakes(tlsstore.ServerConfig(l.tlsStore))),
		ConnContext:    l.srv.connMetrics.CountQUICConn,
		MaxHeaderBytes: o.MaxHeaderBytes,
		IdleTimeout:    o.IdleTimeout,
		QUICConfig: &quic.Config{
			HandshakeIdleTimeout: o.ReadHeaderTimeout,
			MaxIdleTimeout:       o.IdleTimeout,
			MaxIncomingStreams:   int64(o.MaxConcurrentStreams),
		},
		Logger: l.srv.log,
	}
	l.alt = []string{fmt.Sprintf(`h3=":%d"; ma=86400`, l.port)}
	l.serving.Go(func() {
		if err := l.h3.Serve(udp); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, quic.ErrServerClosed) {
			l.srv.log.Error("HTTP/3 listener stopped", "listener", l.addr, "error", err)
		}
	})
	return nil
}

// ServeHTTP is the listener's entry for every protocol.
func (l *listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.inflight.Add(1)
	defer l.inflight.Add(-1)
	if r.ProtoMajor < 3 {
		if c, ok := guard.ConnOf(r.Context()); ok {
			if c.Evicted() {
				// Closed to make room before net/http's claim for this
				// request (proxy/guard): nothing may reach a backend.
				panic(http.ErrAbortHandler)
			}
			if r.ProtoMajor == 2 {
				l.noteHTTP2(c)
			}
		}
	}
	if l.h2c != nil && r.ProtoMajor == 1 && isH2CUpgrade(r.Header) {
		l.serveH2CUpgrade(w, r)
		return
	}
	if r.ProtoMajor >= 2 {
		reserveStack(false)
	}
	if l.srv.draining.Load() && r.ProtoMajor < 3 && len(r.Header["Upgrade"]) == 0 {
		// During the shutdown delay clients are told to leave while
		// every answer still arrives: net/http closes an HTTP/1.1
		// connection after an answer that says so and turns it into a
		// GOAWAY on h2. Otherwise keep-alive connections stay until the
		// listener stops, and are closed under clients that may be
		// sending on them. An Upgrade answer must keep its own
		// Connection header.
		w.Header()["Connection"] = []string{"close"}
	}
	if l.alt != nil && r.ProtoMajor < 3 {
		w.Header()["Alt-Svc"] = l.alt
	}
	if l.srv.server != nil {
		// Every answer made here has it; a proxied one has the
		// backend's instead, if it sent one (modifyResponse,
		// relayResponse).
		w.Header()["Server"] = l.srv.server
	}
	l.srv.serve(w, r, l, l.state.Load())
}

// stackReserve is what forwarding an HTTP/2 or HTTP/3 request may use
// below ServeHTTP: the deepest call of forwarding to an HTTP/1.1 backend
// (parsing its response) is about 2.6 KiB below, with net/http's frames
// above it about 3 KiB in all, just past the 4 KiB the handler goroutines
// were started with. The reserve covers that with room for deeper calls,
// and asks nothing of a goroutine that starts with 8 KiB.
const stackReserve = 6 << 10

// reserveStack grows the calling goroutine's stack, while few frames are
// on it, to what forwarding will use. The HTTP/2 and HTTP/3 servers run
// every request on a new goroutine whose stack starts small, and
// forwarding outgrew it in its deepest call (parsing the backend's
// response), where the runtime copies and adjusts every frame on the
// stack: 9% of the core in bench/run.sh's h2-tls. The runtime sizes a
// stack for a function's whole frame before the function runs, so pad's
// frame is reserved here, once, at a shallow depth; the branch that
// would use it never runs (callers pass false), so nothing is zeroed.
// Growing there costs less than half as much: stack growth fell from 9.3%
// to 4.2% of the core in h2-tls.
//
//go:noinline
func reserveStack(use bool) byte {
	if use {
		var pad [stackReserve]byte
		return padByte(pad[:])
	}
	return 0
}

//go:noinline
func padByte(b []byte) byte { return b[len(b)-1] }

// stopAccepting closes the sockets; connections already open stay.
func (l *listener) stopAccepting() {
	if l.flows != nil {
		l.udp.Close()
		return
	}
	l.tcp.Close()
}

// drain waits for the listener's connections to finish their work, closing
// them all once ctx is done. It reports whether they finished in time.
func (l *listener) drain(ctx context.Context) bool {
	if l.flows != nil {
		return l.drainUDP()
	}
	if l.stream != nil {
		return l.drainL4(ctx)
	}
	var wg sync.WaitGroup
	sharedClean := true
	if l.sharedTLS != nil {
		wg.Go(func() { sharedClean = l.sharedTLS.Drain(ctx) })
	}
	if l.handoff != nil {
		l.closeIdleH1()
	}
	wg.Go(func() { _ = l.http.Shutdown(ctx) })
	if l.h2 != nil {
		l.h2.Drain()
	}
	if l.h3 != nil {
		wg.Go(func() { _ = l.h3.Shutdown(ctx) })
	}
	wg.Wait()
	clean := true
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for clean && l.inflight.Load() > 0 {
		select {
		case <-ctx.Done():
			clean = false
		case <-tick.C:
		}
	}
	if ctx.Err() != nil {
		clean = clean && l.inflight.Load() == 0
		l.http.Close()
		if l.h2 != nil {
			l.h2.Close()
		}
		l.tcp.CloseConns()
		if l.h3 != nil {
			l.h3.Close()
		}
	}
	if l.udp != nil {
		l.udp.Close()
	}
	l.serving.Wait()
	if l.h2 != nil {
		// Its connections close once their GOAWAY is read; the handler
		// goroutines kept for later streams go now.
		l.h2.EndIdleHandlers()
	}
	if l.sharedTLS != nil {
		clean = clean && sharedClean
		l.srv.l4metrics.Forget(l.addr)
	}
	l.srv.log.Info("listener closed", "listener", l.addr, "clean", clean)
	return clean
}

// connState is the http.Server's ConnState hook: it tells the registry
// when net/http's connections wait for a request, and counts failed
// handshakes on HTTPS listeners, as net/http closes a connection whose
// handshake failed without telling anyone else.
func (l *listener) connState(c net.Conn, state http.ConnState) {
	switch state {
	case http.StateActive:
		// A claim that fails is seen again by ServeHTTP.
		if t, ok := guard.Beneath[*guard.TrackedConn](c); ok {
			t.Claim()
		}
	case http.StateIdle:
		if t, ok := guard.Beneath[*guard.TrackedConn](c); ok {
			t.MarkIdle(time.Now())
		}
	case http.StateClosed:
		if l.scheme == "https" {
			l.srv.connMetrics.FailedHandshake(c)
		}
	}
}

// noteHTTP2 counts c, the connection of an HTTP/2 request, as h2, or h2c
// on a cleartext listener.
func (l *listener) noteHTTP2(c *guard.TrackedConn) {
	if l.h2c != nil {
		c.SetProtocol(guard.ProtoH2C)
	} else {
		c.SetProtocol(guard.ProtoH2)
	}
}

// serverNameOf is the server name (SNI) of the TLS connection r came on:
// HTTP/3's from quic-go, the others' from the connection the guard
// terminated TLS on.
func serverNameOf(r *http.Request) string {
	if r.TLS != nil {
		return r.TLS.ServerName
	}
	if c, ok := guard.ConnOf(r.Context()); ok {
		return c.ServerName
	}
	return ""
}
