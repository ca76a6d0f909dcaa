// Package l4 serves hostgate's Layer 4 listeners: TLS, where the server
// name of a connection's ClientHello chooses a TLSRoute and either the
// connection's bytes, the ClientHello first, go unchanged to one of its
// backends (passthrough) or its TLS ends here and the plaintext goes
// (terminate); and TCP, where a listener's TCPRoute does. It owns reading
// the ClientHello (hello.go), the choice of route and endpoint, and the
// copy of bytes both ways: on a goroutine per connection, or on readiness
// loops (relay.go, package relay) for TCP listeners and TLS listeners
// that pass TLS through.
//
// It parses nothing past the ClientHello but through crypto/tls, and
// never touches Kubernetes types: routes come as a compiled
// router.L4Table, certificates as a tlsstore.Store, endpoints as
// proxy/upstream's sets, each swapped whole behind atomic pointers. A
// connection reads the current table and certificates once, when it is
// routed, so a change leaves open connections as they are.
package l4

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/proxy/l4/relay"
	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore"
)

// Mode is what a listener reads before it routes a connection.
type Mode uint8

const (
	// TCP routes every connection by the listener's route alone.
	TCP Mode = iota
	// Passthrough reads the ClientHello and routes by its server name;
	// the route says whether TLS is passed through or terminated.
	Passthrough
	// UDP routes every client flow by the listener's route alone
	// (UDPListener).
	UDP
)

func (m Mode) String() string {
	switch m {
	case Passthrough:
		return "TLS"
	case UDP:
		return "UDP"
	}
	return "TCP"
}

// Options are what a Listener needs from the proxy that runs it.
type Options struct {
	Mode Mode
	// Address names the listener in logs and metrics.
	Address string
	// HelloTimeout bounds the time a client may take to send its
	// ClientHello.
	HelloTimeout time.Duration
	// DialTimeout bounds each connection attempt to an endpoint, and
	// ConnectAttempts how many endpoints are tried (at least 1).
	DialTimeout     time.Duration
	ConnectAttempts int
	// Sets returns the current endpoint sets, keyed by
	// router.BackendRef.Name.
	Sets func() *upstream.Sets
	// Socket returns the socket beneath an accepted connection when
	// reading from it directly loses nothing the wrappers hold, else
	// nil. Copies between two sockets splice; the wrappers' Read and
	// Write would not. Nil: only a bare *net.TCPConn is its own socket.
	Socket func(net.Conn) *net.TCPConn
	// Claim tells the connection caps that an accepted connection
	// reached its backend. Until then (a ClientHello awaited) it is one
	// of the idle connections the caps may close to make room for
	// another; from then on it is a session, a database's say, that no
	// client would expect to lose to a newcomer. Nil: no caps.
	Claim func(net.Conn)
	// Relay, with mode TCP or Passthrough, carries the connections that
	// are a relay.Socket beneath the caps' wrapper (RelaySocket finds
	// it, nil for others) on its loops (relay.go).
	Relay       *relay.Loop
	RelaySocket func(net.Conn) *relay.Socket
	// RelayListener, when set, is the listener of relay.Listen's beneath
	// the one Serve is given: the loop's worker accepts on it
	// (relay.Loop.Serve), admitting through Serve's.
	RelayListener net.Listener
	// BackendTLS is the client configuration that checks a backend as
	// its BackendTLSPolicy says, for the plaintext of a connection whose
	// TLS ended here; nil connects to such backends in plain text.
	BackendTLS func(*router.BackendTLS) (*tls.Config, error)
	// Metrics count what the listener refuses and carries; nil counts
	// nothing.
	Metrics *Metrics
	// FlowIdleTimeout ends a UDP flow that carried no datagram either
	// way for that long, and MaxFlows caps the flows of a UDP listener:
	// datagrams that would start another are dropped and counted.
	FlowIdleTimeout time.Duration
	MaxFlows        int
	// DrainGrace is how long a connection or flow goes on once its route
	// or endpoint is gone (drain.go) before it is closed; not positive:
	// it goes on until its peers end it.
	DrainGrace time.Duration
	// IdleTimeout closes a TCP or TLS connection bound to a backend that
	// Quiet says carried no data either way for that long; not positive:
	// never. Quiet asks the socket beneath a connection, as the bytes
	// may pass where no Go code sees them (splice, a relay loop); 0 and
	// false when it cannot tell.
	IdleTimeout time.Duration
	Quiet       func(net.Conn) (time.Duration, bool)
	// Log receives events; AccessLog, when set, gets one record per
	// connection (UDP flow) once it ends.
	Log       *slog.Logger
	AccessLog func(*Record)
}

