package upstream

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
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/router"
)

// Conn is a connection to a backend with its buffers.
type Conn struct {
	net.Conn
	Reader *bufio.Reader
	Writer *bufio.Writer
	// idleSince is when it went back to the pool, takenAt when it was
	// taken from there: the clock read once for what the start of its
	// next exchange asks of it (Stale, FlushAwait), a read or two each
	// otherwise.
	idleSince, takenAt time.Time
	// While client is set, a read that waits on the backend asks it every
	// clientCheckInterval whether the client hung up, and ends with
	// ErrClientGone if so: net/http's server learns that at once, with a
	// goroutine per connection reading the client.
	client ClientWatch
	// deadline is the exchange's, which those waits do not pass.
	deadline time.Time
	// checkAt, when set, is the socket's read deadline and was set for
	// the watch alone (armCheck). It stays armed while it is far enough
	// ahead, from one exchange to the next through the pool, as each
	// deadline moved is a timer changed: a read it ends while nothing
	// watches clears it and reads on. fixed says a deadline other than
	// checkAt may be set, which the pool clears.
	checkAt time.Time
	fixed   bool
	// readStall and sendStall bound each read and write of the exchange
	// under way (a rule's backend read and send timeouts); zero: only its deadline does.
	readStall, sendStall time.Duration
	// held, while holding, takes what Writer flushes, for FlushAwait to
	// write itself: out is what is left of it to write, wrote says the
	// write was made, writeErr how it failed. raw and step are made once
	// for all of the connection's FlushAwait, which then allocates
	// nothing; fd is the socket's descriptor, which socketState peeks at.
	held     []byte
	holding  bool
	out      []byte
	wrote    bool
	writeErr error
	raw      syscall.RawConn
	step     func(fd uintptr) bool
	fd       int
}

// ClientWatch is what a watched read asks: the HTTP/1.1 engine's client
// connection, or a request bridged from HTTP/2 or HTTP/3.
type ClientWatch interface{ ClientGone() bool }

// Read is what br reads from.
func (uc *Conn) Read(p []byte) (int, error) {
	deadline := uc.deadline
	if uc.readStall > 0 {
		deadline = uc.stallDeadline(uc.readStall)
		arm := deadline
		if uc.client != nil {
			arm = Earliest(time.Now().Add(clientCheckInterval), deadline)
		}
		if err := uc.SetReadDeadline(arm); err != nil {
			return 0, err
		}
	}
	for {
		n, err := uc.Conn.Read(p)
		ne, timedOut := errors.AsType[net.Error](err)
		if n == 0 && timedOut && ne.Timeout() && uc.client == nil && !uc.checkAt.IsZero() {
			// The check of an earlier exchange's watch: this one has
			// none.
			if err := uc.SetReadDeadline(time.Time{}); err != nil {
				return 0, err
			}
			continue
		}
		if uc.client == nil || n > 0 || !timedOut || !ne.Timeout() || !deadline.IsZero() && !time.Now().Before(deadline) {
			return n, err
		}
		if uc.client.ClientGone() {
			return 0, ErrClientGone
		}
		if err := uc.SetReadDeadline(Earliest(time.Now().Add(clientCheckInterval), deadline)); err != nil {
			return 0, err
		}
	}
}

// WatchClient has the reads to come ask client, under the exchange's
// deadline, until UnwatchClient or the pool takes the connection back
// (Pool.Put). Should arming fail, the connection is
// broken, which the next read says.
func (uc *Conn) WatchClient(client ClientWatch, deadline time.Time) {
	uc.client, uc.deadline = client, deadline
	_ = uc.armCheck()
}

// UnwatchClient ends WatchClient, leaving reads the exchange's deadline.
func (uc *Conn) UnwatchClient() error {
	uc.client = nil
	return uc.SetReadDeadline(uc.deadline)
}

// armCheck has a read time out at the next check, once for all the reads
// until then: a stream read in many pieces changes no timer per piece, and
// a check still at least half an interval ahead is kept, so that requests
// in quick succession on a connection change none either. A check earlier
// than the interval only asks the client sooner.
func (uc *Conn) armCheck() error {
	now := time.Now()
	at := now.Add(clientCheckInterval)
	if !uc.deadline.IsZero() && !uc.deadline.After(at) {
		return uc.SetReadDeadline(uc.deadline)
	}
	if !uc.checkAt.IsZero() && uc.checkAt.Sub(now) >= clientCheckInterval/2 {
		return nil
	}
	if err := uc.Conn.SetReadDeadline(at); err != nil {
		return err
	}
	uc.checkAt = at
	return nil
}

// SetDeadline is net.Conn's, noting what armCheck and the pool need to
// know; so are SetReadDeadline and SetWriteDeadline.
func (uc *Conn) SetDeadline(t time.Time) error {
	uc.checkAt, uc.fixed = time.Time{}, !t.IsZero()
	return uc.Conn.SetDeadline(t)
}

func (uc *Conn) SetReadDeadline(t time.Time) error {
	uc.checkAt, uc.fixed = time.Time{}, uc.fixed || !t.IsZero()
	return uc.Conn.SetReadDeadline(t)
}

func (uc *Conn) SetWriteDeadline(t time.Time) error {
	uc.fixed = uc.fixed || !t.IsZero()
	return uc.Conn.SetWriteDeadline(t)
}

const upstreamBufferSize = 4 << 10

