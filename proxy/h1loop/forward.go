//go:build linux

package h1loop

// Forwarding on the loop: a request to a backend is sent, and its
// response relayed, over a connection of the worker's (backend.go), each
// step taken when readiness says it will not block. The tries are the
// request path's (pipeline.Exchange NextTry, TryFailed): another
// endpoint after a failed connect, a fresh connection after a reused
// one turned out closed, 502 or 504 otherwise, as the netpoll engine
// decides them.
//
// What the loop forwards: a request whose body, if any, came whole with
// its head (Content-Length), to an endpoint given as an IP and port, for
// a rule with no retry policy, and no Expect: 100-continue with a body.
// A rule's backend read and send timeouts bound each wait for the
// response's next bytes and for the backend to take the request's, as
// the netpoll engine's deadlines per read and write do (armTry). Everything else is handed over
// before anything is sent. The response is relayed as the netpoll engine
// relays it: with its length, or chunked (a body of unknown length to an
// HTTP/1.1 client too; an HTTP/1.0 client's connection ends with it),
// informational responses before it passed on. The client's next
// requests, pipelined ones included, wait in the socket while one is
// forwarded, and the backend is not read while the client leaves the
// last piece unread.

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hostgate/hostgate/proxy/evloop"
	"github.com/hostgate/hostgate/proxy/h1wire"
	"github.com/hostgate/hostgate/proxy/pipeline"
	"github.com/hostgate/hostgate/proxy/upstream"
)

var (
	errBadResponse  = errors.New("malformed response head from backend")
	errUpgrade      = errors.New("backend switched protocols unasked")
	errHeadTooLarge = errors.New("response head from backend too large")
	errChunk        = errors.New("malformed chunked encoding from backend")
)

// maxChunkLine bounds a chunk's size line and a trailer field.
const maxChunkLine = 4 << 10

// The states of a chunked body's framing.
const (
	chunkSize = iota
	chunkData
	chunkDataEnd
	chunkTrailer
)

// forward sends the request at the start of c's buffer, its head
// headLen bytes long, to a backend, or hands it over when the loop does
// not forward it (see above). It reports false: the client's next
// request waits for the answer.
func (w *worker) forward(c *conn, headLen int) bool {
	ex, req := &c.ex, &c.req
	length := max(req.ContentLength, 0)
	if !ex.SendsOnce() || req.Expect100 && length > 0 || ex.LimitBody(length, nil) {
		ex.Abandon()
		c.handOffAfter = true
		return false
	}
	c.tries = pipeline.Tries{}
	h := ex.NextTry(&c.tries)
	if _, err := netip.ParseAddrPort(h.Address()); err != nil {
		// A name to resolve: net's resolver blocks.
		ex.EndTry()
		ex.Abandon()
		c.handOffAfter = true
		return false
	}
	ex.ApplyPolicies(req)
	ex.AddForwarded(req, c.tc.ClientCert)
	c.headLen, c.reqLen = headLen, headLen+int(length)
	c.keep = !req.Close && (!req.HTTP10 || req.KeepAlive) && !w.s.cfg.Path.Draining() && !w.s.closing.Load()
	c.replayable = length == 0 && pipeline.Repeatable(req.Method, req.Get("Idempotency-Key"))
	c.readStall, c.sendStall = ex.Stalls()
	c.forwarding, c.headSent, c.sent = true, false, 0
	w.try(c, h)
	return false
}

// try makes a try of c's request on endpoint h: on its most recently
// used idle connection, or a new one.
func (w *worker) try(c *conn, h *upstream.Host) {
	addr := h.Address()
	var u *upConn
	if !c.tries.Fresh() {
		u = w.takeIdle(addr, !c.replayable)
	}
	if u == nil {
		var err error
		if u, err = w.dial(addr); err != nil {
			w.tryFailed(c, err)
			return
		}
	}
	if u.buf == nil {
		u.buf = w.upBuffer()
	}
	u.c, c.up = c, u
	if u.connecting {
		w.wheel.Arm(&c.timer, upstream.Earliest(c.ex.AttemptDeadline(), w.now.Add(c.ex.ConnectTimeout())))
		return
	}
	w.sendRequest(c, u)
}

