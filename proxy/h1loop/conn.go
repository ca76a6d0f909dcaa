//go:build linux

package h1loop

import (
	"bytes"
	"io"
	"net/http"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostgate/hostgate/proxy/evloop"
	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/h1wire"
	"github.com/hostgate/hostgate/proxy/pipeline"
	"github.com/hostgate/hostgate/router"
)

// conn is a client connection on a loop.
type conn struct {
	fd int
	// tag is in its socket's events, which it tells from those of a
	// socket closed before with the same descriptor number (dispatch).
	tag  int32
	tc   *guard.TrackedConn
	sock *Socket
	// remote is the connection's address, client its IP, and peer that
	// IP parsed (the PROXY header's, with ProxyProtocol).
	remote, client string
	peer           netip.Addr

	// buf holds what was read and not yet served, buf[start:n]; nil while
	// the connection waits with nothing read. from is where the search
	// for the end of the head resumes.
	buf            []byte
	start, n, from int
	// out is what the client has yet to read of the answers, when a write
	// would have blocked.
	out []byte

	// waiting says the connection waits for a request (the caps may close
	// it to make room); mayRead that a read was cut short by out, so that
	// the socket may hold more than readiness will say; served that a
	// request was served.
	waiting, mayRead, served bool
	// hup says the client sends no more: reads go on to the end of the
	// stream.
	hup bool
	// closeAfter and handOffAfter end the connection, or hand it over,
	// once out is written.
	closeAfter, handOffAfter bool

	req  h1wire.Head
	resp h1wire.Head
	ex   pipeline.Exchange

	// A request forwarded (forward.go): up carries it, on the tries'
	// latest; its head is headLen of the reqLen bytes at start, which
	// stay until it is answered, as a try may send it again.
	forwarding       bool
	up               *upConn
	tries            pipeline.Tries
	headLen, reqLen  int
	keep, replayable bool
	sentAt           time.Time
	// readStall and sendStall are the rule's backend read and send
	// timeouts (armTry).
	readStall, sendStall time.Duration
	// The response's relay: its head went out (headSent), its body's
	// framing (rmode, rleft of a length or chunk, chunk the state of
	// chunked framing), whether it goes to the client chunked, whether
	// its connection may serve again, and the body bytes sent.
	headSent, rchunked, reusable bool
	rmode                        h1wire.BodyMode
	rleft                        int64
	chunk                        uint8
	sent                         int64

	// timer is c's place on the worker's wheel, Of c.
	timer evloop.Timer[*conn]
}

// readable reads what the client sent and serves it. Readiness is
// edge-triggered: a read that fills less than the room it had drained
// the socket, and the loop waits for the next edge rather than read
// again to find nothing. Unless an edge said the client sends no more
// (c.hup): then the end of the stream, which no later edge announces,
// waits after the bytes.
func (w *worker) readable(c *conn) {
	for {
		if len(c.out) > 0 || c.handOffAfter || c.closeAfter || c.forwarding {
			// Answers wait to be read: the client's next requests wait
			// with them, in the socket.
			c.mayRead = true
			return
		}
		c.mayRead = false
		if c.buf == nil {
			c.buf = w.buffer()
		}
		if c.n == len(c.buf) {
			if c.start == 0 {
				// A head longer than the buffer: net/http holds it to
				// MaxHeaderBytes and answers 431.
				w.handOff(c)
				return
			}
			c.n = copy(c.buf, c.buf[c.start:c.n])
			c.from = max(0, c.from-c.start)
			c.start = 0
		}
		room := len(c.buf) - c.n
		n, errno := evloop.Read(c.fd, c.buf[c.n:])
		switch {
		case errno == unix.EAGAIN:
			w.settle(c)
			return
		case errno != 0 || n == 0:
			// The client is gone, or sends no more: what it sent whole
			// is answered, then the connection ends.
			if w.process(c) {
				if len(c.out) > 0 {
					c.closeAfter = true
				} else {
					w.close(c)
				}
			}
			return
		}
		c.n += n
		if !w.process(c) || n < room && !c.hup {
			return
		}
	}
}

