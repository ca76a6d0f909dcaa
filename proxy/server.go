package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/l4"
	"github.com/hostgate/hostgate/proxy/upstream"
)

// Server runs the listeners of the current Config. It is safe for
// concurrent use; Apply, ChangeEndpoints and UpdateEndpoints are meant for
// one control loop.
type Server struct {
	opts Options
	log  *slog.Logger
	fwd  *forwarder
	// h1 is the HTTP/1.1 engine's pool of backend connections.
	h1      *upstream.Pool
	metrics *metrics
	// connMetrics are the series of client connections.
	connMetrics *guard.Metrics
	// l4metrics are the Layer 4 listeners' series; nil without a
	// Registerer.
	l4metrics *l4.Metrics
	// conns are the open client connections of every listener.
	conns *guard.Registry

	// trusted are Options.TrustedProxies; server is the Server field's
	// value, nil when there is none.
	trusted guard.PrefixSet
	server  []string

	registry *upstream.Registry
	// guards owns the state of access filters; Apply's.
	guards *guardRegistry
	sets   atomic.Pointer[map[string]*upstream.Set]

	applied  atomic.Bool
	draining atomic.Bool

	mu        sync.Mutex // serializes Apply and Shutdown
	listeners map[string]*listener
	stopped   bool
	// retiring counts listeners removed by Apply that are still draining.
	retiring sync.WaitGroup
}

// New returns a Server with no listeners. Zero fields of opts take their
// defaults.
func New(opts Options) (*Server, error) {
	opts, err := opts.complete()
	if err != nil {
		return nil, fmt.Errorf("proxy options: %w", err)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register proxy metrics: %w", err)
	}
	cm, err := guard.NewMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register proxy metrics: %w", err)
	}
	var l4m *l4.Metrics
	if opts.Registerer != nil {
		if l4m, err = l4.NewMetrics(opts.Registerer); err != nil {
			return nil, fmt.Errorf("register proxy metrics: %w", err)
		}
	}
	policy := upstream.RoundRobin
	if opts.LoadBalancing == LeastRequest {
		policy = upstream.LeastRequest
	}
	s := &Server{
		opts:        opts,
		log:         opts.Logger,
		metrics:     m,
		connMetrics: cm,
		l4metrics:   l4m,
		registry: upstream.NewRegistry(policy, upstream.Health{
			FailureThreshold: opts.FailureThreshold,
			BaseEjection:     opts.EjectionTime,
			MaxEjection:      opts.MaxEjectionTime,
		}),
		listeners: map[string]*listener{},
		guards:    newGuardRegistry(),
	}
	s.trusted = opts.TrustedProxies
	if !opts.DisableServerHeader {
		s.server = []string{serverName}
	}
	s.conns = guard.NewRegistry(opts.MaxConnections, opts.MaxConnectionsPerAddress, cm)
	s.fwd = newForwarder(s)
	s.h1 = upstream.NewPool(opts.DialTimeout, opts.MaxIdleConnsPerEndpoint, opts.UpstreamIdleTimeout)
	empty := map[string]*upstream.Set{}
	s.sets.Store(&empty)
	return s, nil
}