// armTry arms c's timer for the try under way, which waits stall at most
// (the rule's backend read or send timeout, 0 for none) within the
// try's deadline.
func (w *worker) armTry(c *conn, stall time.Duration) {
	deadline := c.ex.AttemptDeadline()
	if stall > 0 {
		deadline = upstream.Earliest(w.now.Add(stall), deadline)
	}
	w.wheel.Arm(&c.timer, deadline)
}

// sendRequest writes the request, head and body, in one write.
func (w *worker) sendRequest(c *conn, u *upConn) {
	req := &c.req
	w.ucur = u
	bw := w.ubw
	c.ex.WriteRequestLine(bw, req.Method, req.Path, req.Query, req.Host)
	h1wire.WriteRequestFields(bw, req.Fields)
	pipeline.EndRequestHead(bw, req.Method, req.ContentLength, false, req.TETrailers)
	bw.Write(c.buf[c.start+c.headLen : c.start+c.reqLen])
	c.sentAt = w.now
	bw.Flush()
	if err := w.uerr; err != nil {
		w.uerr = nil
		w.tryFailed(c, err)
		return
	}
	if len(u.out) > 0 {
		w.armTry(c, c.sendStall)
	} else {
		w.armTry(c, c.readStall)
	}
}

// upSink writes what the worker's ubw holds to the backend connection
// under way (ucur): at once as far as the socket takes it, the rest once
// it is writable. A failure is left in uerr, so that ubw stays usable.
type upSink struct{ w *worker }

func (s upSink) Write(p []byte) (int, error) {
	w := s.w
	u := w.ucur
	if w.up(u.fd) != u || w.uerr != nil {
		return len(p), nil
	}
	if errno := evloop.SendNow(u.fd, p, &u.out); errno != 0 {
		w.uerr = errno
	}
	return len(p), nil
}

// upEvent takes readiness on a backend connection.
func (w *worker) upEvent(u *upConn, events uint32) {
	c := u.c
	if c == nil {
		// Idle since the wait (dropStale closed those idle before): an
		// idle connection the backend closed, or sent bytes on, is of no
		// use, but the edge may be of bytes a read in the batch took.
		if events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 && stale(u.fd) {
			w.dropIdle(u)
		}
		return
	}
	if u.connecting {
		if events&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return
		}
		u.connecting = false
		if err := connected(u.fd); err != nil {
			w.tryFailed(c, err)
			return
		}
		w.sendRequest(c, u)
		return
	}
	if events&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) != 0 && len(u.out) > 0 {
		w.flushUp(c, u)
		if c.up != u {
			return
		}
	}
	if events&(unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		u.hup = true
	}
	if events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		w.upReadable(u)
	}
}

// flushUp writes what the backend had left of the request.
func (w *worker) flushUp(c *conn, u *upConn) {
	for len(u.out) > 0 {
		n, errno := evloop.Write(u.fd, u.out)
		switch {
		case errno == unix.EAGAIN:
			return
		case errno != 0:
			w.tryFailed(c, errno)
			return
		}
		u.out = u.out[n:]
		// The backend takes the request: the send timeout starts over.
		w.armTry(c, c.sendStall)
	}
	u.out = nil
	w.armTry(c, c.readStall)
}