// process serves the whole requests in c's buffer, in order, and writes
// their answers in one write. It reports whether c is still the loop's.
func (w *worker) process(c *conn) bool {
	w.cur = c
	served := true
	for served && !c.forwarding && len(c.out) == 0 && c.start < c.n {
		if c.waiting {
			if !c.tc.Claim() {
				// Closed to make room: what came is dropped unanswered.
				w.close(c)
				return false
			}
			c.waiting = false
			if c.served {
				// The rest of the head has ReadHeaderTimeout from its
				// first bytes; the first request's runs from the accept.
				w.wheel.Arm(&c.timer, w.now.Add(w.s.cfg.ReadHeaderTimeout))
			}
		}
		served = w.serve(c)
	}
	if w.bw.Buffered() > 0 {
		w.bw.Flush()
	}
	switch {
	case w.conn(c.fd) != c:
		return false
	case c.handOffAfter && len(c.out) == 0:
		w.handOff(c)
		return false
	case c.closeAfter && len(c.out) == 0:
		w.close(c)
		return false
	}
	w.settle(c)
	return true
}

// settle arms c's timer for what it waits for: its client to read, the
// rest of a head, or the next request.
func (w *worker) settle(c *conn) {
	switch {
	case c.forwarding:
		// Its timer is the try's, or the client's to read (flushOut).
	case len(c.out) > 0:
		w.wheel.Arm(&c.timer, w.now.Add(w.s.cfg.IdleTimeout))
	case c.start < c.n:
		// A head not yet whole keeps the deadline of its first bytes.
	case !c.waiting:
		if w.s.closing.Load() {
			w.close(c)
			return
		}
		w.putBuffer(c)
		c.waiting = true
		c.tc.MarkIdle(w.now)
		w.wheel.Arm(&c.timer, w.now.Add(w.s.cfg.IdleTimeout))
	case c.buf != nil:
		w.putBuffer(c)
	}
}

// serve serves the request at the start of c's buffer if its head is
// whole. It reports whether another may follow on c.
func (w *worker) serve(c *conn) bool {
	cfg := &w.s.cfg
	avail := c.buf[c.start:c.n]
	end := h1wire.HeadEnd(avail, c.from)
	if end < 0 {
		if len(avail) > cfg.MaxHeaderBytes {
			c.handOffAfter = true
		}
		c.from = h1wire.HeadSearchFrom(len(avail))
		return false
	}
	c.from = 0
	req := &c.req
	if end > cfg.MaxHeaderBytes || !h1wire.ParseRequest(string(avail[:end]), req) || req.Upgrade || req.Chunked || int64(len(avail)-end) < max(req.ContentLength, 0) {
		// What the loop does not serve itself (an Upgrade, a head net/
		// http answers 400 or 431, the HTTP/2 preface) or not yet (a
		// body still to come) goes to the netpoll engine.
		c.handOffAfter = true
		return false
	}
	path := cfg.Path
	ex := &c.ex
	if !path.Decide(ex, router.Request{Host: req.Host, Method: req.Method, Path: req.Path, RawQuery: req.Query, Header: req}, c.peer, c.client, c.tc) {
		c.handOffAfter = true
		return false
	}
	if ex.Forwards() {
		return w.forward(c, end)
	}
	c.start += end + int(max(req.ContentLength, 0))
	// During the shutdown delay every answer closes its connection, as
	// on the netpoll engine.
	keep := !req.Close && (!req.HTTP10 || req.KeepAlive) && !path.Draining() && !w.s.closing.Load()

	c.resp.Reset("")
	status, body, challenge := ex.Answer(&c.resp.Fields)
	var sent int64
	if body != "" {
		sent = w.writeError(c, status, body, challenge, keep)
	} else {
		// A redirect or a CORS preflight.
		h1wire.WriteStatusLine(w.bw, c.req.HTTP10, status)
		h1wire.WriteFields(w.bw, c.resp.Fields, false)
		if status != http.StatusNoContent {
			w.bw.WriteString("Content-Length: 0\r\n")
		}
		w.endHead(c, keep, c.resp.Fields.Has("Date"))
	}
	ex.Record(status, sent, c.remote, req)
	ex.End()
	c.served = true
	if !keep {
		c.closeAfter = true
	}
	return keep
}

