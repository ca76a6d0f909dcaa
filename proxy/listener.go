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
	"time"

	"golang.org/x/net/http2"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/h1"
	"github.com/hostgate/hostgate/proxy/h1loop"
	"github.com/hostgate/hostgate/proxy/h2"
	"github.com/hostgate/hostgate/proxy/h3"
	"github.com/hostgate/hostgate/proxy/l4"
	"github.com/hostgate/hostgate/proxy/l4/relay"
	"github.com/hostgate/hostgate/proxy/pipeline"
	"github.com/hostgate/hostgate/tlsstore"
)

// TCP keep-alive of the connections accepted: net's defaults, which find
// a client gone silently (a node or NAT that dropped it) in about 2.5
// minutes of idleness.
const (
	keepAliveIdle     = 15 * time.Second
	keepAliveInterval = 15 * time.Second
	keepAliveCount    = 9
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
	// path is the listener's request path, the handler of every engine;
	// a Layer 4 listener has it only for its metrics.
	path *pipeline.Listener

	tcp  *guard.Tracker
	http *http.Server
	h2c  *http2.Server // serves connections upgraded from HTTP/1.1 (EngineStdlib)
	// h2 serves HTTP/2 connections with EngineNative, nil with
	// EngineStdlib.
	h2  *h2.Server
	udp net.PacketConn
	h3  *h3.Server
	alt []string // Alt-Svc value, shared by every response

	// handoff feeds l.http the connections the HTTP/1.1 engine hands
	// over; nil when net/http serves them all (EngineStdlib).
	handoff *guard.Handoff
	// h1 serves the connections accepted (accept), and hands them over;
	// nil when net/http serves them all.
	h1 *h1.Server
	// loop serves the connections accepted on a plain HTTP listener with
	// EngineLoop, and hands them to h1; nil otherwise.
	loop *h1loop.Server

	serving sync.WaitGroup
	// stream serves a Layer 4 listener, which has none of the above but
	// tcp and stats; relay carries its connections when it is a TCP or
	// TLS listener with EngineLoop.
	stream *l4.Listener
	relay  *relay.Loop
	// flows serve a UDP listener, whose socket is udp.
	flows *l4.UDPListener
	// sharedTLS serves, on an HTTPS listener, the connections of the TLS
	// listeners (passthrough or terminate) that share its socket
	// (serveConn).
	sharedTLS *l4.Listener
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
	l.path.Publish(cfg.Routes, cfg.TLS)
}

func (s *Server) openListener(cfg *Listener) (*listener, error) {
	if cfg.Protocol == UDP {
		return s.openUDPListener(cfg)
	}
	lc := listenConfig()
	ln, err := lc.Listen(context.Background(), "tcp", cfg.Address)
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
	onLoop := cfg.Protocol == HTTP && o.HTTP1Engine == EngineLoop
	if onLoop {
		// Beneath the caps, so that a connection they close on the loop
		// closes there (proxy/h1loop).
		ln = h1loop.Listen(ln)
	}
	l := &listener{
		srv:      s,
		protocol: cfg.Protocol,
		addr:     cfg.Address,
		port:     port,
		scheme:   "http",
		tcp:      guard.NewTracker(ln, s.conns, s.connMetrics),
	}
	upgrade := l.upgradeH2C
	if cfg.Protocol == HTTPS {
		l.scheme, upgrade = "https", nil
		if !o.DisableHTTP3 {
			l.alt = h3.AltSvc(port)
		}
		// Always, since TLS listeners may join the socket
		// later; with no routes (cfg.L4 nil) it reads nothing.
		l.sharedTLS = l4.New(s.l4Options(cfg.Address, l4.Passthrough), nil, nil)
	}
	l.path = s.path.NewListener(cfg.Address, l.scheme, port, l.alt, upgrade)
	l.publish(cfg)
	// No ReadTimeout or WriteTimeout: they would cut gRPC streams and
	// WebSockets. Slow clients are bounded by the header timeout, the idle
	// timeout and, on h2, the write timeout per frame.
	l.http = &http.Server{
		Handler:           l.path,
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
		guarded.TLS = s.connMetrics.CountHandshakes(tlsstore.ServerConfig(l.path.TLSStore, "h2", "http/1.1"))
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
			Handler:              l.path,
			MaxConcurrentStreams: uint32(o.MaxConcurrentStreams),
			MaxHeaderListSize:    uint32(o.MaxHeaderBytes),
			ResetBurst:           guard.ResetBurst,
			ResetRate:            guard.ResetRate,
			EmptyFrameBurst:      guard.EmptyFrameBurst,
			IdleTimeout:          o.IdleTimeout,
			PrefaceTimeout:       o.ReadHeaderTimeout,
			ConnState:            l.connState,
			Logger:               s.log,
		}
	}
	serve := func() error { return l.http.Serve(guarded) }
	// HTTPS sockets too, whatever the engines: serveConn chooses between
	// TLS listeners and the HTTP engines.
	if o.HTTP1Engine != EngineStdlib || l.h2 != nil || l.sharedTLS != nil {
		l.handoff = guard.NewHandoff(l.tcp.Addr())
		cfg := h1.Config{
			Path:              l.path,
			HandOff:           l.handoff,
			HandOffHTTP1:      o.HTTP1Engine == EngineStdlib,
			ReadHeaderTimeout: o.ReadHeaderTimeout,
			IdleTimeout:       o.IdleTimeout,
			MaxHeaderBytes:    o.MaxHeaderBytes,
			AltSvc:            l.alt,
			ServerField:       !o.DisableServerHeader,
			Metrics:           s.connMetrics,
		}
		if l.h2 != nil {
			cfg.HTTP2 = l.serveHTTP2
		}
		l.h1 = h1.New(cfg)
		if onLoop {
			var err error
			l.loop, err = h1loop.New(h1loop.Config{
				Path: l.path,
				// The guard the loop does without reads what it did
				// not serve: the smuggling refusals hold past a
				// hand-off.
				HandOff:                 func(c net.Conn) { l.h1.ServeConn(guarded.Guard(c)) },
				ReadHeaderTimeout:       o.ReadHeaderTimeout,
				IdleTimeout:             o.IdleTimeout,
				MaxHeaderBytes:          o.MaxHeaderBytes,
				UpstreamIdleTimeout:     o.UpstreamIdleTimeout,
				MaxIdleConnsPerEndpoint: o.MaxIdleConnsPerEndpoint,
				ServerField:             !o.DisableServerHeader,
			})
			if err != nil {
				ln.Close()
				return nil, fmt.Errorf("start the HTTP/1.1 loops: %w", err)
			}
		}
		serve = func() error { return l.http.Serve(l.handoff) }
		l.serving.Go(func() { l.accept(guarded) })
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
	l.h3 = h3.New(h3.Config{
		Handler:              l.path,
		TLS:                  l.srv.connMetrics.CountHandshakes(tlsstore.ServerConfig(l.path.TLSStore)),
		ConnContext:          l.srv.connMetrics.CountQUICConn,
		MaxHeaderBytes:       o.MaxHeaderBytes,
		IdleTimeout:          o.IdleTimeout,
		HandshakeTimeout:     o.ReadHeaderTimeout,
		MaxConcurrentStreams: o.MaxConcurrentStreams,
		Logger:               l.srv.log,
	})
	l.serving.Go(func() {
		if err := l.h3.Serve(udp); err != nil {
			l.srv.log.Error("HTTP/3 listener stopped", "listener", l.addr, "error", err)
		}
	})
	return nil
}