// Record is what the access log gets of one connection.
type Record struct {
	Start    time.Time
	Duration time.Duration
	Listener string
	Mode     Mode
	Client   netip.AddrPort
	// ServerName is the ClientHello's (Passthrough).
	ServerName string
	// Route is zero and Refused says why when the connection reached no
	// backend.
	Route   router.RouteID
	Refused string
	// Backend is the BackendRef name and Endpoint the address connected.
	Backend, Endpoint string
	// BytesIn were sent by the client (the ClientHello included), and
	// BytesOut sent to it.
	BytesIn, BytesOut int64
	// PacketsIn and PacketsOut count the datagrams of a UDP flow each
	// way.
	PacketsIn, PacketsOut int64
	// Drained says the connection was closed DrainGrace after its route
	// or endpoint went away, and IdleTimedOut that it was closed after
	// IdleTimeout without a byte either way.
	Drained, IdleTimedOut bool
}

// Listener serves the connections of one socket.
type Listener struct {
	opts  Options
	state atomic.Pointer[state]

	mu sync.Mutex
	// conns are the open connections, with what they are bound to once
	// they reached a backend (nil before).
	conns  map[net.Conn]*binding
	closed bool
	active sync.WaitGroup
	// stop ends the sweeper (drain.go) when the listener drains.
	stop     chan struct{}
	stopOnce sync.Once
}

// state is what Publish swaps: routes and the certificates that terminate
// the TLS of their listeners in mode Terminate.
type state struct {
	routes *router.L4Table
	certs  *tlsstore.Store
	// tls asks certs for a certificate by server name, as HTTPS
	// listeners do; nil without certs.
	tls *tls.Config
	// backendTLS caches the client configuration of each backend TLS
	// identity of routes (a *router.BackendTLS), made on first use: it
	// parses certificates. It goes with the routes whose identities they
	// are.
	backendTLS sync.Map
}

// New returns a Listener serving routes with certs, which Publish
// replaces.
func New(opts Options, routes *router.L4Table, certs *tlsstore.Store) *Listener {
	if opts.ConnectAttempts < 1 {
		opts.ConnectAttempts = 1
	}
	if opts.Log == nil {
		opts.Log = defaultLog()
	}
	l := &Listener{opts: opts, conns: map[net.Conn]*binding{}, stop: make(chan struct{})}
	l.Publish(routes, certs)
	go sweep(opts.DrainGrace, opts.IdleTimeout, l.stop, l.sweep)
	return l
}

// Publish makes routes, and certs for routes that terminate TLS, what new
// connections are served by.
func (l *Listener) Publish(routes *router.L4Table, certs *tlsstore.Store) {
	st := &state{routes: routes, certs: certs}
	if certs != nil {
		st.tls = tlsstore.ServerConfig(func() *tlsstore.Store { return certs })
	}
	l.state.Store(st)
	l.opts.Metrics.retire(l.opts.Address, routes)
}

// Serve accepts connections of ln until it is closed: on a relay loop's
// worker when there is one for it (relay.go), else here.
func (l *Listener) Serve(ln net.Listener) error {
	if l.opts.Relay != nil && l.opts.RelayListener != nil {
		err := l.opts.Relay.Serve(l.opts.RelayListener, func() error { return l.acceptOne(ln) })
		if errors.Is(err, net.ErrClosed) {
			return err
		}
		// The worker gave up (out of descriptors, say): go on here,
		// waiting as below, until the listener is opened again.
		l.opts.Log.Warn("accepting on the relay loop failed; accepting through Go's netpoller until the listener is reopened", "listener", l.opts.Address, "error", err)
	}
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || acceptCanRecover(err) {
				// Out of file descriptors and the like: wait, as
				// net/http does, rather than spin.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		l.take(c)
	}
}

// acceptOne accepts a connection of ln and takes it, on a relay loop's
// worker.
func (l *Listener) acceptOne(ln net.Listener) error {
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	l.take(c)
	return nil
}

// take serves c, accepted: on a relay loop, or on a goroutine of its own.
func (l *Listener) take(c net.Conn) {
	if !l.track(c) {
		c.Close()
		return
	}
	if l.opts.Relay != nil {
		st := l.state.Load()
		if s := l.relaySocket(c, st); s != nil {
			l.relay(c, s, st)
			return
		}
	}
	go l.serve(c)
}