// writeError answers status with body and, when not empty, a
// WWW-Authenticate field, as the netpoll engine does; it returns the
// bytes of body sent.
func (w *worker) writeError(c *conn, status int, body, challenge string, keep bool) int64 {
	h1wire.WriteStatusLine(w.bw, c.req.HTTP10, status)
	server := ""
	if w.s.cfg.ServerField {
		server = pipeline.ServerName
	}
	h1wire.WriteErrorFields(w.bw, len(body), challenge, server)
	w.endHead(c, keep, false)
	if c.req.Method == http.MethodHead {
		return 0
	}
	w.bw.WriteString(body)
	return int64(len(body))
}

// endHead writes the fields every answer carries and ends the head.
func (w *worker) endHead(c *conn, keep, hasDate bool) {
	var now time.Time
	if !hasDate {
		now = w.now
	}
	h1wire.EndHead(w.bw, nil, now, c.req.HTTP10, keep)
}

// Write writes the answers built in bw to the connection served: at once
// as far as the socket takes them, and the rest once it is writable. It
// never fails, so that bw stays usable: a connection whose write failed
// is closed, and what is written to it after is dropped.
func (w *worker) Write(p []byte) (int, error) {
	c := w.cur
	if w.conn(c.fd) != c {
		return len(p), nil
	}
	if evloop.SendNow(c.fd, p, &c.out) != 0 {
		w.close(c)
	}
	return len(p), nil
}

// flushOut writes what a client had left unread, now that it reads, and
// goes on with what waited for it.
func (w *worker) flushOut(c *conn) {
	for len(c.out) > 0 {
		n, errno := evloop.Write(c.fd, c.out)
		switch {
		case errno == unix.EAGAIN:
			return
		case errno != 0:
			w.close(c)
			return
		}
		c.out = c.out[n:]
		// A client that reads, however slowly, keeps its connection.
		w.wheel.Arm(&c.timer, w.now.Add(w.s.cfg.IdleTimeout))
	}
	c.out = nil
	switch {
	case c.forwarding:
		// Caught up: the wait is the backend's again.
		w.armTry(c, c.readStall)
		if u := c.up; u != nil && u.mayRead {
			w.upReadable(u)
		}
	case c.handOffAfter:
		w.handOff(c)
	default:
		w.next(c)
	}
}

// next goes on with c once its answer is written: it closes if it must,
// or serves what the client sent next.
func (w *worker) next(c *conn) {
	if c.closeAfter {
		w.close(c)
	} else if w.process(c) && c.mayRead {
		w.readable(c)
	}
}

// handOff gives c, with what was read of it and not served, to the
// netpoll engine: out of the epoll set first, as closing the loop's
// copy of the descriptor would leave it there.
func (w *worker) handOff(c *conn) {
	w.conns[c.fd] = nil
	w.wheel.Disarm(&c.timer)
	_ = unix.EpollCtl(w.poll.FD, unix.EPOLL_CTL_DEL, c.fd, nil)
	var ahead []byte
	if c.start < c.n {
		ahead = bytes.Clone(c.buf[c.start:c.n])
	}
	w.putBuffer(c)
	if err := c.sock.attach(); err != nil {
		c.tc.Close()
		return
	}
	var conn io.Reader = c.tc
	if len(ahead) > 0 {
		conn = io.MultiReader(bytes.NewReader(ahead), c.tc)
	}
	go w.s.cfg.HandOff(&guard.BufferedConn{Conn: c.tc, Reader: conn, Served: c.served})
}
