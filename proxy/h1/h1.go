package h1

// The HTTP/1.1 engine: hostgate's own server and client for plain HTTP/1.1
// proxying, which net/http and httputil.ReverseProxy serve at a fraction
// of the speed (here one goroutine per connection and two allocations per
// request; there two goroutines per connection, contexts and about ninety
// allocations per request).
//
// One goroutine serves a client connection, reading through the guard
// (proxy/guard), so its smuggling refusals hold: a refused request reaches the
// engine as a poisoned head, which it does not parse and hands over. It
// runs the same request path as net/http (pipeline.Listener.Decide), then
// answers itself or forwards to a backend over the pool of HTTP/1.1
// connections to endpoints (upstream.Pool), streaming bodies both ways.
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
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/h1wire"
	"github.com/hostgate/hostgate/proxy/pipeline"
	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
)

const (
	// readBufferSize bounds the request heads the engine serves itself;
	// a longer one goes to net/http, which enforces MaxHeaderBytes.
	readBufferSize = 8 << 10
	// writeBufferSize holds the head and body of most responses, which
	// then leave in one write. With 4 KiB, a 16 KiB response left in
	// pieces, and bench/run.sh's h1-16k served 0.65× nginx's requests/s
	// instead of 1.0×. A connection holds its writer only while it
	// answers, so idle connections do not pay for its size.
	writeBufferSize = 32 << 10
	// relayBufferSize is the size of the buffers bodies are relayed
	// through, as ReverseProxy's.
	relayBufferSize = 32 << 10
	// expectContinueTimeout is how long a request with "Expect:
	// 100-continue" waits for the backend's answer before its body is sent
	// all the same, as net/http's Transport does.
	expectContinueTimeout = time.Second
)

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufferSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, writeBufferSize) }}
	// relayBuffers hold *[]byte of relayBufferSize, to relay bodies
	// through.
	relayBuffers = sync.Pool{New: func() any { b := make([]byte, relayBufferSize); return &b }}
)

// Config is what the engine serves a listener's connections with.
type Config struct {
	// Path is the listener's request path.
	Path *pipeline.Listener
	// HandOff takes the connections net/http is to serve, with what was
	// read of them.
	HandOff *guard.Handoff
	// HTTP2 serves a connection found to speak HTTP/2 (ALPN h2, or the
	// client preface), gc being the guard's connection beneath conn; nil
	// hands such connections to net/http.
	HTTP2 func(conn net.Conn, gc *guard.Conn)
	// HandOffHTTP1 hands every HTTP/1.1 connection to net/http: the
	// engine only finds the HTTP/2 ones (the stdlib HTTP/1.1 engine).
	HandOffHTTP1 bool
	// ReadHeaderTimeout, IdleTimeout and MaxHeaderBytes are as in
	// proxy.Options.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	// AltSvc is the Alt-Svc field of every answer, if any.
	AltSvc []string
	// ServerField has the engine's own answers carry a Server field.
	ServerField bool
	// Metrics count the handshakes that fail.
	Metrics *guard.Metrics
}

// Server serves the HTTP/1.1 connections of one listener.
type Server struct {
	cfg Config
	// conns are the connections served, for CloseIdle to find the idle
	// ones; closing says the listener drains.
	mu      sync.Mutex
	conns   map[*conn]struct{}
	closing atomic.Bool
}

// New returns a Server of cfg.
func New(cfg Config) *Server {
	return &Server{cfg: cfg, conns: map[*conn]struct{}{}}
}

// conn is one client connection served by the engine.
type conn struct {
	s  *Server
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
	// linger says the connection ends with a request body unread.
	linger bool
	// sentShort says the backend answered before the request body all
	// went: the rest is not on its connection, which can carry no other
	// request.
	sentShort bool
	// http2 says the connection speaks HTTP/2, for the HTTP/2 engine.
	http2 bool
}

