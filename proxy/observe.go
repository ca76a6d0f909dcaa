package proxy

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostgate/hostgate/router"
)

// AccessRecord describes one request for Options.AccessLog.
type AccessRecord struct {
	Start    time.Time
	Duration time.Duration
	// Listener is the listener's address.
	Listener   string
	RemoteAddr string
	Proto      string
	Method     string
	Host       string
	Path       string
	// Status is 0 when the client left before a response.
	Status    int
	BytesSent int64
	// Route is zero when no route matched.
	Route router.RouteID
	// Backend is the BackendRef name and Endpoint the address last tried,
	// empty when the request was not forwarded.
	Backend  string
	Endpoint string
}

// recorder notes the status and size of a response for metrics and the
// access log. Unwrap lets http.ResponseController reach the flusher and
// hijacker beneath.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

type metrics struct {
	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	connectRetries prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hostgate_http_requests_total",
			Help: "Requests served, by listener and status class (\"aborted\" when the client left first).",
		}, []string{"listener", "code_class"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hostgate_http_request_duration_seconds",
			Help:    "Time from a request's header to the end of its response, by listener.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"listener"}),
		connectRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hostgate_upstream_connect_retries_total",
			Help: "Requests moved to another endpoint after failing to connect.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.duration, m.connectRetries} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// listenerMetrics are one listener's series, resolved once so that the
// request path does no label lookups.
type listenerMetrics struct {
	classes  [6]prometheus.Counter // by status / 100; 0 is "aborted"
	duration prometheus.Observer
}

func (m *metrics) listener(name string) *listenerMetrics {
	lm := &listenerMetrics{duration: m.duration.WithLabelValues(name)}
	for i := range lm.classes {
		class := "aborted"
		if i > 0 {
			class = strconv.Itoa(i) + "xx"
		}
		lm.classes[i] = m.requests.WithLabelValues(name, class)
	}
	return lm
}

// observe counts a finished request and hands it to the access log.
func (s *Server) observe(l *listener, r *http.Request, rec *recorder, ex *exchange) {
	d := time.Since(ex.start)
	status := rec.status
	if status == 0 && ex.switched {
		status = http.StatusSwitchingProtocols
	}
	l.stats.duration.Observe(d.Seconds())
	l.stats.classes[min(status/100, 5)].Inc()
	if s.opts.AccessLog == nil {
		return
	}
	a := &AccessRecord{
		Start: ex.start, Duration: d, Listener: l.addr, RemoteAddr: r.RemoteAddr,
		Proto: r.Proto, Method: r.Method, Host: r.Host, Path: r.URL.Path,
		Status: status, BytesSent: rec.bytes,
	}
	if ex.plan.target != nil {
		a.Route = ex.plan.target.Route.ID
	}
	if ex.plan.backend != nil {
		a.Backend = ex.plan.backend.Name
	}
	if ex.host != nil {
		a.Endpoint = ex.host.Address()
	}
	s.opts.AccessLog(a)
}
