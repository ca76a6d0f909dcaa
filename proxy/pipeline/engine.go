package pipeline

// The request path for an engine that parses and answers requests itself
// (the HTTP/1.1 engine, proxy/h1) rather than through net/http's
// handlers: Decide runs the pipeline up to the choice of an endpoint set
// without any I/O, so that an engine that must never block can call it
// too; the engine then answers (Answer) or forwards over the pool of
// HTTP/1.1 connections to endpoints (Send), and counts and logs the
// exchange (Record) before End.

import (
	"bufio"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/h1wire"
	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
)

// Exchange is one request of an engine on its way through the request
// path. Its zero value is ready for Decide; it is not to be copied.
type Exchange struct {
	ex exchange
	v  view
	l  *Listener
}

// Decide runs the request path for req, which came over a connection
// from peer (peerText its text), up to the choice of an endpoint set,
// without I/O; conn leads to the connection's TLS server name and client
// certificates. It reports false, having counted nothing, for a request
// the engine does not serve itself: it goes to net/http, which decides
// again (gRPC, a listener's filters, a plan the engine does not forward:
// engineForwards). Otherwise the exchange counts as in flight until End.
func (l *Listener) Decide(e *Exchange, req router.Request, peer netip.Addr, peerText string, conn *guard.TrackedConn) bool {
	if isGRPC(req.Header) {
		return false
	}
	s := l.s
	st := l.state.Load()
	if st.routes != nil && st.routes.HasListenerFilters() {
		return false
	}
	e.l = l
	e.ex = exchange{start: time.Now(), scheme: l.scheme, sets: s.sets.Load()}
	e.ex.from = s.originOf(peer, peerText, req.Header)
	e.v = view{Request: req, scheme: l.scheme, port: l.port, client: e.ex.from.client, guards: st.guards, conn: conn}
	if l.scheme == "https" && st.routes != nil && st.routes.Shared() {
		e.v.tls = st.tls
		e.v.serverName = conn.ServerName
	}
	e.ex.plan = decide(st.routes, e.ex.sets, &e.v)
	if e.ex.plan.action == actForward && !engineForwards(&e.ex.plan, req.Header) {
		// net/http decides again, and counts the request again.
		e.ex.plan.release(&e.v, true)
		return false
	}
	l.inflight.Add(1)
	e.ex.stats = l.routeStats(st, e.ex.plan.target)
	return true
}

// Draining reports whether every answer is to close its connection, as
// the server shuts down.
func (l *Listener) Draining() bool { return l.s.draining.Load() }

// End ends an exchange that Decide began, once its answer is out.
func (e *Exchange) End() {
	e.l.inflight.Add(-1)
	e.ex.plan.release(&e.v, false)
}

// Abandon ends an exchange that Decide began with no answer given: the
// engine hands the request to another, which decides again. What the
// decision took (a rate limit's token) is given back.
func (e *Exchange) Abandon() {
	e.l.inflight.Add(-1)
	e.ex.plan.release(&e.v, true)
}

// Forwards reports whether the request goes to a backend (Send), rather
// than being answered here (Answer).
func (e *Exchange) Forwards() bool { return e.ex.plan.action == actForward }

// Answer is the answer to a request that is not forwarded: its status
// and, for an error, the plain-text body and the WWW-Authenticate
// challenge, if any. A redirect or a CORS preflight has no body (body is
// ""): its fields are added to fields.
func (e *Exchange) Answer(fields *h1wire.Fields) (status int, body, challenge string) {
	p := &e.ex.plan
	switch p.action {
	case actRedirect, actPreflight:
		e.l.s.serverField(fields)
		return answer(p, &e.v, fields), "", ""
	case actDenied:
		return p.status, p.body, p.challenge
	case actMisdirected:
		status = http.StatusMisdirectedRequest
	case actInvalidBackend:
		status = http.StatusInternalServerError
	case actNoEndpoints:
		e.l.s.metrics.upstreamErrors[errNoEndpoint].Inc()
		status = http.StatusServiceUnavailable
	default:
		status = http.StatusNotFound
	}
	return status, errorBodies[status], ""
}

