package h2

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// conn is one HTTP/2 connection.
type conn struct {
	srv    *Server
	nc     net.Conn
	br     *bufio.Reader
	fr     *http2.Framer // the reader's
	ctx    context.Context
	remote string
	// upgrade and settings are ConnOpts'.
	upgrade  *http.Request
	settings []byte

	// Owned by the reader.
	maxStreamID uint32
	// canon caches the canonical forms of header names that
	// CanonicalMIMEHeaderKey does not have interned.
	canon map[string]string

	mu sync.Mutex
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
	// out holds the frames queued for the writer; spare is the buffer it
	// wrote last, which becomes out again.
	out, spare []byte
	wfr        *http2.Framer // writes into out
	henc       *hpack.Encoder
	hbuf       bytes.Buffer
	// lower caches the HTTP/2 names of the response fields lowerName
	// finds outside commonLower.
	lower map[string]string
	// sendWindow is the connection's flow-control window towards the
	// client; peerWindow and peerMaxFrame the client's
	// SETTINGS_INITIAL_WINDOW_SIZE and SETTINGS_MAX_FRAME_SIZE.
	sendWindow   int64
	peerWindow   int64
	peerMaxFrame uint32
	// recvWindow is what the client may send of request bodies before
	// the next WINDOW_UPDATE; unacked counts the bytes consumed since
	// the last one.
	recvWindow int32
	unacked    int32
	// wake wakes the writer; room wakes those waiting for flow-control
	// window or for the writer to catch up, waiters of which there are.
	wake    sync.Cond
	room    sync.Cond
	waiters int
	// goingAway says GOAWAY was queued: no new stream is taken.
	goingAway bool
	// closed says the connection is ending: nothing more is queued, and
	// writerDone is closed once the writer has written what was.
	closed     bool
	writerDone chan struct{}
}

func newConn(s *Server, nc net.Conn, opts ConnOpts) *conn {
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	c := &conn{
		srv:          s,
		nc:           nc,
		br:           bufio.NewReaderSize(nc, 16<<10),
		ctx:          ctx,
		remote:       nc.RemoteAddr().String(),
		upgrade:      opts.Upgrade,
		settings:     opts.Settings,
		streams:      map[uint32]*stream{},
		sendWindow:   65535,
		peerWindow:   65535,
		peerMaxFrame: 16 << 10,
		recvWindow:   recvWindow,
		writerDone:   make(chan struct{}),
	}
	c.wake.L, c.room.L = &c.mu, &c.mu
	c.fr = http2.NewFramer(nil, c.br)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = s.maxHeaderList()
	c.fr.SetMaxReadFrameSize(16 << 10)
	c.fr.SetReuseFrames()
	c.wfr = http2.NewFramer(queue{c}, nil)
	c.henc = hpack.NewEncoder(&c.hbuf)
	return c
}

// queue appends the write Framer's frames to the writer's queue; it is
// only written to under c.mu.
type queue struct{ c *conn }

func (q queue) Write(p []byte) (int, error) {
	q.c.out = append(q.c.out, p...)
	return len(p), nil
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
	_ = c.wfr.WriteWindowUpdate(0, recvWindow-65535)
	c.wake.Signal()
	c.mu.Unlock()
	if c.srv.IdleTimeout > 0 {
		c.idleTimer = time.AfterFunc(c.srv.IdleTimeout, c.idle)
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
	st.req = r.WithContext(st.ctx)
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
	case *http2.MetaHeadersFrame:
		err = c.processHeaders(f)
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
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &ce):
		return connError{http2.ErrCode(ce), "malformed frame"}
	case errors.Is(err, http2.ErrFrameTooLarge):
		return connError{http2.ErrCodeFrameSize, "frame too large"}
	}
	return c.streamError(err)
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
func (c *conn) processHeaders(f *http2.MetaHeadersFrame) error {
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
		st.cancel()
		return err
	}
	c.startStream(st)
	return nil
}

