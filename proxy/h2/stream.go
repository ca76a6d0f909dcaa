package h2

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
)

// stream is one request and its response; it is the handler's
// http.ResponseWriter.
type stream struct {
	c   *conn
	id  uint32
	ctx streamCtx
	req *http.Request
	// request is what req points to, for a request from HEADERS, and
	// url its URL where requestURL could make it in place.
	request http.Request
	url     url.URL
	// values holds the request's field values, each header entry a slice
	// of it, when there are few enough: most requests' are.
	values [8]string
	isHead bool
	// tooLarge says the request's header section was past the limit: it
	// is answered 431 without the handler.
	tooLarge bool

	// Guarded by c.mu.
	sendWindow int64
	// inflow holds what arrived of the request body and is unread.
	inflow
	// remoteClosed says the client ended its side (END_STREAM), and
	// localClosed that the response's END_STREAM is queued: with both,
	// the stream is closed, though its handler may not have returned.
	remoteClosed, localClosed bool
	// aborted is why the stream was reset or its connection lost:
	// writes fail with it.
	aborted error
	// bodyErr is what a read gets after the body (io.EOF at the end).
	bodyErr  error
	bodyCond sync.Cond
	// declared is the request's Content-Length, -1 without; received
	// counts the body bytes that came.
	declared, received int64
	// discard says nobody reads the body any more.
	discard bool
	// trailer is the request's trailer section, put in req.Trailer at
	// the end of the body.
	trailer http.Header
	// needsContinue says the client waits for 100 Continue before its
	// body, which the first read sends.
	needsContinue bool
	readTimer     *time.Timer
	readExpired   bool
	writeTimer    *time.Timer
	writeExpired  bool

	// Owned by the handler.
	header      http.Header
	status      int
	wroteHeader bool
	sentHeader  bool
	// wbuf holds the last small writes of the body, sent with the next
	// ones, a flush or the end of the response.
	wbuf []byte
	// wbufp is the pool's pointer to wbuf's array, which goes back to
	// the pool with it.
	wbufp *[]byte
	// written counts body bytes written; length is the Content-Length
	// the handler declared, -1 without.
	written, length int64
	// trailerKeys are the trailer fields the handler announced in
	// "Trailer" before the header went out.
	trailerKeys []string
	// wholeLength says the handler returned before the header went out,
	// with all of the body in wbuf: its length goes with the header.
	wholeLength bool
	// closeConn says the handler answered "Connection: close": the
	// connection goes away after the response.
	closeConn bool
}

func (c *conn) newStream(id uint32) *stream {
	st := &stream{
		c:        c,
		id:       id,
		ctx:      streamCtx{parent: c.ctx},
		inflow:   inflow{recvWindow: recvWindow},
		declared: -1,
		length:   -1,
	}
	st.bodyCond.L = &c.mu
	// Only the reader, which runs this, changes peerWindow.
	st.sendWindow = c.peerWindow
	return st
}

