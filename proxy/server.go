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
	"github.com/hostgate/hostgate/proxy/pipeline"
	"github.com/hostgate/hostgate/proxy/upstream"
)

// Server runs the listeners of the current Config. It is safe for
// concurrent use; Apply, ChangeEndpoints and UpdateEndpoints are meant for
// one control loop.
type Server struct {
	opts Options
	log  *slog.Logger
	// path is the request path of every HTTP listener.
	path *pipeline.Shared
	// pool holds the HTTP/1.1 connections to endpoints of the HTTP/1.1
	// engine and the bridge.
	pool *upstream.Pool
	// connMetrics are the series of client connections.
	connMetrics *guard.Metrics
	// l4metrics are the Layer 4 listeners' series; nil without a
	// Registerer.
	l4metrics *l4.Metrics
	// conns are the open client connections of every listener.
	conns *guard.Registry

	registry *upstream.Registry

	applied atomic.Bool

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
		connMetrics: cm,
		l4metrics:   l4m,
		registry: upstream.NewRegistry(policy, upstream.Health{
			FailureThreshold: opts.FailureThreshold,
			BaseEjection:     opts.EjectionTime,
			MaxEjection:      opts.MaxEjectionTime,
		}),
		listeners: map[string]*listener{},
	}
	s.conns = guard.NewRegistry(opts.MaxConnections, opts.MaxConnectionsPerAddress, cm)
	s.pool = upstream.NewPool(opts.DialTimeout, opts.MaxIdleConnsPerEndpoint, opts.UpstreamIdleTimeout)
	s.path, err = pipeline.New(pipeline.Config{
		IdleTimeout:             opts.IdleTimeout,
		DialTimeout:             opts.DialTimeout,
		UpstreamIdleTimeout:     opts.UpstreamIdleTimeout,
		MaxIdleConnsPerEndpoint: opts.MaxIdleConnsPerEndpoint,
		ConnectAttempts:         opts.ConnectAttempts,
		UpstreamTLS:             opts.UpstreamTLS,
		MinRequestBodyRate:      opts.MinRequestBodyRate,
		RequestBodyGrace:        opts.RequestBodyGrace,
		RequestBodyTimeout:      opts.RequestBodyTimeout,
		TrustedProxies:          opts.TrustedProxies,
		DisableRequestID:        opts.DisableRequestID,
		DisableServerHeader:     opts.DisableServerHeader,
		Bridge:                  opts.HTTP1Engine != EngineStdlib,
		StdlibHTTP2:             opts.HTTP2Engine == EngineStdlib,
		Pool:                    s.pool,
		Logger:                  opts.Logger,
		Registerer:              opts.Registerer,
		AccessLog:               opts.AccessLog,
	})
	if err != nil {
		return nil, err
	}
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
		cur.path.Forget()
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
	s.path.EndApply()
	s.applied.Store(true)
	return errors.Join(errs...)
}

// UpdateEndpoints replaces every endpoint set, keyed by
// router.BackendRef.Name: all at once, where ChangeEndpoints takes only
// what changed. Routes need not be recompiled; endpoints keep
// their health and connection pools across calls.
func (s *Server) UpdateEndpoints(endpoints map[string][]Endpoint) {
	s.path.SetEndpoints(s.registry.Sets(endpoints))
}

// ChangeEndpoints is UpdateEndpoints of the endpoint sets last given with
// those of changed (new or changed names) and without the names removed.
func (s *Server) ChangeEndpoints(changed map[string][]Endpoint, removed []string) {
	s.path.SetEndpoints(s.registry.Change(changed, removed))
}

// EndpointState is one endpoint of a backend as Endpoints reports it.
type EndpointState = upstream.EndpointState

// Endpoints returns the state of every endpoint of the current endpoint
// sets, keyed by router.BackendRef.Name, for /debug/routes. It reads what
// requests update without stopping them, so the fields of one endpoint may
// be a moment apart.
func (s *Server) Endpoints() map[string][]EndpointState {
	sets := s.path.Endpoints()
	out := make(map[string][]EndpointState, sets.Len())
	for name, set := range sets.All() {
		out[name] = set.Endpoints()
	}
	return out
}

// Ready reports whether the server serves a configuration and is not
// shutting down: what /readyz answers.
func (s *Server) Ready() bool {
	return s.applied.Load() && !s.path.Draining()
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
	s.path.StartDraining()
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
	s.pool.Close()
	if n := forced.Load(); n > 0 {
		return fmt.Errorf("drain listeners: grace period ended with work in flight on %d listeners", n)
	}
	return nil
}
