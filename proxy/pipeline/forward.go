package pipeline

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/h2"
	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
)

// Executing a plan on net/http: answers made here, and forwarding through
// httputil.ReverseProxy (Rewrite, never Director) with a RoundTripper that
// picks the endpoint, so that a failed connect can move to another one.

// serve runs the pipeline for one request and executes its plan.
func (s *Shared) serve(w http.ResponseWriter, r *http.Request, l *Listener, st *listenerState) {
	c := &call{
		rec: recorder{ResponseWriter: w, quiet: !s.relaysInformational(r), writes: guard.WriteBound{Stall: s.cfg.IdleTimeout}},
		ex:  exchange{start: time.Now(), scheme: l.scheme, sets: s.sets.Load(), backendTLS: st.backendTLS, answer: w.Header()},
	}
	rec, ex := &c.rec, &c.ex
	defer s.observeHTTP(l, r, rec, ex)
	conn, connText := remoteOf(r.RemoteAddr)
	ex.from = s.originOf(conn, connText, r.Header)
	v := view{
		Request: router.Request{Host: r.Host, Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Header: r.Header},
		scheme:  l.scheme,
		port:    l.port,
		client:  ex.from.client,
		guards:  st.guards,
		req:     r,
	}
	if l.scheme == "https" && st.routes != nil && st.routes.Shared() {
		v.serverName, v.tls = serverNameOf(r), st.tls
	}
	if st.routes != nil && st.routes.HasListenerFilters() {
		// Before route matching, which sees the fields they set.
		ex.stats = l.routeStats(st, nil)
		if !s.authorize(rec, r, ex, st.guards, st.routes.ListenerFilters(r.Host)) {
			return
		}
	}
	ex.plan = decide(st.routes, ex.sets, &v)
	defer ex.plan.release(&v, false)
	ex.stats = l.routeStats(st, ex.plan.target)
	switch ex.plan.action {
	case actForward:
		if ex.plan.authorize && !s.authorize(rec, r, ex, st.guards, ex.plan.target.Rule.Filters) {
			return
		}
		s.fwd.forward(rec, r, ex)
	case actRedirect, actPreflight:
		rec.WriteHeader(answer(&ex.plan, &v, rec.Header()))
	case actNotFound:
		WriteError(rec, r, http.StatusNotFound)
	case actMisdirected:
		WriteError(rec, r, http.StatusMisdirectedRequest)
	case actDenied:
		if ex.plan.challenge != "" {
			rec.Header().Set("WWW-Authenticate", ex.plan.challenge)
		}
		writeErrorBody(rec, r, ex.plan.status, ex.plan.body)
	case actInvalidBackend:
		WriteError(rec, r, http.StatusInternalServerError)
	case actNoEndpoints:
		s.metrics.upstreamErrors[errNoEndpoint].Inc()
		WriteError(rec, r, http.StatusServiceUnavailable)
	}
}

// call is what serve keeps of a request past its stack, in one
// allocation: the recorder and the exchange both escape, to the
// ReverseProxy hooks and the handlers that wrap the ResponseWriter.
type call struct {
	rec recorder
	ex  exchange
}

// exchange is one request's state, shared with the ReverseProxy hooks
// through the request context.
type exchange struct {
	start  time.Time
	scheme string
	from   origin
	// answer is the header of the answer to the client on net/http.
	answer http.Header
	sets   *upstream.Sets
	plan   plan
	// stats are the series of the request's route.
	stats *routeMetrics
	// deadline ends the request, retries included; attemptDeadline ends
	// the attempt under way (retry.go). Zero: none.
	deadline, attemptDeadline time.Time
	// retry is the rule's retry policy, nil when a request is sent once;
	// retries counts those made.
	retry   *router.Retry
	retries int
	// moveWithin is the policy's budget: no other endpoint is tried
	// from start+moveWithin on (retry.go); 0: no budget. A duration rather
	// than a time, and authCookies a pointer, keep the exchange, on the
	// heap for net/http's engines, in the size class it had without them.
	moveWithin time.Duration
	// protocol is how the backend is spoken to: "", "h2c", "https", "h2".
	protocol string
	// backendTLS are the transports of the TLS identities of the table
	// the plan comes from.
	backendTLS map[*router.BackendTLS]*tlsTransports
	// host is the endpoint last tried; open says a response from it is
	// still being relayed and holds an in-flight count.
	host *upstream.Host
	open bool
	// switched says the backend switched protocols (WebSocket): the 101
	// goes out on the hijacked connection, past the recorder.
	switched bool
	body     guardedBody
	// pace watches the request body's rate, nil when nothing can be
	// slow (no body, or all of it came with the head).
	pace *pacer
	// limited cuts a request body of unknown length at the rule's limit,
	// nil without one.
	limited *limitedBody
	// in is the request on net/http.
	in *http.Request
	// authCookies are the Set-Cookie fields of an authorization
	// service's allowing answer, for the backend's answer if its status
	// is one nginx's add_header adds to (extauth.go).
	authCookies *[]string
}

