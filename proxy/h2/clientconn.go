package h2

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// clientConn is one connection to a backend.
type clientConn struct {
	wire
	t    *Transport
	addr string
	pool *pool
	// forgotten says forget ran: the connection is not pooled again.
	// Guarded by t.mu.
	forgotten bool

	// Guarded by mu.
	streams map[uint32]*clientStream
	// nextID is the ID of the next stream; reserved counts the streams
	// callers have room for and have yet to open.
	nextID   uint32
	reserved int
	// maxStreams is the backend's SETTINGS_MAX_CONCURRENT_STREAMS.
	maxStreams uint32
	// goingAway says either side sent GOAWAY: no new stream is opened;
	// lastID is the last stream the backend's GOAWAY says it acts on.
	goingAway bool
	lastID    uint32
	idleTimer *time.Timer
}

// defaultMaxStreams is what a connection assumes of the backend's
// concurrent streams until its SETTINGS come, as RFC 9113 section 6.5.2
// suggests, and the most it uses whatever the backend allows.
const defaultMaxStreams = 100

func newClientConn(t *Transport, nc net.Conn, addr string, p *pool) *clientConn {
	cc := &clientConn{
		t:       t,
		addr:    addr,
		pool:    p,
		streams: map[uint32]*clientStream{},
		nextID:  1,
		// A backend that allowed none on another connection may allow
		// some on this one, which its SETTINGS will say.
		maxStreams: max(p.maxStreams.Load(), 1),
	}
	// Each stream's window bounds what it buffers; the connection's
	// holds all of them, so that one unread body stalls no other.
	cc.init(nc, t.maxHeaderList(), defaultMaxStreams*recvWindow, cc.abortAll)
	// Request fields are not added to HPACK's dynamic table, as nginx
	// and HAProxy do: gRPC clients send a new grpc-timeout on every
	// call, and adding each evicted another field. With net/http's
	// Transport, encoding took 8.3% of the core in bench/run.sh's grpc
	// with the table and 2.7% without; the bytes it would save stay on
	// the backend's network.
	cc.enc.setLimit(0)
	cc.out = append(cc.out, clientPreface...)
	_ = cc.wfr.WriteSettings(clientSettings(t.maxHeaderList())...)
	_ = cc.wfr.WriteWindowUpdate(0, uint32(cc.recvWindow)-65535)
	if t.IdleTimeout > 0 {
		// A connection whose first request fails before its stream
		// opens has no stream end to start the timer.
		cc.idleTimer = time.AfterFunc(t.IdleTimeout, cc.idle)
	}
	go cc.writeLoop()
	go cc.readLoop()
	return cc
}

// reserve takes room for a stream, reporting false when there is none.
func (cc *clientConn) reserve() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.closed || cc.goingAway || uint32(len(cc.streams)+cc.reserved) >= cc.maxStreams || cc.nextID > 1<<31-1 {
		return false
	}
	cc.reserved++
	if cc.idleTimer != nil {
		cc.idleTimer.Stop()
	}
	return true
}

// abortAll fails every stream of a lost connection. cc.mu is held.
func (cc *clientConn) abortAll() {
	for _, cs := range cc.streams {
		cs.abort(errClosed)
	}
}

func (cc *clientConn) readLoop() {
	var err error
	for err == nil {
		err = cc.readFrame()
	}
	cc.end(err)
}

// readFrame reads and acts on one frame; an error ends the connection.
func (cc *clientConn) readFrame() error {
	f, err := cc.fr.ReadFrame()
	if err != nil {
		return cc.frameError(err)
	}
	switch f := f.(type) {
	case *http2.HeadersFrame:
		b, err := cc.hdr.read(cc.fr, f)
		if err != nil {
			return cc.frameError(err)
		}
		return cc.processHeaders(b)
	case *http2.DataFrame:
		return cc.processData(f)
	case *http2.WindowUpdateFrame:
		return cc.processWindowUpdate(f)
	case *http2.SettingsFrame:
		return cc.processSettings(f)
	case *http2.PingFrame:
		return cc.processPing(f)
	case *http2.RSTStreamFrame:
		return cc.processReset(f)
	case *http2.GoAwayFrame:
		cc.processGoAway(f)
	case *http2.PushPromiseFrame:
		return connError{http2.ErrCodeProtocol, "PUSH_PROMISE with push disabled"}
	}
	return nil
}

// frameError sorts an error of reading a frame: a stream error resets
// its stream and the connection goes on; anything else ends it.
func (cc *clientConn) frameError(err error) error {
	if se, ok := errors.AsType[http2.StreamError](err); ok {
		return cc.resetStream(se.StreamID, se.Code, errors.New("http2: malformed response"))
	}
	return readError(err)
}

// stream is the open stream id, nil for one ended or never opened.
func (cc *clientConn) stream(id uint32) *clientStream {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.streams[id]
}

