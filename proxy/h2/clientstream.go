package h2

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http2"
)

// clientStream is one request to a backend and its response.
type clientStream struct {
	cc  *clientConn
	id  uint32
	req *http.Request
	// stop ends the watch on the request's context.
	stop func() bool

	// Guarded by cc.mu.
	sendWindow int64
	// inflow holds what arrived of the response body and is unread.
	inflow
	// localClosed says the request went out whole (END_STREAM);
	// remoteClosed that the response did.
	localClosed, remoteClosed bool
	// aborted is why the stream was reset or its connection lost.
	aborted error
	// resp is the response once its header came; cond wakes those
	// waiting for it, for body bytes, or for the stream's end.
	resp *http.Response
	cond sync.Cond
	// bodyErr is what a read gets after the body (io.EOF at the end).
	bodyErr error
	discard bool
	// trailer is the response's trailer, put in resp.Trailer by the read
	// that meets the end of the body.
	trailer http.Header
	// bodyStarted says a read of the request body began: the request
	// cannot be sent again unless replay holds all of the body. keep
	// says sendBody keeps the body whole, reading all of it even once
	// the backend turned the stream away; sendDone that sendBody is
	// done with the body, and keepErr why it could not read all of it.
	bodyStarted, keep, sendDone bool
	keepErr                     error
	replay                      []byte
}

// roundTrip sends req on a stream of cc, for which the caller reserved
// room, and waits for the response header.
func (cc *clientConn) roundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	hasBody := req.Body != nil && req.Body != http.NoBody
	cs := &clientStream{cc: cc, req: req, inflow: inflow{recvWindow: recvWindow}}
	cs.cond.L = &cc.mu
	cc.mu.Lock()
	cc.reserved--
	if err := ctx.Err(); err != nil || cc.closed || cc.goingAway {
		cc.closeIfDone()
		cc.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return nil, &unprocessedError{}
	}
	cs.id = cc.nextID
	cc.nextID += 2
	cs.sendWindow = cc.peerWindow
	cc.streams[cs.id] = cs
	cc.writeRequestHeader(cs.id, req, !hasBody)
	cs.localClosed = !hasBody
	// The watch runs on a goroutine of its own, which waits for the
	// lock held here.
	cs.stop = context.AfterFunc(ctx, func() {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		if cc.streams[cs.id] == cs {
			_ = cc.resetStreamLocked(cs.id, http2.ErrCodeCancel, ctx.Err())
		}
	})
	cc.mu.Unlock()
	if hasBody {
		go cs.sendBody()
	}

	cc.mu.Lock()
	defer cc.mu.Unlock()
	for cs.resp == nil && cs.aborted == nil {
		cs.cond.Wait()
	}
	ue, unprocessed := cs.aborted.(*unprocessedError)
	if unprocessed && cs.keep {
		// The backend turned the stream away while the body was being
		// read: sendBody reads the rest into the buffer kept for the
		// next attempt.
		for !cs.sendDone {
			cs.cond.Wait()
		}
	}
	// Nothing sends the body again once the response came.
	replay := cs.replay
	cs.replay = nil
	if cs.resp == nil {
		if unprocessed && replay != nil {
			ue.body = bytes.Clone(replay)
		}
		putBodyBuffer(replay)
		if unprocessed && cs.keepErr != nil {
			return nil, bodyTakenError{fmt.Errorf("%v, and its body could not be read again: %w", ue, cs.keepErr)}
		}
		if cs.bodyStarted {
			// sendBody may still read the body, or be about to.
			return nil, bodyTakenError{cs.aborted}
		}
		return nil, cs.aborted
	}
	putBodyBuffer(replay)
	return cs.resp, nil
}

// writeRequestHeader queues req's header section. cc.mu is held.
func (cc *clientConn) writeRequestHeader(id uint32, req *http.Request, end bool) {
	cc.enc.start()
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	cc.field(":method", req.Method)
	cc.field(":scheme", req.URL.Scheme)
	cc.field(":authority", host)
	cc.field(":path", req.URL.RequestURI())
	cc.enc.header(req.Header, notForwarded)
	if len(req.Trailer) > 0 {
		// The backend learns of the trailer to come, as a server of
		// net/http keeps only the trailer fields announced.
		cc.field("trailer", strings.Join(slices.Sorted(maps.Keys(req.Trailer)), ","))
	}
	if te := req.Header["Te"]; len(te) > 0 && strings.EqualFold(te[0], "trailers") {
		cc.field("te", "trailers")
	}
	switch {
	case req.ContentLength > 0:
		cc.field("content-length", strconv.FormatInt(req.ContentLength, 10))
	case end && req.Method != http.MethodGet && req.Method != http.MethodHead:
		cc.field("content-length", "0")
	}
	cc.writeBlock(id, end)
}