// Apply makes cfg the listener set: it opens the sockets of new listeners,
// swaps routes and certificates of listeners that stay (their connections
// are not touched), and drains listeners that are gone within
// ShutdownGrace. A listener that cannot be opened is reported in the
// returned error and the others are applied all the same.
func (s *Server) Apply(cfg Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("apply proxy config: server is shut down")
	}
	var errs []error
	wanted := make(map[string]*Listener, len(cfg.Listeners))
	for i := range cfg.Listeners {
		l := &cfg.Listeners[i]
		if _, dup := wanted[l.key()]; dup {
			errs = append(errs, fmt.Errorf("apply listener %s: address listed twice", l.key()))
			continue
		}
		wanted[l.key()] = l
	}
	for addr, cur := range s.listeners {
		if w, ok := wanted[addr]; ok && w.Protocol == cur.protocol {
			continue
		}
		delete(s.listeners, addr)
		// Closing the sockets now frees the address for a listener that
		// replaces this one with another protocol; its series go now too,
		// before such a replacement resolves the same ones.
		cur.stopAccepting()
		cur.stats.forget()
		s.retiring.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownGrace)
			defer cancel()
			cur.drain(ctx)
		})
	}
	for addr, w := range wanted {
		if cur, ok := s.listeners[addr]; ok {
			cur.publish(w)
			continue
		}
		l, err := s.openListener(w)
		if err != nil {
			errs = append(errs, fmt.Errorf("open listener %s %s: %w", w.Protocol, addr, err))
			continue
		}
		s.listeners[addr] = l
	}
	s.fwd.dropUnusedTransports()
	s.guards.dropUnused()
	s.applied.Store(true)
	return errors.Join(errs...)
}

// UpdateEndpoints replaces every endpoint set, keyed by
// router.BackendRef.Name: all at once, where ChangeEndpoints takes only
// what changed. Routes need not be recompiled; endpoints keep
// their health and connection pools across calls.
func (s *Server) UpdateEndpoints(endpoints map[string][]Endpoint) {
	sets := s.registry.Sets(endpoints)
	s.sets.Store(&sets)
}

// ChangeEndpoints is UpdateEndpoints of the endpoint sets last given with
// those of changed (new or changed names) and without the names removed.
func (s *Server) ChangeEndpoints(changed map[string][]Endpoint, removed []string) {
	sets := s.registry.Change(changed, removed)
	s.sets.Store(&sets)
}

// EndpointState is one endpoint of a backend as Endpoints reports it.
type EndpointState = upstream.EndpointState

// Endpoints returns the state of every endpoint of the current endpoint
// sets, keyed by router.BackendRef.Name, for /debug/routes. It reads what
// requests update without stopping them, so the fields of one endpoint may
// be a moment apart.
func (s *Server) Endpoints() map[string][]EndpointState {
	sets := *s.sets.Load()
	out := make(map[string][]EndpointState, len(sets))
	for name, set := range sets {
		out[name] = set.Endpoints()
	}
	return out
}

// Ready reports whether the server serves a configuration and is not
// shutting down: what /readyz answers.
func (s *Server) Ready() bool {
	return s.applied.Load() && !s.draining.Load()
}

// Start runs until ctx is done, then shuts down as Shutdown does. It
// returns nil even when the grace period ran out, as stopping is still
// what was asked for; that case is logged.
func (s *Server) Start(ctx context.Context) error {
	<-ctx.Done()
	if err := s.Shutdown(context.Background()); err != nil {
		s.log.Warn("proxy shutdown cut requests short", "error", err)
	}
	return nil
}

// Shutdown stops the server gracefully: Ready turns false at once, the
// listeners keep accepting for ShutdownDelay with answers that close their
// connections, then stop accepting, and
// requests and streams in flight get ShutdownGrace to finish before their
// connections are closed. ctx cuts both waits short. The error says
// whether connections had to be closed with work in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	select {
	case <-time.After(s.opts.ShutdownDelay):
	case <-ctx.Done():
	}
	s.mu.Lock()
	s.stopped = true
	listeners := s.listeners
	s.listeners = nil
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, s.opts.ShutdownGrace)
	defer cancel()
	var wg sync.WaitGroup
	var forced atomic.Int32
	for _, l := range listeners {
		l.stopAccepting()
		wg.Go(func() {
			if !l.drain(ctx) {
				forced.Add(1)
			}
		})
	}
	wg.Wait()
	s.retiring.Wait()
	s.h1.Close()
	if n := forced.Load(); n > 0 {
		return fmt.Errorf("drain listeners: grace period ended with work in flight on %d listeners", n)
	}
	return nil
}