// acceptCanRecover reports whether a failed accept leaves the listener
// able to accept again once the process has descriptors or memory back:
// an error whose Timeout is false then would have stopped the listener
// for good at the first spike.
func acceptCanRecover(err error) bool {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

func (l *Listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[c] = nil
	l.active.Add(1)
	return true
}

// bind notes what c, an open connection, was routed to, and claims it
// from the caps.
func (l *Listener) bind(c net.Conn, b *binding) {
	if l.opts.IdleTimeout > 0 {
		b.lookQuiet = time.Now().Add(l.opts.IdleTimeout)
	}
	l.mu.Lock()
	if _, open := l.conns[c]; open {
		l.conns[c] = b
	}
	l.mu.Unlock()
	if l.opts.Claim != nil {
		l.opts.Claim(c)
	}
}

// sweep closes the connections whose route or endpoint has been gone for
// DrainGrace, and those quiet for IdleTimeout.
func (l *Listener) sweep(now time.Time) {
	routes, sets := l.state.Load().routes, l.opts.Sets()
	l.mu.Lock()
	defer l.mu.Unlock()
	for c, b := range l.conns {
		switch {
		case b == nil:
		case l.opts.DrainGrace > 0 && b.expired(b.served(routes, sets), now, l.opts.DrainGrace):
			b.shutFor(shutDrained, &l.opts)
		case l.opts.IdleTimeout > 0 && b.quietFor(c, now, &l.opts):
			b.shutFor(shutIdle, &l.opts)
		}
	}
}

func (l *Listener) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	l.active.Done()
}

// Drain waits for the open connections to end, closing those left once
// ctx is done, and reports whether they ended by themselves. No
// connection is taken after Drain began.
func (l *Listener) Drain(ctx context.Context) bool {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.stopOnce.Do(func() { close(l.stop) })
	done := make(chan struct{})
	go func() { l.active.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	l.mu.Lock()
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	<-done
	return false
}

func defaultLog() *slog.Logger { return slog.Default() }

// clientClosed is the access log's Refused for a connection closed
// before its ClientHello was whole: counted nowhere else.
const clientClosed = "client_closed"

// Refusal reasons, the label of hostgate_l4_refused_total.
const (
	refusedMalformed = "malformed_hello"
	refusedTooLarge  = "hello_too_large"
	refusedTimeout   = "hello_timeout"
	refusedNotTLS    = "not_tls"
	refusedNoRoute   = "no_route"
	refusedNoBackend = "no_backend"
	refusedDial      = "connect_failed"
	refusedHandshake = "handshake_failed"
	// refusedFlowLimit counts datagrams dropped because they would
	// start a UDP flow past Options.MaxFlows.
	refusedFlowLimit = "flow_limit"
)

func (l *Listener) serve(c net.Conn) {
	defer l.untrack(c)
	defer c.Close()
	rec := l.record(c)
	var hello []byte
	var err error
	if l.opts.Mode == Passthrough {
		hello, rec.ServerName, err = l.readHello(c)
	}
	l.route(c, &rec, l.state.Load(), hello, err)
}

func (l *Listener) record(c net.Conn) Record {
	rec := Record{Start: time.Now(), Listener: l.opts.Address, Mode: l.opts.Mode}
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		rec.Client = a.AddrPort()
	}
	return rec
}

// readHello reads c's ClientHello within HelloTimeout.
func (l *Listener) readHello(c net.Conn) (hello []byte, serverName string, err error) {
	if l.opts.HelloTimeout > 0 {
		_ = c.SetReadDeadline(time.Now().Add(l.opts.HelloTimeout))
	}
	hello, serverName, err = readHello(c)
	if err == nil {
		_ = c.SetReadDeadline(time.Time{})
	}
	return hello, serverName, err
}

// Divert serves c, a connection to a socket whose HTTPS listeners this
// Listener's TLS listeners share, when its ClientHello is this
// Listener's: the server name is one its table claims
// (router.L4Listeners.HTTPS), or the hello is unusable (refused as on a
// TLS socket of its own).
// Otherwise it returns the bytes it read and taken false: the HTTPS
// engine must see them as if unread. A client that sends no TLS at all
// goes to the HTTPS engine too, which tells it so. The routes are read
// once, as for any connection.
func (l *Listener) Divert(c net.Conn) (read []byte, taken bool) {
	st := l.state.Load()
	if st.routes == nil {
		return nil, false
	}
	hello, serverName, err := l.readHello(c)
	if errors.Is(err, errNotTLS) || (err == nil && !st.routes.Claims(serverName)) {
		if err != nil {
			// The HTTPS engine's own header timeout holds from here.
			_ = c.SetReadDeadline(time.Time{})
		}
		return hello, false
	}
	if !l.track(c) {
		c.Close()
		return nil, true
	}
	defer l.untrack(c)
	defer c.Close()
	rec := l.record(c)
	rec.ServerName = serverName
	l.route(c, &rec, st, hello, err)
	return nil, true
}

