// Package h2 is hostgate's HTTP/2 engine: the connection, stream and
// flow-control logic of RFC 9113 over x/net/http2's Framer and hpack, on
// both sides of the proxy. Server serves an http.Handler to clients;
// Transport (client.go) is the http.RoundTripper to HTTP/2 backends. Both
// build on wire.go (the write queue and its writer, flow control, HPACK
// encoding) and fields.go (header sections decoded). It knows nothing of
// routes or Kubernetes.
//
// net/http's HTTP/2 server spent most of a core in its own machinery on
// bench/run.sh's h2-tls: a serve loop that every frame and every handler
// event goes through over channels, a goroutine started for each batch of
// frames written, and select statements to hand work between them. Here a
// connection has two goroutines of its own, whatever its streams do:
//
//   - the reader reads frames and acts on them at once, under the
//     connection's mutex: it starts a handler goroutine per request, puts
//     request body bytes where the handler reads them, and answers
//     SETTINGS, PING and flow control itself;
//   - the writer writes whatever frames the handlers and the reader queued
//     since its last write, in one write: a handler queues its frames and
//     goes on, and the writer yields once before taking the queue, so that
//     the responses of handlers ready to run join the batch.
//
// Every stream's state is guarded by the one connection mutex; waits (for
// body bytes, for flow-control window, for the writer to catch up) are
// condition variables on it, woken by the reader, the writer or a timer.
package h2

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves HTTP/2 connections with Handler.
type Server struct {
	Handler http.Handler
	// MaxConcurrentStreams bounds the requests of one connection whose
	// handlers run at once; streams past it are refused. Default 100.
	MaxConcurrentStreams uint32
	// MaxHeaderListSize bounds a request's header section (RFC 9113
	// section 6.5.2): a larger one is answered 431. Default 64 KiB.
	MaxHeaderListSize uint32
	// ResetBurst and ResetRate bound the streams a client may reset
	// before their response started: ResetBurst at once, then ResetRate
	// per second more; past them the connection ends with
	// GOAWAY(ENHANCE_YOUR_CALM). Zero ResetBurst: no bound.
	ResetBurst int
	ResetRate  float64
	// EmptyFrameBurst bounds the frames a client may send that carry no
	// bytes and do nothing (emptyBudget): EmptyFrameBurst more than those
	// that do; past it the connection ends with
	// GOAWAY(ENHANCE_YOUR_CALM). Zero: no bound.
	EmptyFrameBurst int
	// IdleTimeout closes a connection with no stream open for that long,
	// with GOAWAY. Zero: never.
	IdleTimeout time.Duration
	// PrefaceTimeout bounds the wait for the client's connection preface
	// and first SETTINGS. Zero: none.
	PrefaceTimeout time.Duration
	// ConnState, if set, hears StateActive when a connection's first
	// stream opens, StateIdle when its last one ends, and StateClosed.
	ConnState func(net.Conn, http.ConnState)
	// Logger gets handler panics other than http.ErrAbortHandler.
	Logger *slog.Logger

	mu       sync.Mutex
	conns    map[*conn]struct{}
	draining bool

	// work hands streams to idle handler goroutines, idle counts them,
	// busy counts those running a handler; ended, set by
	// EndIdleHandlers, ends them, and a nil on work those waiting.
	work     chan *stream
	idle     atomic.Int32
	busy     atomic.Int32
	initOnce sync.Once
	ended    atomic.Bool
}

// minIdleHandlers is how many handler goroutines a Server keeps waiting
// for streams at least; past it, no more than there are handlers
// running. A goroutine that served a request has grown its stack to what
// serving one takes; a new goroutine per stream grew it again for each
// (stack copying was 4.5% of the core in bench/run.sh's h2-tls). A fixed
// bound of 64 still had h2-tls, 512 streams at once, end and start
// goroutines all along (stack growth, goroutine exits and starts 8.6% of
// the core): what finishes in one burst is what the next burst's streams
// need. With no more idle than busy, the goroutines a burst started
// mostly wait for the next one, and once the load is gone, at most half
// of those of its peak stay, each with the 8 KiB stack next keeps from
// being shrunk (4 MiB for 512 waiting).
const minIdleHandlers = 64

func (s *Server) init() {
	s.initOnce.Do(func() {
		s.work = make(chan *stream)
	})
}

// dispatch runs st's handler on an idle handler goroutine, or a new one.
func (s *Server) dispatch(st *stream) {
	s.busy.Add(1)
	select {
	case s.work <- st:
	default:
		go s.handle(st)
	}
}