type exchangeKey struct{}

func exchangeOf(ctx context.Context) *exchange {
	return ctx.Value(exchangeKey{}).(*exchange)
}

// exchangeContext is a request's context that carries its exchange, in
// place of context.WithValue's: over the HTTP/2 engine's stream context,
// each context made from a WithValue (the deadline, the transport's, a
// backend stream's AfterFunc) took a goroutine to follow the stream, as
// the context package found there neither its own cancelCtx nor an
// AfterFunc. Passing AfterFunc on lets them wait without one.
type exchangeContext struct {
	context.Context
	ex *exchange
}

func withExchange(ctx context.Context, ex *exchange) context.Context {
	return &exchangeContext{ctx, ex}
}

func (c *exchangeContext) Value(key any) any {
	if key == (exchangeKey{}) {
		return c.ex
	}
	return c.Context.Value(key)
}

func (c *exchangeContext) AfterFunc(f func()) (stop func() bool) {
	return context.AfterFunc(c.Context, f)
}

// guardedBody records whether the request body was read, since only a
// request whose body is still unread can go to another endpoint. Its Close
// does nothing: net/http closes the inbound body when the handler returns,
// and the Transport closing it after a failed connect must not spoil the
// retry.
type guardedBody struct {
	io.ReadCloser
	// read is atomic: the Transport reads the body on its own goroutine.
	read atomic.Bool
}

func (b *guardedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.ReadCloser.Read(p)
}

func (b *guardedBody) Close() error { return nil }

// forwarder relays requests to backends.
type forwarder struct {
	s          *Shared
	rp         *httputil.ReverseProxy
	http1, tls *http.Transport
	h2c, h2    backendTransport
	// byIdentity are the transports of backends with a TLS identity of
	// their own, kept from one Apply to the next while some table uses
	// them; applies counts the Applies. Both belong to Apply.
	byIdentity map[string]*tlsTransports
	applies    uint64
	// dialer is every transport's.
	dialer *net.Dialer
	// mirrorSlots bounds the mirrored requests in flight, and
	// mirrorBytes counts the request bodies they hold (mirror.go).
	mirrorSlots chan struct{}
	mirrorBytes atomic.Int64
}

const (
	// upstreamMaxHeaderBytes bounds a backend's response header; backends
	// are trusted more than clients, hence the larger bound.
	upstreamMaxHeaderBytes = 1 << 20
)

// newTransport makes a transport to backends speaking the protocols
// given, with a copy of tlsConfig: a transport with HTTP/2 adds "h2" to
// the config's NextProtos, which "https" must not offer.
func (f *forwarder) newTransport(http1, http2, h2c bool, tlsConfig *tls.Config) *http.Transport {
	o := &f.s.cfg
	t := &http.Transport{
		DialContext:            f.dialContext,
		TLSClientConfig:        tlsConfig.Clone(),
		TLSHandshakeTimeout:    o.DialTimeout,
		MaxIdleConnsPerHost:    o.MaxIdleConnsPerEndpoint,
		IdleConnTimeout:        o.UpstreamIdleTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: upstreamMaxHeaderBytes,
		// The client's Accept-Encoding goes through as it is; the
		// proxy must not ask for and undo compression itself.
		DisableCompression: true,
		Protocols:          new(http.Protocols),
		// Request fields to HTTP/2 backends are not added to HPACK's
		// dynamic table, as proxy/h2's Transport says why.
		HTTP2: &http.HTTP2Config{MaxEncoderHeaderTableSize: 1},
	}
	t.Protocols.SetHTTP1(http1)
	t.Protocols.SetHTTP2(http2)
	t.Protocols.SetUnencryptedHTTP2(h2c)
	return t
}

