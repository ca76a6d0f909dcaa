package proxy

// The HTTP/1.1 engine: hostgate's own server and client for plain HTTP/1.1
// proxying, which net/http and httputil.ReverseProxy serve at a fraction
// of the speed (here one goroutine per connection and two allocations per
// request; there two goroutines per connection, contexts and about ninety
// allocations per request).
//
// One goroutine serves a client connection, reading through the guard
// (proxy/guard), so its smuggling refusals hold: a refused request reaches the
// engine as a poisoned head, which it does not parse and hands over. It
// runs the same pipeline as net/http (decide), then answers itself or
// forwards to a backend over its own keep-alive pool (h1pool.go),
// streaming bodies both ways.
//
// What it does not handle it hands to the listener's net/http server for
// the rest of the connection, with the bytes already read: an Upgrade
// (WebSocket, h2c), HTTP/2 (prior knowledge, or h2 chosen by ALPN), gRPC,
// mirrors, backends spoken to over TLS or HTTP/2, and any head it does not
// fully understand, too large or malformed, so that net/http gives the
// answer (400, 431, ...) it always gave.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/h1wire"
	"github.com/hostgate/hostgate/proxy/h2"
	"github.com/hostgate/hostgate/proxy/l4"
	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
)

// Engine names the server of HTTP/1.1 connections.
type Engine string

const (
	// EngineNative is hostgate's own HTTP/1.1 engine, which hands what it
	// does not serve to net/http.
	EngineNative Engine = "native"
	// EngineStdlib serves every connection with net/http.
	EngineStdlib Engine = "stdlib"
)

const (
	// h1ReadBufferSize bounds the request heads the engine serves itself;
	// a longer one goes to net/http, which enforces MaxHeaderBytes.
	h1ReadBufferSize = 8 << 10
	// h1WriteBufferSize holds the head and body of most responses, which
	// then leave in one write. With 4 KiB, a 16 KiB response left in
	// pieces, and bench/run.sh's h1-16k served 0.65× nginx's requests/s
	// instead of 1.0×. A connection holds its writer only while it
	// answers, so idle connections do not pay for its size.
	h1WriteBufferSize = 32 << 10
	// expectContinueTimeout is how long a request with "Expect:
	// 100-continue" waits for the backend's answer before its body is sent
	// all the same, as net/http's Transport does.
	expectContinueTimeout = time.Second
)

var (
	h1Readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, h1ReadBufferSize) }}
	h1Writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, h1WriteBufferSize) }}
	// h1Buffers hold *[]byte of copyBufferSize, to relay bodies through.
	h1Buffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

	errUpgradeAnswer = errors.New("backend switched protocols unasked")
	errBadResponse   = errors.New("malformed response head from backend")
	errHeadTooLarge  = errors.New("response head from backend too large")
)

// h1conn is one client connection served by the engine.
type h1conn struct {
	l  *listener
	gc *guard.Conn
	// tc is the connection beneath TLS and the guard, which says when it
	// waits for a request.
	tc *guard.TrackedConn
	br *bufio.Reader
	// bw is the writer of the exchange under way, nil between them.
	bw *bufio.Writer
	// remote is the connection's address, client its IP, and peer that
	// IP parsed (the PROXY header's, with ProxyProtocol).
	remote, client string
	peer           netip.Addr
	req            h1wire.Head
	resp           h1wire.Head
	// body is the request body, rbody the response body.
	body, rbody h1wire.BodyReader
	scratch     [64]byte
	// linger says the connection ends with a request body unread.
	linger bool
	// http2 says the connection speaks HTTP/2, for the HTTP/2 engine.
	http2 bool
}