// notForwarded names the fields a request to a backend does not carry as
// they are: those RoundTrip writes itself.
func notForwarded(key string) bool {
	switch key {
	case "Host", "Te", "Content-Length", "Trailer":
		return true
	}
	return false
}

// sendBody copies the request body to the stream, then ends it, with the
// request's trailer if it has one.
func (cs *clientStream) sendBody() {
	cc := cs.cc
	body := cs.req.Body
	declared := cs.req.ContentLength
	// A body that fits the buffer whole is kept in it until the response
	// comes, to be sent again if the backend refuses the stream: the
	// stream a server has just closed can still count against its limit
	// when the next one opens.
	keep := declared > 0 && declared <= bodyBufferSize && len(cs.req.Trailer) == 0
	cc.mu.Lock()
	if cs.aborted != nil {
		// Refused before a byte was read: the body is the next
		// attempt's.
		cs.sendDone = true
		cc.mu.Unlock()
		return
	}
	cs.bodyStarted, cs.keep = true, keep
	cc.mu.Unlock()
	defer body.Close()
	buf := (*bodyBuffers.Get().(*[]byte))[:bodyBufferSize]
	sent := int64(0)
	for {
		chunk := buf
		if keep {
			chunk = buf[sent:declared]
		}
		n, err := body.Read(chunk)
		chunk = chunk[:n]
		sent += int64(n)
		// A body of known length ends with its last byte, without a
		// read that waits for EOF.
		last := err == io.EOF || declared > 0 && sent >= declared
		end := last && len(cs.req.Trailer) == 0
		cc.mu.Lock()
		var werr error
		if n > 0 || end {
			werr = cc.queueData(cs.id, &cs.sendWindow, chunk, end, cs.writeErr)
		} else if last {
			// The trailer goes only on a stream still open.
			werr = cs.writeErr()
		}
		_, unprocessed := cs.aborted.(*unprocessedError)
		switch {
		case unprocessed && keep:
			// The backend never acted on the stream: the rest of
			// the body is read for the next attempt.
			if err == nil && sent < declared {
				cc.mu.Unlock()
				n, err = io.ReadFull(body, buf[sent:declared])
				sent += int64(n)
				cc.mu.Lock()
			}
			if sent == declared {
				cs.replay, buf = buf[:declared], nil
			} else if cs.keepErr = err; err == io.EOF {
				cs.keepErr = io.ErrUnexpectedEOF
			}
		case werr != nil:
			// The stream ended: reset it if the response ended
			// while the request went on, which the backend did not
			// do itself.
			if cc.streams[cs.id] == cs {
				_ = cc.resetStreamLocked(cs.id, http2.ErrCodeCancel, werr)
			}
		case last:
			if !end {
				cc.enc.start()
				cc.enc.header(cs.req.Trailer, noKey)
				cc.writeBlock(cs.id, true)
			}
			if keep && sent == declared && cs.resp == nil && cs.aborted == nil {
				cs.replay, buf = buf[:declared], nil
			}
			cs.localClosed = true
			cs.done()
		case err != nil:
			// The request is cut short: the backend must not take
			// what came for all of it.
			if cc.streams[cs.id] == cs {
				_ = cc.resetStreamLocked(cs.id, http2.ErrCodeCancel, err)
			}
		}
		finished := werr != nil || last || err != nil || unprocessed && keep
		if finished {
			cs.sendDone = true
			cs.cond.Broadcast()
		}
		cc.mu.Unlock()
		if finished {
			putBodyBuffer(buf)
			return
		}
	}
}

const bodyBufferSize = 16 << 10

var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, bodyBufferSize); return &b }}

func putBodyBuffer(b []byte) {
	if cap(b) == bodyBufferSize {
		b = b[:0]
		bodyBuffers.Put(&b)
	}
}

// ErrBodyTaken is in the error of a request whose body the Transport began
// to send, and may still read: the request must not be sent again with
// that body, even where the caller saw nothing read of it yet.
var ErrBodyTaken = errors.New("http2: request body taken")

type bodyTakenError struct{ err error }

func (e bodyTakenError) Error() string { return e.err.Error() }

func (e bodyTakenError) Unwrap() []error { return []error{e.err, ErrBodyTaken} }