// handle runs st's handler, then those of the streams handed to it while
// the idle handlers are within their bound (minIdleHandlers), until
// EndIdleHandlers.
func (s *Server) handle(st *stream) {
	for {
		st.run()
		busy := s.busy.Add(-1)
		// Counted idle before it looks at ended, as EndIdleHandlers
		// sets ended before it counts the idle: it sees this one, or
		// this one sees ended.
		if s.idle.Add(1) > max(minIdleHandlers, busy) || s.ended.Load() {
			s.idle.Add(-1)
			return
		}
		st = s.next(false)
		s.idle.Add(-1)
		if st == nil {
			return
		}
	}
}

// next waits for the next stream to serve. A receive alone, which costs
// less than a select that also waits for a quit channel (selectgo was 3.6%
// of the core in bench/run.sh's h2-tls): EndIdleHandlers sends nil
// instead.
//
// It waits below a frame of idleFrame bytes (pad, whose branch never runs,
// so nothing is written there). The collector halves the stack of a
// goroutine that uses less than a quarter of it, and a handler goroutine
// waiting at the top of its stack used next to nothing of the 8 KiB a
// bridged request grows it to: after each collection every idle handler
// grew its stack again on its next request, copying it (stack growth was
// 2.3% of the core in bench/run.sh's h2-fixed). Waiting below the frame,
// it uses a quarter of 8 KiB, which then stays; a larger stack is halved
// to that.
//
//go:noinline
func (s *Server) next(pad bool) *stream {
	if pad {
		var b [idleFrame]byte
		return s.next(held(b[:]))
	}
	return <-s.work
}

//go:noinline
func held(b []byte) bool { return len(b) == 0 }

// idleFrame is the stack a handler goroutine holds while it waits: a
// quarter of the 8 KiB that forwarding a request takes.
const idleFrame = 2 << 10

// ConnOpts are what a connection starts with.
type ConnOpts struct {
	// Context is the parent of every request's context.
	Context context.Context
	// Upgrade, for a connection upgraded from HTTP/1.1 to h2c (RFC 7540
	// section 3.2), is the request that asked, served as stream 1 with
	// its body already read; Settings is its HTTP2-Settings, decoded.
	Upgrade  *http.Request
	Settings []byte
}

// Protocol-level sizes of the server.
const (
	// recvWindow is the flow-control window each stream offers: how
	// much of its request body the server buffers for a handler that
	// has not read it yet.
	recvWindow = 1 << 20
	// connRecvWindow is the connection's window, what it buffers of all
	// its streams' bodies together: twice a stream's, so that a handler
	// that stops reading a body (its backend stalls) leaves the other
	// streams a stream's window at least. With one window for both, as
	// net/http's server has, one such stream stalled every upload on its
	// connection.
	connRecvWindow = 2 * recvWindow
	// maxQueued bounds what a connection's writer has queued: a handler
	// past it waits for the client to read, and a client whose control
	// frames (PING, SETTINGS acknowledgements) pile up past four times as
	// much without reading loses its connection.
	maxQueued = 256 << 10
	// goAwayLinger is how long a connection ended by a protocol error
	// reads and drops what the client still sends, so that closing it
	// does not reset the connection before the GOAWAY is read.
	goAwayLinger = time.Second
	// maxResetHandlers bounds, as a multiple of the concurrent streams,
	// the handlers of a connection still running, those of streams reset
	// included.
	maxResetHandlers = 5
)

func (s *Server) maxStreams() uint32 {
	if s.MaxConcurrentStreams == 0 {
		return 100
	}
	return s.MaxConcurrentStreams
}

func (s *Server) maxHeaderList() uint32 {
	if s.MaxHeaderListSize == 0 {
		return 64 << 10
	}
	return s.MaxHeaderListSize
}

// track adds c to the connections Drain and Close reach, reporting false
// once the server drains: the connection is then closed.
func (s *Server) track(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.conns, c)
		return true
	}
	if s.conns == nil {
		s.conns = map[*conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return !s.draining
}

// Drain sends every connection GOAWAY: each closes once its streams have
// ended, and connections served after Drain close as soon as their first
// requests are answered.
func (s *Server) Drain() {
	s.mu.Lock()
	s.draining = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.goAwayGracefully()
	}
}

// EndIdleHandlers ends the handler goroutines kept for later streams,
// for a Server that is done with; handlers running end as they would.
func (s *Server) EndIdleHandlers() {
	s.init()
	s.ended.Store(true)
	for s.idle.Load() > 0 {
		select {
		case s.work <- nil:
		default:
			// One on its way to the receive, or from it.
			runtime.Gosched()
		}
	}
}

// Close closes every connection now, and ends the idle handler
// goroutines.
func (s *Server) Close() {
	s.EndIdleHandlers()
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.nc.Close()
	}
}

// ServeConn serves nc, whose next bytes are the client's connection
// preface, until it closes. Handlers of its streams may still be running
// when it returns.
func (s *Server) ServeConn(nc net.Conn, opts ConnOpts) {
	s.init()
	c := newConn(s, nc, opts)
	draining := !s.track(c, true)
	defer s.track(c, false)
	c.serve(draining)
}