// newRequest builds the stream's request from its header section, or
// returns the stream error that makes it malformed (RFC 9113 section
// 8.1.1).
func (c *conn) newRequest(st *stream, f *headerBlock) error {
	var method, scheme, authority, path string
	for _, hf := range f.PseudoFields() {
		switch hf.Name {
		case ":method":
			method = hf.Value
		case ":scheme":
			scheme = hf.Value
		case ":authority":
			authority = hf.Value
		case ":path":
			path = hf.Value
		default:
			// :protocol (extended CONNECT) is not offered; :status
			// belongs to responses.
			return streamErr(st.id, http2.ErrCodeProtocol)
		}
	}
	// A value, not an error: made an error only when returned.
	bad := http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
	isConnect := method == http.MethodConnect
	switch {
	case isConnect && (scheme != "" || path != "" || authority == ""):
		return bad
	case !isConnect && (method == "" || scheme == "" || path == ""):
		return bad
	case !isConnect && path[0] != '/' && !(path == "*" && method == http.MethodOptions):
		return bad
	case !httpguts.ValidHostHeader(authority):
		return bad
	}
	fields := f.RegularFields()
	tes := 0
	header := make(http.Header, len(fields))
	values := st.values[:]
	if len(fields) > len(values) {
		values = make([]string, len(fields))
	}
	for i, hf := range fields {
		switch hf.Name {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			return errSmuggling
		case "te":
			if tes++; tes > 1 || hf.Value != "trailers" && hf.Value != "" {
				return errSmuggling
			}
		}
		key := c.canonical(hf.Name)
		if prior, ok := header[key]; ok {
			header[key] = append(prior, hf.Value)
			continue
		}
		values[i] = hf.Value
		header[key] = values[i : i+1 : i+1]
	}
	if cookies := header["Cookie"]; len(cookies) > 1 {
		// HTTP/2 may split the field; what reads it expects one
		// (RFC 9113 section 8.2.3).
		header["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	if authority == "" {
		authority = header.Get("Host")
	}
	if cl := header["Content-Length"]; len(cl) > 0 {
		n, err := strconv.ParseInt(cl[0], 10, 64)
		for _, v := range cl[1:] {
			if v != cl[0] {
				err = strconv.ErrSyntax
			}
		}
		if err != nil || n < 0 || cl[0][0] == '+' {
			return bad
		}
		st.declared = n
	}
	req := &http.Request{
		Method:     method,
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     header,
		Host:       authority,
		RemoteAddr: c.remote,
		RequestURI: path,
	}
	if isConnect {
		req.URL, req.RequestURI = &url.URL{Host: authority}, authority
	} else {
		u, err := requestURL(path, &st.url)
		if err != nil {
			return bad
		}
		req.URL = u
	}
	if f.StreamEnded() {
		if st.declared > 0 {
			return bad
		}
		st.remoteClosed = true
		req.Body = http.NoBody
	} else {
		req.Body = requestBody{st}
		req.ContentLength = st.declared
		if e := header["Expect"]; len(e) == 1 && strings.EqualFold(e[0], "100-continue") {
			delete(header, "Expect")
			st.needsContinue = true
		}
		for _, v := range header["Trailer"] {
			for key := range strings.SplitSeq(v, ",") {
				key = http.CanonicalHeaderKey(strings.TrimSpace(key))
				if validTrailer(key) {
					if req.Trailer == nil {
						req.Trailer = http.Header{}
					}
					req.Trailer[key] = nil
				}
			}
		}
	}
	st.isHead = method == http.MethodHead
	st.tooLarge = f.Truncated
	// The request lives in the stream: one allocation fewer per
	// request, as WithContext's copy stays on the stack.
	st.request = *req.WithContext(&st.ctx)
	st.req = &st.request
	return nil
}

// errSmuggling ends a connection that sent a field RFC 9113 section 8.2.2
// forbids in HTTP/2, as the H2.TE and H2.CL kind of request smuggling do
// when a proxy downgrades to HTTP/1.1: a connection error rather than the
// stream's, as the guard in front of net/http's server ends it too, and
// every engine answers alike.
var errSmuggling = connError{http2.ErrCodeProtocol, "connection-specific header field"}

// requestURL is url.ParseRequestURI(path), made in into, without an
// allocation, where path is of the kind most are: an absolute path of
// characters no URL escapes, with no percent-encoding, and any query.
func requestURL(path string, into *url.URL) (*url.URL, error) {
	p, query, hasQuery := strings.Cut(path, "?")
	if p == "" || p[0] != '/' || !plainPath(p) || strings.ContainsFunc(query, isCTL) {
		return url.ParseRequestURI(path)
	}
	*into = url.URL{Path: p, RawQuery: query}
	if hasQuery && query == "" && strings.Count(path, "?") == 1 {
		into.ForceQuery = true
	}
	return into, nil
}

// plainPath reports whether every byte of p is one net/url leaves as it
// is in a path (so that RawPath stays empty).
func plainPath(p string) bool {
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-_.~$&+,/:;=@", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func isCTL(r rune) bool { return r < ' ' || r == 0x7f }

// validTrailer reports whether key may be a trailer field (RFC 9110
// section 6.5.1), as net/http's server decides.
func validTrailer(key string) bool {
	switch key {
	case "Transfer-Encoding", "Trailer", "Content-Length", "Host", "Te", "Connection", "Keep-Alive", "Upgrade", "Proxy-Connection", "Content-Type", "Authorization", "Cache-Control", "Content-Encoding", "Content-Range", "Expect", "Max-Forwards", "Pragma", "Proxy-Authenticate", "Proxy-Authorization", "Range", "Set-Cookie", "Www-Authenticate":
		return false
	}
	return true
}

// canonical is http.CanonicalHeaderKey of a lower-case field name,
// cached per connection for names net/http does not intern.
func (w *wire) canonical(name string) string {
	if key, ok := w.canon[name]; ok {
		return key
	}
	key := http.CanonicalHeaderKey(name)
	if len(w.canon) < 256 && key != name {
		if w.canon == nil {
			w.canon = map[string]string{}
		}
		w.canon[name] = key
	}
	return key
}

// startStream registers st and runs its handler, unless the connection
// goes away: a GOAWAY sent since the reader took the request named the
// last stream served, and the client may retry st elsewhere.
func (c *conn) startStream(st *stream) {
	c.mu.Lock()
	if c.goingAway || c.closed {
		c.mu.Unlock()
		st.ctx.cancel(context.Canceled)
		return
	}
	c.streams[st.id] = st
	c.active++
	first := c.active == 1
	c.lastStarted = st.id
	if err := c.ctx.Err(); err != nil {
		// cancelStreams ran before st was among the streams.
		st.ctx.cancel(err)
	}
	c.mu.Unlock()
	if first && c.srv.ConnState != nil {
		c.srv.ConnState(c.nc, http.StateActive)
	}
	c.srv.dispatch(st)
}

func (st *stream) run() {
	defer st.finish()
	if st.tooLarge {
		st.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
		return
	}
	st.c.srv.Handler.ServeHTTP(st, st.req)
}

// finish ends the response when the handler returns: END_STREAM after
// what it wrote, or RST_STREAM if it panicked or the response is short
// of its Content-Length.
func (st *stream) finish() {
	c := st.c
	failed := false
	if p := recover(); p != nil {
		failed = true
		if p != http.ErrAbortHandler && c.srv.Logger != nil {
			buf := make([]byte, 64<<10)
			buf = buf[:runtime.Stack(buf, false)]
			c.srv.Logger.Error("http2: handler panicked", "remote", c.remote, "panic", fmt.Sprint(p), "stack", string(buf))
		}
	}
	if !failed {
		failed = st.endResponse() != nil
	}
	if failed && st.wroteHeader {
		// What the handler wrote before it gave up, or short of its
		// Content-Length, goes out before the reset, as every write
		// would have gone out unbuffered.
		_ = st.send(nil, false)
	}
	if h := st.header; h != nil && len(h) <= maxPooledFields {
		clear(h)
		responseHeaders.Put(h)
	}
	st.header = nil
	c.mu.Lock()
	if st.aborted == nil && !c.closed {
		switch {
		case failed:
			_ = c.wfr.WriteRSTStream(st.id, http2.ErrCodeInternal)
			c.wake.Signal()
		case !st.remoteClosed:
			// The answer is whole; the rest of the request is not
			// wanted (RFC 9113 section 8.1).
			_ = c.wfr.WriteRSTStream(st.id, http2.ErrCodeNo)
			c.wake.Signal()
		}
	}
	if c.streams[st.id] == st {
		delete(c.streams, st.id)
	}
	st.dropBody()
	if st.wbufp != nil {
		*st.wbufp = st.wbuf[:0]
		smallBuffers.Put(st.wbufp)
		st.wbuf, st.wbufp = nil, nil
	}
	if st.readTimer != nil {
		st.readTimer.Stop()
	}
	if st.writeTimer != nil {
		st.writeTimer.Stop()
	}
	c.active--
	idle := c.active == 0
	if idle && (c.goingAway || c.closed) {
		c.stopReading()
	} else if idle && c.idleTimer != nil {
		c.idleTimer.Reset(c.srv.IdleTimeout)
	}
	c.mu.Unlock()
	st.ctx.cancel(context.Canceled)
	if st.closeConn {
		c.goAwayGracefully()
	}
	if idle && c.srv.ConnState != nil {
		c.srv.ConnState(c.nc, http.StateIdle)
	}
}

// responseHeaders recycles the handlers' response headers, kept with the
// table their fields took: a header is encoded as it goes out, and nothing
// may use a ResponseWriter once its handler returned.
var responseHeaders = sync.Pool{New: func() any { return http.Header{} }}

// maxPooledFields bounds the header maps recycled, as one keeps the size
// its largest response gave it.
const maxPooledFields = 32

// dropBody gives the window of unread body bytes back to the connection,
// and has those still to come dropped, and reads fail. c.mu is held.
func (st *stream) dropBody() {
	st.discard = true
	// Nor is the client asked for it: a read now, once the handler
	// returned, would send 100 Continue on a stream already ended.
	st.needsContinue = false
	st.drop(&st.c.wire)
	// A read waiting for bytes would wait for ever once the handler
	// returned: a proxy's goroutine copying the body upstream, say.
	st.bodyCond.Broadcast()
}

// abort fails the stream's reads and writes with err and takes it off the
// connection's streams. c.mu is held.
func (st *stream) abort(err error) {
	if st.aborted == nil {
		st.aborted = err
	}
	if !st.remoteClosed {
		st.bodyErr = err
	}
	if st.c.streams[st.id] == st {
		delete(st.c.streams, st.id)
	}
	st.ctx.cancel(context.Canceled)
	st.bodyCond.Broadcast()
	st.c.room.Broadcast()
}

// closeRemote ends the request body. c.mu is held.
func (st *stream) closeRemote() {
	st.remoteClosed = true
	if st.bodyErr == nil {
		st.bodyErr = io.EOF
	}
	st.bodyCond.Broadcast()
}

// copyTrailer puts the trailer that came into the request's Trailer, on
// the handler's goroutine as its body read meets the end: the handler
// (ReverseProxy cloning the request) reads that map meanwhile. c.mu is
// held.
func (st *stream) copyTrailer() {
	for k, vv := range st.trailer {
		if _, declared := st.req.Trailer[k]; declared {
			st.req.Trailer[k] = vv
		}
	}
	st.trailer = nil
}

// requestBody is a stream's request body.
type requestBody struct{ st *stream }

func (b requestBody) Read(p []byte) (int, error) {
	st := b.st
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.needsContinue {
		st.needsContinue = false
		if st.aborted == nil && !c.closed {
			c.queueHeaders(st.id, http.StatusContinue, nil, -1, false)
		}
	}
	for st.bodyOff == len(st.body) {
		switch {
		case st.bodyErr != nil:
			if st.bodyErr == io.EOF && st.trailer != nil {
				st.copyTrailer()
			}
			return 0, st.bodyErr
		case st.readExpired:
			return 0, os.ErrDeadlineExceeded
		case st.discard:
			return 0, http.ErrBodyReadAfterClose
		}
		st.bodyCond.Wait()
	}
	return st.take(&c.wire, st.id, p, st.open()), nil
}

// open reports whether the client may still send on the stream. c.mu is
// held.
func (st *stream) open() bool { return !st.remoteClosed && st.aborted == nil }

func (b requestBody) Close() error {
	c := b.st.c
	c.mu.Lock()
	b.st.dropBody()
	c.mu.Unlock()
	return nil
}

// Header is http.ResponseWriter's.
func (st *stream) Header() http.Header {
	if st.header == nil {
		st.header = responseHeaders.Get().(http.Header)
	}
	return st.header
}

// WriteHeader is http.ResponseWriter's: an informational status goes out
// at once, the final one with the first bytes of the body or the end.
func (st *stream) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if st.wroteHeader {
		return
	}
	if code < 200 {
		if code == http.StatusSwitchingProtocols {
			return // no such thing in HTTP/2
		}
		c := st.c
		c.mu.Lock()
		if st.aborted == nil && !c.closed {
			c.queueHeaders(st.id, code, st.header, -1, false)
		}
		c.mu.Unlock()
		return
	}
	st.wroteHeader, st.status = true, code
	h := st.Header()
	if cl := h["Content-Length"]; len(cl) == 1 {
		if n, err := strconv.ParseInt(cl[0], 10, 64); err == nil && n >= 0 {
			st.length = n
		} else {
			delete(h, "Content-Length")
		}
	}
	for _, v := range h["Trailer"] {
		for key := range strings.SplitSeq(v, ",") {
			if key = http.CanonicalHeaderKey(strings.TrimSpace(key)); key != "" {
				st.trailerKeys = append(st.trailerKeys, key)
			}
		}
	}
	if conn := h["Connection"]; len(conn) > 0 {
		for _, v := range conn {
			if strings.EqualFold(strings.TrimSpace(v), "close") {
				st.closeConn = true
			}
		}
	}
}

// bodyAllowed reports whether a response with status may have a body.
func (st *stream) bodyAllowed() bool {
	return !st.isHead && st.status != http.StatusNoContent && st.status != http.StatusNotModified
}

// smallWrite is the size under which writes are held back to go out with
// the next, or with END_STREAM.
const smallWrite = 16 << 10

var smallBuffers = sync.Pool{New: func() any { b := make([]byte, 0, smallWrite); return &b }}

// Write is http.ResponseWriter's.
func (st *stream) Write(p []byte) (int, error) {
	if !st.wroteHeader {
		st.WriteHeader(http.StatusOK)
	}
	if !st.bodyAllowed() {
		if st.isHead {
			st.written += int64(len(p))
			return len(p), nil
		}
		return 0, http.ErrBodyNotAllowed
	}
	if st.length >= 0 && st.written+int64(len(p)) > st.length {
		return 0, http.ErrContentLength
	}
	st.written += int64(len(p))
	if len(st.wbuf)+len(p) <= smallWrite {
		if st.wbufp == nil {
			st.wbufp = smallBuffers.Get().(*[]byte)
			st.wbuf = (*st.wbufp)[:0]
		}
		st.wbuf = append(st.wbuf, p...)
		return len(p), nil
	}
	if err := st.send(p, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// send queues the header if it has not gone out, then what wbuf holds
// and p, as DATA frames, ending the stream if end.
func (st *stream) send(p []byte, end bool) (err error) {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() { st.localClosed = st.localClosed || end && err == nil }()
	if err := st.writeErr(); err != nil {
		return err
	}
	if !st.sentHeader {
		st.sentHeader = true
		// The client waiting for 100 Continue has the final status;
		// an informational one cannot follow it.
		st.needsContinue = false
		length := int64(-1)
		if st.wholeLength {
			length = int64(len(st.wbuf))
		}
		c.queueHeaders(st.id, st.status, st.header, length, end && len(st.wbuf) == 0 && len(p) == 0)
		if end && len(st.wbuf) == 0 && len(p) == 0 {
			return nil
		}
	}
	if len(st.wbuf) > 0 {
		if err := st.queueData(st.wbuf, end && len(p) == 0); err != nil {
			return err
		}
		st.wbuf = st.wbuf[:0]
		if len(p) == 0 {
			return nil
		}
	}
	return st.queueData(p, end)
}

// writeErr is why the stream can take no more frames. c.mu is held.
func (st *stream) writeErr() error {
	switch {
	case st.aborted != nil:
		return st.aborted
	case st.c.closed:
		return errClosed
	case st.writeExpired:
		return os.ErrDeadlineExceeded
	}
	return nil
}

// queueData queues p as DATA frames. c.mu is held.
func (st *stream) queueData(p []byte, end bool) error {
	return st.c.queueData(st.id, &st.sendWindow, p, end, st.writeErr)
}

// endResponse sends what is left of the response when the handler
// returns; an error says the stream must be reset.
func (st *stream) endResponse() error {
	if !st.wroteHeader {
		st.WriteHeader(http.StatusOK)
	}
	trailer := st.trailerFields()
	if !st.sentHeader && st.length < 0 && len(trailer) == 0 && st.bodyAllowed() {
		// The whole body is here: its length goes with the header,
		// as net/http's servers do.
		st.wholeLength = true
	}
	if st.length >= 0 && st.written < st.length && !st.isHead {
		return http.ErrContentLength
	}
	if err := st.send(nil, len(trailer) == 0); err != nil {
		return err
	}
	if len(trailer) == 0 {
		return nil
	}
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := st.writeErr(); err != nil {
		return err
	}
	c.queueHeaders(st.id, 0, trailer, -1, true)
	st.localClosed = true
	return nil
}

// trailerFields are the trailer the handler set: the fields announced in
// "Trailer", and those named with http.TrailerPrefix.
func (st *stream) trailerFields() http.Header {
	var t http.Header
	for _, k := range st.trailerKeys {
		if vv := st.header[k]; len(vv) > 0 {
			if t == nil {
				t = http.Header{}
			}
			t[k] = vv
		}
	}
	for k, vv := range st.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && len(vv) > 0 {
			if t == nil {
				t = http.Header{}
			}
			t[http.CanonicalHeaderKey(name)] = vv
		}
	}
	return t
}

// Flush is http.Flusher's.
func (st *stream) Flush() { _ = st.FlushError() }

// FlushError sends the header and what the body has so far; what
// http.ResponseController's Flush calls.
func (st *stream) FlushError() error {
	if !st.wroteHeader {
		st.WriteHeader(http.StatusOK)
	}
	return st.send(nil, false)
}

// EnableFullDuplex is http.ResponseController's: HTTP/2 is full duplex.
func (st *stream) EnableFullDuplex() error { return nil }

// SetReadDeadline bounds the reads of the request body.
func (st *stream) SetReadDeadline(t time.Time) error {
	st.moveDeadline(&st.readTimer, &st.readExpired, &st.bodyCond, t)
	return nil
}

// SetWriteDeadline bounds the writes of the response.
func (st *stream) SetWriteDeadline(t time.Time) error {
	st.moveDeadline(&st.writeTimer, &st.writeExpired, &st.c.room, t)
	return nil
}

// moveDeadline moves a deadline of the stream to t (none for zero): when
// it passes, expired is set and those waiting on wake are woken.
func (st *stream) moveDeadline(timer **time.Timer, expired *bool, wake *sync.Cond, t time.Time) {
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	*expired = false
	if *timer != nil {
		(*timer).Stop()
	}
	if t.IsZero() {
		return
	}
	expire := func() {
		*expired = true
		wake.Broadcast()
	}
	switch d := time.Until(t); {
	case d <= 0:
		expire()
	case *timer == nil:
		*timer = time.AfterFunc(d, func() {
			c.mu.Lock()
			expire()
			c.mu.Unlock()
		})
	default:
		(*timer).Reset(d)
	}
}
