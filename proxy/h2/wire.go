package h2

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"

	"golang.org/x/net/http2"
)

// wire is what a connection's two ends share, server or client: the
// socket, the write queue and its writer, HPACK encoding, and the
// connection-level flow-control windows. Everything below mu is guarded
// by it.
type wire struct {
	nc net.Conn
	br *bufio.Reader
	fr *http2.Framer // the reader's
	// hdr decodes the header sections the reader reads.
	hdr *headerReader
	// canon caches the canonical forms of header names that
	// CanonicalMIMEHeaderKey does not have interned; the reader's.
	canon map[string]string

	mu sync.Mutex
	// out holds the frames queued for the writer; spare is the buffer it
	// wrote last, which becomes out again.
	out, spare []byte
	wfr        *http2.Framer // writes into out
	enc        encoder
	// sendWindow is the connection's flow-control window towards the
	// peer; peerWindow and peerMaxFrame the peer's
	// SETTINGS_INITIAL_WINDOW_SIZE and SETTINGS_MAX_FRAME_SIZE.
	sendWindow   int64
	peerWindow   int64
	peerMaxFrame uint32
	// recvWindow is what the peer may send of bodies before the next
	// WINDOW_UPDATE; unacked counts the bytes consumed since the last
	// one.
	recvWindow int32
	unacked    int32
	// wake wakes the writer; room wakes those waiting for flow-control
	// window or for the writer to catch up, waiters of which there are.
	wake    sync.Cond
	room    sync.Cond
	waiters int
	// closed says the connection is ending: nothing more is queued, and
	// writerDone is closed once the writer has written what was.
	closed     bool
	writerDone chan struct{}
	// lost fails the streams of a connection whose write failed. mu is
	// held.
	lost func()
}

// init readies the wire of nc; connWindow is the receive window the
// connection offers, which its first frames announce.
func (w *wire) init(nc net.Conn, maxHeaderList uint32, connWindow int32, lost func()) {
	w.nc = nc
	w.br = bufio.NewReaderSize(nc, 16<<10)
	w.sendWindow, w.peerWindow, w.peerMaxFrame = 65535, 65535, 16<<10
	w.recvWindow = connWindow
	w.writerDone = make(chan struct{})
	w.lost = lost
	w.wake.L, w.room.L = &w.mu, &w.mu
	w.fr = http2.NewFramer(nil, w.br)
	w.hdr = newHeaderReader(maxHeaderList)
	w.fr.SetMaxReadFrameSize(16 << 10)
	w.fr.SetReuseFrames()
	w.wfr = http2.NewFramer(queue{w}, nil)
	w.enc = newEncoder()
}

// queue appends the write Framer's frames to the writer's queue; it is
// only written to under w.mu.
type queue struct{ w *wire }

func (q queue) Write(p []byte) (int, error) {
	q.w.out = append(q.w.out, p...)
	return len(p), nil
}

// consumed returns n bytes of the connection's receive window, with a
// WINDOW_UPDATE once half the window is owed. w.mu is held.
func (w *wire) consumed(n int32) {
	w.unacked += n
	if w.unacked >= recvWindow/2 {
		w.queueWindowUpdate(0, w.unacked)
		w.recvWindow += w.unacked
		w.unacked = 0
	}
}

func (w *wire) queueWindowUpdate(id uint32, n int32) {
	if w.closed || n <= 0 {
		return
	}
	_ = w.wfr.WriteWindowUpdate(id, uint32(n))
	w.wake.Signal()
}

// takeData takes a DATA frame's flow-controlled length from the
// connection's receive window. w.mu is held.
func (w *wire) takeData(flow int32) error {
	if flow > w.recvWindow {
		// Each stream keeps to its window; all of them at once would
		// have the connection buffer their sum.
		return connError{http2.ErrCodeFlowControl, "DATA past the connection's window"}
	}
	w.recvWindow -= flow
	return nil
}

// grow adds a WINDOW_UPDATE's increment to a send window. w.mu is held.
func (w *wire) grow(window *int64, inc uint32, id uint32) error {
	if *window+int64(inc) > 1<<31-1 {
		if id == 0 {
			return connError{http2.ErrCodeFlowControl, "connection window past 2^31-1"}
		}
		return streamErr(id, http2.ErrCodeFlowControl)
	}
	*window += int64(inc)
	w.wakeWaiters()
	return nil
}

// wakeWaiters wakes those waiting for window or for the writer. w.mu is
// held.
func (w *wire) wakeWaiters() {
	if w.waiters > 0 {
		w.room.Broadcast()
	}
}

// queuedControl wakes the writer for a control frame just queued, and ends
// a connection whose peer sends control frames and does not read their
// answers. w.mu is held.
func (w *wire) queuedControl() error {
	w.wake.Signal()
	if len(w.out) > 4*maxQueued {
		return connError{http2.ErrCodeEnhanceYourCalm, "peer does not read"}
	}
	return nil
}

// applySetting takes one of the peer's settings, in order (RFC 9113
// section 6.5.3: a setting repeated takes its last value); a change of
// the initial window moves each stream's send window in windows. w.mu is
// held.
func (w *wire) applySetting(s http2.Setting, windows func(yield func(*int64) bool)) error {
	if err := s.Valid(); err != nil {
		if ce, ok := errors.AsType[http2.ConnectionError](err); ok {
			return connError{http2.ErrCode(ce), "invalid setting " + s.String()}
		}
		return connError{http2.ErrCodeProtocol, "invalid setting " + s.String()}
	}
	switch s.ID {
	case http2.SettingHeaderTableSize:
		w.enc.setLimit(s.Val)
	case http2.SettingMaxFrameSize:
		w.peerMaxFrame = s.Val
	case http2.SettingInitialWindowSize:
		delta := int64(s.Val) - w.peerWindow
		w.peerWindow = int64(s.Val)
		for window := range windows {
			if *window+delta > 1<<31-1 {
				return connError{http2.ErrCodeFlowControl, "stream window past 2^31-1"}
			}
			*window += delta
		}
		w.wakeWaiters()
	}
	return nil
}