// ServeConn serves gc until it closes, or hands it to net/http or the
// HTTP/2 engine.
func (s *Server) ServeConn(gc *guard.Conn) {
	tc, _ := guard.Beneath[*guard.TrackedConn](gc)
	c := &conn{s: s, gc: gc, tc: tc, remote: gc.RemoteAddr().String(), peer: guard.AddrOf(gc.RemoteAddr())}
	c.client = c.remote
	if host, _, err := net.SplitHostPort(c.remote); err == nil {
		c.client = host
	}
	c.br = readers.Get().(*bufio.Reader)
	c.br.Reset(gc)
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()

	handedOff := c.serve()

	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	if c.http2 {
		gc.LeaveFrames()
		// The engine reads through a buffer of its own: the HTTP/1.1
		// reader goes back to its pool with a copy of what it holds,
		// rather than staying with the connection for its life.
		ahead, _ := c.br.Peek(c.br.Buffered())
		conn := &guard.BufferedConn{Conn: gc, Reader: io.MultiReader(bytes.NewReader(bytes.Clone(ahead)), gc)}
		c.br.Reset(nil)
		readers.Put(c.br)
		s.cfg.HTTP2(conn, gc)
		return
	}
	if handedOff {
		return // the reader goes with the connection
	}
	c.br.Reset(nil)
	readers.Put(c.br)
	if c.linger {
		lingerClose(gc)
	}
	gc.Close()
}

// CloseIdle makes the engine's connections close once idle, and wakes
// those idle now: the listener drains.
func (s *Server) CloseIdle() {
	s.closing.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.tc.Idle() {
			_ = c.gc.SetReadDeadline(time.Now())
		}
	}
}