// processHeaders takes a response's header section, an informational
// one, or its trailer.
func (cc *clientConn) processHeaders(f *headerBlock) error {
	cs := cc.stream(f.StreamID)
	if cs == nil {
		return nil
	}
	if f.Truncated {
		return cc.resetStream(cs.id, http2.ErrCodeProtocol, errors.New("http2: response header section past the limit"))
	}
	if cs.resp != nil {
		return cc.processTrailer(cs, f)
	}
	status, err := strconv.Atoi(f.PseudoValue("status"))
	if err != nil || status < 100 || status > 999 || len(f.PseudoFields()) != 1 {
		return cc.resetStream(cs.id, http2.ErrCodeProtocol, errors.New("http2: malformed :status in the response"))
	}
	header := cc.header(f.RegularFields())
	if status < 200 {
		if f.StreamEnded() || status == http.StatusSwitchingProtocols {
			// 101 has no place in HTTP/2 (RFC 9113 section 8.6).
			return cc.resetStream(cs.id, http2.ErrCodeProtocol, errors.New("http2: informational response ends the stream, or is 101"))
		}
		// 100 Continue needs nothing: the body goes without waiting.
		if trace := httptrace.ContextClientTrace(cs.req.Context()); status != http.StatusContinue && trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(status, textproto.MIMEHeader(header)); err != nil {
				return cc.resetStream(cs.id, http2.ErrCodeCancel, err)
			}
		}
		return nil
	}
	resp := &http.Response{
		Status:        statusLine(status),
		StatusCode:    status,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        header,
		ContentLength: -1,
		Request:       cs.req,
	}
	if cl := header["Content-Length"]; len(cl) == 1 {
		if n, err := strconv.ParseInt(cl[0], 10, 64); err == nil && n >= 0 {
			resp.ContentLength = n
		}
	}
	for _, v := range header["Trailer"] {
		for key := range strings.SplitSeq(v, ",") {
			if key = http.CanonicalHeaderKey(strings.TrimSpace(key)); key != "" {
				if resp.Trailer == nil {
					resp.Trailer = http.Header{}
				}
				resp.Trailer[key] = nil
			}
		}
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cs.aborted != nil {
		// Reset meanwhile (its context ended, say): the caller gets
		// the reset, not a response whose body fails.
		return nil
	}
	cs.resp = resp
	if f.StreamEnded() {
		resp.Body = http.NoBody
		if cs.req.Method != http.MethodHead {
			resp.ContentLength = 0
		}
		cs.closeRemote()
	} else {
		resp.Body = responseBody{cs}
	}
	cs.cond.Broadcast()
	return nil
}

// processTrailer takes the trailer that ends a response body.
func (cc *clientConn) processTrailer(cs *clientStream, f *headerBlock) error {
	cc.mu.Lock()
	ended := cs.remoteClosed
	cc.mu.Unlock()
	if ended {
		return cc.resetStream(cs.id, http2.ErrCodeStreamClosed, errors.New("http2: HEADERS after the response ended"))
	}
	if !f.StreamEnded() || len(f.PseudoFields()) > 0 {
		return cc.resetStream(cs.id, http2.ErrCodeProtocol, errors.New("http2: malformed response trailer"))
	}
	trailer := cc.header(f.RegularFields())
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cs.trailer = trailer
	cs.closeRemote()
	return nil
}

// header is the http.Header of fields, whose values share one array.
func (cc *clientConn) header(fields []hpack.HeaderField) http.Header {
	h := make(http.Header, len(fields))
	values := make([]string, len(fields))
	for i, hf := range fields {
		key := cc.canonical(hf.Name)
		if prior, ok := h[key]; ok {
			h[key] = append(prior, hf.Value)
			continue
		}
		values[i] = hf.Value
		h[key] = values[i : i+1 : i+1]
	}
	return h
}

// processData hands response body bytes to their stream's reader.
func (cc *clientConn) processData(f *http2.DataFrame) error {
	data := f.Data()
	flow := int32(f.Length)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if err := cc.takeData(flow); err != nil {
		return err
	}
	cs := cc.streams[f.StreamID]
	if cs == nil || cs.resp == nil || cs.remoteClosed {
		// A stream reset or ended: its bytes count against the
		// connection's window all the same.
		cc.consumed(flow)
		switch {
		case cs == nil:
			return nil
		case cs.remoteClosed:
			return cc.resetStreamLocked(cs.id, http2.ErrCodeStreamClosed, errors.New("http2: DATA after the response ended"))
		}
		return cc.resetStreamLocked(cs.id, http2.ErrCodeProtocol, errors.New("http2: DATA before the response header"))
	}
	if flow > cs.recvWindow {
		cc.consumed(flow)
		return cc.resetStreamLocked(cs.id, http2.ErrCodeFlowControl, errors.New("http2: response body past the stream's window"))
	}
	cs.recvWindow -= flow
	pad := flow - int32(len(data))
	cc.consumed(pad)
	cs.giveBack(&cc.wire, cs.id, pad, cs.open())
	if cs.discard {
		cc.consumed(int32(len(data)))
	} else if len(data) > 0 {
		cs.body = append(cs.body, data...)
		cs.cond.Broadcast()
	}
	if f.StreamEnded() {
		cs.closeRemote()
	}
	return nil
}