// writeBlock queues the header block encoded as HEADERS and CONTINUATION
// frames. w.mu is held.
func (w *wire) writeBlock(id uint32, end bool) {
	block := w.enc.buf
	frameSize := int(w.peerMaxFrame)
	first := min(len(block), frameSize)
	_ = w.wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:first], EndStream: end, EndHeaders: first == len(block)})
	for rest := block[first:]; len(rest) > 0; {
		n := min(len(rest), frameSize)
		_ = w.wfr.WriteContinuation(id, n == len(rest), rest[:n])
		rest = rest[n:]
	}
	w.wake.Signal()
}

func (w *wire) field(name, value string) { w.enc.field(name, value) }

// queueData queues p as DATA frames of stream id as the flow-control
// windows (the connection's and the stream's window) and the writer
// allow, waiting for them; writeErr says why the stream can take no more.
// w.mu is held.
func (w *wire) queueData(id uint32, window *int64, p []byte, end bool, writeErr func() error) error {
	for {
		if err := writeErr(); err != nil {
			return err
		}
		if len(p) == 0 {
			if end {
				_ = w.wfr.WriteData(id, true, nil)
				w.wake.Signal()
			}
			return nil
		}
		n := min(int64(len(p)), w.sendWindow, *window, int64(w.peerMaxFrame))
		if n <= 0 || len(w.out) >= maxQueued {
			w.waiters++
			w.room.Wait()
			w.waiters--
			continue
		}
		last := end && int(n) == len(p)
		_ = w.wfr.WriteData(id, last, p[:n])
		w.sendWindow -= n
		*window -= n
		p = p[n:]
		w.wake.Signal()
		if last {
			return nil
		}
	}
}

// writeLoop writes the queued frames, all of them at once, until the
// connection ends.
func (w *wire) writeLoop() {
	defer close(w.writerDone)
	w.mu.Lock()
	for {
		for len(w.out) == 0 && !w.closed {
			w.wake.Wait()
		}
		if len(w.out) == 0 {
			break
		}
		// Streams woken with this one queue their frames first, and
		// go out in the same write.
		w.mu.Unlock()
		runtime.Gosched()
		w.mu.Lock()
		buf := w.out
		w.out, w.spare = w.spare[:0], nil
		w.mu.Unlock()
		_, err := w.nc.Write(buf)
		w.mu.Lock()
		if cap(buf) <= 2*maxQueued {
			w.spare = buf[:0]
		}
		w.wakeWaiters()
		if err != nil {
			w.closed = true
			w.lost()
			w.room.Broadcast()
			w.mu.Unlock()
			w.nc.Close()
			return
		}
	}
	w.mu.Unlock()
}

// inflow is what a stream received of a body and its reader has yet to
// read, with the stream's receive window. The connection's mutex guards
// it.
type inflow struct {
	// body[bodyOff:] is unread.
	body    []byte
	bodyOff int
	// recvWindow is what the peer may still send on the stream; unacked
	// counts the bytes read since the stream's last WINDOW_UPDATE.
	recvWindow int32
	unacked    int32
}

// take moves unread bytes into p, and gives their window back to the
// connection and, while open, to the stream id. w.mu is held.
func (in *inflow) take(w *wire, id uint32, p []byte, open bool) int {
	n := copy(p, in.body[in.bodyOff:])
	in.bodyOff += n
	if in.bodyOff == len(in.body) {
		in.body, in.bodyOff = in.body[:0], 0
	}
	w.consumed(int32(n))
	in.giveBack(w, id, int32(n), open)
	return n
}

// drop forgets the unread bytes, giving their window back to the
// connection. w.mu is held.
func (in *inflow) drop(w *wire) {
	w.consumed(int32(len(in.body) - in.bodyOff))
	in.body, in.bodyOff = nil, 0
}

// giveBack returns n bytes of the stream's receive window, with a
// WINDOW_UPDATE once a quarter of the window is owed, unless the stream
// is closed: the reader may read what it holds of the body, but a frame
// on the closed stream is one the peer must answer with a reset. w.mu is
// held.
func (in *inflow) giveBack(w *wire, id uint32, n int32, open bool) {
	in.unacked += n
	if open && in.unacked >= recvWindow/4 {
		w.queueWindowUpdate(id, in.unacked)
		in.recvWindow += in.unacked
		in.unacked = 0
	}
}

// readError sorts an error of reading a frame, other than a stream error:
// the socket's (the peer left, a deadline), returned as it is, or the
// peer's, a connection error to answer with GOAWAY: one of ours (a bound
// the header reader enforces) as it is, the Framer's ConnectionError and
// ErrFrameTooLarge, and PROTOCOL_ERROR for anything else it may come to
// return.
func readError(err error) error {
	if _, ok := errors.AsType[connError](err); ok {
		return err
	}
	if ce, ok := errors.AsType[http2.ConnectionError](err); ok {
		return connError{http2.ErrCode(ce), "malformed frame"}
	}
	_, netErr := errors.AsType[net.Error](err)
	switch {
	case errors.Is(err, http2.ErrFrameTooLarge):
		return connError{http2.ErrCodeFrameSize, "frame too large"}
	case netErr, errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded):
		return err
	}
	if _, tlsErr := errors.AsType[tls.RecordHeaderError](err); tlsErr {
		return err
	}
	return connError{http2.ErrCodeProtocol, "malformed frame: " + err.Error()}
}