// backendTransport forwards to backends: net/http's Transport, or
// hostgate's HTTP/2 one.
type backendTransport interface {
	http.RoundTripper
	CloseIdleConnections()
}

// newHTTP2Transport makes a transport to HTTP/2 backends, over TLS with a
// copy of tlsConfig unless cleartext (h2c): hostgate's own, or net/http's
// with Config.StdlibHTTP2.
func (f *forwarder) newHTTP2Transport(tlsConfig *tls.Config, cleartext bool) backendTransport {
	o := &f.s.cfg
	if o.StdlibHTTP2 {
		return f.newTransport(false, !cleartext, cleartext, tlsConfig)
	}
	t := &h2.Transport{
		DialContext:            f.dialContext,
		TLSHandshakeTimeout:    o.DialTimeout,
		IdleTimeout:            o.UpstreamIdleTimeout,
		MaxResponseHeaderBytes: upstreamMaxHeaderBytes,
	}
	if !cleartext {
		t.TLSClientConfig = &tls.Config{}
		if tlsConfig != nil {
			t.TLSClientConfig = tlsConfig.Clone()
		}
	}
	return t
}

func newForwarder(s *Shared) *forwarder {
	o := &s.cfg
	f := &forwarder{
		s:           s,
		dialer:      &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second},
		byIdentity:  map[string]*tlsTransports{},
		mirrorSlots: make(chan struct{}, mirrorSlots),
	}
	f.http1 = f.newTransport(true, false, false, o.UpstreamTLS)
	f.h2c = f.newHTTP2Transport(o.UpstreamTLS, true)
	// "https" stays on HTTP/1.1 even where the backend offers h2, so that
	// WebSocket upgrades to it keep working; "h2" asks for h2.
	f.tls = f.newTransport(true, false, false, o.UpstreamTLS)
	f.h2 = f.newHTTP2Transport(o.UpstreamTLS, false)
	f.rp = &httputil.ReverseProxy{
		Rewrite:        f.rewrite,
		Transport:      f,
		ModifyResponse: f.modifyResponse,
		ErrorHandler:   f.fail,
		BufferPool:     &bufferPool{},
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	return f
}

// bufferPool recycles ReverseProxy's copy buffers, which would otherwise
// be 32 KiB allocated per request.
type bufferPool struct{ pool sync.Pool }

const copyBufferSize = 32 << 10

func (p *bufferPool) Get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, copyBufferSize)
}

func (p *bufferPool) Put(b []byte) { p.pool.Put(&b) }

// transport is the transport of protocol and, for a backend with a TLS
// identity, of that identity in tt; nil when tt lacks it.
func (f *forwarder) transport(protocol string, b *router.BackendTLS, tt map[*router.BackendTLS]*tlsTransports) http.RoundTripper {
	if b != nil {
		t := tt[b]
		switch {
		case t == nil:
			return nil
		case protocol == "h2":
			return t.h2
		}
		return t.https
	}
	switch protocol {
	case "h2c":
		return f.h2c
	case "https":
		return f.tls
	case "h2":
		return f.h2
	}
	return f.http1
}

// upstreamProtocol is the backend's protocol. gRPC needs HTTP/2, so gRPC
// routes and calls default to h2c.
func upstreamProtocol(p *plan, h router.Headers) string {
	if p.backend.Protocol == "" && (p.target.Route.ID.Kind == router.KindGRPCRoute || isGRPC(h)) {
		return "h2c"
	}
	return p.backend.Protocol
}

func upstreamScheme(protocol string) string {
	if protocol == "https" || protocol == "h2" {
		return "https"
	}
	return "http"
}