// acceptH1 accepts the listener's connections for the engine.
func (l *listener) acceptH1(ln guard.Listener) {
	for {
		c, err := ln.Listener.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors, say: wait for some to close, as
			// net/http does.
			l.srv.log.Debug("accept failed", "listener", l.addr, "error", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go l.serveConn(ln, c)
	}
}

// serveConn serves c, accepted from ln's socket, on its own goroutine: a
// ClientHello that a TLS listener on the socket claims goes to proxy/l4 (Divert reads it here, not in the accept loop, so that a slow
// client holds up no other); any other connection goes to the HTTP
// engines, which read the bytes Divert read as if unread.
func (l *listener) serveConn(ln guard.Listener, c net.Conn) {
	if l.sharedTLS != nil {
		read, taken := l.sharedTLS.Divert(c)
		if taken {
			return
		}
		if len(read) > 0 {
			c = l4.NewReplayConn(c, read)
		}
	}
	l.serveH1(ln.Guard(c))
}

func (l *listener) serveH1(gc *guard.Conn) {
	tc, _ := guard.Beneath[*guard.TrackedConn](gc)
	c := &h1conn{l: l, gc: gc, tc: tc, remote: gc.RemoteAddr().String(), peer: guard.AddrOf(gc.RemoteAddr())}
	c.client = c.remote
	if host, _, err := net.SplitHostPort(c.remote); err == nil {
		c.client = host
	}
	c.br = h1Readers.Get().(*bufio.Reader)
	c.br.Reset(gc)
	l.h1mu.Lock()
	l.h1conns[c] = struct{}{}
	l.h1mu.Unlock()

	handedOff := c.serve()

	l.h1mu.Lock()
	delete(l.h1conns, c)
	l.h1mu.Unlock()
	if c.http2 {
		// Handlers see the context net/http would give them: with
		// http.ServerContextKey, ReverseProxy resets a stream whose
		// backend body breaks off instead of ending it as if whole.
		ctx := guard.ConnContext(context.WithValue(context.Background(), http.ServerContextKey, l.http), gc)
		gc.LeaveFrames()
		// The engine reads through a buffer of its own: the HTTP/1.1
		// reader goes back to its pool with a copy of what it holds,
		// rather than staying with the connection for its life.
		ahead, _ := c.br.Peek(c.br.Buffered())
		conn := &guard.BufferedConn{Conn: gc, Reader: io.MultiReader(bytes.NewReader(bytes.Clone(ahead)), gc)}
		c.br.Reset(nil)
		h1Readers.Put(c.br)
		l.h2.ServeConn(conn, h2.ConnOpts{Context: ctx})
		return
	}
	if handedOff {
		return // the reader goes with the connection
	}
	c.br.Reset(nil)
	h1Readers.Put(c.br)
	if c.linger {
		lingerClose(gc)
	}
	gc.Close()
}

// closeIdleH1 makes the engine's connections close once idle, and wakes
// those idle now.
func (l *listener) closeIdleH1() {
	l.closing.Store(true)
	l.h1mu.Lock()
	defer l.h1mu.Unlock()
	for c := range l.h1conns {
		if c.tc.Idle() {
			_ = c.gc.SetReadDeadline(time.Now())
		}
	}
}

// serve runs the connection's requests in turn. It reports whether the
// connection was handed to net/http.
func (c *h1conn) serve() bool {
	o := &c.l.srv.opts
	for first := true; ; first = false {
		wait := o.IdleTimeout
		if first {
			wait = o.ReadHeaderTimeout
		}
		// The deadline first, then idle: closeIdleH1 sets its deadline
		// after either, or this sees closing.
		now := time.Now()
		if c.gc.SetReadDeadline(now.Add(wait)) != nil {
			return false
		}
		c.tc.MarkIdle(now)
		if c.l.closing.Load() {
			return false
		}
		if _, err := c.br.Peek(1); err != nil {
			if first {
				c.l.srv.connMetrics.FailedHandshake(c.gc.Conn)
			}
			return false
		}
		if !c.tc.Claim() {
			// Closed to make room: what came is dropped unanswered.
			return false
		}
		if c.l.closing.Load() {
			// closeIdleH1 may have found the connection idle just
			// before its request came, and cut the wait short after
			// this read: the request is served all the same, under
			// the wait's deadline, once closeIdleH1 is done (it holds
			// h1mu throughout). Otherwise its body, or the watch on
			// the client while the backend answers, would fail.
			c.l.h1mu.Lock()
			c.l.h1mu.Unlock()
			if c.gc.SetReadDeadline(time.Now().Add(wait)) != nil {
				return false
			}
		}
		if first {
			alpnH2 := false
			if tc, ok := c.gc.Conn.(*tls.Conn); ok {
				alpnH2 = tc.ConnectionState().NegotiatedProtocol == "h2"
			}
			switch {
			case c.l.h2 != nil && (alpnH2 || c.startsWithPreface()):
				c.http2 = true
				return true
			case alpnH2 || o.HTTP1Engine == EngineStdlib:
				return c.handOff()
			}
		}
		n, err := c.peekHead(!first)
		if err != nil {
			return false
		}
		if n == 0 || n > o.MaxHeaderBytes {
			// net/http holds the head to its limit, and answers 431.
			return c.handOff()
		}
		keep, handOff := c.exchange(n)
		if handOff {
			return c.handOff()
		}
		if !keep {
			return false
		}
	}
}

// peekHead waits for a whole request head in the reader's buffer and
// returns its length, 0 when it does not fit. With armHeaderTimeout the
// rest of a head not yet whole has ReadHeaderTimeout from now, instead
// of the idle wait that ended with its first bytes; a head that came
// whole, as most do, changes no deadline.
func (c *h1conn) peekHead(armHeaderTimeout bool) (int, error) {
	from := 0
	for {
		buf, _ := c.br.Peek(c.br.Buffered())
		if n := h1wire.HeadEnd(buf, from); n > 0 {
			return n, nil
		}
		if len(buf) == c.br.Size() {
			return 0, nil
		}
		if armHeaderTimeout {
			if err := c.gc.SetReadDeadline(time.Now().Add(c.l.srv.opts.ReadHeaderTimeout)); err != nil {
				return 0, err
			}
			armHeaderTimeout = false
		}
		from = h1wire.HeadSearchFrom(len(buf))
		if _, err := c.br.Peek(len(buf) + 1); err != nil {
			return 0, err
		}
	}
}

// startsWithPreface reports whether the connection starts with HTTP/2's
// client preface (h2c with prior knowledge). No HTTP/1.1 request starts
// like it, so a wait for more of it is a wait for an HTTP/2 client.
func (c *h1conn) startsWithPreface() bool {
	for {
		buf, _ := c.br.Peek(c.br.Buffered())
		n := min(len(buf), len(guard.H2Preface))
		if string(buf[:n]) != guard.H2Preface[:n] {
			return false
		}
		if n == len(guard.H2Preface) {
			return true
		}
		if _, err := c.br.Peek(n + 1); err != nil {
			return false
		}
	}
}

// handOff gives the connection, with what was read of it, to net/http.
func (c *h1conn) handOff() bool {
	if c.gc.SetReadDeadline(time.Time{}) != nil {
		return false
	}
	return c.l.handoff.Deliver(&guard.BufferedConn{Conn: c.gc, Reader: c.br})
}

// exchange serves the request whose head is the reader's first n bytes.
// It reports whether the connection stays open for another, or is to be
// handed over with the request unread.
func (c *h1conn) exchange(n int) (keep, handOff bool) {
	c.bw = h1Writers.Get().(*bufio.Writer)
	c.bw.Reset(c.gc)
	defer func() {
		// Whatever is left unflushed belongs to an answer given up on.
		c.bw.Reset(nil)
		h1Writers.Put(c.bw)
		c.bw = nil
	}()
	head, _ := c.br.Peek(n)
	req := &c.req
	if !h1wire.ParseRequest(string(head), req) || req.Upgrade || req.Method == "PRI" || isGRPC(req) {
		return false, true
	}
	l := c.l
	s := l.srv
	st := l.state.Load()
	ex := exchange{start: time.Now(), scheme: l.scheme, sets: *s.sets.Load()}
	ex.from = s.originOf(c.peer, c.client, req)
	v := view{
		Request: router.Request{Host: req.Host, Method: req.Method, Path: req.Path, RawQuery: req.Query, Header: req},
		scheme:  l.scheme,
		port:    l.port,
		client:  ex.from.client,
		guards:  st.guards,
		conn:    c.tc,
	}
	if l.scheme == "https" && st.routes != nil && st.routes.Shared() {
		v.tls = st.tls
		v.serverName = c.tc.ServerName
	}
	if st.routes != nil && st.routes.HasListenerFilters() {
		return false, true
	}
	ex.plan = decide(st.routes, ex.sets, &v)
	if ex.plan.action == actForward && !engineForwards(&ex.plan, req) {
		// net/http decides again, and counts the request again.
		ex.plan.release(&v, true)
		return false, true
	}
	defer ex.plan.release(&v, false)
	if _, err := c.br.Discard(n); err != nil {
		return false, false
	}
	l.inflight.Add(1)
	defer l.inflight.Add(-1)
	ex.stats = l.routeStats(st, ex.plan.target)
	// During the shutdown delay every answer closes its connection, as
	// on net/http (listener.ServeHTTP): clients leave while answers
	// still arrive.
	keep = !req.Close && (!req.HTTP10 || req.KeepAlive) && !s.draining.Load()
	switch {
	case req.Chunked:
		c.body.Start(c.br, h1wire.BodyChunked, 0)
	default:
		c.body.Start(c.br, h1wire.BodyLength, max(req.ContentLength, 0))
	}

	var status int
	var sent int64
	switch ex.plan.action {
	case actForward:
		status, sent, keep = c.forward(&ex, keep)
	case actRedirect, actPreflight:
		c.resp.Reset("")
		s.serverField(&c.resp.Fields)
		status = answer(&ex.plan, &v, &c.resp.Fields)
		keep = keep && c.body.Done
		c.statusLine(status)
		c.writeFields(c.resp.Fields, false)
		if status != http.StatusNoContent {
			c.bw.WriteString("Content-Length: 0\r\n")
		}
		c.endHead(keep, c.resp.Fields.Has("Date"))
	case actNotFound:
		status, sent, keep = c.writeError(http.StatusNotFound, keep)
	case actMisdirected:
		status, sent, keep = c.writeError(http.StatusMisdirectedRequest, keep)
	case actDenied:
		status, sent, keep = c.writeErrorBody(ex.plan.status, ex.plan.body, ex.plan.challenge, keep)
	case actInvalidBackend:
		status, sent, keep = c.writeError(http.StatusInternalServerError, keep)
	case actNoEndpoints:
		s.metrics.upstreamErrors[errNoEndpoint].Inc()
		status, sent, keep = c.writeError(http.StatusServiceUnavailable, keep)
	}
	if a := s.observe(l, &ex, status, sent); a != nil {
		a.RemoteAddr, a.Method, a.Host = c.remote, req.Method, req.Host
		a.Proto = "HTTP/1.1"
		if req.HTTP10 {
			a.Proto = "HTTP/1.0"
		}
		a.Path = req.Path
		if p, err := url.PathUnescape(req.Path); err == nil {
			a.Path = p
		}
		s.opts.AccessLog(a)
	}
	// The end of the answer goes out after it was counted, so that
	// whoever sees the end also sees the count, as with net/http.
	if c.bw.Flush() != nil {
		return false, false
	}
	// A body left unread would be taken for the next request.
	return keep && c.body.Done && !l.closing.Load(), false
}

// engineForwards reports whether the engine forwards what p plans itself:
// to an HTTP/1.1 backend, without a mirror, an authorization service to
// ask, a fallback backend or a pace for the answer, to a path it can send
// as is.
func engineForwards(p *plan, req router.Headers) bool {
	if p.authorize || upstreamProtocol(p, req) != "" || p.path != "" && !h1wire.ValidPath(p.path) || p.usesFallback() || p.target.Rule.ResponseRate != nil {
		return false
	}
	mirrored := false
	eachFilter(p, router.FilterRequestMirror, func(*router.Filter) { mirrored = true })
	return !mirrored
}

// writeError answers status as writeError does for net/http, leaving the
// answer in the buffer.
func (c *h1conn) writeError(status int, keep bool) (int, int64, bool) {
	return c.writeErrorBody(status, errorBodies[status], "", keep)
}

// writeErrorBody is writeError with a body of its own and, when not
// empty, a WWW-Authenticate field.
func (c *h1conn) writeErrorBody(status int, body, challenge string, keep bool) (int, int64, bool) {
	keep = keep && c.body.Done
	c.statusLine(status)
	c.bw.WriteString("Content-Type: text/plain; charset=utf-8\r\nContent-Length: ")
	c.bw.Write(strconv.AppendInt(c.scratch[:0], int64(len(body)), 10))
	c.bw.WriteString("\r\nX-Content-Type-Options: nosniff\r\n")
	if challenge != "" {
		c.bw.WriteString("WWW-Authenticate: " + challenge + "\r\n")
	}
	if c.l.srv.server != nil {
		c.bw.WriteString("Server: " + serverName + "\r\n")
	}
	c.endHead(keep, false)
	var sent int64
	if c.req.Method != http.MethodHead {
		c.bw.WriteString(body)
		sent = int64(len(body))
	}
	return status, sent, keep
}

// statusLine writes a status line as net/http does, in the client's
// version.
func (c *h1conn) statusLine(code int) {
	if c.req.HTTP10 {
		c.bw.WriteString("HTTP/1.0 ")
	} else {
		c.bw.WriteString("HTTP/1.1 ")
	}
	code3 := strconv.AppendInt(c.scratch[:0], int64(code), 10)
	c.bw.Write(code3)
	c.bw.WriteByte(' ')
	if text := http.StatusText(code); text != "" {
		c.bw.WriteString(text)
	} else {
		c.bw.WriteString("status code ")
		c.bw.Write(code3)
	}
	c.bw.WriteString("\r\n")
}

// writeFields writes the fields that are not hop-by-hop; keepTrailer keeps
// Trailer, which announces the trailers of a chunked response relayed as
// such.
func (c *h1conn) writeFields(fields h1wire.Fields, keepTrailer bool) {
	for i := range fields {
		f := &fields[i]
		if f.Hop && !(keepTrailer && strings.EqualFold(f.Name, "Trailer")) {
			continue
		}
		c.bw.WriteString(f.Name)
		c.bw.WriteString(": ")
		c.bw.WriteString(f.Value)
		c.bw.WriteString("\r\n")
	}
}

// endHead writes the fields every answer carries and ends the head. An
// answer given while its listener drains (a Gateway or port removed while
// the request was in flight) says Connection: close, so that the client
// does not send its next request to a socket about to close.
func (c *h1conn) endHead(keep, hasDate bool) {
	keep = keep && !c.l.closing.Load()
	for _, v := range c.l.alt {
		c.bw.WriteString("Alt-Svc: ")
		c.bw.WriteString(v)
		c.bw.WriteString("\r\n")
	}
	if !hasDate {
		c.bw.WriteString("Date: ")
		c.bw.Write(time.Now().UTC().AppendFormat(c.scratch[:0], http.TimeFormat))
		c.bw.WriteString("\r\n")
	}
	switch {
	case !keep && !c.req.HTTP10:
		c.bw.WriteString("Connection: close\r\n")
	case keep && c.req.HTTP10:
		c.bw.WriteString("Connection: keep-alive\r\n")
	}
	c.bw.WriteString("\r\n")
}

// forward relays the request to an endpoint of the plan's set (sendH1) and
// its response back; failures are answered 502, or 504 past the deadline.
func (c *h1conn) forward(ex *exchange, keep bool) (status int, sent int64, keepOpen bool) {
	s := c.l.srv
	req := &c.req
	ex.applyPolicies(req)
	deadline := ex.clientDeadline()
	if c.gc.SetReadDeadline(deadline) != nil {
		return 0, 0, false
	}
	o := &ex.from
	xff, proto, fhost := forwarded(o.connText, req.Host, ex.scheme, req, o.trusted)
	req.Fields = append(req.Fields,
		h1wire.Field{Name: "X-Forwarded-For", Value: xff},
		h1wire.Field{Name: "X-Forwarded-Proto", Value: proto},
		h1wire.Field{Name: "X-Forwarded-Host", Value: fhost},
		h1wire.Field{Name: "X-Real-Ip", Value: o.clientText})
	if o.requestID != "" {
		req.Fields = append(req.Fields, h1wire.Field{Name: "X-Request-Id", Value: o.requestID})
	}
	if cert := c.clientCert(); cert != "" {
		req.Fields = append(req.Fields, h1wire.Field{Name: clientCertField, Value: cert})
	}
	if ex.plan.clientCert != nil {
		ex.plan.clientCert.setFields(&req.Fields)
	}
	eachFilter(&ex.plan, router.FilterRequestHeaderModifier, func(f *router.Filter) { modifyHeader(&req.Fields, f.RequestHeaders) })

	// Only a request without a body that is safe to repeat goes again on
	// a fresh connection after a reused one turned out closed, as
	// net/http's Transport does.
	bodiless := c.body.Done
	length := req.ContentLength
	if req.Chunked {
		length = -1
	}
	tooLarge, limited := bodyTooLarge(ex.plan.target.Rule, length, &c.body)
	if tooLarge && !bodiless {
		// Unread, the body would reset the connection under the answer.
		c.linger = true
		return c.writeError(http.StatusRequestEntityTooLarge, false)
	}
	ex.limited = limited
	replayable := bodiless && repeatable(req.Method, req.Get("Idempotency-Key"))
	if limits := s.opts.requestBodyLimits(); !bodiless && !req.Chunked && limits.enabled() && !c.bodyBuffered() {
		// Setting a read deadline in the past wakes the read waiting
		// for the body; the connection closes after the 408.
		ex.pace = startPacer(limits, &c.body, func() { _ = c.gc.SetReadDeadline(time.Unix(1, 0)) })
	}
	uc, status, err := s.sendH1(ex, bodiless, replayable, c.ClientGone, &c.resp, req.Method, func(uc *upstream.Conn) (bool, error) { return c.roundTrip(uc, ex) })
	ex.pace.finish()
	if uc == nil {
		if status == 0 {
			// No one to answer; the request counts as aborted.
			return 0, 0, false
		}
		// After the client's fault, or past the deadline (the client's
		// read deadline with it), the connection ends.
		_, clientErr := errors.AsType[clientBodyError](err)
		keep = keep && !clientErr && (deadline.IsZero() || time.Now().Before(deadline))
		c.linger = ex.limited.tooLarge()
		return c.writeError(status, keep)
	}
	defer ex.host.End()
	return c.relayResponse(uc, ex, keep)
}

// sendH1 sends a request to an endpoint of the plan's set over the
// engine's pool, as forwarder does for net/http, in attempts as the rule's
// retry policy says (retry.go): send writes the request on uc, under
// ex.attemptDeadline, and reads the response head into resp. bodiless
// says the request has no body, replayable that it has none and is safe to
// send twice. A failure after the client left (clientGone) is not the
// endpoint's, and nothing more is tried. It returns the connection the
// response head came on, ex.host then holding an in-flight count for the
// caller to end, or the status to answer with (0 when the client is gone)
// and the error.
func (s *Server) sendH1(ex *exchange, bodiless, replayable bool, clientGone func() bool, resp *h1wire.Head, method string, send func(uc *upstream.Conn) (answered bool, err error)) (*upstream.Conn, int, error) {
	for {
		uc, status, err := s.attemptH1(ex, replayable, clientGone, send)
		answer := status
		if uc != nil {
			answer = resp.Status
		} else if status == 0 {
			return nil, 0, err
		}
		wait, again := ex.retryAfter(answer, err, bodiless, replayable)
		if !again {
			return uc, status, err
		}
		if uc != nil {
			s.discardH1(uc, resp, method, ex.host.Address())
			ex.host.End()
		}
		sleep(wait, nil)
		// A wait that overran the request's deadline comes before
		// clientGone: past it, the client socket's read deadline makes
		// the client look gone.
		if !ex.deadline.IsZero() && !time.Now().Before(ex.deadline) {
			return nil, http.StatusGatewayTimeout, os.ErrDeadlineExceeded
		}
		if clientGone() {
			return nil, 0, upstream.ErrClientGone
		}
		ex.startAttempt(time.Now())
	}
}

// discardH1 drops a response that is retried. Its connection goes back to
// the pool when no body follows the head, and is closed otherwise rather
// than read for nothing.
func (s *Server) discardH1(uc *upstream.Conn, resp *h1wire.Head, method, addr string) {
	mode := resp.BodyMode(method)
	if resp.Reusable(mode) && (mode == h1wire.BodyNone || mode == h1wire.BodyLength && resp.ContentLength == 0) {
		s.h1.Put(addr, uc)
		return
	}
	uc.Close()
}

// attemptH1 makes one attempt of sendH1: a reused connection found closed
// is replaced for a request that can be sent again, and a failure moves to
// another endpoint where tryAnother allows.
func (s *Server) attemptH1(ex *exchange, replayable bool, clientGone func() bool, send func(uc *upstream.Conn) (answered bool, err error)) (*upstream.Conn, int, error) {
	deadline := ex.attemptDeadline
	var tried [maxConnectAttempts]*upstream.Host
	fresh := false
	for n := 0; ; {
		h := ex.plan.pick(tried[:n])
		ex.host = h
		h.Begin()
		connect := ex.plan.target.Rule.Timeouts.Connect
		uc, reused, err := s.h1.Get(h.Address(), deadline, connect, fresh)
		if err == nil && reused && !replayable && uc.Stale() {
			uc.Close()
			uc, reused, err = s.h1.Get(h.Address(), deadline, connect, true)
		}
		var answered bool
		if err == nil {
			sentAt := time.Now()
			if answered, err = send(uc); err == nil {
				ex.stats.upstream.Observe(time.Since(sentAt).Seconds())
				h.Succeeded()
				return uc, 0, nil
			}
		}
		h.End()
		if uc != nil {
			uc.Close()
		}
		_, clientErr := errors.AsType[clientBodyError](err)
		switch {
		case s.metrics.cutBy(ex.pace.err()):
			// First: the wake-up of the cut read looks like a client
			// that left (net/http cancels the request on it).
			return nil, http.StatusRequestTimeout, ex.pace.err()
		case errors.Is(err, upstream.ErrClientGone):
			return nil, 0, err
		case !deadline.IsZero() && !time.Now().Before(deadline):
			// A slow upload too: the attempt timed out, which a retry
			// policy may make again.
			s.metrics.upstreamErrors[errTimeout].Inc()
			return nil, http.StatusGatewayTimeout, err
		case clientGone():
			// Asked once the deadline is known not to have passed: the
			// engine's client socket carries no earlier one.
			return nil, 0, upstream.ErrClientGone
		case reused && replayable && !answered && !fresh && !isTimeout(err):
			fresh = true
			continue
		case clientErr && ex.limited.tooLarge():
			return nil, http.StatusRequestEntityTooLarge, err
		case clientErr:
			// The client's fault, not the endpoint's.
			return nil, http.StatusBadGateway, err
		}
		s.metrics.upstreamError(err)
		if h.Failed() {
			s.metrics.ejections.Inc()
		}
		if tryAnother(err, replayable) && n+1 < s.opts.ConnectAttempts && n+1 < ex.plan.set.Len() && ex.mayMove(time.Now()) {
			s.metrics.connectRetries.Inc()
			tried[n] = h
			n++
			fresh = false
			continue
		}
		if isTimeout(err) {
			return nil, http.StatusGatewayTimeout, err
		}
		return nil, http.StatusBadGateway, err
	}
}

// bodyBuffered reports whether the whole request body is already in the
// connection's reader, as a small body sent with its head is: then no
// client can be slow with it.
func (c *h1conn) bodyBuffered() bool {
	return c.body.Mode == h1wire.BodyLength && int64(c.br.Buffered()) >= c.body.Left
}

// clientBodyError is a failure to read the request body from the client.
type clientBodyError struct{ error }

func (e clientBodyError) Unwrap() error { return e.error }

// repeatable reports whether a request may be sent again, as net/http's
// Transport judges it: a method safe to repeat, or an Idempotency-Key.
func repeatable(method, idempotencyKey string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return idempotencyKey != ""
}

// roundTrip sends the request on uc and reads the response head into
// c.resp. answered says bytes of a response came, after which the request
// is not sent again.
func (c *h1conn) roundTrip(uc *upstream.Conn, ex *exchange) (answered bool, err error) {
	deadline := ex.attemptDeadline
	// Pooled and new connections have none, and each deadline set is a
	// timer changed.
	if !deadline.IsZero() {
		if err := uc.SetDeadline(deadline); err != nil {
			return false, err
		}
	}
	uc.SetStall(&ex.plan.target.Rule.Timeouts, deadline)
	req := &c.req
	bw := uc.Writer
	writeRequestLine(bw, ex, req.Method, req.Path, req.Query, req.Host)
	for i := range req.Fields {
		f := &req.Fields[i]
		// Fields a modifier may have set that the framing owns, as
		// net/http's Transport ignores them.
		if f.Hop || strings.EqualFold(f.Name, "Host") || strings.EqualFold(f.Name, "Content-Length") || strings.EqualFold(f.Name, "Transfer-Encoding") || strings.EqualFold(f.Name, "Trailer") {
			continue
		}
		bw.WriteString(f.Name)
		bw.WriteString(": ")
		bw.WriteString(f.Value)
		bw.WriteString("\r\n")
	}
	endRequestHead(bw, req.Method, req.ContentLength, req.Chunked, req.TETrailers)

	if !c.body.Done && req.Expect100 && !req.HTTP10 {
		if err := bw.Flush(); err != nil {
			return false, err
		}
		// The backend answers 100 Continue, or at once with a final
		// status and the body is never sent, or nothing: then it gets the
		// body after a while anyway.
		_ = uc.SetReadDeadline(upstream.Earliest(time.Now().Add(expectContinueTimeout), deadline))
		_, err := uc.Reader.Peek(1)
		_ = uc.SetReadDeadline(deadline)
		if err == nil {
			if err := c.readResponse(uc); err != nil {
				return true, err
			}
			if c.resp.Status != http.StatusContinue {
				return true, nil
			}
		} else if ne, ok := errors.AsType[net.Error](err); !ok || !ne.Timeout() {
			return false, err
		}
		c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		if err := c.bw.Flush(); err != nil {
			return false, clientBodyError{err}
		}
	}
	var body io.Reader
	switch {
	case ex.limited != nil:
		body = ex.limited
	case ex.pace != nil:
		body = ex.pace
	case !c.body.Done:
		body = &c.body
	}
	if early, err := sendBody(uc, body, c.req.Chunked); err != nil {
		// The backend may have answered before reading it all.
		if early && c.readResponse(uc) == nil {
			return true, nil
		}
		return false, err
	}
	if err := c.awaitResponse(uc, deadline); err != nil {
		return false, err
	}
	return true, c.readResponse(uc)
}

// writeRequestLine writes the request line and Host field of a request to
// the endpoint ex.host: the plan's path and host where it rewrites them.
func writeRequestLine(bw *bufio.Writer, ex *exchange, method, path, query, host string) {
	bw.WriteString(method)
	bw.WriteByte(' ')
	if ex.plan.path != "" {
		bw.WriteString(ex.plan.path)
	} else {
		bw.WriteString(path)
	}
	if query != "" {
		bw.WriteByte('?')
		bw.WriteString(query)
	}
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	switch {
	case ex.plan.host != "":
		bw.WriteString(ex.plan.host)
	case host != "":
		bw.WriteString(host)
	default:
		bw.WriteString(ex.host.Address())
	}
	bw.WriteString("\r\n")
}

// endRequestHead writes the fields the engine owns, the framing of the
// body among them, and ends the head.
func endRequestHead(bw *bufio.Writer, method string, contentLength int64, chunked, teTrailers bool) {
	if teTrailers {
		bw.WriteString("Te: trailers\r\n")
	}
	switch {
	case chunked:
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	case contentLength > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch:
		var digits [20]byte
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(digits[:0], max(contentLength, 0), 10))
		bw.WriteString("\r\n")
	}
	bw.WriteString("\r\n")
}

