package h2

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/http2"
)

const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// conn is one HTTP/2 connection.
type conn struct {
	wire
	srv    *Server
	ctx    context.Context
	remote string
	// upgrade and settings are ConnOpts'.
	upgrade  *http.Request
	settings []byte

	// Owned by the reader.
	maxStreamID uint32
	// resets is what is left of the reset budget, as of refilled.
	resets   float64
	refilled time.Time
	empty    emptyBudget

	// Guarded by mu.
	// streams are the streams open for frames from the client: a stream
	// leaves when its handler has answered or either side reset it.
	streams map[uint32]*stream
	// active counts handlers running; idleTimer closes the connection
	// once it has been 0 for IdleTimeout.
	active    uint32
	idleTimer *time.Timer
	// lastStarted is the last stream given to a handler, which a GOAWAY
	// names.
	lastStarted uint32
	// goingAway says GOAWAY was queued: no new stream is taken.
	goingAway bool
}

func newConn(s *Server, nc net.Conn, opts ConnOpts) *conn {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	c := &conn{
		srv:      s,
		ctx:      ctx,
		remote:   nc.RemoteAddr().String(),
		upgrade:  opts.Upgrade,
		settings: opts.Settings,
		streams:  map[uint32]*stream{},
	}
	c.init(nc, s.maxHeaderList(), connRecvWindow, c.abortAll)
	if s.EmptyFrameBurst > 0 {
		c.empty = emptyBudget{left: s.EmptyFrameBurst, burst: s.EmptyFrameBurst}
		c.hdr.empty = &c.empty
	}
	return c
}

// abortAll fails every stream of a lost connection. c.mu is held.
func (c *conn) abortAll() {
	for _, st := range c.streams {
		st.abort(errClosed)
	}
}

// cancelStreams ends the contexts of the streams under way as the
// connection's context ends; startStream ends those of later ones.
func (c *conn) cancelStreams() {
	err := c.ctx.Err()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.streams {
		st.ctx.cancel(err)
	}
}

// connError ends the connection with GOAWAY and code.
type connError struct {
	code http2.ErrCode
	why  string
}

func (e connError) Error() string { return "http2: connection error " + e.code.String() + ": " + e.why }

var (
	errClosed      = errors.New("http2: connection closed")
	errStreamReset = errors.New("http2: stream reset")
)

func (c *conn) serve(draining bool) {
	defer c.nc.Close()
	go c.writeLoop()
	c.mu.Lock()
	settings := []http2.Setting{
		{ID: http2.SettingMaxConcurrentStreams, Val: c.srv.maxStreams()},
		{ID: http2.SettingInitialWindowSize, Val: recvWindow},
		{ID: http2.SettingMaxHeaderListSize, Val: c.srv.maxHeaderList()},
	}
	_ = c.wfr.WriteSettings(settings...)
	_ = c.wfr.WriteWindowUpdate(0, connRecvWindow-65535)
	c.wake.Signal()
	c.mu.Unlock()
	if c.srv.IdleTimeout > 0 {
		c.idleTimer = time.AfterFunc(c.srv.IdleTimeout, c.idle)
	}
	if c.ctx.Done() != nil {
		// Once the connection ends, so have its streams (end).
		defer context.AfterFunc(c.ctx, c.cancelStreams)()
	}

	err := c.readPreface()
	if err == nil && c.upgrade != nil {
		err = c.startUpgraded()
	}
	if draining {
		c.goAwayGracefully()
	}
	for err == nil {
		err = c.readFrame()
	}
	c.end(err)
}

// readPreface reads the client's preface and its first SETTINGS under
// PrefaceTimeout.
func (c *conn) readPreface() error {
	if t := c.srv.PrefaceTimeout; t > 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(t))
		defer c.nc.SetReadDeadline(time.Time{})
	}
	var buf [len(clientPreface)]byte
	if _, err := io.ReadFull(c.br, buf[:]); err != nil {
		return err
	}
	if string(buf[:]) != clientPreface {
		return connError{http2.ErrCodeProtocol, "bad connection preface"}
	}
	f, err := c.fr.ReadFrame()
	if err != nil {
		return c.frameError(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return connError{http2.ErrCodeProtocol, "first frame is not SETTINGS"}
	}
	return c.processSettings(sf)
}