func (f *forwarder) forward(w http.ResponseWriter, r *http.Request, ex *exchange) {
	ex.protocol = upstreamProtocol(&ex.plan, r.Header)
	// Deferred, as ReverseProxy and the bridge panic with
	// http.ErrAbortHandler when a response breaks off midway.
	defer func() {
		if ex.open {
			ex.host.End()
		}
	}()
	ex.applyPolicies(r.Header)
	ex.in = r
	tooLarge, limited := bodyTooLarge(ex.plan.target.Rule, r.ContentLength, r.Body)
	if tooLarge {
		if r.ProtoMajor == 1 {
			w.Header().Set("Connection", "close")
		}
		WriteError(w, r, http.StatusRequestEntityTooLarge)
		return
	}
	if limited != nil {
		ex.limited = limited
		r.Body = limitedReadCloser{limited, r.Body}
	}
	if limits := f.s.cfg.requestBodyLimits(); limits.enabled() && r.ContentLength > 0 && !isGRPC(r.Header) {
		// A read deadline in the past wakes the read waiting for the
		// body: on HTTP/2 and HTTP/3 the stream's, on HTTP/1.1 the
		// connection's, which closes after the 408.
		rc := http.NewResponseController(w)
		ex.pace = startPacer(limits, r.Body, func() { _ = rc.SetReadDeadline(time.Unix(1, 0)) })
		r.Body = pacedBody{ex.pace, r.Body}
		defer ex.pace.finish()
	}
	if f.bridges(r, ex) && f.bridge(w, r, ex) {
		return
	}
	ctx := withExchange(r.Context(), ex)
	if deadline := ex.clientDeadline(); !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	f.rp.ServeHTTP(w, r.WithContext(ctx))
}

func (f *forwarder) rewrite(pr *httputil.ProxyRequest) {
	ex := exchangeOf(pr.In.Context())
	out := pr.Out
	out.URL.Scheme = upstreamScheme(ex.protocol)
	// The endpoint is picked per attempt in RoundTrip.
	out.URL.Host = ex.plan.backend.Name
	if ex.plan.path != "" {
		setPath(out.URL, ex.plan.path)
	}
	if ex.plan.rewritesQuery {
		// A client's bare "?" goes no further, as nginx sends a
		// rewritten query only when it is not empty.
		out.URL.RawQuery, out.URL.ForceQuery = ex.plan.query, false
	}
	if ex.plan.host != "" {
		out.Host = ex.plan.host
	}
	setForwarded(pr.In, out.Header, ex)
	if ex.plan.fallback {
		fallbackFields(out.Header, ex.plan.target.Rule.Fallback, http.StatusServiceUnavailable, pr.In, false)
	}
	eachFilter(&ex.plan, router.FilterRequestHeaderModifier, func(flt *router.Filter) { modifyHeader(out.Header, flt.RequestHeaders) })
	eachFilter(&ex.plan, router.FilterRequestMirror, func(flt *router.Filter) { f.mirror(out, flt.Mirror, ex) })
	if out.Body != nil && out.Body != http.NoBody {
		ex.body.ReadCloser = out.Body
		out.Body = &ex.body
	}
}

// setPath sets an escaped path on u.
func setPath(u *url.URL, escaped string) {
	path, err := url.PathUnescape(escaped)
	if err != nil {
		path = escaped
	}
	u.Path, u.RawPath = path, escaped
}