// sendBody relays the request body, if any, to the backend and sends the
// request. early says the body could not all be written, where the
// backend may have answered before reading it; a failure to read the body
// is a clientBodyError.
func sendBody(uc *upstream.Conn, body io.Reader, chunked bool) (early bool, err error) {
	if body == nil {
		return false, uc.Writer.Flush()
	}
	buf := h1Buffers.Get().(*[]byte)
	_, readErr, writeErr := h1wire.Relay(uc.Writer, body, *buf, chunked, chunked)
	h1Buffers.Put(buf)
	if readErr == nil && writeErr == nil {
		writeErr = uc.Writer.Flush()
	}
	if readErr != nil {
		return false, clientBodyError{readErr}
	}
	return writeErr != nil, writeErr
}

// awaitResponse waits for the backend's response to begin, and abandons a
// request whose client hung up meanwhile (upConn.watchClient).
func (c *h1conn) awaitResponse(uc *upstream.Conn, deadline time.Time) error {
	uc.WatchClient(c, deadline)
	_, err := uc.Reader.Peek(1)
	if unwatchErr := uc.UnwatchClient(); err == nil {
		err = unwatchErr
	}
	return err
}

// ClientGone reports whether the client hung up.
func (c *h1conn) ClientGone() bool {
	return upstream.SocketState(c.tc.Conn) == upstream.SocketClosed
}

