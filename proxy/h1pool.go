package proxy

// Keep-alive connections of the HTTP/1.1 engine to backends.
//
// Idle connections wait on a stack per endpoint address. The most recently
// used one is taken first, so that the connections a burst opened and no
// longer needs age out while the rest stay warm; a stack also costs memory
// only for the connections it holds, where a buffered channel would
// reserve the whole bound for every endpoint ever used. Only a connection
// whose exchange ended cleanly, its response read whole, goes back; any
// other is closed. A sweeper closes connections idle longer than the
// timeout.

import (
	"bufio"
	"net"
	"sync"
	"time"
)

// upConn is a connection to a backend with its buffers.
type upConn struct {
	net.Conn
	br *bufio.Reader
	bw *bufio.Writer
	// idleSince is when it went back to the pool.
	idleSince time.Time
	// While client is set, a read that waits on the backend asks it every
	// clientCheckInterval whether the client hung up, and ends with
	// errClientGone if so: net/http's server learns that at once, with a
	// goroutine per connection reading the client.
	client clientWatch
	// deadline is the exchange's, which those waits do not pass.
	deadline time.Time
	// readStall and sendStall bound each read and write of the exchange
	// under way (backendpolicy.go); zero: only its deadline does.
	readStall, sendStall time.Duration
}

// clientWatch is what a watched read asks (h1conn).
type clientWatch interface{ clientGone() bool }

// Read is what br reads from.
func (uc *upConn) Read(p []byte) (int, error) {
	deadline := uc.deadline
	if uc.readStall > 0 {
		deadline = uc.stallDeadline(uc.readStall)
		arm := deadline
		if uc.client != nil {
			arm = earliest(time.Now().Add(clientCheckInterval), deadline)
		}
		if err := uc.Conn.SetReadDeadline(arm); err != nil {
			return 0, err
		}
	}
	for {
		n, err := uc.Conn.Read(p)
		if uc.client == nil || n > 0 || !isTimeout(err) || !deadline.IsZero() && !time.Now().Before(deadline) {
			return n, err
		}
		if uc.client.clientGone() {
			return 0, errClientGone
		}
		if err := uc.Conn.SetReadDeadline(earliest(time.Now().Add(clientCheckInterval), deadline)); err != nil {
			return 0, err
		}
	}
}

// watchClient has the reads to come ask client, under the exchange's
// deadline, until unwatchClient or the pool takes the connection back
// (upstreamPool.put). Should arming fail, the connection is
// broken, which the next read says.
func (uc *upConn) watchClient(client clientWatch, deadline time.Time) {
	uc.client, uc.deadline = client, deadline
	_ = uc.armCheck()
}

// unwatchClient ends watchClient, leaving reads the exchange's deadline.
func (uc *upConn) unwatchClient() error {
	uc.client = nil
	return uc.Conn.SetReadDeadline(uc.deadline)
}

// armCheck has a read time out at the next check, once for all the reads
// until then: a stream read in many pieces changes no timer per piece.
func (uc *upConn) armCheck() error {
	return uc.Conn.SetReadDeadline(earliest(time.Now().Add(clientCheckInterval), uc.deadline))
}

const upstreamBufferSize = 4 << 10

// upstreamPool holds idle connections per endpoint address.
type upstreamPool struct {
	dialer  net.Dialer
	maxIdle int
	timeout time.Duration
	// idle maps an address to its *idleStack.
	idle      sync.Map
	sweepOnce sync.Once
	stop      chan struct{}
	stopOnce  sync.Once
}

func newUpstreamPool(o *Options) *upstreamPool {
	return &upstreamPool{
		dialer:  net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second},
		maxIdle: o.MaxIdleConnsPerEndpoint,
		timeout: o.UpstreamIdleTimeout,
		stop:    make(chan struct{}),
	}
}

