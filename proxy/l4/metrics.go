package l4

import (
	"sync"

	"github.com/hostgate/hostgate/router"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Layer 4 series, labelled by listener address and, once a
// connection has a route, by route ("TCPRoute namespace/name", as HTTP
// routes are in hostgate_requests_total).
type Metrics struct {
	refusedTotal *prometheus.CounterVec
	connsTotal   *prometheus.CounterVec
	connsOpen    *prometheus.GaugeVec
	bytesTotal   *prometheus.CounterVec
	// datagramsTotal counts the datagrams of UDP flows.
	datagramsTotal *prometheus.CounterVec
	// drainedTotal counts connections and flows closed DrainGrace after
	// their route or endpoint went away.
	drainedTotal *prometheus.CounterVec
	// idleClosedTotal counts connections closed after IdleTimeout
	// without a byte either way.
	idleClosedTotal *prometheus.CounterVec

	// routes are the listeners' and routes' series, with the connections
	// open on each: a route removed from its listener loses its series
	// at the first change after its last connection ended, so that what
	// that connection carried is scraped (and a gauge deleted under an
	// open connection would come back at -1 when it closed). Opening and
	// closing a connection is not a request's path: a mutex is cheap
	// here.
	mu     sync.Mutex
	routes map[routeSeries]int
}

type routeSeries struct {
	listener string
	route    string
}

// NewMetrics registers the series with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		refusedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostgate_l4_refused_total",
			Help: "Layer 4 connections closed before any byte reached a backend, by listener and reason (malformed_hello, hello_too_large, hello_timeout, not_tls, no_route, no_backend, connect_failed, handshake_failed; for UDP listeners, datagrams that started no flow: no_route, no_backend, connect_failed, flow_limit past the cap of flows).",
		}, []string{"listener", "reason"}),
		connsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostgate_l4_connections_total",
			Help: "Layer 4 connections (UDP flows) carried to a backend, by listener and route.",
		}, []string{"listener", "route"}),
		connsOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hostgate_l4_connections_open",
			Help: "Layer 4 connections (UDP flows) open to a backend, by listener and route.",
		}, []string{"listener", "route"}),
		bytesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostgate_l4_bytes_total",
			Help: "Bytes carried by Layer 4 connections (UDP flows: payloads) once they ended, by listener, route and direction (in: from clients, out: to clients).",
		}, []string{"listener", "route", "direction"}),
		datagramsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostgate_l4_datagrams_total",
			Help: "Datagrams carried by UDP flows once they ended, by listener, route and direction (in: from clients, out: to clients).",
		}, []string{"listener", "route", "direction"}),
		drainedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostgate_l4_drained_total",
			Help: "Layer 4 connections (UDP flows) closed by hostgate once their route or endpoint had been gone for the drain grace, by listener.",
		}, []string{"listener"}),
		idleClosedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostgate_l4_idle_closed_total",
			Help: "TCP and TLS connections closed by hostgate after the idle timeout (--l4-idle-timeout) without a byte either way, by listener.",
		}, []string{"listener"}),
		routes: map[routeSeries]int{},
	}
	for _, c := range []prometheus.Collector{m.refusedTotal, m.connsTotal, m.connsOpen, m.bytesTotal, m.datagramsTotal, m.drainedTotal, m.idleClosedTotal} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// routeVecs are the series labelled by route.
func (m *Metrics) routeVecs() []*prometheus.MetricVec {
	return []*prometheus.MetricVec{m.connsTotal.MetricVec, m.connsOpen.MetricVec, m.bytesTotal.MetricVec, m.datagramsTotal.MetricVec}
}

func (m *Metrics) refused(listener, reason string) {
	if m != nil {
		m.refusedTotal.WithLabelValues(listener, reason).Inc()
	}
}

// opened counts a connection (flow) of listener that route carries to a
// backend.
func (m *Metrics) opened(listener string, route router.RouteID) {
	if m == nil {
		return
	}
	key := routeSeries{listener, route.String()}
	m.mu.Lock()
	m.routes[key]++
	m.mu.Unlock()
	m.connsTotal.WithLabelValues(key.listener, key.route).Inc()
	m.connsOpen.WithLabelValues(key.listener, key.route).Inc()
}

// ended counts what an opened connection (flow) carried, as rec says,
// once it ended.
func (m *Metrics) ended(rec *Record) {
	if m == nil {
		return
	}
	key := routeSeries{rec.Listener, rec.Route.String()}
	m.connsOpen.WithLabelValues(key.listener, key.route).Dec()
	m.bytesTotal.WithLabelValues(key.listener, key.route, "in").Add(float64(rec.BytesIn))
	m.bytesTotal.WithLabelValues(key.listener, key.route, "out").Add(float64(rec.BytesOut))
	if rec.Mode == UDP {
		m.datagramsTotal.WithLabelValues(key.listener, key.route, "in").Add(float64(rec.PacketsIn))
		m.datagramsTotal.WithLabelValues(key.listener, key.route, "out").Add(float64(rec.PacketsOut))
	}
	m.mu.Lock()
	if _, ok := m.routes[key]; ok {
		m.routes[key]--
	}
	m.mu.Unlock()
}

// shutDown counts a connection (flow) of listener that the sweeper
// closed for why. Not by route: most drained ones were cut because their
// route went away.
func (m *Metrics) shutDown(listener string, why shutReason) {
	if m == nil {
		return
	}
	counter := m.drainedTotal
	if why == shutIdle {
		counter = m.idleClosedTotal
	}
	counter.WithLabelValues(listener).Inc()
}

// retire drops the series of listener's routes that routes no longer has
// and that no open connection counts on.
func (m *Metrics) retire(listener string, routes *router.L4Table) {
	if m == nil {
		return
	}
	live := map[string]bool{}
	for _, d := range routes.Describe() {
		live[d.Route] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, open := range m.routes {
		if key.listener != listener {
			continue
		}
		if !live[key.route] && open == 0 {
			m.forget(key)
		}
	}
}

// forget deletes the series of key. m.mu is held.
func (m *Metrics) forget(key routeSeries) {
	delete(m.routes, key)
	labels := prometheus.Labels{"listener": key.listener, "route": key.route}
	for _, v := range m.routeVecs() {
		v.DeletePartialMatch(labels)
	}
}

// Forget drops the series of a listener that is gone.
func (m *Metrics) Forget(listener string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	for key := range m.routes {
		if key.listener == listener {
			delete(m.routes, key)
		}
	}
	m.mu.Unlock()
	for _, v := range append(m.routeVecs(), m.refusedTotal.MetricVec, m.drainedTotal.MetricVec) {
		v.DeletePartialMatch(prometheus.Labels{"listener": listener})
	}
}