// accept accepts the listener's connections for the HTTP/1.1 engine,
// or a TLS listener sharing the socket.
func (l *listener) accept(ln guard.Listener) {
	for {
		c, err := ln.Listener.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors, say: wait for some to close, as
			// net/http does.
			l.srv.log.Debug("accept failed", "listener", l.addr, "error", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go l.serveConn(ln, c)
	}
}

// serveConn serves c, accepted from ln's socket, on its own goroutine: a
// ClientHello that a TLS listener on the socket claims goes to proxy/l4
// (Divert reads it here, not in the accept loop, so that a slow client
// holds up no other); any other connection goes to the HTTP engines,
// which read the bytes Divert read as if unread.
func (l *listener) serveConn(ln guard.Listener, c net.Conn) {
	if l.sharedTLS != nil {
		read, taken := l.sharedTLS.Divert(c)
		if taken {
			return
		}
		if len(read) > 0 {
			c = l4.NewReplayConn(c, read)
		}
	}
	if l.loop != nil {
		l.loop.ServeConn(c)
		return
	}
	l.h1.ServeConn(ln.Guard(c))
}

// serveHTTP2 serves conn, which the HTTP/1.1 engine found to speak
// HTTP/2 (gc beneath it), with the HTTP/2 engine.
func (l *listener) serveHTTP2(conn net.Conn, gc *guard.Conn) {
	// Handlers see the context net/http would give them: with
	// http.ServerContextKey, ReverseProxy resets a stream whose backend
	// body breaks off instead of ending it as if whole.
	ctx := guard.ConnContext(context.WithValue(context.Background(), http.ServerContextKey, l.http), gc)
	l.h2.ServeConn(conn, h2.ConnOpts{Context: ctx})
}

// stopAccepting closes the sockets. Connections already open stay, but
// from now on every HTTP/1.1 answer closes its own, connections idle
// close, and HTTP/2 clients get GOAWAY: here rather than in drain, whose
// goroutine may start after an answer went out with keep-alive
// (TestRemovedListenerDrains, on a loaded machine).
func (l *listener) stopAccepting() {
	if l.flows != nil {
		l.udp.Close()
		return
	}
	l.tcp.Close()
	if l.stream != nil {
		return
	}
	if l.h1 != nil {
		l.h1.CloseIdle()
	}
	if l.loop != nil {
		l.loop.CloseIdle()
	}
	l.http.SetKeepAlivesEnabled(false)
	if l.h2 != nil {
		l.h2.Drain()
	}
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
	wg.Go(func() { _ = l.http.Shutdown(ctx) })
	if l.h3 != nil {
		wg.Go(func() { _ = l.h3.Shutdown(ctx) })
	}
	wg.Wait()
	clean := true
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for clean && l.path.InFlight() > 0 {
		select {
		case <-ctx.Done():
			clean = false
		case <-tick.C:
		}
	}
	if ctx.Err() != nil {
		clean = clean && l.path.InFlight() == 0
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
	if l.loop != nil {
		// Nothing is in flight, or the time is up: what is left on the
		// loops (a head half sent) closes with them.
		l.loop.Close()
	}
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
