//go:build linux

package h1loop

// The timeouts of a worker's connections (a request head's, the wait for
// the next request, a client that stops reading) on a timer wheel: a
// ring of slots, each a list of the connections whose deadline falls in
// its tick. Arming a deadline later than the slot a connection is in
// only stores it (most arm the wait for the next request, a little
// later each time); the slot, when its tick comes, moves the connection
// on. Neither costs a Go timer, a heap operation or an allocation.

import "time"

const (
	tick      = 100 * time.Millisecond
	wheelSize = 1024 // slots: the ring turns in 102.4 s
)

type wheel struct {
	slots [wheelSize]*conn
	// now is the tick the wheel has turned to; count the connections
	// in it.
	now   int64
	count int
}

func ticks(t time.Time) int64 { return t.UnixNano() / int64(tick) }

// arm gives c the deadline at (zero for none).
func (w *wheel) arm(c *conn, at time.Time) {
	if at.IsZero() {
		w.disarm(c)
		c.deadline = 0
		return
	}
	d := ticks(at) + 1
	c.deadline = d
	if c.slotTick != 0 && c.slotTick <= d {
		return // the slot moves it on when its tick comes
	}
	w.disarm(c)
	w.insert(c, d)
}

func (w *wheel) insert(c *conn, d int64) {
	// Past the ring's turn it waits in the last slot, and moves on from
	// there.
	d = min(max(d, w.now+1), w.now+wheelSize-1)
	i := d % wheelSize
	c.slotTick = d
	c.prev, c.next = nil, w.slots[i]
	if c.next != nil {
		c.next.prev = c
	}
	w.slots[i] = c
	w.count++
}

func (w *wheel) disarm(c *conn) {
	if c.slotTick == 0 {
		return
	}
	i := c.slotTick % wheelSize
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		w.slots[i] = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next, c.slotTick = nil, nil, 0
	w.count--
}

// advance turns the wheel to now, calling expire for each connection
// whose deadline passed.
func (w *wheel) advance(now time.Time, expire func(*conn)) {
	to := ticks(now)
	if w.now == 0 || w.count == 0 {
		w.now = to
		return
	}
	for w.now < to {
		// The tick turns before its slot is taken: a connection that
		// expire arms again for a deadline already due goes to the next
		// slot. In this one it would be left behind with a tick that
		// never comes again, and never expire.
		w.now++
		c := w.slots[w.now%wheelSize]
		for c != nil {
			next := c.next
			if c.slotTick == w.now {
				w.disarm(c)
				if c.deadline <= w.now {
					c.deadline = 0
					expire(c)
				} else {
					w.insert(c, c.deadline)
				}
			}
			c = next
		}
		if w.count == 0 {
			w.now = to
			return
		}
	}
}

// wait is how long the worker may sleep before the next tick, in
// milliseconds, -1 for as long as it likes.
func (w *wheel) wait(now time.Time) int {
	if w.count == 0 {
		return -1
	}
	// Past the tick already (the loop's work since the wheel turned took
	// that long): no sleep at all, where a negative timeout would have
	// epoll_wait sleep until the next event, however late.
	return max(0, int(((w.now+1)*int64(tick)-now.UnixNano())/int64(time.Millisecond)))
}