// ApplyPolicies sets the request's deadlines and takes its rule's retry
// policy, before the request is forwarded; h is its header.
func (e *Exchange) ApplyPolicies(h router.Headers) { e.ex.applyPolicies(h) }

// ClientDeadline bounds the client's side of a forwarded request (its
// body), zero for none.
func (e *Exchange) ClientDeadline() time.Time { return e.ex.clientDeadline() }

// AttemptDeadline ends the attempt under way, zero for none.
func (e *Exchange) AttemptDeadline() time.Time { return e.ex.attemptDeadline }

// AddForwarded adds to req's fields those a backend gets from the proxy
// (X-Forwarded-*, X-Real-IP, X-Request-ID, the client certificate's,
// clientCert being the X-Forwarded-Client-Cert value, if any), then
// applies the rule's request header modifiers.
func (e *Exchange) AddForwarded(req *h1wire.Head, clientCert string) {
	o := &e.ex.from
	xff, proto, fhost := forwarded(o.connText, req.Host, e.ex.scheme, req, o.trusted)
	req.Fields = append(req.Fields,
		h1wire.Field{Name: "X-Forwarded-For", Value: xff},
		h1wire.Field{Name: "X-Forwarded-Proto", Value: proto},
		h1wire.Field{Name: "X-Forwarded-Host", Value: fhost},
		h1wire.Field{Name: "X-Real-Ip", Value: o.clientText})
	if o.requestID != "" {
		req.Fields = append(req.Fields, h1wire.Field{Name: "X-Request-Id", Value: o.requestID})
	}
	if clientCert != "" {
		req.Fields = append(req.Fields, h1wire.Field{Name: clientCertField, Value: clientCert})
	}
	if e.ex.plan.clientCert != nil {
		e.ex.plan.clientCert.setFields(&req.Fields)
	}
	eachFilter(&e.ex.plan, router.FilterRequestHeaderModifier, func(f *router.Filter) { modifyHeader(&req.Fields, f.RequestHeaders) })
}

// LimitBody applies the rule's bound on the request body, of length
// bytes (-1: unknown), read from body: true when the declared length
// passes it, and otherwise RequestBody cuts a body of unknown length at
// it.
func (e *Exchange) LimitBody(length int64, body io.Reader) (tooLarge bool) {
	tooLarge, e.ex.limited = bodyTooLarge(e.ex.plan.target.Rule, length, body)
	return tooLarge
}

// BodyTooLarge reports whether the request body was cut at the rule's
// bound.
func (e *Exchange) BodyTooLarge() bool { return e.ex.limited.tooLarge() }

// Pace watches the rate of the request body read from body, if the
// server bounds it: wake must make a read of body that waits return at
// once. Send ends the watch.
func (e *Exchange) Pace(body io.Reader, wake func()) {
	if limits := e.l.s.cfg.requestBodyLimits(); limits.enabled() {
		e.ex.pace = startPacer(limits, body, wake)
	}
}

// RequestBody is body, the request body to send, read through the rule's
// bound or the pace's watch where there is one.
func (e *Exchange) RequestBody(body io.Reader) io.Reader {
	switch {
	case e.ex.limited != nil:
		return e.ex.limited
	case e.ex.pace != nil:
		return e.ex.pace
	}
	return body
}

// Send sends the request to an endpoint of the plan's set, as sendH1
// says, then ends the watch on the body's pace. Once it returns a
// connection, Finish ends the attempt.
func (e *Exchange) Send(bodiless, replayable bool, clientGone func() bool, resp *h1wire.Head, method string, send func(uc *upstream.Conn) (answered bool, err error)) (*upstream.Conn, int, error) {
	uc, status, err := e.l.s.sendH1(&e.ex, bodiless, replayable, clientGone, resp, method, send)
	e.ex.pace.finish()
	return uc, status, err
}

// Arm gives uc the attempt's deadline and the rule's backend read and
// send timeouts, before the request is written on it.
func (e *Exchange) Arm(uc *upstream.Conn) error { return e.ex.arm(uc) }