// upReadable reads the response and relays it. Readiness is edge-
// triggered, as on the client side: a short read drained the socket.
func (w *worker) upReadable(u *upConn) {
	c := u.c
	for {
		if len(c.out) > 0 {
			// Backpressure: the client reads the last piece first.
			u.mayRead = true
			return
		}
		u.mayRead = false
		if u.start == u.n {
			u.start, u.n = 0, 0
		} else if u.n == len(u.buf) {
			switch {
			case u.start == 0 && c.headSent:
				w.finish(c, u, false, false)
				return
			case u.start == 0 && len(u.buf) >= upMaxHeadBytes:
				w.tryFailed(c, errHeadTooLarge)
				return
			case u.start == 0:
				// A head longer than the buffer: rare, so the
				// buffer grows for this response rather than
				// every buffer being large.
				u.buf = append(u.buf, make([]byte, len(u.buf))...)
			default:
				u.n = copy(u.buf, u.buf[u.start:u.n])
				u.start = 0
			}
		}
		room := len(u.buf) - u.n
		n, errno := evloop.Read(u.fd, u.buf[u.n:])
		switch {
		case errno == unix.EAGAIN:
			return
		case errno != 0 || n == 0:
			w.upEnded(c, u, errno)
			return
		}
		u.n += n
		u.answered = true
		u.full = n == room
		if c.readStall > 0 {
			// Bytes came: the read timeout starts over (relay arms
			// the client's instead, if it stops reading them).
			w.armTry(c, c.readStall)
		}
		if !w.relay(c, u) || n < room && !u.hup {
			return
		}
	}
}

// upEnded takes the end of the backend's stream, or its failure.
func (w *worker) upEnded(c *conn, u *upConn, errno unix.Errno) {
	var err error = io.EOF
	if errno != 0 {
		err = errno
	} else if u.answered {
		err = io.ErrUnexpectedEOF
	}
	switch {
	case !c.headSent:
		w.tryFailed(c, err)
	case c.rmode == h1wire.BodyUntilClose && errno == 0:
		w.finish(c, u, false, true)
	default:
		// Cut short: what came goes out, and the connection's end tells
		// the client the rest is missing.
		w.finish(c, u, false, false)
	}
}

// relay relays what the backend's buffer holds of the response. It
// reports whether more is to be read.
func (w *worker) relay(c *conn, u *upConn) bool {
	w.cur = c
	if !c.headSent && !w.responseHead(c, u) {
		// Informational responses go out now: bw is the worker's, and
		// what it holds would go with the next answer it writes, another
		// client's.
		w.bw.Flush()
		return c.up == u
	}
	done, err := w.relayBody(c, u)
	switch {
	case w.conn(c.fd) != c:
		// A write failed, and closed c, while bw held more of the response
		// than one write takes (a long head): what it still holds goes to
		// no one, not in front of the next answer, another client's.
		w.bw.Reset(w)
		return false
	case err != nil:
		w.finish(c, u, false, false)
		return false
	case done:
		// The response may end before the backend took all of the
		// request (a refusal sent before its body was read): putIdle
		// drops what is left to send, and the next request on the
		// connection, another client's, would make up the rest of the
		// body. And bytes past it are no request's: those the read that
		// ended it took are in the buffer, and those it left in the
		// socket, when it filled the buffer, had their edge taken with
		// its own, so that only a look tells (rare: the response ends
		// where the buffer does).
		w.finish(c, u, c.reusable && u.start == u.n && len(u.out) == 0 && !(u.full && stale(u.fd)), true)
		return false
	}
	w.bw.Flush()
	if len(c.out) > 0 && w.conn(c.fd) == c {
		// The client stopped reading (relay starts with nothing
		// unread): it has IdleTimeout to go on, or the connection and
		// the backend's end (expireForward), as the guard bounds a
		// write on the netpoll engine.
		w.wheel.Arm(&c.timer, w.now.Add(w.s.cfg.IdleTimeout))
	}
	return w.conn(c.fd) == c
}

// responseHead reads the final response head in u's buffer, relaying the
// informational ones before it, and writes it to the client. It reports
// whether it did.
func (w *worker) responseHead(c *conn, u *upConn) bool {
	for {
		avail := u.buf[u.start:u.n]
		end := h1wire.HeadEnd(avail, 0)
		if end < 0 {
			return false
		}
		resp := &c.resp
		// The head's strings alias the backend's read buffer rather than
		// a copy of it, the last allocation of each response: they are
		// read only until responseFields has written them to the
		// client's buffer, before anything is read into this one again
		// (the status alone is kept, and c.resp is Reset before reuse).
		if !h1wire.ParseResponse(unsafe.String(&avail[0], end), resp) {
			w.tryFailed(c, errBadResponse)
			return false
		}
		u.start += end
		switch code := resp.Status; {
		case code == http.StatusSwitchingProtocols:
			w.tryFailed(c, errUpgrade)
			return false
		case code == http.StatusContinue:
			// The body went with the head.
			continue
		case code < 200:
			if !c.req.HTTP10 {
				h1wire.WriteStatusLine(w.bw, false, code)
				h1wire.WriteFields(w.bw, resp.Fields, false)
				w.bw.WriteString("\r\n")
			}
			continue
		}
		c.ex.TrySucceeded(c.sentAt)
		w.responseFields(c)
		c.headSent = true
		return true
	}
}

