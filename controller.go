package main

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostgate/hostgate/proxy"
	"github.com/hostgate/hostgate/watch"
)

// controller takes each translated snapshot to the proxy: it compiles the
// listeners' routes and certificates, applies them, and swaps endpoint sets.
// A snapshot whose listeners did not change only swaps endpoints, so pod
// churn never recompiles routes.
type controller struct {
	srv     *proxy.Server
	current *atomic.Pointer[generation]
	log     *slog.Logger

	last    *watch.Snapshot
	number  uint64
	metrics controllerMetrics

	// mu keeps retire's timer out of a publish. retiring are the endpoint
	// sets no longer listed, with when they go from the proxy: a request
	// reads its listener's routes and then the endpoint sets, and one that
	// read the routes of the generation before may look a set of theirs up
	// after the publish that stopped using it (a route moved to another
	// Service answered 503 in between, TestBackendSwitchFailsNoRequest).
	mu          sync.Mutex
	retiring    map[string]time.Time
	retireTimer *time.Timer
}

// retireAfter is how long an endpoint set no longer listed stays in the
// proxy for requests that chose their route before it went.
const retireAfter = time.Second

type controllerMetrics struct {
	generation  prometheus.Gauge
	lastChange  prometheus.Gauge
	compileTime prometheus.Histogram
	applyErrors prometheus.Counter
	annotations *prometheus.GaugeVec
}

func newController(srv *proxy.Server, current *atomic.Pointer[generation], log *slog.Logger, reg prometheus.Registerer) *controller {
	m := controllerMetrics{
		generation: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hostgate_config_generation", Help: "Number of the configuration being served; it grows with every change.",
		}),
		lastChange: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hostgate_config_last_change_timestamp_seconds", Help: "When the served configuration last changed (Unix time).",
		}),
		compileTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "hostgate_config_compile_duration_seconds", Help: "Time to compile routes and certificates of a new configuration.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		applyErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hostgate_config_apply_errors_total", Help: "Configurations of which some listener could not be opened.",
		}),
	}
	m.annotations = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hostgate_ingress_annotations",
		Help: "Ingresses of ours that carry each ingress-nginx annotation, by what hostgate does with it (honoured, ignored, refused, invalid).",
	}, []string{"annotation", "outcome"})
	reg.MustRegister(m.generation, m.lastChange, m.compileTime, m.applyErrors, m.annotations)
	return &controller{srv: srv, current: current, log: log, metrics: m, retiring: map[string]time.Time{}}
}

// findings are what translation found besides the Snapshot: the problems
// (objects or fields it left out) and the outcome of each ingress-nginx
// annotation. *watch.Reports has them.
type findings interface {
	Problems() []string
	IngressAnnotations() []watch.IngressAnnotations
}

// publish is called by the source, one snapshot at a time, with the
// findings of its translation (nil for none). They are asked for once the
// proxy serves the snapshot: with 10,000 routes, finding the problems
// takes milliseconds.
func (c *controller) publish(snap *watch.Snapshot, found findings) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.retire(time.Now())
	// Only the endpoint sets that changed go to the proxy: with 10,000 of
	// them, converting and comparing them all was a good part of a change.
	var lastEndpoints *watch.EndpointSets
	if c.last != nil {
		lastEndpoints = c.last.Endpoints
	}
	changed, removed := endpointChanges(lastEndpoints, snap)
	endpointsChanged := len(changed) > 0 || len(removed) > 0
	if c.last != nil && sameListeners(c.last.Listeners, snap.Listeners) {
		if len(changed) > 0 {
			c.srv.ChangeEndpoints(proxyEndpoints(changed), nil)
		}
		c.retireLater(removed)
		if gen := c.current.Load(); gen != nil {
			next := *gen
			adopted := next.adoptRoutes(snap.Listeners)
			c.describeFindings(&next, found)
			if adopted || !slices.Equal(gen.Problems, next.Problems) || !slices.EqualFunc(gen.Annotations, next.Annotations, sameIngressAnnotations) {
				c.current.Store(&next)
			}
		}
		c.last = snap
		c.log.Debug("endpoints updated", "endpoint_sets", snap.Endpoints.Len(), "changed", endpointsChanged)
		return
	}
	c.number++
	start := time.Now()
	gen := compileSnapshot(snap, c.number, c.current.Load(), c.log)
	compiled := time.Now()
	// New and changed endpoint sets go before the routes, so that the new
	// generation's routes never find their backends missing; sets no
	// longer listed go a while after, as the last generation's routes may
	// use them until Apply returns and requests that chose a route of
	// theirs a little longer (a route moved to another Service got 503s
	// in between).
	if len(changed) > 0 {
		c.srv.ChangeEndpoints(proxyEndpoints(changed), nil)
	}
	if err := c.srv.Apply(gen.config); err != nil {
		c.metrics.applyErrors.Inc()
		c.log.Error("some listeners could not be opened", "generation", gen.Number, "error", err)
	}
	c.retireLater(removed)
	applied := time.Now()
	c.describeFindings(gen, found)
	c.current.Store(gen)
	c.last = snap
	c.metrics.generation.Set(float64(gen.Number))
	c.metrics.lastChange.SetToCurrentTime()
	c.metrics.compileTime.Observe(compiled.Sub(start).Seconds())
	c.log.Info("configuration applied", "generation", gen.Number, "listeners", len(gen.Listeners),
		"endpoint_sets", snap.Endpoints.Len(), "left_out", len(gen.LeftOut),
		"compile_seconds", compiled.Sub(start).Seconds(), "apply_seconds", applied.Sub(compiled).Seconds())
}

// retireLater has the endpoint sets removed go from the proxy after
// retireAfter, unless a snapshot lists them again before.
func (c *controller) retireLater(removed []string) {
	at := time.Now().Add(retireAfter)
	for _, name := range removed {
		c.retiring[name] = at
	}
}

// retire takes from the proxy the sets whose time came and that the last
// snapshot does not list (a snapshot that lists one again gave it to the
// proxy already), and has itself called again for the others. c.mu is
// held.
func (c *controller) retire(now time.Time) {
	var due []string
	var next time.Time
	for name, at := range c.retiring {
		_, listed := c.last.Endpoints.Get(name)
		switch {
		case listed:
			delete(c.retiring, name)
		case !at.After(now):
			delete(c.retiring, name)
			due = append(due, name)
		case next.IsZero() || at.Before(next):
			next = at
		}
	}
	if len(due) > 0 {
		c.srv.ChangeEndpoints(nil, due)
	}
	if next.IsZero() {
		return
	}
	wait := next.Sub(now)
	if c.retireTimer == nil {
		c.retireTimer = time.AfterFunc(wait, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.retire(time.Now())
		})
		return
	}
	c.retireTimer.Reset(wait)
}

// describeFindings puts found into gen, and counts the annotations of
// each kind and outcome in the metric.
func (c *controller) describeFindings(gen *generation, found findings) {
	gen.Problems, gen.Annotations = nil, nil
	if found != nil {
		gen.Problems, gen.Annotations = found.Problems(), found.IngressAnnotations()
	}
	c.metrics.annotations.Reset()
	for _, ing := range gen.Annotations {
		for _, o := range ing.Annotations {
			c.metrics.annotations.WithLabelValues(o.Annotation, string(o.Outcome)).Inc()
		}
	}
}

func sameIngressAnnotations(a, b watch.IngressAnnotations) bool {
	return a.Ingress == b.Ingress && slices.Equal(a.Annotations, b.Annotations)
}