func (cc *clientConn) processWindowUpdate(f *http2.WindowUpdateFrame) error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if f.StreamID == 0 {
		return cc.grow(&cc.sendWindow, f.Increment, 0)
	}
	if cs := cc.streams[f.StreamID]; cs != nil {
		if err := cc.grow(&cs.sendWindow, f.Increment, f.StreamID); err != nil {
			return cc.resetStreamLocked(cs.id, http2.ErrCodeFlowControl, err)
		}
	}
	return nil
}

func (cc *clientConn) processSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingMaxConcurrentStreams:
			cc.maxStreams = min(s.Val, defaultMaxStreams)
			cc.pool.maxStreams.Store(cc.maxStreams)
		case http2.SettingHeaderTableSize:
			return nil // the encoder keeps no table, whatever the room
		}
		return cc.applySetting(s, func(yield func(*int64) bool) {
			for _, cs := range cc.streams {
				if !yield(&cs.sendWindow) {
					return
				}
			}
		})
	})
	if err != nil || cc.closed {
		return err
	}
	_ = cc.wfr.WriteSettingsAck()
	return cc.queuedControl()
}

func (cc *clientConn) processPing(f *http2.PingFrame) error {
	if f.IsAck() {
		return nil
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.closed {
		return nil
	}
	_ = cc.wfr.WritePing(true, f.Data)
	return cc.queuedControl()
}

func (cc *clientConn) processReset(f *http2.RSTStreamFrame) error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cs := cc.streams[f.StreamID]
	if cs == nil {
		return nil
	}
	var err error = http2.StreamError{StreamID: f.StreamID, Code: f.ErrCode}
	switch {
	case f.ErrCode == http2.ErrCodeRefusedStream:
		err = cs.unprocessed(err)
	case f.ErrCode == http2.ErrCodeNo && cs.remoteClosed:
		// The response is whole; the backend wants no more of the
		// request (RFC 9113 section 8.1).
		cs.localClosed = true
		cs.done()
		return nil
	}
	cs.abort(err)
	return nil
}

// processGoAway stops new streams and fails those past the backend's last
// one, which it never acted on; the connection closes once the rest end.
func (cc *clientConn) processGoAway(f *http2.GoAwayFrame) {
	cc.t.forget(cc)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.goingAway, cc.lastID = true, f.LastStreamID
	for id, cs := range cc.streams {
		if id > f.LastStreamID {
			cs.abort(cs.unprocessed(errors.New("http2: backend went away before the request was processed")))
		}
	}
	cc.closeIfDone()
}

// resetStream sends RST_STREAM with code and fails the stream with err.
func (cc *clientConn) resetStream(id uint32, code http2.ErrCode, err error) error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.resetStreamLocked(id, code, err)
}

func (cc *clientConn) resetStreamLocked(id uint32, code http2.ErrCode, err error) error {
	if cs := cc.streams[id]; cs != nil {
		cs.abort(err)
	}
	if cc.closed {
		return nil
	}
	_ = cc.wfr.WriteRSTStream(id, code)
	return cc.queuedControl()
}

// closeIfIdle closes a connection without streams, reporting whether it
// did.
func (cc *clientConn) closeIfIdle() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if len(cc.streams) > 0 || cc.reserved > 0 {
		return false
	}
	cc.goingAway = true
	cc.closeIfDone()
	return true
}

// closeIfDone closes a connection going away once its last stream has
// ended, after a GOAWAY of its own. cc.mu is held.
func (cc *clientConn) closeIfDone() {
	if !cc.goingAway || cc.closed || len(cc.streams) > 0 || cc.reserved > 0 {
		return
	}
	_ = cc.wfr.WriteGoAway(0, http2.ErrCodeNo, nil)
	cc.closed = true
	cc.wake.Signal()
	go func() {
		<-cc.writerDone
		cc.nc.Close()
	}()
}

// idle is the idle timer's.
func (cc *clientConn) idle() {
	if cc.closeIfIdle() {
		cc.t.forget(cc)
	}
}

// end tears the connection down after the reader stopped for err.
func (cc *clientConn) end(err error) {
	cc.t.forget(cc)
	ce, protocolError := errors.AsType[connError](err)
	cc.mu.Lock()
	if protocolError && !cc.closed {
		_ = cc.wfr.WriteGoAway(0, ce.code, nil)
	}
	cc.closed = true
	cc.abortAll()
	cc.wake.Signal()
	cc.room.Broadcast()
	if cc.idleTimer != nil {
		cc.idleTimer.Stop()
	}
	cc.mu.Unlock()
	select {
	case <-cc.writerDone:
	case <-time.After(goAwayLinger):
	}
	cc.nc.Close()
}