// startUpgraded applies the upgrade's settings and serves its request as
// stream 1, half-closed from the client's side.
func (c *conn) startUpgraded() error {
	if len(c.settings)%6 != 0 {
		return connError{http2.ErrCodeProtocol, "HTTP2-Settings"}
	}
	for i := 0; i < len(c.settings); i += 6 {
		s := http2.Setting{
			ID:  http2.SettingID(uint16(c.settings[i])<<8 | uint16(c.settings[i+1])),
			Val: uint32(c.settings[i+2])<<24 | uint32(c.settings[i+3])<<16 | uint32(c.settings[i+4])<<8 | uint32(c.settings[i+5]),
		}
		if err := c.applySetting(s); err != nil {
			return err
		}
	}
	r := c.upgrade
	st := c.newStream(1)
	c.maxStreamID = 1
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
	r.RemoteAddr = c.remote
	st.req = r.WithContext(&st.ctx)
	st.isHead = r.Method == http.MethodHead
	st.remoteClosed = true
	c.startStream(st)
	return nil
}

// readFrame reads and acts on one frame; an error ends the connection.
func (c *conn) readFrame() error {
	f, err := c.fr.ReadFrame()
	if err != nil {
		return c.frameError(err)
	}
	switch f := f.(type) {
	case *http2.HeadersFrame:
		var b *headerBlock
		if b, err = c.hdr.read(c.fr, f); err != nil {
			return c.frameError(err)
		}
		c.empty.refill()
		err = c.processHeaders(b)
	case *http2.DataFrame:
		err = c.processData(f)
	case *http2.WindowUpdateFrame:
		err = c.processWindowUpdate(f)
	case *http2.SettingsFrame:
		err = c.processSettings(f)
	case *http2.PingFrame:
		err = c.processPing(f)
	case *http2.RSTStreamFrame:
		err = c.processReset(f)
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			err = streamErr(f.StreamID, http2.ErrCodeProtocol)
		} else if !c.empty.spend() {
			err = errEmptyFlood
		}
	case *http2.GoAwayFrame:
		c.goAwayGracefully()
	case *http2.PushPromiseFrame:
		err = connError{http2.ErrCodeProtocol, "PUSH_PROMISE from a client"}
	}
	return c.streamError(err)
}

// frameError sorts an error of the Framer: a stream error resets its
// stream and the connection goes on; anything else ends it.
func (c *conn) frameError(err error) error {
	if _, ok := errors.AsType[http2.StreamError](err); ok {
		return c.streamError(err)
	}
	return readError(err)
}

// streamError resets the stream of a stream error, which leaves the
// connection going; other errors end it.
func (c *conn) streamError(err error) error {
	if se, ok := errors.AsType[http2.StreamError](err); ok {
		if se.StreamID > c.maxStreamID && se.StreamID%2 == 1 {
			// A malformed request, or a PRIORITY on an idle
			// stream: reset, the stream is closed, and HEADERS
			// must not open it again.
			c.maxStreamID = se.StreamID
		}
		return c.resetStream(se.StreamID, se.Code)
	}
	return err
}

func streamErr(id uint32, code http2.ErrCode) error {
	return http2.StreamError{StreamID: id, Code: code}
}

// processHeaders opens a stream, or takes the trailer of one open.
func (c *conn) processHeaders(f *headerBlock) error {
	id := f.StreamID
	if id%2 == 0 {
		return connError{http2.ErrCodeProtocol, "even stream ID from a client"}
	}
	c.mu.Lock()
	st := c.streams[id]
	c.mu.Unlock()
	if st != nil {
		return c.processTrailer(st, f)
	}
	if id <= c.maxStreamID {
		return connError{http2.ErrCodeStreamClosed, "HEADERS on a closed stream"}
	}
	c.maxStreamID = id
	if f.HasPriority() && f.Priority.StreamDep == id {
		return streamErr(id, http2.ErrCodeProtocol)
	}
	c.mu.Lock()
	refuse := c.goingAway || c.closed
	// Streams count until answered or reset, as the client counts
	// them; the handlers of reset streams that have yet to notice are
	// bounded apart, as what a client resets in a loop.
	busy := uint32(len(c.streams)) >= c.srv.maxStreams() || c.active >= maxResetHandlers*c.srv.maxStreams()
	c.mu.Unlock()
	if refuse {
		// Past our GOAWAY's last stream: the client retries elsewhere.
		return nil
	}
	if busy {
		return streamErr(id, http2.ErrCodeRefusedStream)
	}
	st = c.newStream(id)
	if err := c.newRequest(st, f); err != nil {
		st.ctx.cancel(context.Canceled)
		return err
	}
	c.startStream(st)
	return nil
}

