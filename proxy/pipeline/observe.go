package pipeline

import (
	"net/http"
	"net/netip"
	"time"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/router"
)

// AccessRecord describes one request for the access log
// (proxy.Options.AccessLog).
type AccessRecord struct {
	Start    time.Time
	Duration time.Duration
	// Listener is the listener's address.
	Listener string
	// RemoteAddr is the connection's address: its PROXY header's with
	// Options.ProxyProtocol, else its peer's. Client is the real client's
	// address (client.go), RequestID the X-Request-ID sent to the backend.
	RemoteAddr string
	Client     netip.Addr
	RequestID  string
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
	// quiet drops the 1xx responses written, the bridge's and
	// ReverseProxy's, where none may reach the client
	// (relaysInformational).
	quiet bool
	// writes bounds how long a write of a large answer may wait for the
	// client (Write).
	writes guard.WriteBound
}

// streamStallAfter is how much of an answer is written before its writes
// get a deadline: HTTP/2 and HTTP/3 buffer and flow-control well beyond
// what most answers are, so only a large answer can wait on a client, and
// small ones pay nothing.
const streamStallAfter = 1 << 20

func (r *recorder) WriteHeader(code int) {
	if code < 200 && r.quiet {
		return
	}
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.bytes >= streamStallAfter {
		// On HTTP/2 and HTTP/3 a client can leave one stream's
		// flow-control window shut while its connection stays busy,
		// which holds the stream, and the backend connection behind it,
		// for as long as it likes: the deadline is the stream's own (the
		// connection's on HTTP/1.1).
		if d, ok := r.writes.Next(); ok {
			_ = http.NewResponseController(r.ResponseWriter).SetWriteDeadline(d)
		}
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// observeHTTP counts a request served by net/http and logs it.
func (s *Shared) observeHTTP(l *Listener, r *http.Request, rec *recorder, ex *exchange) {
	status := rec.status
	if status == 0 && ex.switched {
		status = http.StatusSwitchingProtocols
	}
	if a := s.observe(l, ex, status, rec.bytes); a != nil {
		a.RemoteAddr, a.Proto, a.Method, a.Host, a.Path = r.RemoteAddr, r.Proto, r.Method, r.Host, r.URL.Path
		s.cfg.AccessLog(a)
	}
}

// observe counts a finished request. It returns the access record for the
// engine to fill in the request's fields and log, nil when there is no
// access log.
func (s *Shared) observe(l *Listener, ex *exchange, status int, bytes int64) *AccessRecord {
	d := time.Since(ex.start)
	ex.stats.duration.Observe(d.Seconds())
	ex.stats.requests(status).Inc()
	if s.cfg.AccessLog == nil || ex.plan.target != nil && ex.plan.target.Rule.NoAccessLog {
		return nil
	}
	a := &AccessRecord{
		Start: ex.start, Duration: d, Listener: l.name,
		Status: status, BytesSent: bytes,
		Client: ex.from.client, RequestID: ex.from.requestID,
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
	return a
}