// unprocessedError fails a request the backend did not act on: refused,
// or past the last stream of its GOAWAY. body is the request body to send
// again, nil for none or for one still unread.
type unprocessedError struct{ body []byte }

func (e *unprocessedError) Error() string { return errUnprocessed.Error() }

func (e *unprocessedError) Is(target error) bool { return target == errUnprocessed }

// unprocessed is the error of a stream the backend did not act on: one to
// send again if the body is still unread or kept whole, else cause.
// cc.mu is held.
func (cs *clientStream) unprocessed(cause error) error {
	if !cs.bodyStarted || cs.keep {
		return &unprocessedError{}
	}
	return cause
}

// writeErr is why the stream can take no more frames. cc.mu is held.
func (cs *clientStream) writeErr() error {
	switch {
	case cs.aborted != nil:
		return cs.aborted
	case cs.cc.closed:
		return errClosed
	case cs.remoteClosed:
		// The response ended: the backend wants no more.
		return errStreamReset
	}
	return nil
}

// abort fails the stream's reads and writes with err and ends it. cc.mu
// is held.
func (cs *clientStream) abort(err error) {
	if cs.aborted == nil {
		cs.aborted = err
	}
	if !cs.remoteClosed || cs.bodyErr == nil {
		cs.bodyErr = err
	}
	cs.localClosed, cs.remoteClosed = true, true
	cs.cond.Broadcast()
	cs.cc.room.Broadcast()
	cs.done()
}

// closeRemote ends the response body. cc.mu is held.
func (cs *clientStream) closeRemote() {
	cs.remoteClosed = true
	if cs.bodyErr == nil {
		cs.bodyErr = io.EOF
	}
	if !cs.localClosed && cs.aborted == nil && !cs.cc.closed {
		// The response is whole: what is left of the request is not
		// sent (as net/http's Transport does), and the stream ends now
		// on both sides rather than when sendBody next looks, which a
		// read of the body can hold up for as long as the client likes.
		_ = cs.cc.wfr.WriteRSTStream(cs.id, http2.ErrCodeCancel)
		cs.cc.wake.Signal()
		cs.localClosed = true
	}
	cs.cond.Broadcast()
	cs.cc.room.Broadcast()
	cs.done()
}

// done takes a stream off its connection once both sides ended it; the
// response body keeps what came of it for its reader. cc.mu is held.
func (cs *clientStream) done() {
	cc := cs.cc
	if !cs.localClosed || !cs.remoteClosed || cc.streams[cs.id] != cs {
		return
	}
	delete(cc.streams, cs.id)
	if cs.stop != nil {
		cs.stop()
	}
	if len(cc.streams) > 0 || cc.reserved > 0 || cc.closed {
		return
	}
	if cc.goingAway {
		cc.closeIfDone()
	} else if cc.idleTimer != nil {
		cc.idleTimer.Reset(cc.t.IdleTimeout)
	}
}

// open reports whether the backend may still send on the stream. cc.mu
// is held.
func (cs *clientStream) open() bool { return !cs.remoteClosed && cs.aborted == nil }

// responseBody is a stream's response body.
type responseBody struct{ cs *clientStream }

func (b responseBody) Read(p []byte) (int, error) {
	cs := b.cs
	cc := cs.cc
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for cs.bodyOff == len(cs.body) {
		switch {
		case cs.bodyErr != nil:
			if cs.bodyErr == io.EOF {
				cs.copyTrailer()
			}
			return 0, cs.bodyErr
		case cs.discard:
			return 0, http.ErrBodyReadAfterClose
		}
		cs.cond.Wait()
	}
	return cs.take(&cc.wire, cs.id, p, cs.open()), nil
}

// copyTrailer puts the trailer that came into the response's Trailer, on
// the goroutine that reads the body: it reads that map meanwhile. cc.mu
// is held.
func (cs *clientStream) copyTrailer() {
	switch {
	case cs.trailer == nil:
		return
	case cs.resp.Trailer == nil:
		cs.resp.Trailer = cs.trailer
	default:
		for k, vv := range cs.trailer {
			cs.resp.Trailer[k] = vv
		}
	}
	cs.trailer = nil
}

// Close drops what is left of the response, resetting a stream still open.
func (b responseBody) Close() error {
	cs := b.cs
	cc := cs.cc
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !cs.discard {
		cs.discard = true
		cs.drop(&cc.wire)
	}
	if !cs.remoteClosed && cs.aborted == nil {
		_ = cc.resetStreamLocked(cs.id, http2.ErrCodeCancel, errStreamReset)
	}
	cs.done()
	cs.cond.Broadcast()
	return nil
}