// processTrailer takes the trailer section that ends a request body.
func (c *conn) processTrailer(st *stream, f *headerBlock) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case st.remoteClosed && st.localClosed:
		// Closed both ways, its END_STREAM maybe read by the client
		// already: as for a stream whose handler returned.
		return connError{http2.ErrCodeStreamClosed, "HEADERS on a closed stream"}
	case st.remoteClosed:
		return streamErr(st.id, http2.ErrCodeStreamClosed)
	case !f.StreamEnded() || len(f.PseudoFields()) > 0:
		return streamErr(st.id, http2.ErrCodeProtocol)
	}
	if st.declared >= 0 && st.received != st.declared {
		return streamErr(st.id, http2.ErrCodeProtocol)
	}
	for _, hf := range f.RegularFields() {
		key := c.canonical(hf.Name)
		if !validTrailer(key) {
			return streamErr(st.id, http2.ErrCodeProtocol)
		}
		if st.trailer == nil {
			st.trailer = http.Header{}
		}
		st.trailer[key] = append(st.trailer[key], hf.Value)
	}
	st.closeRemote()
	return nil
}

// processData hands request body bytes to their stream's handler.
func (c *conn) processData(f *http2.DataFrame) error {
	if f.Length > 0 || f.StreamEnded() {
		c.empty.refill()
	} else if !c.empty.spend() {
		return errEmptyFlood
	}
	id := f.StreamID
	data := f.Data()
	flow := int32(f.Length)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.takeData(flow); err != nil {
		return err
	}
	st := c.streams[id]
	if st == nil || st.remoteClosed {
		if id > c.maxStreamID {
			return connError{http2.ErrCodeProtocol, "DATA on an idle stream"}
		}
		// The bytes count against the connection's window all the same.
		c.consumed(flow)
		return streamErr(id, http2.ErrCodeStreamClosed)
	}
	if flow > st.recvWindow {
		c.consumed(flow)
		return streamErr(id, http2.ErrCodeFlowControl)
	}
	st.recvWindow -= flow
	// Padding is consumed at once, from the stream's window as from the
	// connection's: no read gives it back, and a stream sent padding
	// would stall once it added up to the window.
	pad := flow - int32(len(data))
	c.consumed(pad)
	st.giveBack(&c.wire, id, pad, st.open())
	st.received += int64(len(data))
	if st.declared >= 0 && st.received > st.declared {
		c.consumed(int32(len(data)))
		return streamErr(id, http2.ErrCodeProtocol)
	}
	if st.discard {
		c.consumed(int32(len(data)))
	} else if len(data) > 0 {
		st.body = append(st.body, data...)
		st.bodyCond.Signal()
	}
	if f.StreamEnded() {
		if st.declared >= 0 && st.received != st.declared {
			return streamErr(id, http2.ErrCodeProtocol)
		}
		st.closeRemote()
	}
	return nil
}

func (c *conn) processWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		return c.grow(&c.sendWindow, f.Increment, 0)
	}
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID > c.maxStreamID {
			return connError{http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream"}
		}
		return nil
	}
	return c.grow(&st.sendWindow, f.Increment, f.StreamID)
}

func (c *conn) processSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	if err := f.ForeachSetting(c.applySetting); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	_ = c.wfr.WriteSettingsAck()
	return c.queuedControl()
}

// applySetting takes one of the client's settings.
func (c *conn) applySetting(s http2.Setting) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wire.applySetting(s, func(yield func(*int64) bool) {
		for _, st := range c.streams {
			if !yield(&st.sendWindow) {
				return
			}
		}
	})
}

func (c *conn) processPing(f *http2.PingFrame) error {
	if f.IsAck() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	_ = c.wfr.WritePing(true, f.Data)
	return c.queuedControl()
}

func (c *conn) processReset(f *http2.RSTStreamFrame) error {
	if f.StreamID > c.maxStreamID {
		return connError{http2.ErrCodeProtocol, "RST_STREAM on an idle stream"}
	}
	c.mu.Lock()
	st := c.streams[f.StreamID]
	early := st != nil && !st.sentHeader
	if st != nil {
		st.abort(errStreamReset)
	}
	c.mu.Unlock()
	if early && !c.spendReset() {
		return connError{http2.ErrCodeEnhanceYourCalm, "too many streams reset before their response (rapid reset)"}
	}
	return nil
}