func (f *forwarder) modifyResponse(resp *http.Response) error {
	ex := exchangeOf(resp.Request.Context())
	if err := ex.pace.err(); err != nil {
		// A backend may answer a body cut short (net/http's Transport
		// waits a moment for it): the client still gets its 408.
		return err
	}
	ex.switched = resp.StatusCode == http.StatusSwitchingProtocols
	if s := f.s.server; s != nil {
		// The backend's, or else the one ServeHTTP put on the answer,
		// before the response header modifiers, which may remove it;
		// ReverseProxy adds the response's fields to the answer's.
		delete(ex.answer, "Server")
		if _, ok := resp.Header["Server"]; !ok {
			resp.Header["Server"] = s
		}
	}
	editResponse(&ex.plan, resp.Header)
	if rate := ex.plan.target.Rule.ResponseRate; rate != nil && resp.StatusCode != http.StatusSwitchingProtocols {
		// Not an upgraded connection, whose body ReverseProxy takes for
		// the connection it is.
		resp.Body = rateBody(resp.Request.Context(), resp.Body, rate, ex.start)
	}
	if c := ex.authCookies; c != nil && router.SetCookieStatus(resp.StatusCode) {
		// After editResponse: proxy-cookie-domain and -path rewrite the
		// backend's cookies, not these, as in nginx.
		resp.Header["Set-Cookie"] = append(resp.Header["Set-Cookie"], *c...)
	}
	return nil
}

// RoundTrip sends req to an endpoint of the exchange's set, again where
// the rule's retry policy says so.
func (f *forwarder) RoundTrip(req *http.Request) (*http.Response, error) {
	ex := exchangeOf(req.Context())
	resp, err := f.roundTripWatched(req, ex, f.send)
	if err == nil && ex.plan.usesFallback() {
		return f.intercept(req, resp, ex)
	}
	return resp, err
}

// send makes the attempts the rule's retry policy says.
func (f *forwarder) send(req *http.Request, ex *exchange) (*http.Response, error) {
	if ex.retry != nil {
		return f.retryRoundTrip(req, ex)
	}
	return f.attempt(req, ex)
}

// retryRoundTrip makes attempts as the retry policy says (retry.go). Each
// has a context of its own when timeouts.backendRequest ends it before the
// request's deadline; the one whose response is returned keeps it until
// its body is closed.
func (f *forwarder) retryRoundTrip(req *http.Request, ex *exchange) (*http.Response, error) {
	bodiless := req.Body == nil || req.Body == http.NoBody
	replayable := bodiless && Repeatable(req.Method, req.Header.Get("Idempotency-Key"))
	for {
		attemptReq, end := req, context.CancelFunc(nil)
		if ex.attemptDeadline != ex.deadline {
			ctx, cancel := context.WithDeadline(req.Context(), ex.attemptDeadline)
			attemptReq, end = req.WithContext(ctx), cancel
		}
		resp, err := f.attempt(attemptReq, ex)
		status := 0
		if err == nil {
			status = resp.StatusCode
		}
		var wait time.Duration
		again := req.Context().Err() == nil
		if again {
			wait, again = ex.retryAfter(status, err, bodiless, replayable)
		}
		if !again {
			if end != nil {
				endWithBody(resp, end)
			}
			return resp, err
		}
		if resp != nil {
			// Not drained: a body on the way costs its connection, which
			// is cheaper than waiting for bytes no one reads.
			resp.Body.Close()
			ex.host.End()
			ex.open = false
		}
		if end != nil {
			end()
		}
		if !sleep(wait, req.Context().Done()) {
			return nil, req.Context().Err()
		}
		ex.startAttempt(time.Now())
	}
}

// endWithBody ends an attempt's context once its response body is closed,
// or now when there is no response. An upgraded connection keeps it until
// the request ends: ReverseProxy takes its body for the connection it is.
func endWithBody(resp *http.Response, end context.CancelFunc) {
	switch {
	case resp == nil:
		end()
	case resp.StatusCode != http.StatusSwitchingProtocols:
		resp.Body = &attemptBody{ReadCloser: resp.Body, end: end}
	}
}

// attemptBody is a response body whose Close ends its attempt's context.
type attemptBody struct {
	io.ReadCloser
	end context.CancelFunc
}

func (b *attemptBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}