// processTrailer takes the trailer section that ends a request body.
func (c *conn) processTrailer(st *stream, f *http2.MetaHeadersFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
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
	id := f.StreamID
	data := f.Data()
	flow := int32(f.Length)
	c.mu.Lock()
	defer c.mu.Unlock()
	if flow > c.recvWindow {
		// Each stream keeps to its window; all of them at once
		// would have the server buffer their sum.
		return connError{http2.ErrCodeFlowControl, "DATA past the connection's window"}
	}
	c.recvWindow -= flow
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
	st.giveBack(pad)
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

// consumed returns n bytes of the connection's receive window, with a
// WINDOW_UPDATE once half the window is owed. c.mu is held.
func (c *conn) consumed(n int32) {
	c.unacked += n
	if c.unacked >= recvWindow/2 {
		c.queueWindowUpdate(0, c.unacked)
		c.recvWindow += c.unacked
		c.unacked = 0
	}
}

func (c *conn) queueWindowUpdate(id uint32, n int32) {
	if c.closed || n <= 0 {
		return
	}
	_ = c.wfr.WriteWindowUpdate(id, uint32(n))
	c.wake.Signal()
}

func (c *conn) processWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		if c.sendWindow+inc > 1<<31-1 {
			return connError{http2.ErrCodeFlowControl, "connection window past 2^31-1"}
		}
		c.sendWindow += inc
		c.wakeWaiters()
		return nil
	}
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID > c.maxStreamID {
			return connError{http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream"}
		}
		return nil
	}
	if st.sendWindow+inc > 1<<31-1 {
		return streamErr(f.StreamID, http2.ErrCodeFlowControl)
	}
	st.sendWindow += inc
	c.wakeWaiters()
	return nil
}

// wakeWaiters wakes the handlers waiting for window or for the writer.
// c.mu is held.
func (c *conn) wakeWaiters() {
	if c.waiters > 0 {
		c.room.Broadcast()
	}
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

// applySetting takes one of the client's settings, in order (RFC 9113
// section 6.5.3: a setting repeated takes its last value).
func (c *conn) applySetting(s http2.Setting) error {
	if err := s.Valid(); err != nil {
		var ce http2.ConnectionError
		if errors.As(err, &ce) {
			return connError{http2.ErrCode(ce), "invalid setting " + s.String()}
		}
		return connError{http2.ErrCodeProtocol, "invalid setting " + s.String()}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch s.ID {
	case http2.SettingHeaderTableSize:
		c.henc.SetMaxDynamicTableSizeLimit(s.Val)
	case http2.SettingMaxFrameSize:
		c.peerMaxFrame = s.Val
	case http2.SettingInitialWindowSize:
		delta := int64(s.Val) - c.peerWindow
		c.peerWindow = int64(s.Val)
		for _, st := range c.streams {
			if st.sendWindow+delta > 1<<31-1 {
				return connError{http2.ErrCodeFlowControl, "stream window past 2^31-1"}
			}
			st.sendWindow += delta
		}
		c.wakeWaiters()
	}
	return nil
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

// queuedControl wakes the writer for a control frame just queued, and ends
// a connection whose client sends control frames and does not read their
// answers. c.mu is held.
func (c *conn) queuedControl() error {
	c.wake.Signal()
	if len(c.out) > 4*maxQueued {
		return connError{http2.ErrCodeEnhanceYourCalm, "client does not read"}
	}
	return nil
}

func (c *conn) processReset(f *http2.RSTStreamFrame) error {
	if f.StreamID > c.maxStreamID {
		return connError{http2.ErrCodeProtocol, "RST_STREAM on an idle stream"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.streams[f.StreamID]; st != nil {
		st.abort(errStreamReset)
	}
	return nil
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
		last := c.maxStreamID
		if c.goingAway {
			// The streams past the first GOAWAY's were dropped
			// unanswered, which the client may have retried
			// elsewhere: a GOAWAY must not name more than the one
			// before (RFC 9113 section 6.8).
			last = c.lastStarted
		}
		_ = c.wfr.WriteGoAway(last, ce.code, nil)
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

// writeLoop writes the queued frames, all of them at once, until the
// connection ends.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	c.mu.Lock()
	for {
		for len(c.out) == 0 && !c.closed {
			c.wake.Wait()
		}
		if len(c.out) == 0 {
			break
		}
		// Handlers woken with this one queue their frames first, and
		// go out in the same write.
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
		buf := c.out
		c.out, c.spare = c.spare[:0], nil
		c.mu.Unlock()
		_, err := c.nc.Write(buf)
		c.mu.Lock()
		if cap(buf) <= 2*maxQueued {
			c.spare = buf[:0]
		}
		c.wakeWaiters()
		if err != nil {
			c.closed = true
			for _, st := range c.streams {
				st.abort(errClosed)
			}
			c.room.Broadcast()
			c.mu.Unlock()
			c.nc.Close()
			return
		}
	}
	c.mu.Unlock()
}
