package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/l4"
	"github.com/hostgate/hostgate/proxy/l4/relay"
	"github.com/hostgate/hostgate/proxy/pipeline"
	"github.com/hostgate/hostgate/router"
)

// openL4Listener serves a TLSPassthrough or TCP listener on ln with
// proxy/l4, beneath the same connection caps and PROXY protocol handling
// as the HTTP listeners, on the same endpoint sets, balancing and passive
// health.
func (s *Server) openL4Listener(cfg *Listener, ln net.Listener, port int) *listener {
	mode := l4.TCP
	if cfg.Protocol == TLSPassthrough {
		mode = l4.Passthrough
	}
	opts := s.l4Options(cfg.Address, mode)
	opts.IdleTimeout, opts.Quiet = max(s.opts.L4IdleTimeout, 0), quietFor
	var loop *relay.Loop
	if s.opts.HTTP1Engine == EngineLoop {
		// TCP and TLS passthrough connections (proxy/l4's relay.go),
		// beneath the caps, which then wrap its sockets; not beneath a
		// PROXY header's listener, whose bytes are read in Go
		// (relay.Listen leaves it as it is). The loop first: a
		// relay.Listen whose loop then failed would leave its copy of
		// the listening socket open, listening after ln closed.
		newLoop, err := relay.New()
		if err != nil {
			s.log.Error("relay loops", "listener", cfg.Address, "error", err)
		} else if rl := relay.Listen(ln); rl == ln {
			newLoop.Close()
		} else {
			ln, loop = rl, newLoop
			opts.Relay, opts.RelayListener = loop, rl
			opts.RelaySocket = func(c net.Conn) *relay.Socket {
				sock, _ := guard.Beneath[*relay.Socket](c)
				return sock
			}
		}
	}
	l := &listener{
		srv:      s,
		protocol: cfg.Protocol,
		addr:     cfg.Address,
		port:     port,
		tcp:      guard.NewTracker(ln, s.conns, s.connMetrics),
		path:     s.path.NewListener(cfg.Address, "", port, nil, nil),
		relay:    loop,
	}
	l.stream = l4.New(opts, cfg.L4, cfg.TLS)
	l.serving.Go(func() {
		if err := l.stream.Serve(l.tcp); !errors.Is(err, net.ErrClosed) {
			s.log.Error("listener stopped", "listener", l.addr, "error", err)
		}
	})
	s.log.Info("listener opened", "listener", l.addr, "protocol", cfg.Protocol.String(), "port", port)
	return l
}

// openUDPListener serves a UDP listener with proxy/l4's flows. PROXY
// protocol and the connection caps are TCP's and do not apply; the cap
// of flows does.
func (s *Server) openUDPListener(cfg *Listener) (*listener, error) {
	pc, err := net.ListenPacket("udp", cfg.Address)
	if err != nil {
		return nil, err
	}
	conn := pc.(*net.UDPConn)
	key := cfg.key()
	l := &listener{
		srv:      s,
		protocol: cfg.Protocol,
		addr:     key,
		port:     conn.LocalAddr().(*net.UDPAddr).Port,
		udp:      conn,
	}
	l.path = s.path.NewListener(key, "", l.port, nil, nil)
	o := s.l4Options(key, l4.UDP)
	o.FlowIdleTimeout = s.opts.UDPFlowIdleTimeout
	o.MaxFlows = max(s.opts.MaxUDPFlows, 0)
	l.flows = l4.NewUDP(o, cfg.L4, conn)
	l.serving.Go(func() {
		if err := l.flows.Serve(); !errors.Is(err, net.ErrClosed) {
			s.log.Error("listener stopped", "listener", l.addr, "error", err)
		}
	})
	s.log.Info("listener opened", "listener", l.addr, "protocol", cfg.Protocol.String(), "port", l.port)
	return l, nil
}

// drainUDP ends the flows of a UDP listener whose socket is closed: their
// answers could no longer reach their clients.
func (l *listener) drainUDP() bool {
	l.serving.Wait()
	l.flows.Close()
	l.srv.l4metrics.Forget(l.addr)
	l.srv.log.Info("listener closed", "listener", l.addr, "clean", true)
	return true
}

// l4Options are what proxy/l4 serves a listener at address with.
func (s *Server) l4Options(address string, mode l4.Mode) l4.Options {
	o := &s.opts
	return l4.Options{
		Mode:    mode,
		Address: address,
		// A ClientHello is smaller than a request head and gets as long.
		HelloTimeout:    o.ReadHeaderTimeout,
		DialTimeout:     o.DialTimeout,
		ConnectAttempts: o.ConnectAttempts,
		DrainGrace:      o.L4DrainGrace,
		BackendTLS:      func(b *router.BackendTLS) (*tls.Config, error) { return pipeline.BackendTLSConfig(nil, b) },
		Sets:            s.path.Endpoints,
		Socket:          guard.SocketOf,
		Claim:           claimConn,
		Metrics:         s.l4metrics,
		Log:             s.log,
		AccessLog:       o.L4AccessLog,
	}
}

// claimConn marks the connection caps' record of c busy for as long as
// c lasts: nothing marks it idle again.
func claimConn(c net.Conn) {
	if t, ok := guard.Beneath[*guard.TrackedConn](c); ok {
		t.Claim()
	}
}

// quietFor is how long the socket beneath c, an accepted TCP connection,
// has carried no data either way; false when that cannot be told.
func quietFor(c net.Conn) (time.Duration, bool) {
	var control func(func(fd uintptr)) error
	if sock, ok := guard.Beneath[*relay.Socket](c); ok {
		control = sock.Control
	} else if tcp, ok := guard.Beneath[*net.TCPConn](c); ok {
		rc, err := tcp.SyscallConn()
		if err != nil {
			return 0, false
		}
		control = rc.Control
	} else {
		return 0, false
	}
	var quiet time.Duration
	known := false
	if control(func(fd uintptr) { quiet, known = socketQuiet(fd) }) != nil {
		return 0, false
	}
	return quiet, known
}

// drainL4 lets the listener's connections run until ctx is done, then
// closes them.
func (l *listener) drainL4(ctx context.Context) bool {
	clean := l.stream.Drain(ctx)
	l.serving.Wait()
	if l.relay != nil {
		// Every connection on it has ended.
		l.relay.Close()
	}
	l.srv.l4metrics.Forget(l.addr)
	l.srv.log.Info("listener closed", "listener", l.addr, "clean", clean)
	return clean
}
