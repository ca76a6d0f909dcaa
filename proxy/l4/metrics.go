package l4

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the Layer 4 series, labelled by listener address.
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
			Help: "Layer 4 connections (UDP flows) carried to a backend, by listener.",
		}, []string{"listener"}),
		connsOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hostgate_l4_connections_open",
			Help: "Layer 4 connections (UDP flows) open to a backend, by listener.",
		}, []string{"listener"}),
		bytesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostgate_l4_bytes_total",
			Help: "Bytes carried by Layer 4 connections (UDP flows: payloads) once they ended, by listener and direction (in: from clients, out: to clients).",
		}, []string{"listener", "direction"}),
		datagramsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostgate_l4_datagrams_total",
			Help: "Datagrams carried by UDP flows once they ended, by listener and direction (in: from clients, out: to clients).",
		}, []string{"listener", "direction"}),
		drainedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostgate_l4_drained_total",
			Help: "Layer 4 connections (UDP flows) closed by hostgate once their route or endpoint had been gone for the drain grace, by listener.",
		}, []string{"listener"}),
	}
	for _, c := range []prometheus.Collector{m.refusedTotal, m.connsTotal, m.connsOpen, m.bytesTotal, m.datagramsTotal, m.drainedTotal} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) refused(listener, reason string) {
	if m != nil {
		m.refusedTotal.WithLabelValues(listener, reason).Inc()
	}
}

func (m *Metrics) opened(listener string) {
	if m != nil {
		m.connsTotal.WithLabelValues(listener).Inc()
		m.connsOpen.WithLabelValues(listener).Inc()
	}
}

func (m *Metrics) closed(listener string) {
	if m != nil {
		m.connsOpen.WithLabelValues(listener).Dec()
	}
}

func (m *Metrics) carried(listener string, in, out int64) {
	if m != nil {
		m.bytesTotal.WithLabelValues(listener, "in").Add(float64(in))
		m.bytesTotal.WithLabelValues(listener, "out").Add(float64(out))
	}
}

func (m *Metrics) datagrams(listener string, in, out int64) {
	if m != nil {
		m.datagramsTotal.WithLabelValues(listener, "in").Add(float64(in))
		m.datagramsTotal.WithLabelValues(listener, "out").Add(float64(out))
	}
}

func (m *Metrics) drained(listener string) {
	if m != nil {
		m.drainedTotal.WithLabelValues(listener).Inc()
	}
}

// Forget drops the series of a listener that is gone.
func (m *Metrics) Forget(listener string) {
	if m != nil {
		for _, v := range []*prometheus.MetricVec{m.refusedTotal.MetricVec, m.connsTotal.MetricVec, m.connsOpen.MetricVec, m.bytesTotal.MetricVec, m.datagramsTotal.MetricVec, m.drainedTotal.MetricVec} {
			v.DeletePartialMatch(prometheus.Labels{"listener": listener})
		}
	}
}