// attempt sends req to an endpoint of the exchange's set, moving to
// another endpoint where tryAnother allows and the body is still unread.
func (f *forwarder) attempt(req *http.Request, ex *exchange) (*http.Response, error) {
	rt := f.transport(ex.protocol, ex.plan.backend.TLS, ex.backendTLS)
	if rt == nil {
		return nil, errNoTLSIdentity
	}
	var tried [MaxConnectAttempts]*upstream.Host
	for n := 0; ; n++ {
		h := ex.plan.pick(tried[:n])
		req.URL.Host = h.Address()
		h.Begin()
		sent := time.Now()
		resp, err := rt.RoundTrip(req)
		ex.host = h
		if err == nil {
			ex.stats.upstream.Observe(time.Since(sent).Seconds())
			h.Succeeded()
			ex.open = true
			return resp, nil
		}
		h.End()
		if expired := deadlinePassed(req.Context()); expired || req.Context().Err() != nil {
			// The client left or the deadline passed: that says nothing
			// about the endpoint, though a deadline is the backend's
			// error all the same.
			if expired {
				f.s.metrics.upstreamErrors[errTimeout].Inc()
			}
			return nil, err
		}
		f.s.metrics.upstreamError(err)
		if h.Failed() {
			f.s.metrics.ejections.Inc()
		}
		// The HTTP/2 client may have begun to read the body before
		// guardedBody saw a read.
		bodyTaken := ex.body.read.Load() || errors.Is(err, h2.ErrBodyTaken)
		if bodyTaken || !tryAnother(err, Repeatable(req.Method, req.Header.Get("Idempotency-Key"))) || n+1 >= f.s.cfg.ConnectAttempts || n+1 >= ex.plan.set.Len() || !ex.mayMove(time.Now()) {
			return nil, err
		}
		f.s.metrics.connectRetries.Inc()
		tried[n] = h
	}
}

// errNoTLSIdentity fails a request to a backend whose TLS identity has no
// transport, which Apply makes for every identity of a table: it cannot
// happen, and such a backend must not be reached with another's.
var errNoTLSIdentity = errors.New("proxy: backend TLS identity has no transport")

func isConnectError(err error) bool {
	op, ok := errors.AsType[*net.OpError](err)
	return ok && op.Op == "dial"
}

// tryAnother says a failed attempt goes to another endpoint: connecting
// failed, or the request is safe to send again and failed for another
// reason than time running out, as nginx's default proxy_next_upstream.
// The second covers a backend that stops just after accepting: a pod
// shutting down while its removal from the EndpointSlice is still on the
// way resets the connections queued on its closed listener, and a request
// that met one would otherwise fail in the middle of a rolling update.
func tryAnother(err error, replayable bool) bool {
	return isConnectError(err) || replayable && !isTimeout(err)
}

// isTimeout reports whether err is time running out, the proxy's or the
// network's.
func isTimeout(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return errors.Is(err, context.DeadlineExceeded) || ok && ne.Timeout()
}

// fail answers a request that could not be relayed.
func (f *forwarder) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusBadGateway
	switch ex := exchangeOf(r.Context()); {
	case f.s.metrics.cutBy(ex.pace.finish()):
		// First: the wake-up of the cut read looks like a client that
		// left (net/http cancels the request on it). The client's
		// slowness, not the backend's: its HTTP/1.1 connection goes; on
		// HTTP/2 and HTTP/3 the stream alone ends (Connection: close
		// would send the whole connection GOAWAY).
		status = http.StatusRequestTimeout
		if r.ProtoMajor == 1 {
			w.Header().Set("Connection", "close")
		}
	case ex.limited.tooLarge():
		// The backend got part of the body, and the client no answer.
		status = http.StatusRequestEntityTooLarge
		if r.ProtoMajor == 1 {
			w.Header().Set("Connection", "close")
		}
	case errors.Is(r.Context().Err(), context.Canceled):
		return // the client left; there is no one to answer
	case isTimeout(err) || deadlinePassed(r.Context()):
		// Once the request's deadline has passed the request timed
		// out, whatever the transport's error says.
		status = http.StatusGatewayTimeout
	}
	WriteError(w, r, status)
}

// deadlinePassed reports whether ctx's deadline is behind us, whether or
// not its timer has fired yet: a backend that enforces the same deadline
// (a gRPC server given grpc-timeout resets the stream at it) can end the
// exchange before the proxy's own timer goes off, which on a busy machine
// is late (TestGRPC's deadline case got Bad Gateway so).
func deadlinePassed(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
