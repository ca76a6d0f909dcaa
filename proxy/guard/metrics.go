package guard

// The series of client connections: those open, by protocol; those
// refused or closed at a cap; PROXY headers refused; TLS handshakes.

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the series of client connections.
type Metrics struct {
	conns      [numConnProtocols]prometheus.Gauge
	refused    [numConnCaps]prometheus.Counter
	evicted    [numConnCaps]prometheus.Counter
	handshakes [numHandshakeResults]prometheus.Counter
	ppRejected [numPPReasons]prometheus.Counter
}

// connProtocol is what a client connection speaks. A TCP connection counts
// as http1 until a request shows it speaks HTTP/2; protoClosed marks one
// that no gauge counts any more.
type ConnProtocol uint32

const (
	protoHTTP1 ConnProtocol = iota
	ProtoH2
	ProtoH2C
	protoH3
	numConnProtocols
	protoClosed = numConnProtocols
)

var connProtocolNames = [numConnProtocols]string{"http1", "h2", "h2c", "h3"}

type handshakeResult uint8

const (
	handshakeOK handshakeResult = iota
	handshakeUnknownSNI
	handshakeError
	numHandshakeResults
)

var handshakeResultNames = [numHandshakeResults]string{"ok", "unknown_sni", "error"}

// newConnMetrics makes the series and registers them with reg, if not
// nil.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{}
	refused := counters("hostgate_connections_refused_total", "Client connections closed as soon as accepted, with no idle connection to close in their place, by the cap reached.", "reason", connCapNames[:], m.refused[:])
	evicted := counters("hostgate_connections_evicted_total", "Idle client connections closed to make room for a new one, by the cap reached.", "reason", connCapNames[:], m.evicted[:])
	handshakes := counters("hostgate_tls_handshakes_total", "TLS handshakes with clients, by result.", "result", handshakeResultNames[:], m.handshakes[:])
	ppRejected := counters("hostgate_proxy_protocol_rejected_total", "Client connections closed for their PROXY protocol header (--proxy-protocol), by reason: a peer not allowed to send one, a malformed or overlong header, a connection that ended before it, or one that did not come within --read-header-timeout.", "reason", ppReasonNames[:], m.ppRejected[:])
	conns := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hostgate_active_connections",
		Help: "Open client connections, by protocol.",
	}, []string{"protocol"})
	resolve(conns.WithLabelValues, connProtocolNames[:], m.conns[:])
	if reg != nil {
		for _, c := range []prometheus.Collector{conns, refused, evicted, handshakes, ppRejected} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// counters returns a counter family of one label, with out filled with
// the counter of each of values.
func counters(name, help, label string, values []string, out []prometheus.Counter) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
	resolve(v.WithLabelValues, values, out)
	return v
}

// resolve fills out with the child of each label value, in order.
func resolve[T any](with func(...string) T, values []string, out []T) {
	for i, v := range values {
		out[i] = with(v)
	}
}
