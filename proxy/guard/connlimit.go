package guard

// Caps on the client connections of the node and of each client address.
//
// Every TCP connection the listeners accept is registered here, under its
// client's address, until it closes. A connection past a cap first makes
// room by closing connections idle the longest: those waiting for a
// request (HTTP/1.1 between requests, HTTP/2 without an open stream, any
// connection before its first request) for idleGrace at least, as nginx
// reuses its keep-alive connections past worker_connections. With none to close, it is refused:
// closed as soon as accepted, by the accept loop, before any TLS
// handshake. HTTP/3's QUIC connections are not capped: quic-go's hook that
// could refuse one before its handshake sees a source address not yet
// validated, so spoofed packets could fill the caps and lock TCP clients
// out.
//
// Whoever serves a connection says when it waits for a request (the
// HTTP/1.1 engine around its read of the next head, net/http through its
// ConnState hook), in an atomic on the connection: the per-request path
// takes no lock. Registering and closing a connection take the registry's.
// A request claims its connection with a compare-and-swap, which a
// connection being closed to make room has already lost: the engine drops
// what it read, and listener.ServeHTTP aborts what net/http read before
// its claim failed. No request is forwarded from a connection closed to
// make room, and none is cut short; one that arrives as its connection is
// closed gets no answer, as when any server closes an idle keep-alive
// connection, which clients retry.

import (
	"cmp"
	"iter"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// connCap names a cap, for the metrics.
type connCap uint8

const (
	capNode connCap = iota
	capAddress
	numConnCaps
)

var connCapNames = [numConnCaps]string{"node_limit", "address_limit"}

// Values of TrackedConn.idleFrom besides a time.
const (
	connBusy    = 0
	connEvicted = -1
)

const (
	// maxEvictions bounds the idle connections one accept closes. It
	// closes an eighth of those idle, up to this, as nginx does, so that
	// at the cap the walk over every connection is paid once per many
	// accepts.
	maxEvictions = 32
	// idleQuiet is how long a search for idle connections that found none
	// is not repeated, so that a flood at a cap of busy connections costs
	// each refused connection no walk over them.
	idleQuiet = 100 * time.Millisecond
	// idleGrace is how long a connection waits for a request before it
	// may be closed to make room. A connection its client reuses within a
	// moment is not idle: closing it only has the client open another,
	// and a TLS handshake is what a small node can least afford (300 h2
	// clients pausing up to 50 ms, at a cap of 100: 10,731 answers in 5 s
	// with the grace, 1,872 without). A new connection needs a few round
	// trips for its handshakes and first request. And net/http's HTTP/2
	// server calls a connection idle when its last stream ends, before it
	// flushes that stream's last frames.
	idleGrace = time.Second
)

// Registry holds the node's open client connections.
type Registry struct {
	maxConns, maxPerAddr int
	refused, evicted     [numConnCaps]prometheus.Counter

	mu     sync.Mutex
	open   int
	byAddr map[netip.Addr]*addrConns
	// quiet is when the node-wide search for idle connections may run
	// again, in unix nanoseconds.
	quiet int64
	// idle is room for the search, kept between accepts.
	idle []idleConn
}

type addrConns struct {
	conns []*TrackedConn
	quiet int64
}

type idleConn struct {
	from int64
	c    *TrackedConn
}

// newConnRegistry caps the connections of the node at maxConns and of each
// client address at maxPerAddr, neither when not positive.
func NewRegistry(maxConns, maxPerAddr int, m *Metrics) *Registry {
	return &Registry{
		maxConns:   maxConns,
		maxPerAddr: maxPerAddr,
		refused:    m.refused,
		evicted:    m.evicted,
		byAddr:     map[netip.Addr]*addrConns{},
	}
}

// clientAddr is what a connection from the remote address a counts
// against the per-address cap: its IP address, or for IPv6 its /64, which
// one client often holds whole.
func clientAddr(a net.Addr) netip.Addr {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip := ta.AddrPort().Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		ip = p.Addr()
	}
	return ip
}

