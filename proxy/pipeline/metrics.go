package pipeline

// The data plane's Prometheus metrics.
//
// The request path never looks a series up by its labels, which would hash
// them and allocate: series are resolved once per listener, route and
// status code and then found through pointers. A listener's route series
// are cached per published routing table (listenerState), keyed by the
// *router.Route a lookup returns; status codes per route are a short list
// that grows copy-on-write. Both are read without a lock.
//
// Labels stay bounded: routes come from configuration, codes from HTTP,
// and the series of routes and listeners that Apply removes are deleted.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostgate/hostgate/router"
)

type metrics struct {
	requests         *prometheus.CounterVec
	duration         *prometheus.HistogramVec
	upstreamDuration *prometheus.HistogramVec
	retries          *prometheus.CounterVec
	connectRetries   prometheus.Counter
	// slowBodies counts request bodies cut by their pacer, by reason.
	slowBodies     *prometheus.CounterVec
	ejections      prometheus.Counter
	upstreamErrors [numErrorKinds]prometheus.Counter
}

// errorKind classifies a failed exchange with a backend.
type errorKind uint8

const (
	errConnectRefused errorKind = iota
	errConnectTimeout
	errReset
	errTimeout
	errTLS
	errNoEndpoint
	errOther
	numErrorKinds
)

var errorKindNames = [numErrorKinds]string{"connect_refused", "connect_timeout", "reset", "timeout", "tls", "no_endpoint", "other"}

// latencyBuckets span 0.5ms to about 2 minutes.
var latencyBuckets = prometheus.ExponentialBuckets(0.0005, 4, 10)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostgate_http_requests_total",
			Help: "Requests served, by listener, route (\"Kind namespace/name\", empty when none matched) and status code (\"aborted\" when the client left first).",
		}, []string{"listener", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hostgate_http_request_duration_seconds",
			Help:    "Time from a request's header to the end of its response, by listener and route.",
			Buckets: latencyBuckets,
		}, []string{"listener", "route"}),
		upstreamDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hostgate_upstream_response_duration_seconds",
			Help:    "Time from sending a request to a backend to receiving its response header, by listener and route.",
			Buckets: latencyBuckets,
		}, []string{"listener", "route"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostgate_http_retries_total",
			Help: "Requests sent to a backend again under their rule's retry policy, by listener and route.",
		}, []string{"listener", "route"}),
		connectRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hostgate_upstream_connect_retries_total",
			Help: "Requests moved to another endpoint after failing to connect, or after failing otherwise when safe to send again (idempotent, body unread).",
		}),
		slowBodies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostgate_request_body_timeouts_total",
			Help: "Requests answered 408 because their body came too slowly (reason=rate, --request-body-min-rate) or took too long (reason=timeout, --request-body-timeout).",
		}, []string{"reason"}),
		ejections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hostgate_upstream_ejections_total",
			Help: "Endpoints taken out of rotation by passive health checking.",
		}),
	}
	upstreamErrors := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostgate_upstream_errors_total",
		Help: "Failed attempts to get a response from a backend, by kind.",
	}, []string{"kind"})
	for kind, name := range errorKindNames {
		m.upstreamErrors[kind] = upstreamErrors.WithLabelValues(name)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.duration, m.upstreamDuration, m.retries, m.connectRetries, m.slowBodies, m.ejections, upstreamErrors} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	for _, reason := range []string{"rate", "timeout"} {
		m.slowBodies.WithLabelValues(reason) // shown at 0 from the start
	}
	return m, nil
}

// upstreamError counts a failed attempt to reach a backend.
func (m *metrics) upstreamError(err error) {
	m.upstreamErrors[classify(err)].Inc()
}

// classify tells the kind of a backend error. Connecting comes first, as a
// dial error can also be a timeout.
func classify(err error) errorKind {
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "dial" {
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return errConnectRefused
		case op.Timeout():
			return errConnectTimeout
		}
	}
	if isTLSError(err) {
		return errTLS
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errReset
	}
	if isTimeout(err) {
		return errTimeout
	}
	return errOther
}

func isTLSError(err error) bool {
	_, alert := errors.AsType[tls.AlertError](err)
	_, record := errors.AsType[tls.RecordHeaderError](err)
	_, verify := errors.AsType[*tls.CertificateVerificationError](err)
	_, authority := errors.AsType[x509.UnknownAuthorityError](err)
	_, hostname := errors.AsType[x509.HostnameError](err)
	return alert || record || verify || authority || hostname
}

// listenerMetrics are one listener's route series. They outlive the
// routing tables the listener serves, so that a route's series are
// resolved again only when the route comes back after being removed.
type listenerMetrics struct {
	m       *metrics
	name    string
	noRoute *routeMetrics

	mu     sync.Mutex // guards what follows; never taken per request once resolved
	routes map[router.RouteID]*routeMetrics
	// pruned is the Serial of the table last pruned against. suspects are
	// the routes whose series requests on another table made since: the
	// route may have gone already, so the next prune looks for them.
	pruned   uint64
	suspects []router.RouteID
}

func (m *metrics) listener(name string) *listenerMetrics {
	return &listenerMetrics{m: m, name: name, noRoute: m.route(name, ""), routes: map[router.RouteID]*routeMetrics{}}
}