// route serves c, whose ClientHello (Passthrough) was read with err, by
// st, and writes its access log record.
func (l *Listener) route(c net.Conn, rec *Record, st *state, hello []byte, err error) {
	tracked := c
	defer l.log(rec)
	rec.BytesIn = int64(len(hello))
	if err != nil {
		if alert := l.opts.refuseHello(rec, err); alert != nil {
			writeAlert(c, alert)
		}
		return
	}
	target := l.lookup(st, rec)
	if target == nil {
		return
	}
	var raw *net.TCPConn
	if target.Terminate {
		// The handshake first: a client that fails it costs no
		// backend connection.
		if c = l.terminate(c, hello, st); c == nil {
			l.refuse(rec, refusedHandshake)
			return
		}
		// What the client sent was the handshake, not the backend's.
		hello, rec.BytesIn = nil, 0
	} else if l.opts.Socket != nil {
		raw = l.opts.Socket(c)
	} else {
		raw, _ = c.(*net.TCPConn)
	}
	backend, host := l.connect(target, st, rec, c)
	if backend == nil {
		return
	}
	defer host.End()
	defer backend.Close()
	b := newBinding(rec.ServerName, target, rec.Backend, host, func() {
		tracked.Close()
		backend.Close()
	})
	l.bind(tracked, b)
	l.opts.Metrics.opened(l.opts.Address, rec.Route)
	defer l.opts.Metrics.ended(rec)
	defer b.noteShut(rec)
	if len(hello) > 0 {
		if _, err := backend.Write(hello); err != nil {
			return
		}
	}
	in, out := pipe(c, raw, backend)
	rec.BytesIn += in
	rec.BytesOut = out
}

// lookup is the route of a connection, nil (refused and counted) when
// none takes it.
func (l *Listener) lookup(st *state, rec *Record) *router.L4Target {
	target := st.routes.Lookup(rec.ServerName)
	if target == nil {
		// Closed without an alert: the Gateway API asks that a
		// connection no route takes be rejected at the transport, and
		// its conformance tests take an EOF or a reset for that, not an
		// unrecognized_name alert (TLSRouteHostnameIntersection).
		l.refuse(rec, refusedNoRoute)
		return nil
	}
	rec.Route = target.Route
	return target
}

// log gives rec, a connection's that ended, to the access log.
func (l *Listener) log(rec *Record) {
	rec.Duration = time.Since(rec.Start)
	if l.opts.AccessLog != nil {
		l.opts.AccessLog(rec)
	}
}

// terminate ends the TLS of c, whose ClientHello was hello, with st's
// certificates, within HelloTimeout, and returns the connection of its
// plaintext; nil when the handshake failed.
func (l *Listener) terminate(c net.Conn, hello []byte, st *state) net.Conn {
	if st.tls == nil {
		// No certificate: the listener would not have been served.
		return nil
	}
	tc := tls.Server(NewReplayConn(c, hello), st.tls)
	ctx := context.Background()
	if l.opts.HelloTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.opts.HelloTimeout)
		defer cancel()
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil
	}
	return tc
}

// ReplayConn gives its first reads the bytes read from Conn before: a
// ClientHello read to choose a route, for the TLS handshake that follows
// to read as if unread.
type ReplayConn struct {
	net.Conn
	pending []byte
}

// NewReplayConn returns c, whose reads give read first.
func NewReplayConn(c net.Conn, read []byte) *ReplayConn {
	return &ReplayConn{Conn: c, pending: read}
}