// serve runs the connection's requests in turn. It reports whether the
// connection was handed to net/http.
func (c *conn) serve() bool {
	o := &c.s.cfg
	for first := true; ; first = false {
		wait := o.IdleTimeout
		if first {
			wait = o.ReadHeaderTimeout
		}
		// The deadline first, then idle: CloseIdle sets its deadline
		// after either, or this sees closing.
		now := time.Now()
		if c.gc.SetReadDeadline(now.Add(wait)) != nil {
			return false
		}
		c.tc.MarkIdle(now)
		if c.s.closing.Load() {
			return false
		}
		if _, err := c.br.Peek(1); err != nil {
			if first {
				c.s.cfg.Metrics.FailedHandshake(c.gc.Conn)
			}
			return false
		}
		if !c.tc.Claim() {
			// Closed to make room: what came is dropped unanswered.
			return false
		}
		if c.s.closing.Load() {
			// CloseIdle may have found the connection idle just
			// before its request came, and cut the wait short after
			// this read: the request is served all the same, under
			// the wait's deadline, once CloseIdle is done (it holds
			// mu throughout). Otherwise its body, or the watch on
			// the client while the backend answers, would fail.
			c.s.mu.Lock()
			c.s.mu.Unlock()
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
			case o.HTTP2 != nil && (alpnH2 || c.startsWithPreface()):
				c.http2 = true
				return true
			case alpnH2 || o.HandOffHTTP1:
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
func (c *conn) peekHead(armHeaderTimeout bool) (int, error) {
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
			if err := c.gc.SetReadDeadline(time.Now().Add(c.s.cfg.ReadHeaderTimeout)); err != nil {
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
func (c *conn) startsWithPreface() bool {
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
func (c *conn) handOff() bool {
	if c.gc.SetReadDeadline(time.Time{}) != nil {
		return false
	}
	return c.s.cfg.HandOff.Deliver(&guard.BufferedConn{Conn: c.gc, Reader: c.br})
}

// exchange serves the request whose head is the reader's first n bytes.
// It reports whether the connection stays open for another, or is to be
// handed over with the request unread.
func (c *conn) exchange(n int) (keep, handOff bool) {
	c.bw = writers.Get().(*bufio.Writer)
	c.bw.Reset(c.gc)
	defer func() {
		// Whatever is left unflushed belongs to an answer given up on.
		c.bw.Reset(nil)
		writers.Put(c.bw)
		c.bw = nil
	}()
	head, _ := c.br.Peek(n)
	req := &c.req
	if !h1wire.ParseRequest(string(head), req) || req.Upgrade || req.Method == "PRI" {
		return false, true
	}
	path := c.s.cfg.Path
	var ex pipeline.Exchange
	if !path.Decide(&ex, router.Request{Host: req.Host, Method: req.Method, Path: req.Path, RawQuery: req.Query, Header: req}, c.peer, c.client, c.tc) {
		return false, true
	}
	defer ex.End()
	if _, err := c.br.Discard(n); err != nil {
		return false, false
	}
	// During the shutdown delay every answer closes its connection, as
	// on net/http (pipeline.Listener.ServeHTTP): clients leave while
	// answers still arrive.
	keep = !req.Close && (!req.HTTP10 || req.KeepAlive) && !path.Draining()
	switch {
	case req.Chunked:
		c.body.Start(c.br, h1wire.BodyChunked, 0)
	default:
		c.body.Start(c.br, h1wire.BodyLength, max(req.ContentLength, 0))
	}

	var status int
	var sent int64
	if ex.Forwards() {
		status, sent, keep = c.forward(&ex, keep)
	} else {
		c.resp.Reset("")
		var body, challenge string
		switch status, body, challenge = ex.Answer(&c.resp.Fields); {
		case body != "":
			status, sent, keep = c.writeErrorBody(status, body, challenge, keep)
		default:
			// A redirect or a CORS preflight.
			keep = keep && c.body.Done
			h1wire.WriteStatusLine(c.bw, c.req.HTTP10, status)
			h1wire.WriteFields(c.bw, c.resp.Fields, false)
			if status != http.StatusNoContent {
				c.bw.WriteString("Content-Length: 0\r\n")
			}
			c.endHead(keep, c.resp.Fields.Has("Date"))
		}
	}
	ex.Record(status, sent, c.remote, req)
	// The end of the answer goes out after it was counted, so that
	// whoever sees the end also sees the count, as with net/http.
	if c.bw.Flush() != nil {
		return false, false
	}
	// A body left unread would be taken for the next request.
	return keep && c.body.Done && !c.s.closing.Load(), false
}

// writeError answers status as writeError does for net/http, leaving the
// answer in the buffer.
func (c *conn) writeError(status int, keep bool) (int, int64, bool) {
	return c.writeErrorBody(status, pipeline.ErrorBody(status), "", keep)
}

// writeErrorBody is writeError with a body of its own and, when not
// empty, a WWW-Authenticate field.
func (c *conn) writeErrorBody(status int, body, challenge string, keep bool) (int, int64, bool) {
	keep = keep && c.body.Done
	h1wire.WriteStatusLine(c.bw, c.req.HTTP10, status)
	server := ""
	if c.s.cfg.ServerField {
		server = pipeline.ServerName
	}
	h1wire.WriteErrorFields(c.bw, len(body), challenge, server)
	c.endHead(keep, false)
	var sent int64
	if c.req.Method != http.MethodHead {
		c.bw.WriteString(body)
		sent = int64(len(body))
	}
	return status, sent, keep
}

// endHead writes the fields every answer carries and ends the head. An
// answer given while its listener drains (a Gateway or port removed while
// the request was in flight) says Connection: close, so that the client
// does not send its next request to a socket about to close.
func (c *conn) endHead(keep, hasDate bool) {
	var now time.Time
	if !hasDate {
		now = time.Now()
	}
	h1wire.EndHead(c.bw, c.s.cfg.AltSvc, now, c.req.HTTP10, keep && !c.s.closing.Load())
}

// forward relays the request to an endpoint of the plan's set (sendH1) and
// its response back; failures are answered 502, or 504 past the deadline.
func (c *conn) forward(ex *pipeline.Exchange, keep bool) (status int, sent int64, keepOpen bool) {
	req := &c.req
	ex.ApplyPolicies(req)
	deadline := ex.ClientDeadline()
	if c.gc.SetReadDeadline(deadline) != nil {
		return 0, 0, false
	}
	ex.AddForwarded(req, c.clientCert())

	// Only a request without a body that is safe to repeat goes again on
	// a fresh connection after a reused one turned out closed, as
	// net/http's Transport does.
	bodiless := c.body.Done
	length := req.ContentLength
	if req.Chunked {
		length = -1
	}
	if ex.LimitBody(length, &c.body) && !bodiless {
		// Unread, the body would reset the connection under the answer.
		c.linger = true
		return c.writeError(http.StatusRequestEntityTooLarge, false)
	}
	replayable := bodiless && pipeline.Repeatable(req.Method, req.Get("Idempotency-Key"))
	if !bodiless && !req.Chunked && !c.bodyBuffered() {
		// Setting a read deadline in the past wakes the read waiting
		// for the body; the connection closes after the 408.
		ex.Pace(&c.body, func() { _ = c.gc.SetReadDeadline(time.Unix(1, 0)) })
	}
	uc, status, err := ex.Send(bodiless, replayable, c.ClientGone, &c.resp, req.Method, func(uc *upstream.Conn) (bool, error) { return c.roundTrip(uc, ex) })
	if uc == nil {
		if status == 0 {
			// No one to answer; the request counts as aborted.
			return 0, 0, false
		}
		// After the client's fault, or past the deadline (the client's
		// read deadline with it), the connection ends.
		_, clientErr := errors.AsType[pipeline.ClientBodyError](err)
		keep = keep && !clientErr && (deadline.IsZero() || time.Now().Before(deadline))
		c.linger = ex.BodyTooLarge()
		return c.writeError(status, keep)
	}
	return c.relayResponse(uc, ex, keep)
}

// bodyBuffered reports whether the whole request body is already in the
// connection's reader, as a small body sent with its head is: then no
// client can be slow with it.
func (c *conn) bodyBuffered() bool {
	return c.body.Mode == h1wire.BodyLength && int64(c.br.Buffered()) >= c.body.Left
}

// roundTrip sends the request on uc and reads the response head into
// c.resp. answered says bytes of a response came, after which the request
// is not sent again.
func (c *conn) roundTrip(uc *upstream.Conn, ex *pipeline.Exchange) (answered bool, err error) {
	if err := ex.Arm(uc); err != nil {
		return false, err
	}
	c.sentShort = false
	deadline := ex.AttemptDeadline()
	req := &c.req
	bw := uc.Writer
	ex.WriteRequestLine(bw, req.Method, req.Path, req.Query, req.Host)
	h1wire.WriteRequestFields(bw, req.Fields)
	pipeline.EndRequestHead(bw, req.Method, req.ContentLength, req.Chunked, req.TETrailers)

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
			return false, pipeline.ClientBodyError{Err: err}
		}
	}
	var body io.Reader
	if !c.body.Done {
		body = &c.body
	}
	if early, err := pipeline.SendBody(uc, ex.RequestBody(body), c.req.Chunked); err != nil {
		// The backend may have answered before reading it all.
		if early && c.readResponse(uc) == nil {
			c.sentShort = true
			return true, nil
		}
		return false, err
	}
	if err := c.awaitResponse(uc, deadline); err != nil {
		return false, err
	}
	return true, c.readResponse(uc)
}

// awaitResponse waits for the backend's response to begin, and abandons a
// request whose client hung up meanwhile (upConn.watchClient).
func (c *conn) awaitResponse(uc *upstream.Conn, deadline time.Time) error {
	uc.WatchClient(c, deadline)
	_, err := uc.Reader.Peek(1)
	if unwatchErr := uc.UnwatchClient(); err == nil {
		err = unwatchErr
	}
	return err
}

// ClientGone reports whether the client hung up.
func (c *conn) ClientGone() bool {
	return upstream.SocketState(c.tc.Conn) == upstream.SocketClosed
}

// clientCert is the X-Forwarded-Client-Cert value of the client
// certificate the connection's handshake verified, if any.
func (c *conn) clientCert() string {
	return c.tc.ClientCert
}

// readResponse reads a final response head into c.resp, relaying the
// informational ones before it (103 Early Hints) to the client; a 100
// Continue is the engine's to send, and comes before the body.
func (c *conn) readResponse(uc *upstream.Conn) error {
	informational := c.relayInformational
	if c.req.HTTP10 {
		informational = nil
	}
	return pipeline.ReadFinalResponse(uc.Reader, &c.resp, c.body.Done, informational)
}

func (c *conn) relayInformational(resp *h1wire.Head) error {
	h1wire.WriteStatusLine(c.bw, c.req.HTTP10, resp.Status)
	h1wire.WriteFields(c.bw, resp.Fields, false)
	c.bw.WriteString("\r\n")
	if err := c.bw.Flush(); err != nil {
		return pipeline.ClientBodyError{Err: err}
	}
	return nil
}

// relayResponse writes the response in c.resp, streaming its body, and
// returns uc to the pool when it was read whole.
func (c *conn) relayResponse(uc *upstream.Conn, ex *pipeline.Exchange, keep bool) (status int, sent int64, keepOpen bool) {
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
	// Read whole from the client, the body may still not all have gone
	// to the backend (the write of its end timed out after the backend
	// answered): the writer keeps the failure, and the next request on
	// the connection would fail with it.
	reusable := resp.Reusable(mode) && c.body.Done && !c.sentShort

	ex.EditResponse(&resp.Fields)
	h1wire.WriteStatusLine(c.bw, c.req.HTTP10, status)
	h1wire.WriteFields(c.bw, resp.Fields, chunked)
	if resp.ContentLength >= 0 && mode != h1wire.BodyChunked {
		h1wire.WriteContentLength(c.bw, resp.ContentLength)
	}
	if chunked {
		c.bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	c.endHead(keep, resp.Fields.Has("Date"))
	if unknown && uc.Reader.Buffered() == 0 {
		// The head goes out at once when nothing of the body is here: a
		// stream's first piece may be long in coming.
		if c.bw.Flush() != nil {
			ex.Finish(uc, false)
			return status, 0, false
		}
	}

	c.rbody.Start(uc.Reader, mode, max(resp.ContentLength, 0))
	c.rbody.KeepTrailer = chunked
	var readErr, writeErr error
	if mode != h1wire.BodyNone {
		buf := relayBuffers.Get().(*[]byte)
		// Bodies of unknown length are often streams (server-sent
		// events): each piece goes out as it comes, and a client that
		// leaves during a long wait for the next ends the stream then.
		if unknown {
			uc.WatchClient(c, ex.AttemptDeadline())
		}
		sent, readErr, writeErr = h1wire.Relay(c.bw, &c.rbody, *buf, chunked, unknown)
		relayBuffers.Put(buf)
	}
	ex.Finish(uc, readErr == nil && writeErr == nil && reusable)
	// Cut short, what came goes out all the same, and closing the
	// connection tells the client the rest is missing.
	return status, sent, keep && readErr == nil && writeErr == nil
}

// lingerTime and lingerBytes bound what is read and dropped of a request
// body before its connection closes. A client sends on until it reads the
// answer, so a cap below what it still has to send resets it all the same
// (a 3 MiB upload cut at ingress-nginx's 1 MiB default was): nginx reads
// for up to 30 s (lingering_time); 5 s and 64 MiB cost a core little on a
// link fast enough to send more.
const (
	lingerTime  = 5 * time.Second
	lingerBytes = 64 << 20
)

// lingerClose drops what the client still sends, for a while, before its
// connection closes: closing with unread bytes would reset it, and the
// reset can destroy the answer before the client read it (nginx's
// lingering_close).
func lingerClose(c net.Conn) {
	tcp, ok := guard.Beneath[*net.TCPConn](c)
	if !ok {
		return
	}
	_ = tcp.CloseWrite()
	_ = tcp.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.CopyN(io.Discard, tcp, lingerBytes)
}
