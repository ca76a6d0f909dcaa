package proxy

// Keep-alive connections of the HTTP/1.1 engine to backends.
//
// Idle connections wait in a buffered channel per endpoint address, so
// that taking and returning one is a channel operation and no lock of the
// engine's own. Only a connection whose exchange ended cleanly, its
// response read whole, goes back; any other is closed. A sweeper closes
// connections idle longer than the timeout.

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
}

const upstreamBufferSize = 4 << 10

// upstreamPool holds idle connections per endpoint address.
type upstreamPool struct {
	dialer  net.Dialer
	maxIdle int
	timeout time.Duration
	// idle maps an address to its chan *upConn.
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
func (p *upstreamPool) get(addr string, deadline time.Time, fresh bool) (uc *upConn, reused bool, err error) {
	if !fresh {
		if ch, ok := p.idle.Load(addr); ok {
			for uc := p.take(ch.(chan *upConn)); uc != nil; uc = p.take(ch.(chan *upConn)) {
				if time.Since(uc.idleSince) < p.timeout {
					return uc, true, nil
				}
				uc.Close()
			}
		}
	}
	d := p.dialer
	if !deadline.IsZero() && (d.Timeout == 0 || time.Until(deadline) < d.Timeout) {
		d.Deadline = deadline
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, false, err
	}
	return &upConn{Conn: c, br: bufio.NewReaderSize(c, upstreamBufferSize), bw: bufio.NewWriterSize(c, upstreamBufferSize)}, false, nil
}

func (p *upstreamPool) take(ch chan *upConn) *upConn {
	select {
	case uc := <-ch:
		return uc
	default:
		return nil
	}
}

// put returns a connection whose exchange ended cleanly; after close it
// is closed instead.
func (p *upstreamPool) put(addr string, uc *upConn) {
	select {
	case <-p.stop:
		uc.Close()
		return
	default:
	}
	if uc.SetDeadline(time.Time{}) != nil {
		uc.Close()
		return
	}
	uc.idleSince = time.Now()
	ch, ok := p.idle.Load(addr)
	if !ok {
		ch, _ = p.idle.LoadOrStore(addr, make(chan *upConn, p.maxIdle))
		p.sweepOnce.Do(func() { go p.sweep() })
	}
	select {
	case ch.(chan *upConn) <- uc:
	default:
		uc.Close()
	}
}

// sweep closes connections idle past the timeout. Addresses stay mapped
// (an empty channel each), since dropping one could strand a connection a
// concurrent put sends into it.
func (p *upstreamPool) sweep() {
	tick := time.NewTicker(max(p.timeout/4, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		p.idle.Range(func(_, v any) bool {
			ch := v.(chan *upConn)
			for range len(ch) {
				uc := p.take(ch)
				if uc == nil {
					break
				}
				if time.Since(uc.idleSince) >= p.timeout {
					uc.Close()
					continue
				}
				select {
				case ch <- uc:
				default:
					uc.Close()
				}
			}
			return true
		})
	}
}

// close stops the sweeper and closes the idle connections.
func (p *upstreamPool) close() {
	p.stopOnce.Do(func() { close(p.stop) })
	p.idle.Range(func(_, v any) bool {
		ch := v.(chan *upConn)
		for uc := p.take(ch); uc != nil; uc = p.take(ch) {
			uc.Close()
		}
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