// route returns the series of the route id of the table numbered serial
// (router.Table.Serial).
func (lm *listenerMetrics) route(id router.RouteID, serial uint64) *routeMetrics {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	rm := lm.routes[id]
	if rm == nil {
		rm = lm.m.route(lm.name, id.String())
		lm.routes[id] = rm
		// Any table but the one pruned against: a listener may be
		// published a table compiled before the one it had (one that
		// another listener with the same routes kept), so a request
		// still on the newer one has a higher serial than pruned.
		if serial != lm.pruned {
			lm.suspects = append(lm.suspects, id)
		}
	}
	return rm
}

// prune deletes the series of routes that routes no longer has.
func (lm *listenerMetrics) prune(routes *router.Table) {
	lm.mu.Lock()
	last, suspects := lm.pruned, lm.suspects
	lm.pruned, lm.suspects = routes.Serial(), nil
	if len(lm.routes) == 0 {
		lm.mu.Unlock()
		return
	}
	went, told := routes.GoneSince(last)
	if !told {
		// Every route with series is looked for.
		suspects = slices.Collect(maps.Keys(lm.routes))
	}
	lm.mu.Unlock()
	// Runs at every configuration change. A table recompiled from the last
	// one says what went, where walking its 10,000 routes was a twentieth
	// of a change; the routes to look for then are those whose series a
	// request on an older table made again, rarely any.
	gone := goneOf(routes, suspects)
	lm.mu.Lock()
	defer lm.mu.Unlock()
	for _, ids := range [][]router.RouteID{went, gone} {
		for _, id := range ids {
			if rm := lm.routes[id]; rm != nil {
				delete(lm.routes, id)
				rm.delete()
			}
		}
	}
}

// goneOf returns those of ids that routes (nil for none) does not have.
// Only routes that served a request have series, usually far fewer than
// the table's 10,000 routes: a set of every route in the table was a
// fifth of the garbage a route change made, so the set holds ids and the
// table is walked. Hashing a name is a third of hashing an ID, and most
// of the table's routes share no name with one of ids.
func goneOf(routes *router.Table, ids []router.RouteID) []router.RouteID {
	if len(ids) == 0 || routes == nil {
		return ids
	}
	left := make(map[router.RouteID]bool, len(ids))
	names := make(map[string]bool, len(ids))
	for _, id := range ids {
		left[id], names[id.Name] = true, true
	}
	for id := range routes.RouteIDs() {
		if !names[id.Name] {
			continue
		}
		delete(left, id)
		if len(left) == 0 {
			return nil
		}
	}
	return slices.Collect(maps.Keys(left))
}

// forget deletes every series of the listener. Requests still running on it
// count into series no longer exported.
func (lm *listenerMetrics) forget() {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	lm.noRoute.delete()
	for _, rm := range lm.routes {
		rm.delete()
	}
}

// routeMetrics are the series of one route on one listener.
type routeMetrics struct {
	m                  *metrics
	listener, route    string
	duration, upstream prometheus.Observer
	// retries is resolved at the route's first retry, so that routes
	// without a retry policy export no series for it.
	retries atomic.Pointer[prometheus.Counter]

	mu    sync.Mutex // serializes adding codes
	codes atomic.Pointer[[]codeCounter]
}

type codeCounter struct {
	code    int
	counter prometheus.Counter
}

func (m *metrics) route(listener, route string) *routeMetrics {
	return &routeMetrics{
		m: m, listener: listener, route: route,
		duration: m.duration.WithLabelValues(listener, route),
		upstream: m.upstreamDuration.WithLabelValues(listener, route),
	}
}

// requests returns the counter of status code (0: aborted). A route sees a
// handful of distinct codes, so scanning a short list beats a map.
func (rm *routeMetrics) requests(code int) prometheus.Counter {
	if c := findCode(rm.codes.Load(), code); c != nil {
		return c
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	codes := rm.codes.Load()
	if c := findCode(codes, code); c != nil {
		return c
	}
	label := "aborted"
	if code != 0 {
		label = strconv.Itoa(code)
	}
	c := rm.m.requests.WithLabelValues(rm.listener, rm.route, label)
	var grown []codeCounter
	if codes != nil {
		grown = slices.Clip(*codes)
	}
	grown = append(grown, codeCounter{code, c})
	rm.codes.Store(&grown)
	return c
}

// retried counts a retry. Racing first retries resolve the same series.
func (rm *routeMetrics) retried() {
	c := rm.retries.Load()
	if c == nil {
		counter := rm.m.retries.WithLabelValues(rm.listener, rm.route)
		c = &counter
		rm.retries.Store(c)
	}
	(*c).Inc()
}

func findCode(codes *[]codeCounter, code int) prometheus.Counter {
	if codes == nil {
		return nil
	}
	for _, c := range *codes {
		if c.code == code {
			return c.counter
		}
	}
	return nil
}

func (rm *routeMetrics) delete() {
	rm.m.requests.DeletePartialMatch(prometheus.Labels{"listener": rm.listener, "route": rm.route})
	rm.m.duration.DeleteLabelValues(rm.listener, rm.route)
	rm.m.upstreamDuration.DeleteLabelValues(rm.listener, rm.route)
	rm.m.retries.DeleteLabelValues(rm.listener, rm.route)
}

// routeStats returns the series of the route target belongs to, or of no
// route. The first request of a route after a publish resolves them.
func (l *Listener) routeStats(st *listenerState, target *router.Target) *routeMetrics {
	if target == nil {
		return l.stats.noRoute
	}
	if rm, ok := st.stats.Load(target.Route); ok {
		return rm.(*routeMetrics)
	}
	rm := l.stats.route(target.Route.ID, st.routes.Serial())
	st.stats.Store(target.Route, rm)
	return rm
}