// clientCheckInterval is how often a request waiting for its backend
// looks whether the client is still there.
const clientCheckInterval = time.Second

var ErrClientGone = errors.New("client closed the connection while waiting for the backend")

// SetStall has uc's reads and writes, until the pool takes it back, wait
// no longer than t's backend read and send timeouts, within deadline.
func (uc *Conn) SetStall(t *router.Timeouts, deadline time.Time) {
	uc.readStall, uc.sendStall = t.BackendRead, t.BackendSend
	if uc.readStall > 0 || uc.sendStall > 0 {
		uc.deadline = deadline
	}
}

// stallDeadline is the deadline of a read or write that starts now and may
// wait stall, within the exchange's.
func (uc *Conn) stallDeadline(stall time.Duration) time.Time {
	d := time.Now().Add(stall)
	if !uc.deadline.IsZero() && uc.deadline.Before(d) {
		return uc.deadline
	}
	return d
}

// Write is what bw writes to.
func (uc *Conn) Write(p []byte) (int, error) {
	if uc.holding {
		uc.held = p
		return len(p), nil
	}
	if uc.sendStall > 0 {
		if err := uc.SetWriteDeadline(uc.stallDeadline(uc.sendStall)); err != nil {
			return 0, err
		}
	}
	return uc.Conn.Write(p)
}

// Earliest is a, or b when b is set and comes first.
func Earliest(a, b time.Time) time.Time {
	if !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// Pool holds idle connections per endpoint address.
type Pool struct {
	dialer  net.Dialer
	maxIdle int
	timeout time.Duration
	// idle maps an address to its *idleStack.
	idle      sync.Map
	sweepOnce sync.Once
	stop      chan struct{}
	stopOnce  sync.Once
}

// NewPool dials within dialTimeout and keeps up to maxIdle
// connections per address, each for idleTimeout.
func NewPool(dialTimeout time.Duration, maxIdle int, idleTimeout time.Duration) *Pool {
	return &Pool{
		dialer:  net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second},
		maxIdle: maxIdle,
		timeout: idleTimeout,
		stop:    make(chan struct{}),
	}
}

// Get returns an idle connection to addr, or dials one when there is none
// or fresh is set. reused says the connection served before, and may have
// been closed by the backend since.
// A connect timeout, if given, replaces the dialer's.
func (p *Pool) Get(addr string, deadline time.Time, connect time.Duration, fresh bool) (uc *Conn, reused bool, err error) {
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
	uc = &Conn{Conn: c}
	uc.Reader = bufio.NewReaderSize(uc, upstreamBufferSize)
	uc.Writer = bufio.NewWriterSize(uc, upstreamBufferSize)
	return uc, false, nil
}

// idleStack holds the idle connections to one address, the most recently
// returned last.
type idleStack struct {
	mu    sync.Mutex
	conns []*Conn
}

// pop takes the most recently returned connection; nil when there is none
// or it has been idle for timeout, and then so have all the older ones
// below it, which are closed, outside the lock that requests take.
func (st *idleStack) pop(timeout time.Duration) *Conn {
	st.mu.Lock()
	n := len(st.conns)
	if n == 0 {
		st.mu.Unlock()
		return nil
	}
	now := time.Now()
	if uc := st.conns[n-1]; now.Sub(uc.idleSince) < timeout {
		st.conns[n-1] = nil
		st.conns = st.conns[:n-1]
		st.mu.Unlock()
		uc.takenAt = now
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
func (st *idleStack) push(uc *Conn, max int) bool {
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

// Put returns a connection whose exchange ended cleanly, its deadlines and
// any watch on the client over (a check's deadline may stay: armCheck);
// after Close it is closed instead.
func (p *Pool) Put(addr string, uc *Conn) {
	select {
	case <-p.stop:
		uc.Close()
		return
	default:
	}
	uc.client, uc.deadline, uc.readStall, uc.sendStall = nil, time.Time{}, 0, 0
	if uc.fixed && uc.SetDeadline(time.Time{}) != nil {
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
// concurrent Put adds to it.
func (p *Pool) sweep() {
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

// Close stops the sweeper and closes the idle connections.
func (p *Pool) Close() {
	p.stopOnce.Do(func() { close(p.stop) })
	p.idle.Range(func(_, st any) bool {
		st.(*idleStack).closeIdle(0)
		return true
	})
}

// IdleConns counts the idle connections to addr.
func (p *Pool) IdleConns(addr string) int {
	st, ok := p.idle.Load(addr)
	if !ok {
		return 0
	}
	stack := st.(*idleStack)
	stack.mu.Lock()
	defer stack.mu.Unlock()
	return len(stack.conns)
}

// Stale reports whether a pooled connection is known to be of no use: the
// backend closed it, or sent bytes no request asked for.
func (uc *Conn) Stale() bool {
	if uc.Reader.Buffered() > 0 {
		return true
	}
	if !uc.checkAt.IsZero() && !uc.takenAt.Before(uc.checkAt) {
		// A client check left armed in the pool (armCheck) passed: a
		// read deadline that passed makes SocketState see the socket
		// closed.
		if uc.SetReadDeadline(time.Time{}) != nil {
			return true
		}
	}
	st := uc.socketState()
	return st == socketData || st == SocketClosed
}

// socketStatus is what SocketState sees of a connection.
type socketStatus uint8

const (
	socketUnknown socketStatus = iota
	socketIdle
	socketData
	SocketClosed
)
