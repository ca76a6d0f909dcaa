package pipeline

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Slow clients: a request body that trickles in holds a client connection
// and a backend connection for as long as the client likes, which read
// timeouts alone do not prevent (one byte every few seconds never lets a
// read time out). A pacer bounds such a transfer: after a grace period the
// bytes moved must keep up with a minimum average rate, and the whole
// transfer may have a time limit. It checks from a timer, never per read,
// so a body that keeps pace costs a timer and two atomic adds per read;
// when the check fails it wakes the read that waits (a deadline in the
// past), and the read reports why.

// paceLimits are the bounds of one kind of transfer.
type paceLimits struct {
	// minRate is in bytes per second; 0 leaves the rate unchecked.
	minRate int64
	// grace is how long a transfer may start slowly.
	grace time.Duration
	// limit bounds the whole transfer; 0 is no bound.
	limit time.Duration
}

func (l paceLimits) enabled() bool { return l.minRate > 0 || l.limit > 0 }

var (
	errBodyTooSlow = errors.New("request body came slower than the minimum data rate")
	errBodyTooLong = errors.New("request body took longer than the body timeout")
)

// pacer watches one transfer.
type pacer struct {
	limits paceLimits
	start  time.Time
	moved  atomic.Int64
	// cut is the reason the transfer was cut, once it was.
	cut  atomic.Pointer[error]
	wake func()

	// mu orders a check against finish: once finished, a check must not
	// wake a connection that has moved on to its next request.
	mu       sync.Mutex
	finished bool
	timer    *time.Timer
	// r is the body read through Read.
	r io.Reader
}

// startPacer watches the transfer of r from now on; wake must make a read
// of r that waits return at once.
func startPacer(limits paceLimits, r io.Reader, wake func()) *pacer {
	p := &pacer{limits: limits, start: time.Now(), wake: wake, r: r}
	p.mu.Lock()
	p.timer = time.AfterFunc(p.nextCheck(0), p.check)
	p.mu.Unlock()
	return p
}

// nextCheck is how long after the start the transfer, having moved moved
// bytes, falls behind if nothing more comes, or reaches its limit.
func (p *pacer) nextCheck(moved int64) time.Duration {
	l := p.limits
	next := time.Duration(1<<63 - 1)
	if l.minRate > 0 {
		next = l.grace + time.Duration(float64(moved+1)/float64(l.minRate)*float64(time.Second))
	}
	if l.limit > 0 {
		next = min(next, l.limit)
	}
	return next
}

func (p *pacer) check() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	elapsed := time.Since(p.start)
	moved := p.moved.Load()
	var reason error
	switch l := p.limits; {
	case l.limit > 0 && elapsed >= l.limit:
		reason = errBodyTooLong
	case l.minRate > 0 && elapsed > l.grace && moved < int64((elapsed-l.grace).Seconds()*float64(l.minRate)):
		reason = errBodyTooSlow
	}
	if reason != nil {
		p.cut.Store(&reason)
		p.finished = true
		p.wake()
		return
	}
	p.timer.Reset(max(p.nextCheck(moved)-elapsed, time.Millisecond))
}

// Read reads the body and counts what came; once the transfer was cut,
// its error says why.
func (p *pacer) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.moved.Add(int64(n))
	if err != nil {
		if cut := p.err(); cut != nil {
			return n, cut
		}
	}
	return n, err
}

// pacedBody is a request body read through its pacer.
type pacedBody struct {
	*pacer
	io.Closer
}

// finish ends the watch; it reports why the transfer was cut, nil if it
// was not. A nil pacer is a transfer nobody watched.
func (p *pacer) finish() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	p.finished = true
	p.timer.Stop()
	p.mu.Unlock()
	return p.err()
}

// err is why the transfer was cut, nil while it was not.
func (p *pacer) err() error {
	if p == nil {
		return nil
	}
	if cut := p.cut.Load(); cut != nil {
		return *cut
	}
	return nil
}

// cutBy reports whether err says a pacer cut the transfer, and counts it
// when it does: every engine asks once, where it answers 408.
func (m *metrics) cutBy(err error) bool {
	switch {
	case errors.Is(err, errBodyTooSlow):
		m.slowBodies.WithLabelValues("rate").Inc()
	case errors.Is(err, errBodyTooLong):
		m.slowBodies.WithLabelValues("timeout").Inc()
	default:
		return false
	}
	return true
}