// spendReset takes one reset of a stream whose response had not started
// from the connection's budget, refilled at Server.ResetRate per second up
// to Server.ResetBurst, and reports whether there was one. Each such
// stream cost a handler and perhaps a backend request; a client that
// opens and resets them in a loop (rapid reset, CVE-2023-44487) has the
// server work for nothing.
func (c *conn) spendReset() bool {
	burst := float64(c.srv.ResetBurst)
	if burst == 0 {
		return true
	}
	now := time.Now()
	if c.refilled.IsZero() {
		c.resets = burst
	} else {
		c.resets = min(burst, c.resets+now.Sub(c.refilled).Seconds()*c.srv.ResetRate)
	}
	c.refilled = now
	if c.resets < 1 {
		return false
	}
	c.resets--
	return true
}

// emptyBudget bounds the frames of a connection that carry no bytes and
// do nothing: DATA without END_STREAM, header block fragments without
// END_HEADERS, and PRIORITY, which this engine ignores. Each costs a read
// and a dispatch as a request's frames do, yet takes nothing from a
// flow-control window or the header limit, so without a bound a client
// keeps a core busy with them at no cost (CVE-2019-9518). Every such
// frame takes one from the budget, every DATA frame with bytes or
// END_STREAM and every header block ended gives one back, up to burst:
// past burst, they can be no more than the frames that move requests
// forward. The zero budget, and a nil one, bound nothing.
type emptyBudget struct {
	left, burst int
}

var errEmptyFlood = connError{http2.ErrCodeEnhanceYourCalm, "too many frames that carry nothing (empty frame flood)"}

// spend takes one empty frame from the budget and reports whether there
// was one.
func (b *emptyBudget) spend() bool {
	if b == nil || b.burst == 0 {
		return true
	}
	if b.left == 0 {
		return false
	}
	b.left--
	return true
}

// refill gives one back for a frame that did work.
func (b *emptyBudget) refill() {
	if b != nil && b.left < b.burst {
		b.left++
	}
}

// resetStream sends RST_STREAM with code and aborts the stream if open.
// Resets answer frames of the client, as PING acknowledgements do, and
// are bounded alike: an error ends the connection.
func (c *conn) resetStream(id uint32, code http2.ErrCode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.streams[id]; st != nil {
		st.abort(errStreamReset)
	}
	if c.closed {
		return nil
	}
	_ = c.wfr.WriteRSTStream(id, code)
	return c.queuedControl()
}

// goAwayGracefully sends GOAWAY(NO_ERROR): streams open go on, no new one
// is taken, and the connection closes once they have ended.
func (c *conn) goAwayGracefully() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.goingAway || c.closed {
		return
	}
	c.goingAway = true
	_ = c.wfr.WriteGoAway(c.lastStarted, http2.ErrCodeNo, nil)
	c.wake.Signal()
	if c.active == 0 {
		c.stopReading()
	}
}

// stopReading has the reader end the connection in goAwayLinger: until
// then frames sent before the client saw the GOAWAY are still answered
// (a PING, say), and the GOAWAY is not lost to a reset of the connection.
func (c *conn) stopReading() {
	_ = c.nc.SetReadDeadline(time.Now().Add(goAwayLinger))
}

// idle is the idle timer's: a connection without streams goes away.
func (c *conn) idle() {
	c.mu.Lock()
	idle := c.active == 0
	c.mu.Unlock()
	if idle {
		c.goAwayGracefully()
	}
}

// end tears the connection down after the reader stopped for err: a
// connection error is sent as GOAWAY, streams still open are aborted, and
// the writer writes what was queued before the socket closes.
func (c *conn) end(err error) {
	ce, protocolError := errors.AsType[connError](err)
	c.mu.Lock()
	if protocolError && !c.closed {
		// The last stream a handler took: those after it were refused,
		// reset or dropped, and the client may send them again
		// elsewhere; nor may a GOAWAY name more than one before it
		// (RFC 9113 section 6.8).
		_ = c.wfr.WriteGoAway(c.lastStarted, ce.code, nil)
	}
	c.closed = true
	for _, st := range c.streams {
		st.abort(errClosed)
	}
	c.wake.Signal()
	c.room.Broadcast()
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	c.mu.Unlock()
	select {
	case <-c.writerDone:
	case <-time.After(goAwayLinger):
	}
	if protocolError {
		c.linger()
	}
	if cs := c.srv.ConnState; cs != nil {
		cs(c.nc, http.StateClosed)
	}
}

// linger reads and drops what the client sends after a GOAWAY for a
// protocol error, for goAwayLinger at most: closing a socket with unread
// bytes resets the connection, which can destroy the GOAWAY unread.
func (c *conn) linger() {
	_ = c.nc.SetReadDeadline(time.Now().Add(goAwayLinger))
	_, _ = io.Copy(io.Discard, c.br)
}