// WriteRequestLine writes the request line and Host field of the
// request to the endpoint of the attempt, as writeRequestLine does.
func (e *Exchange) WriteRequestLine(bw *bufio.Writer, method, path, query, host string) {
	writeRequestLine(bw, &e.ex, method, path, query, host)
}

// EditResponse edits the fields of the backend's response as the plan
// says, adding the Server field where the backend sent none.
func (e *Exchange) EditResponse(fields *h1wire.Fields) {
	e.l.s.serverField(fields)
	editResponse(&e.ex.plan, fields)
}

// Finish ends the attempt whose connection Send returned: uc goes back
// to the pool with reuse, and is closed otherwise.
func (e *Exchange) Finish(uc *upstream.Conn, reuse bool) {
	if reuse {
		e.l.s.h1.Put(e.ex.host.Address(), uc)
	} else {
		uc.Close()
	}
	e.ex.host.End()
}

// Record counts the exchange of req, which came over the connection from
// remote, answered with status and sent bytes of body, and hands it to
// the access log, if any. The end of the answer goes out after it, so
// that whoever sees the end also sees the count, as with net/http.
func (e *Exchange) Record(status int, sent int64, remote string, req *h1wire.Head) {
	a := e.l.s.observe(e.l, &e.ex, status, sent)
	if a == nil {
		return
	}
	a.RemoteAddr, a.Method, a.Host = remote, req.Method, req.Host
	a.Proto = "HTTP/1.1"
	if req.HTTP10 {
		a.Proto = "HTTP/1.0"
	}
	a.Path = req.Path
	if p, err := url.PathUnescape(req.Path); err == nil {
		a.Path = p
	}
	e.l.s.cfg.AccessLog(a)
}

// Tries is what the attempt under way went through, for an engine that
// makes its tries itself without blocking (NextTry, TryFailed), as Send
// makes them for one that blocks.
type Tries struct{ t tries }

// Fresh says the next try needs a new connection: a reused one was found
// closed.
func (t *Tries) Fresh() bool { return t.t.fresh }

// SendsOnce reports whether the request's rule has no retry policy (its
// waits and budget), which an engine that drives its own tries does not
// follow.
func (e *Exchange) SendsOnce() bool { return e.ex.plan.target.Rule.Retry == nil }

// Stalls are the rule's backend read and send timeouts: how long the
// response's next bytes, or the backend's taking the request's next
// ones, may keep the exchange waiting; 0 for no bound but the attempt's.
func (e *Exchange) Stalls() (read, send time.Duration) {
	t := &e.ex.plan.target.Rule.Timeouts
	return t.BackendRead, t.BackendSend
}

// NextTry picks the endpoint of the attempt's next try, which counts as
// in flight until EndTry.
func (e *Exchange) NextTry(t *Tries) *upstream.Host { return e.ex.nextTry(&t.t) }

// ConnectTimeout bounds a try's connect: the rule's, or the server's.
func (e *Exchange) ConnectTimeout() time.Duration {
	if d := e.ex.plan.target.Rule.Timeouts.Connect; d > 0 {
		return d
	}
	return e.l.s.cfg.DialTimeout
}

// TrySucceeded counts the try under way answered with a response head,
// its request sent at sentAt.
func (e *Exchange) TrySucceeded(sentAt time.Time) { e.ex.trySucceeded(sentAt) }

// TryFailed decides after the try under way failed with err, once EndTry
// ended it, as Send does: again says another try is to be made,
// otherwise status is the answer (0 when the client is gone). reused says
// the try's connection had served before, answered that bytes of a
// response came on it, replayable that the request has no body and is
// safe to send twice.
func (e *Exchange) TryFailed(t *Tries, err error, reused, answered, replayable bool, clientGone func() bool) (status int, again bool) {
	status, again, _ = e.l.s.tryFailed(&e.ex, &t.t, err, reused, answered, replayable, clientGone)
	return status, again
}

// EndTry ends the in-flight count of the try under way, as Finish does
// for a connection of the pool.
func (e *Exchange) EndTry() { e.ex.host.End() }
