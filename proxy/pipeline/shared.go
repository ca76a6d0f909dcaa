package pipeline

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore"
)

// Config is what the request path takes of the server's options
// (proxy.Options says what each means); the server has filled in their
// defaults.
type Config struct {
	IdleTimeout             time.Duration
	DialTimeout             time.Duration
	UpstreamIdleTimeout     time.Duration
	MaxIdleConnsPerEndpoint int
	ConnectAttempts         int
	UpstreamTLS             *tls.Config
	MinRequestBodyRate      int64
	RequestBodyGrace        time.Duration
	RequestBodyTimeout      time.Duration
	TrustedProxies          guard.PrefixSet
	DisableRequestID        bool
	DisableServerHeader     bool
	// Bridge has requests that net/http's HTTP/2 and HTTP/3 servers
	// take, to HTTP/1.1 backends, go over Pool (bridge.go): set unless
	// the HTTP/1.1 engine is net/http's (the loop's HTTPS listeners and
	// hand-offs are the native engine's, which owns Pool).
	Bridge bool
	// StdlibHTTP2 speaks HTTP/2 to backends with net/http's Transport
	// rather than proxy/h2's; it is set where net/http's server serves
	// HTTP/2 clients too (relaysInformational).
	StdlibHTTP2 bool
	// Pool holds the HTTP/1.1 connections to endpoints; its owner closes
	// it.
	Pool       *upstream.Pool
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	AccessLog  func(*AccessRecord)
}

// MaxConnectAttempts bounds Config.ConnectAttempts, so that the endpoints
// tried fit in a fixed array on the request path.
const MaxConnectAttempts = 8

// Shared is the request path's state that every listener shares: the
// endpoint sets, the state of access filters and the transports to
// backends that outlive a configuration, and the metrics.
type Shared struct {
	cfg     Config
	log     *slog.Logger
	fwd     *forwarder
	h1      *upstream.Pool
	metrics *metrics
	// server is the Server field's value, nil when there is none.
	server []string
	// guards owns the state of access filters; Apply's.
	guards   *guardRegistry
	sets     atomic.Pointer[upstream.Sets]
	draining atomic.Bool
}

// New returns the request path of cfg, its metrics registered with
// cfg.Registerer.
func New(cfg Config) (*Shared, error) {
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register proxy metrics: %w", err)
	}
	s := &Shared{cfg: cfg, log: cfg.Logger, h1: cfg.Pool, metrics: m, guards: newGuardRegistry()}
	if !cfg.DisableServerHeader {
		s.server = []string{ServerName}
	}
	s.fwd = newForwarder(s)
	s.sets.Store(&upstream.Sets{})
	return s, nil
}

// SetEndpoints makes sets, keyed by router.BackendRef.Name, the endpoint
// sets requests go to.
func (s *Shared) SetEndpoints(sets *upstream.Sets) { s.sets.Store(sets) }

// Endpoints are the current endpoint sets.
func (s *Shared) Endpoints() *upstream.Sets { return s.sets.Load() }

// EndApply forgets the state that no table published since the last call
// uses: the transports of backends' TLS identities (only their idle
// connections close) and the state of access filters. Apply calls it
// once every listener has its table, under the lock that serializes
// publishing.
func (s *Shared) EndApply() {
	s.fwd.dropUnusedTransports()
	s.guards.dropUnused()
}

// StartDraining makes every answer from now on close its connection
// (Connection: close, or GOAWAY on h2), so that clients leave while their
// answers still arrive.
func (s *Shared) StartDraining() { s.draining.Store(true) }

// Draining reports whether StartDraining was called.
func (s *Shared) Draining() bool { return s.draining.Load() }

// Listener is the request path of one listener: its published table and
// certificates, its metrics and the requests in flight on it.
type Listener struct {
	s *Shared
	// name is the listener's address, its metrics' label.
	name   string
	scheme string
	port   int
	alt    []string // Alt-Svc value, shared by every response

	state atomic.Pointer[listenerState]
	// inflight counts requests in flight, hijacked ones (WebSocket, h2c
	// Upgrade) included, which http.Server.Shutdown does not wait for.
	inflight atomic.Int64
	stats    *listenerMetrics
	upgrade  func(http.ResponseWriter, *http.Request) bool
}

// listenerState is what Publish swaps on a listener that stays.
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

// NewListener returns the request path of the listener name (its
// address), whose clients speak scheme ("http" or "https"; "" for a
// Layer 4 listener, which only has metrics) on port, with alt the Alt-Svc
// of its answers, if any. upgrade, when set, is offered the HTTP/1.1
// requests and reports whether it served one itself (h2c's Upgrade).
func (s *Shared) NewListener(name, scheme string, port int, alt []string, upgrade func(http.ResponseWriter, *http.Request) bool) *Listener {
	return &Listener{s: s, name: name, scheme: scheme, port: port, alt: alt, upgrade: upgrade, stats: s.metrics.listener(name)}
}

// Publish makes routes and tls the listener's; requests under way finish
// with the ones they started with. Only Apply calls it, under the lock
// that serializes publishing.
func (l *Listener) Publish(routes *router.Table, tls *tlsstore.Store) {
	l.state.Store(&listenerState{routes: routes, tls: tls, backendTLS: l.s.fwd.backendTransports(routes), guards: l.s.guards.resolve(routes)})
	l.stats.prune(routes)
}

// TLSStore is the listener's current certificate store.
func (l *Listener) TLSStore() *tlsstore.Store { return l.state.Load().tls }

// InFlight is the number of requests in flight on the listener.
func (l *Listener) InFlight() int64 { return l.inflight.Load() }

// Forget deletes the listener's series, once it is removed.
func (l *Listener) Forget() { l.stats.forget() }

// ServeHTTP is the listener's entry for net/http's servers (HTTP/1.1,
// HTTP/2, h2c), proxy/h2's and HTTP/3's.
func (l *Listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	if l.upgrade != nil && r.ProtoMajor == 1 && l.upgrade(w, r) {
		return
	}
	if r.ProtoMajor >= 2 {
		reserveStack(false)
	}
	if l.s.draining.Load() && r.ProtoMajor < 3 && len(r.Header["Upgrade"]) == 0 {
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
	if l.s.server != nil {
		// Every answer made here has it; a proxied one has the
		// backend's instead, if it sent one (modifyResponse,
		// relayResponse).
		w.Header()["Server"] = l.s.server
	}
	l.s.serve(w, r, l, l.state.Load())
}

// noteHTTP2 counts c, the connection of an HTTP/2 request, as h2, or h2c
// on a cleartext listener.
func (l *Listener) noteHTTP2(c *guard.TrackedConn) {
	if l.scheme == "http" {
		c.SetProtocol(guard.ProtoH2C)
	} else {
		c.SetProtocol(guard.ProtoH2)
	}
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

// requestBodyLimits are the pacer's bounds of request bodies.
func (c *Config) requestBodyLimits() paceLimits {
	return paceLimits{minRate: max(c.MinRequestBodyRate, 0), grace: c.RequestBodyGrace, limit: c.RequestBodyTimeout}
}