// get returns an idle connection to addr, or dials one when there is none
// or fresh is set. reused says the connection served before, and may have
// been closed by the backend since.
// A connect timeout, if given, replaces the dialer's.
func (p *upstreamPool) get(addr string, deadline time.Time, connect time.Duration, fresh bool) (uc *upConn, reused bool, err error) {
	if !fresh {
		if st, ok := p.idle.Load(addr); ok {
			if uc := st.(*idleStack).pop(p.timeout); uc != nil {
				return uc, true, nil
			}
		}
	}
	d := p.dialer
	if connect > 0 {
		d.Timeout = connect
	}
	if !deadline.IsZero() && (d.Timeout == 0 || time.Until(deadline) < d.Timeout) {
		d.Deadline = deadline
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, false, err
	}
	uc = &upConn{Conn: c}
	uc.br = bufio.NewReaderSize(uc, upstreamBufferSize)
	uc.bw = bufio.NewWriterSize(uc, upstreamBufferSize)
	return uc, false, nil
}

// idleStack holds the idle connections to one address, the most recently
// returned last.
type idleStack struct {
	mu    sync.Mutex
	conns []*upConn
}

// pop takes the most recently returned connection; nil when there is none
// or it has been idle for timeout, and then so have all the older ones
// below it, which are closed, outside the lock that requests take.
func (st *idleStack) pop(timeout time.Duration) *upConn {
	st.mu.Lock()
	n := len(st.conns)
	if n == 0 {
		st.mu.Unlock()
		return nil
	}
	if uc := st.conns[n-1]; time.Since(uc.idleSince) < timeout {
		st.conns[n-1] = nil
		st.conns = st.conns[:n-1]
		st.mu.Unlock()
		return uc
	}
	stale := st.conns
	st.conns = nil
	st.mu.Unlock()
	for _, uc := range stale {
		uc.Close()
	}
	return nil
}

// push keeps uc unless the stack holds max connections already, and
// reports whether it did.
func (st *idleStack) push(uc *upConn, max int) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.conns) >= max {
		return false
	}
	st.conns = append(st.conns, uc)
	return true
}

// closeIdle closes the connections idle for at least timeout (all of them
// for 0) and keeps the rest in order. The oldest are at the
// bottom, so it stops at the first one younger than timeout.
func (st *idleStack) closeIdle(timeout time.Duration) {
	st.mu.Lock()
	defer st.mu.Unlock()
	old := 0
	for old < len(st.conns) && time.Since(st.conns[old].idleSince) >= timeout {
		st.conns[old].Close()
		old++
	}
	kept := copy(st.conns, st.conns[old:])
	clear(st.conns[kept:])
	st.conns = st.conns[:kept]
}

// put returns a connection whose exchange ended cleanly, its deadlines and
// any watch on the client over; after close it is closed instead.
func (p *upstreamPool) put(addr string, uc *upConn) {
	select {
	case <-p.stop:
		uc.Close()
		return
	default:
	}
	uc.client, uc.deadline, uc.readStall, uc.sendStall = nil, time.Time{}, 0, 0
	if uc.SetDeadline(time.Time{}) != nil {
		uc.Close()
		return
	}
	uc.idleSince = time.Now()
	st, ok := p.idle.Load(addr)
	if !ok {
		st, _ = p.idle.LoadOrStore(addr, &idleStack{})
		p.sweepOnce.Do(func() { go p.sweep() })
	}
	if !st.(*idleStack).push(uc, p.maxIdle) {
		uc.Close()
	}
}

// sweep closes connections idle past the timeout. Addresses stay mapped
// (an empty stack each), since dropping one could strand a connection a
// concurrent put adds to it.
func (p *upstreamPool) sweep() {
	tick := time.NewTicker(max(p.timeout/4, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		p.idle.Range(func(_, st any) bool {
			st.(*idleStack).closeIdle(p.timeout)
			return true
		})
	}
}

// close stops the sweeper and closes the idle connections.
func (p *upstreamPool) close() {
	p.stopOnce.Do(func() { close(p.stop) })
	p.idle.Range(func(_, st any) bool {
		st.(*idleStack).closeIdle(0)
		return true
	})
}

// stale reports whether a pooled connection is known to be of no use: the
// backend closed it, or sent bytes no request asked for.
func (uc *upConn) stale() bool {
	if uc.br.Buffered() > 0 {
		return true
	}
	st := socketState(uc.Conn)
	return st == socketData || st == socketClosed
}

// socketStatus is what socketState sees of a connection.
type socketStatus uint8

const (
	socketUnknown socketStatus = iota
	socketIdle
	socketData
	socketClosed
)