// clientCert is the X-Forwarded-Client-Cert value of the client
// certificate the connection's handshake verified, if any.
func (c *h1conn) clientCert() string {
	return c.tc.ClientCert
}

// readResponse reads a final response head into c.resp, relaying the
// informational ones before it (103 Early Hints) to the client; a 100
// Continue is the engine's to send, and comes before the body.
func (c *h1conn) readResponse(uc *upstream.Conn) error {
	informational := c.relayInformational
	if c.req.HTTP10 {
		informational = nil
	}
	return readFinalResponse(uc.Reader, &c.resp, c.body.Done, informational)
}

func (c *h1conn) relayInformational(resp *h1wire.Head) error {
	c.statusLine(resp.Status)
	c.writeFields(resp.Fields, false)
	c.bw.WriteString("\r\n")
	if err := c.bw.Flush(); err != nil {
		return clientBodyError{err}
	}
	return nil
}

// readFinalResponse reads a final response head into resp, or a 100
// Continue while the request body is still to be sent (bodySent unset).
// The informational responses before it (103 Early Hints) go to
// informational, if set, and are dropped otherwise.
func readFinalResponse(br *bufio.Reader, resp *h1wire.Head, bodySent bool, informational func(*h1wire.Head) error) error {
	for {
		raw, err := readResponseHead(br)
		if err != nil {
			return err
		}
		if !h1wire.ParseResponse(raw, resp) {
			return errBadResponse
		}
		switch code := resp.Status; {
		case code == http.StatusSwitchingProtocols:
			return errUpgradeAnswer
		case code == http.StatusContinue:
			if bodySent {
				continue
			}
			return nil
		case code < 200:
			if informational == nil {
				continue
			}
			if err := informational(resp); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// readResponseHead reads a response head off br. One longer than br's
// buffer is gathered, up to upstreamMaxHeaderBytes.
func readResponseHead(br *bufio.Reader) (string, error) {
	from := 0
	for {
		buf, _ := br.Peek(br.Buffered())
		if n := h1wire.HeadEnd(buf, from); n > 0 {
			raw := string(buf[:n])
			_, err := br.Discard(n)
			return raw, err
		}
		if len(buf) == br.Size() {
			break
		}
		from = h1wire.HeadSearchFrom(len(buf))
		if _, err := br.Peek(len(buf) + 1); err != nil {
			if err == io.EOF && len(buf) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
	}
	var head []byte
	for {
		b, err := br.ReadSlice('\n')
		head = append(head, b...)
		if len(head) > upstreamMaxHeaderBytes {
			return "", errHeadTooLarge
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
		if n := h1wire.HeadEnd(head, h1wire.HeadSearchFrom(len(head)-len(b))); n > 0 {
			return string(head), nil
		}
	}
}

// relayResponse writes the response in c.resp, streaming its body, and
// returns uc to the pool when it was read whole.
func (c *h1conn) relayResponse(uc *upstream.Conn, ex *exchange, keep bool) (status int, sent int64, keepOpen bool) {
	req, resp := &c.req, &c.resp
	status = resp.Status
	mode := resp.BodyMode(req.Method)
	// A body of unknown length goes to HTTP/1.1 clients chunked, and ends
	// the connection of an HTTP/1.0 one.
	unknown := mode == h1wire.BodyChunked || mode == h1wire.BodyUntilClose
	chunked := unknown && !req.HTTP10
	keep = keep && !(unknown && req.HTTP10)
	// The request body is unread when the backend answered early.
	keep = keep && c.body.Done
	reusable := resp.Reusable(mode) && c.body.Done

	c.l.srv.serverField(&resp.Fields)
	editResponse(&ex.plan, &resp.Fields)
	c.statusLine(status)
	c.writeFields(resp.Fields, chunked)
	if resp.ContentLength >= 0 && mode != h1wire.BodyChunked {
		c.bw.WriteString("Content-Length: ")
		c.bw.Write(strconv.AppendInt(c.scratch[:0], resp.ContentLength, 10))
		c.bw.WriteString("\r\n")
	}
	if chunked {
		c.bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	c.endHead(keep, resp.Fields.Has("Date"))
	if unknown && uc.Reader.Buffered() == 0 {
		// The head goes out at once when nothing of the body is here: a
		// stream's first piece may be long in coming.
		if c.bw.Flush() != nil {
			uc.Close()
			return status, 0, false
		}
	}

	c.rbody.Start(uc.Reader, mode, max(resp.ContentLength, 0))
	c.rbody.KeepTrailer = chunked
	var readErr, writeErr error
	if mode != h1wire.BodyNone {
		buf := h1Buffers.Get().(*[]byte)
		// Bodies of unknown length are often streams (server-sent
		// events): each piece goes out as it comes, and a client that
		// leaves during a long wait for the next ends the stream then.
		if unknown {
			uc.WatchClient(c, ex.attemptDeadline)
		}
		sent, readErr, writeErr = h1wire.Relay(c.bw, &c.rbody, *buf, chunked, unknown)
		h1Buffers.Put(buf)
	}
	if readErr != nil || writeErr != nil || !reusable {
		uc.Close()
	} else {
		c.l.srv.h1.Put(ex.host.Address(), uc)
	}
	// Cut short, what came goes out all the same, and closing the
	// connection tells the client the rest is missing.
	return status, sent, keep && readErr == nil && writeErr == nil
}