func (c *ReplayConn) Read(p []byte) (int, error) {
	if len(c.pending) == 0 {
		return c.Conn.Read(p)
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// refuseHello counts a connection whose ClientHello could not be read,
// and returns the alert that tells the client why, nil where there is
// none.
func (o *Options) refuseHello(rec *Record, err error) (alert []byte) {
	var ne net.Error
	switch {
	case errors.Is(err, errTooLarge):
		o.refuse(rec, refusedTooLarge)
		return decodeError
	case errors.Is(err, errMalformed):
		o.refuse(rec, refusedMalformed)
		return decodeError
	case errors.Is(err, errNotTLS):
		o.refuse(rec, refusedNotTLS)
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
		o.refuse(rec, refusedTimeout)
	default:
		// The client went away before it finished: nothing to count
		// against it beyond the access log line.
		rec.Refused = clientClosed
	}
	return nil
}

func (l *Listener) refuse(rec *Record, reason string) { l.opts.refuse(rec, reason) }

func (o *Options) refuse(rec *Record, reason string) {
	rec.Refused = reason
	o.Metrics.refused(o.Address, reason)
}

// connect draws a backend of target and connects to one of its endpoints
// for c.
func (l *Listener) connect(target *router.L4Target, st *state, rec *Record, c net.Conn) (halfCloser, *upstream.Host) {
	b := chooseBackend(&l.opts, target, rec)
	if b == nil {
		return nil, nil
	}
	var tlsConfig *tls.Config
	if target.Terminate && b.TLS != nil && l.opts.BackendTLS != nil {
		var err error
		if tlsConfig, err = st.backendConfig(b.TLS, l.opts.BackendTLS); err != nil {
			// Not in plain text what the policy says to encrypt.
			l.opts.Log.Warn("backend TLS", "listener", l.opts.Address, "backend", b.Name, "error", err)
			l.refuse(rec, refusedNoBackend)
			return nil, nil
		}
	}
	return connectEndpoint(&l.opts, b, rec, func(address string) (halfCloser, error) {
		return dial(address, l.opts.DialTimeout, header(b, rec, c), tlsConfig)
	}, true)
}

// chooseBackend draws the backend of target for a new connection or flow,
// nil (refused and counted) when none takes it.
func chooseBackend(o *Options, target *router.L4Target, rec *Record) *router.BackendRef {
	b := router.ChooseBackend(target.Rule.Backends)
	if b == nil || b.Invalid {
		// The spec asks for the share of an invalid backend to be
		// refused, not given to the others.
		o.refuse(rec, refusedNoBackend)
		return nil
	}
	rec.Backend = b.Name
	return b
}

// connectEndpoint picks an endpoint of b's set and connects to it with
// dial, trying others of the set on a failure, with passive health: a
// failed dial counts against its endpoint, and a successful one for it
// when succeeded says that dialling proves the endpoint (TCP; a UDP socket
// connects without sending anything). The endpoint returned has begun
// (upstream.Host.Begin); its End is the caller's.
func connectEndpoint[C any](o *Options, b *router.BackendRef, rec *Record, dial func(address string) (C, error), succeeded bool) (C, *upstream.Host) {
	a := newAttempts(o, b, rec)
	for h := a.next(); h != nil; h = a.next() {
		conn, err := dial(h.Address())
		if err == nil {
			if succeeded {
				h.Succeeded()
			}
			return conn, h
		}
		a.failed(err)
	}
	var none C
	return none, nil
}

// attempts are the endpoints of a backend's set that one connection
// tries, up to Options.ConnectAttempts, with passive health.
type attempts struct {
	o     *Options
	b     *router.BackendRef
	rec   *Record
	set   *upstream.Set
	tried []*upstream.Host
	// host is the endpoint of the attempt under way, begun; nil once
	// it failed.
	host *upstream.Host
}

func newAttempts(o *Options, b *router.BackendRef, rec *Record) attempts {
	return attempts{o: o, b: b, rec: rec, set: o.Sets().Get(b.Name)}
}

// next begins an endpoint to connect to; nil when none is left, and the
// connection is refused and counted.
func (a *attempts) next() *upstream.Host {
	if a.set != nil && len(a.tried) < a.o.ConnectAttempts {
		if h := a.set.Pick(a.tried); h != nil {
			a.tried = append(a.tried, h)
			a.rec.Endpoint = h.Address()
			h.Begin()
			a.host = h
			return h
		}
	}
	if len(a.tried) == 0 {
		a.o.refuse(a.rec, refusedNoBackend)
	} else {
		a.o.refuse(a.rec, refusedDial)
	}
	return nil
}

// failed ends the attempt under way, whose connect failed with err.
func (a *attempts) failed(err error) {
	h := a.host
	a.host = nil
	h.End()
	if h.Failed() {
		a.o.Log.Warn("endpoint ejected", "listener", a.o.Address, "backend", a.b.Name, "endpoint", h.Address(), "error", err)
	}
}

// header is the PROXY protocol header b asks for at the start of the
// connection of rec to c's local address, nil when it asks for none.
func header(b *router.BackendRef, rec *Record, c net.Conn) []byte {
	if b.ProxyProtocol == 0 {
		return nil
	}
	var local netip.AddrPort
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
		local = a.AddrPort()
	}
	return proxyHeader(b.ProxyProtocol, rec.Client, local)
}

// halfCloser is a backend connection: TCP, or TLS over it.
type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// dial connects to address within timeout, sends header (a PROXY
// protocol header) when there is one, then makes TLS as cfg says when it
// is not nil, all within the same timeout.
func dial(address string, timeout time.Duration, header []byte, cfg *tls.Config) (halfCloser, error) {
	deadline := time.Now().Add(timeout)
	conn, err := (&net.Dialer{Deadline: deadline, KeepAliveConfig: backendKeepAlive}).Dial("tcp", address)
	if err != nil {
		return nil, err
	}
	tc := conn.(*net.TCPConn)
	if len(header) == 0 && cfg == nil {
		return tc, nil
	}
	if err := tc.SetDeadline(deadline); err != nil {
		tc.Close()
		return nil, err
	}
	if _, err := tc.Write(header); err != nil {
		tc.Close()
		return nil, err
	}
	var backend halfCloser = tc
	if cfg != nil {
		if cfg.ServerName == "" {
			// As tls.Dialer does: the name dialled.
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(address)
		}
		tlsConn := tls.Client(tc, cfg)
		if err := tlsConn.Handshake(); err != nil {
			tc.Close()
			return nil, err
		}
		backend = tlsConn
	}
	if err := tc.SetDeadline(time.Time{}); err != nil {
		tc.Close()
		return nil, err
	}
	return backend, nil
}

// backendKeepAlive turns keep-alive probes on with the system's timings,
// as nginx's proxy_socket_keepalive does: one system call per backend
// connection where Go's defaults (15 s probes) take four, a tenth of what
// a short connection costs.
var backendKeepAlive = net.KeepAliveConfig{Enable: true, Idle: -1, Interval: -1, Count: -1}

// backendConfig is the client configuration of identity b, made by build
// once per state.
func (st *state) backendConfig(b *router.BackendTLS, build func(*router.BackendTLS) (*tls.Config, error)) (*tls.Config, error) {
	type made struct {
		cfg *tls.Config
		err error
	}
	if m, ok := st.backendTLS.Load(b); ok {
		return m.(made).cfg, m.(made).err
	}
	cfg, err := build(b)
	st.backendTLS.Store(b, made{cfg, err})
	return cfg, err
}

// pipe copies bytes both ways until both directions ended, passing on a
// half-close, and returns the bytes copied from client to backend and
// back. io.Copy between two *net.TCPConn splices on Linux, so long
// transfers stay in the kernel: raw is the client's socket for that, nil
// when it must be read through client. Either way client is what is
// closed, so that the proxy's accounting of it sees the close.
func pipe(client net.Conn, raw *net.TCPConn, backend halfCloser) (in, out int64) {
	// ended counts the directions that ended: the second need not pass
	// its half-close on, as both connections close at once after it.
	var ended atomic.Int32
	var wg sync.WaitGroup
	wg.Go(func() {
		var err error
		in, err = io.Copy(backend, readerOf(client, raw))
		if err != nil {
			// A reset or a closed connection: nothing more goes
			// either way.
			backend.Close()
			client.Close()
			return
		}
		if ended.Add(1) == 1 {
			_ = backend.CloseWrite()
		}
	})
	var err error
	out, err = io.Copy(writerOf(client, raw), backend)
	switch {
	case err != nil:
		backend.Close()
		client.Close()
	case ended.Add(1) > 1:
	case raw != nil:
		_ = raw.CloseWrite()
	default:
		client.Close()
	}
	wg.Wait()
	return in, out
}

func readerOf(c net.Conn, raw *net.TCPConn) io.Reader {
	if raw != nil {
		return raw
	}
	return c
}

func writerOf(c net.Conn, raw *net.TCPConn) io.Writer {
	if raw != nil {
		return raw
	}
	return c
}

// alertDecodeError is the TLS alert of a malformed ClientHello (RFC 8446
// section 6).
const alertDecodeError = 50

// decodeError is that alert, fatal, in a TLS 1.0 record, which every
// client version reads before its handshake picked one.
var decodeError = []byte{21, 3, 1, 0, 2, 2, alertDecodeError}

// writeAlert sends alert. It does not wait: the connection is closed
// next either way.
func writeAlert(c net.Conn, alert []byte) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write(alert)
}