// responseFields writes the head of the response in c.resp as the netpoll
// engine writes it (relayResponse), and sets how its body is relayed.
func (w *worker) responseFields(c *conn) {
	req, resp := &c.req, &c.resp
	mode := resp.BodyMode(req.Method)
	unknown := mode == h1wire.BodyChunked || mode == h1wire.BodyUntilClose
	c.rchunked = unknown && !req.HTTP10
	c.keep = c.keep && !(unknown && req.HTTP10) && !w.s.closing.Load()
	c.reusable = resp.Reusable(mode)
	c.ex.EditResponse(&resp.Fields)
	h1wire.WriteStatusLine(w.bw, req.HTTP10, resp.Status)
	h1wire.WriteFields(w.bw, resp.Fields, c.rchunked)
	if resp.ContentLength >= 0 && mode != h1wire.BodyChunked {
		h1wire.WriteContentLength(w.bw, resp.ContentLength)
	}
	if c.rchunked {
		w.bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	w.endHead(c, c.keep, resp.Fields.Has("Date"))
	c.rmode, c.rleft, c.chunk = mode, max(resp.ContentLength, 0), chunkSize
}

// relayBody relays what u's buffer holds of the body. done says the body
// ended; err that its framing is broken.
func (w *worker) relayBody(c *conn, u *upConn) (done bool, err error) {
	switch c.rmode {
	case h1wire.BodyNone:
		return true, nil
	case h1wire.BodyLength:
		take := min(c.rleft, int64(u.n-u.start))
		w.emit(c, u.buf[u.start:u.start+int(take)])
		u.start += int(take)
		c.rleft -= take
		return c.rleft == 0, nil
	case h1wire.BodyUntilClose:
		w.emit(c, u.buf[u.start:u.n])
		u.start = u.n
		return false, nil
	}
	return w.relayChunks(c, u)
}

// relayChunks relays a chunked body's data, taking its framing apart as
// far as the buffer goes.
func (w *worker) relayChunks(c *conn, u *upConn) (done bool, err error) {
	for w.conn(c.fd) == c {
		avail := u.buf[u.start:u.n]
		if c.chunk == chunkData {
			if len(avail) == 0 {
				return false, nil
			}
			take := min(c.rleft, int64(len(avail)))
			w.emit(c, avail[:take])
			u.start += int(take)
			if c.rleft -= take; c.rleft == 0 {
				c.chunk = chunkDataEnd
			}
			continue
		}
		i := bytes.IndexByte(avail, '\n')
		if i < 0 {
			if len(avail) > maxChunkLine {
				return false, errChunk
			}
			return false, nil
		}
		u.start += i + 1
		line, ok := h1wire.ChunkLine(avail[:i+1])
		if !ok {
			return false, errChunk
		}
		switch c.chunk {
		case chunkSize:
			size, ok := h1wire.ChunkSize(line)
			switch {
			case !ok:
				return false, errChunk
			case size > 0:
				c.rleft, c.chunk = size, chunkData
			default:
				c.chunk = chunkTrailer
				if c.rchunked {
					w.bw.WriteString("0\r\n")
				}
			}
		case chunkDataEnd:
			if len(line) != 0 {
				return false, errChunk
			}
			c.chunk = chunkSize
		case chunkTrailer:
			if len(line) > 0 && !h1wire.TrailerField(line) {
				return false, errChunk
			}
			if c.rchunked {
				w.bw.Write(line)
				w.bw.WriteString("\r\n")
			}
			if len(line) == 0 {
				return true, nil
			}
		}
	}
	return false, nil
}

// emit writes body data to the client, as a chunk of its own when the
// client gets the body chunked.
func (w *worker) emit(c *conn, p []byte) {
	if len(p) == 0 {
		return
	}
	if c.rchunked {
		h1wire.WriteChunkSize(w.bw, len(p))
	}
	w.bw.Write(p)
	if c.rchunked {
		w.bw.WriteString("\r\n")
	}
	c.sent += int64(len(p))
}

// tryFailed ends the try under way, which failed with err before a
// response head was relayed, and makes the next one or answers as the
// request path says.
func (w *worker) tryFailed(c *conn, err error) {
	var reused, answered bool
	if u := c.up; u != nil {
		reused, answered = u.reused, u.answered
		w.closeUp(u)
		c.up = nil
	}
	c.ex.EndTry()
	status, again := c.ex.TryFailed(&c.tries, err, reused, answered, c.replayable, c.gone)
	if again {
		w.try(c, c.ex.NextTry(&c.tries))
		return
	}
	if status == 0 {
		// No one to answer.
		w.close(c)
		return
	}
	w.cur = c
	deadline := c.ex.AttemptDeadline()
	keep := c.keep && (deadline.IsZero() || w.now.Before(deadline))
	sent := w.writeError(c, status, pipeline.ErrorBody(status), "", keep)
	w.done(c, status, sent, keep)
}

// finish ends a response relayed whole (ok) or cut short: u goes back to
// the worker's pool with reuse.
func (w *worker) finish(c *conn, u *upConn, reuse, ok bool) {
	if ok && c.rchunked && c.rmode == h1wire.BodyUntilClose {
		w.bw.WriteString("0\r\n\r\n")
	}
	c.ex.EndTry()
	if reuse && ok && !u.hup {
		w.putIdle(u)
	} else {
		w.closeUp(u)
	}
	c.up = nil
	w.done(c, c.resp.Status, c.sent, c.keep && ok)
}

// done counts and logs the exchange, sends the end of its answer, and
// goes on with the client's next request.
func (w *worker) done(c *conn, status int, sent int64, keep bool) {
	c.forwarding = false
	c.ex.Record(status, sent, c.remote, &c.req)
	c.ex.End()
	w.cur = c
	w.bw.Flush()
	if w.conn(c.fd) != c {
		return
	}
	c.start += c.reqLen
	c.served = true
	if !keep {
		c.closeAfter = true
	}
	if len(c.out) > 0 {
		w.settle(c)
	} else {
		w.next(c)
	}
}

// abort ends the exchange of a connection that closes while its request
// is forwarded.
func (w *worker) abort(c *conn) {
	c.forwarding = false
	if u := c.up; u != nil {
		c.ex.EndTry()
		w.closeUp(u)
		c.up = nil
	}
	status := 0
	if c.headSent {
		status = c.resp.Status
	}
	c.ex.Record(status, c.sent, c.remote, &c.req)
	c.ex.End()
}

// expireForward ends what a forwarded request waits for past its
// deadline: the try (a connect, or the response head), which the request
// path answers 504 or tries again, or else the connection.
func (w *worker) expireForward(c *conn) {
	u := c.up
	if u == nil || c.headSent || len(c.out) > 0 {
		w.close(c)
		return
	}
	var err error = os.ErrDeadlineExceeded
	if u.connecting {
		err = dialError(os.ErrDeadlineExceeded)
	}
	w.tryFailed(c, err)
}

// gone reports whether the client hung up, for the request path's
// decisions.
func (c *conn) gone() bool { return c.hup }

// putUpBuffer takes u's read buffer back. One grown for a long head is
// left to the collector, so that the pool holds buffers of upBufferSize.
func (w *worker) putUpBuffer(u *upConn) {
	if len(u.buf) == upBufferSize {
		w.freeUp = append(w.freeUp, u.buf)
	}
	u.buf = nil
}

func (w *worker) upBuffer() []byte {
	if n := len(w.freeUp); n > 0 {
		b := w.freeUp[n-1]
		w.freeUp = w.freeUp[:n-1]
		return b
	}
	return make([]byte, upBufferSize)
}
