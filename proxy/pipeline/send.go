package pipeline

// Requests to HTTP/1.1 backends over the pool of HTTP/1.1 connections
// (upstream.Pool), for the HTTP/1.1 engine and the bridge: the attempts a
// rule's retry policy and ConnectAttempts allow, the request head and
// body, and the response head.

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hostgate/hostgate/proxy/h1wire"
	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
)

var (
	// h1Buffers hold *[]byte of copyBufferSize, to relay bodies through.
	h1Buffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

	errUpgradeAnswer = errors.New("backend switched protocols unasked")
	errBadResponse   = errors.New("malformed response head from backend")
	errHeadTooLarge  = errors.New("response head from backend too large")
)

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
func (s *Shared) sendH1(ex *exchange, bodiless, replayable bool, clientGone func() bool, resp *h1wire.Head, method string, send func(uc *upstream.Conn) (answered bool, err error)) (*upstream.Conn, int, error) {
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
func (s *Shared) discardH1(uc *upstream.Conn, resp *h1wire.Head, method, addr string) {
	mode := resp.BodyMode(method)
	if resp.Reusable(mode) && (mode == h1wire.BodyNone || mode == h1wire.BodyLength && resp.ContentLength == 0) {
		s.h1.Put(addr, uc)
		return
	}
	uc.Close()
}

// attemptH1 makes one attempt of sendH1: a reused connection found closed,
// or holding bytes no request asked for, is replaced, and a failure moves
// to another endpoint where tryAnother allows (tries).
func (s *Shared) attemptH1(ex *exchange, replayable bool, clientGone func() bool, send func(uc *upstream.Conn) (answered bool, err error)) (*upstream.Conn, int, error) {
	deadline := ex.attemptDeadline
	var t tries
	for {
		h := ex.nextTry(&t)
		connect := ex.plan.target.Rule.Timeouts.Connect
		uc, reused, err := s.h1.Get(h.Address(), deadline, connect, t.fresh)
		// Looked at for every request, not only those that cannot be
		// sent twice: bytes a backend sent past its last response (a
		// body to a HEAD, after a 204 or 304, past Content-Length) would
		// be read as the answer to this one, another client's.
		if err == nil && reused && uc.Stale() {
			uc.Close()
			uc, reused, err = s.h1.Get(h.Address(), deadline, connect, true)
		}
		var answered bool
		if err == nil {
			sentAt := time.Now()
			if answered, err = send(uc); err == nil {
				ex.trySucceeded(sentAt)
				return uc, 0, nil
			}
		}
		h.End()
		if uc != nil {
			uc.Close()
		}
		status, again, err := s.tryFailed(ex, &t, err, reused, answered, replayable, clientGone)
		if !again {
			return nil, status, err
		}
	}
}

// tries is what one attempt went through: the endpoints that failed to
// take it, and whether the next try needs a fresh connection. An engine
// that must not block drives an attempt try by try with it, as attemptH1
// does.
type tries struct {
	tried [MaxConnectAttempts]*upstream.Host
	n     int
	fresh bool
}

// nextTry picks the endpoint of the attempt's next try, which then counts
// as in flight.
func (ex *exchange) nextTry(t *tries) *upstream.Host {
	h := ex.plan.pick(t.tried[:t.n])
	ex.host = h
	h.Begin()
	return h
}

// trySucceeded counts a try answered with a response head, sent at
// sentAt.
func (ex *exchange) trySucceeded(sentAt time.Time) {
	ex.stats.upstream.Observe(time.Since(sentAt).Seconds())
	ex.host.Succeeded()
}

// tryFailed decides after a try that failed with err, its in-flight count
// ended: again says another try is to be made (t says how), and otherwise
// status is the answer (0 when the client is gone) and err why. reused
// says the try's connection came from the pool, answered that bytes of a
// response came on it.
func (s *Shared) tryFailed(ex *exchange, t *tries, err error, reused, answered, replayable bool, clientGone func() bool) (status int, again bool, _ error) {
	deadline := ex.attemptDeadline
	h := ex.host
	_, clientErr := errors.AsType[ClientBodyError](err)
	switch {
	case s.metrics.cutBy(ex.pace.err()):
		// First: the wake-up of the cut read looks like a client
		// that left (net/http cancels the request on it).
		return http.StatusRequestTimeout, false, ex.pace.err()
	case errors.Is(err, upstream.ErrClientGone):
		return 0, false, err
	case !deadline.IsZero() && !time.Now().Before(deadline):
		// A slow upload too: the attempt timed out, which a retry
		// policy may make again.
		s.metrics.upstreamErrors[errTimeout].Inc()
		return http.StatusGatewayTimeout, false, err
	case clientGone():
		// Asked once the deadline is known not to have passed: the
		// engine's client socket carries no earlier one.
		return 0, false, upstream.ErrClientGone
	case reused && replayable && !answered && !t.fresh && !isTimeout(err):
		t.fresh = true
		return 0, true, nil
	case clientErr && ex.limited.tooLarge():
		return http.StatusRequestEntityTooLarge, false, err
	case clientErr:
		// The client's fault, not the endpoint's.
		return http.StatusBadGateway, false, err
	}
	s.metrics.upstreamError(err)
	if h.Failed() {
		s.metrics.ejections.Inc()
	}
	if tryAnother(err, replayable) && t.n+1 < s.cfg.ConnectAttempts && t.n+1 < ex.plan.set.Len() && ex.mayMove(time.Now()) {
		s.metrics.connectRetries.Inc()
		t.tried[t.n] = h
		t.n++
		t.fresh = false
		return 0, true, nil
	}
	if isTimeout(err) {
		return http.StatusGatewayTimeout, false, err
	}
	return http.StatusBadGateway, false, err
}

// arm gives uc the attempt's deadline and the rule's backend read and
// send timeouts.
func (ex *exchange) arm(uc *upstream.Conn) error {
	deadline := ex.attemptDeadline
	// Pooled and new connections have none, and each deadline set is a
	// timer changed.
	if !deadline.IsZero() {
		if err := uc.SetDeadline(deadline); err != nil {
			return err
		}
	}
	uc.SetStall(&ex.plan.target.Rule.Timeouts, deadline)
	return nil
}

// ClientBodyError is a failure to read the request body from the client.
type ClientBodyError struct{ Err error }

func (e ClientBodyError) Error() string { return e.Err.Error() }
func (e ClientBodyError) Unwrap() error { return e.Err }

// Repeatable reports whether a request may be sent again, as net/http's
// Transport judges it: a method safe to repeat, or an Idempotency-Key.
func Repeatable(method, idempotencyKey string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return idempotencyKey != ""
}

// writeRequestLine writes the request line and Host field of a request to
// the endpoint ex.host: the plan's path, query and host where it rewrites
// them.
func writeRequestLine(bw *bufio.Writer, ex *exchange, method, path, query, host string) {
	bw.WriteString(method)
	bw.WriteByte(' ')
	if ex.plan.path != "" {
		bw.WriteString(ex.plan.path)
	} else {
		bw.WriteString(path)
	}
	if ex.plan.rewritesQuery {
		query = ex.plan.query
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

// EndRequestHead writes the fields the engine owns, the framing of the
// body among them, and ends the head.
func EndRequestHead(bw *bufio.Writer, method string, contentLength int64, chunked, teTrailers bool) {
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

// SendBody relays the request body, if any, to the backend and sends the
// request. early says the body could not all be written, where the
// backend may have answered before reading it; a failure to read the body
// is a ClientBodyError.
func SendBody(uc *upstream.Conn, body io.Reader, chunked bool) (early bool, err error) {
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
		return false, ClientBodyError{readErr}
	}
	return writeErr != nil, writeErr
}

// ReadFinalResponse reads a final response head into resp, or a 100
// Continue while the request body is still to be sent (bodySent unset).
// The informational responses before it (103 Early Hints) go to
// informational, if set, and are dropped otherwise.
func ReadFinalResponse(br *bufio.Reader, resp *h1wire.Head, bodySent bool, informational func(*h1wire.Head) error) error {
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
