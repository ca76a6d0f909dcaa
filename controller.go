package main

import (
	"log/slog"
	"slices"
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
}

type controllerMetrics struct {
	generation  prometheus.Gauge
	lastChange  prometheus.Gauge
	compileTime prometheus.Histogram
	applyErrors prometheus.Counter
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
	reg.MustRegister(m.generation, m.lastChange, m.compileTime, m.applyErrors)
	return &controller{srv: srv, current: current, log: log, metrics: m}
}

// publish is called by the source, one snapshot at a time, with what
// lists the problems translation found (objects or fields it left out; nil
// for none). The list is asked for once the proxy serves the snapshot:
// with 10,000 routes, finding it takes milliseconds.
func (c *controller) publish(snap *watch.Snapshot, problems func() []string) {
	// Only the endpoint sets that changed go to the proxy: with 10,000 of
	// them, converting and comparing them all was a good part of a change.
	var lastEndpoints map[string][]watch.Endpoint
	if c.last != nil {
		lastEndpoints = c.last.Endpoints
	}
	changed, removed := endpointChanges(lastEndpoints, snap.Endpoints)
	endpointsChanged := len(changed) > 0 || len(removed) > 0
	updateEndpoints := func() {
		if endpointsChanged {
			c.srv.ChangeEndpoints(proxyEndpoints(changed), removed)
		}
	}
	if c.last != nil && sameListeners(c.last.Listeners, snap.Listeners) {
		updateEndpoints()
		if gen, list := c.current.Load(), listProblems(problems); gen != nil && !slices.Equal(gen.Problems, list) {
			next := *gen
			next.Problems = list
			c.current.Store(&next)
		}
		c.last = snap
		c.log.Debug("endpoints updated", "endpoint_sets", len(snap.Endpoints), "changed", endpointsChanged)
		return
	}
	c.number++
	start := time.Now()
	gen := compileSnapshot(snap, c.number, c.current.Load(), c.log)
	compiled := time.Now()
	// Endpoints go first so that routes of the new generation never find
	// their backends missing.
	updateEndpoints()
	if err := c.srv.Apply(gen.config); err != nil {
		c.metrics.applyErrors.Inc()
		c.log.Error("some listeners could not be opened", "generation", gen.Number, "error", err)
	}
	applied := time.Now()
	gen.Problems = listProblems(problems)
	c.current.Store(gen)
	c.last = snap
	c.metrics.generation.Set(float64(gen.Number))
	c.metrics.lastChange.SetToCurrentTime()
	c.metrics.compileTime.Observe(compiled.Sub(start).Seconds())
	c.log.Info("configuration applied", "generation", gen.Number, "listeners", len(gen.Listeners),
		"endpoint_sets", len(snap.Endpoints), "left_out", len(gen.LeftOut),
		"compile_seconds", compiled.Sub(start).Seconds(), "apply_seconds", applied.Sub(compiled).Seconds())
}

func listProblems(problems func() []string) []string {
	if problems == nil {
		return nil
	}
	return problems()
}