// admit registers c, idle from now, having first closed connections idle
// the longest if a cap is reached. It reports false, counted, if c is
// refused: no connection could be closed to make room.
func (r *Registry) admit(c *TrackedConn) bool {
	now := time.Now()
	c.MarkIdle(now)
	var room [maxEvictions]*TrackedConn
	closed := room[:0]
	r.mu.Lock()
	a := r.byAddr[c.addr]
	reached := numConnCaps
	switch {
	case a != nil && r.maxPerAddr > 0 && len(a.conns) >= r.maxPerAddr:
		reached = capAddress
		closed = r.closeIdlest(slices.Values(a.conns), &a.quiet, now, closed)
	case r.maxConns > 0 && r.open >= r.maxConns:
		reached = capNode
		closed = r.closeIdlest(r.all(), &r.quiet, now, closed)
	}
	if reached != numConnCaps && len(closed) == 0 {
		r.mu.Unlock()
		r.refused[reached].Inc()
		return false
	}
	// Closing the address's last connections took its entry out.
	if a = r.byAddr[c.addr]; a == nil {
		a = &addrConns{}
		r.byAddr[c.addr] = a
	}
	c.slot = len(a.conns)
	a.conns = append(a.conns, c)
	r.open++
	c.tracker.gauges[protoHTTP1].Inc()
	r.mu.Unlock()
	if reached != numConnCaps {
		r.evicted[reached].Add(float64(len(closed)))
	}
	for _, v := range closed {
		v.Conn.Close()
	}
	return true
}

// all is every registered connection.
func (r *Registry) all() iter.Seq[*TrackedConn] {
	return func(yield func(*TrackedConn) bool) {
		for a := range maps.Values(r.byAddr) {
			for _, c := range a.conns {
				if !yield(c) {
					return
				}
			}
		}
	}
}

// closeIdlest takes the connections of conns idle the longest out of the
// registry, up to an eighth of those idle (at least one, at most
// maxEvictions), and appends them to closed for the caller to close once
// the lock is released. A search that finds none keeps *quiet from
// searching again for idleQuiet.
func (r *Registry) closeIdlest(conns iter.Seq[*TrackedConn], quiet *int64, at time.Time, closed []*TrackedConn) []*TrackedConn {
	now := at.UnixNano()
	if now < *quiet {
		return closed
	}
	r.idle = r.idle[:0]
	for c := range conns {
		if from := c.idleFrom.Load(); from > 0 && from <= now {
			r.idle = append(r.idle, idleConn{from, c})
		}
	}
	slices.SortFunc(r.idle, func(a, b idleConn) int { return cmp.Compare(a.from, b.from) })
	for _, ic := range r.idle[:min(max(1, len(r.idle)/8), maxEvictions, len(r.idle))] {
		// A request may have claimed it since.
		if ic.c.idleFrom.CompareAndSwap(ic.from, connEvicted) {
			r.remove(ic.c)
			closed = append(closed, ic.c)
		}
	}
	clear(r.idle)
	if len(closed) == 0 {
		*quiet = now + int64(idleQuiet)
	}
	return closed
}

// remove takes c out of the registry, if still in, under r.mu.
func (r *Registry) remove(c *TrackedConn) {
	if c.slot < 0 {
		return
	}
	a := r.byAddr[c.addr]
	last := a.conns[len(a.conns)-1]
	a.conns[c.slot], last.slot = last, c.slot
	a.conns[len(a.conns)-1] = nil
	a.conns = a.conns[:len(a.conns)-1]
	if len(a.conns) == 0 {
		delete(r.byAddr, c.addr)
	}
	c.slot = -1
	r.open--
	c.tracker.gauges[c.proto.Swap(uint32(protoClosed))].Dec()
}

// release takes c out of the registry when it closes.
func (r *Registry) release(c *TrackedConn) {
	r.mu.Lock()
	r.remove(c)
	r.mu.Unlock()
}

// of returns the open connections accepted by t.
func (r *Registry) of(t *Tracker) []*TrackedConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	var conns []*TrackedConn
	for c := range r.all() {
		if c.tracker == t {
			conns = append(conns, c)
		}
	}
	return conns
}

// MarkIdle says c waits for a request since now. A connection already
// idle keeps its earlier time, and one closed stays so.
func (c *TrackedConn) MarkIdle(now time.Time) {
	c.idleFrom.CompareAndSwap(connBusy, now.Add(idleGrace).UnixNano())
}

// Claim marks c busy with a request. It reports false if c was closed to
// make room: the request must not be served.
func (c *TrackedConn) Claim() bool {
	for {
		v := c.idleFrom.Load()
		switch {
		case v == connEvicted:
			return false
		case v == connBusy, c.idleFrom.CompareAndSwap(v, connBusy):
			return true
		}
	}
}

func (c *TrackedConn) Idle() bool    { return c.idleFrom.Load() > 0 }
func (c *TrackedConn) Evicted() bool { return c.idleFrom.Load() == connEvicted }
