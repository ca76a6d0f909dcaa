//go:build linux

package evloop

// The deadlines of a worker's connections (a request head's, the wait for
// the next request, a client that stops reading, a ClientHello's, a
// connect's) on a timer wheel: a ring of slots, each a list of the
// timers whose deadline falls in its tick. Arming a deadline later than
// the slot a timer is in only stores it (most arm the wait for the next
// request, a little later each time); the slot, when its tick comes,
// moves the timer on. Neither costs a Go timer, a heap operation or an
// allocation. A wheel and its timers belong to one worker: nothing in
// them is safe for another goroutine.

import "time"

const (
	tick      = 100 * time.Millisecond
	wheelSize = 1024 // slots: the ring turns in 102.4 s
)

// Timer is a connection's place on a Wheel, a field of the connection,
// which Of names for the wheel's expire.
type Timer[T any] struct {
	Of T
	// The deadline and the slot's tick, in ticks, and the slot's list.
	deadline, slotTick int64
	prev, next         *Timer[T]
}

// Wheel holds the timers of one worker's connections.
type Wheel[T any] struct {
	slots [wheelSize]*Timer[T]
	// now is the tick the wheel has turned to; count the timers in it.
	now   int64
	count int
	// start is tick 1's beginning. Ticks are counted from it on the
	// monotonic clock: counted on the wall clock, a clock set back left
	// the wheel behind the netpoller's deadline (a worker woke for
	// nothing, over and over, until the clock caught up), and one set
	// forward expired every connect at once, taken for a dead endpoint.
	start time.Time
}

// ticks is the tick t falls in: 1 from start on, for a wheel started.
func (w *Wheel[T]) ticks(t time.Time) int64 { return int64(t.Sub(w.start)/tick) + 1 }

// Start has the wheel begin at now, a reading of time.Now.
func (w *Wheel[T]) Start(now time.Time) { w.start, w.now = now, 1 }

// Arm gives c the deadline at (zero for none). It never expires before
// at, and up to a tick after.
func (w *Wheel[T]) Arm(c *Timer[T], at time.Time) {
	if at.IsZero() {
		w.Disarm(c)
		c.deadline = 0
		return
	}
	d := w.ticks(at) + 1
	c.deadline = d
	if c.slotTick != 0 && c.slotTick <= d {
		return // the slot moves it on when its tick comes
	}
	w.Disarm(c)
	w.insert(c, d)
}

func (w *Wheel[T]) insert(c *Timer[T], d int64) {
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

// Disarm takes c off the wheel.
func (w *Wheel[T]) Disarm(c *Timer[T]) {
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

// Advance turns the wheel to now, calling expire for each timer whose
// deadline passed.
func (w *Wheel[T]) Advance(now time.Time, expire func(T)) {
	to := w.ticks(now)
	if w.count == 0 {
		w.now = to
		return
	}
	for w.now < to {
		// The tick turns before its slot is taken: a timer that expire
		// arms again for a deadline already due goes to the next slot.
		// In this one it would be left behind with a tick that never
		// comes again, and never expire.
		w.now++
		c := w.slots[w.now%wheelSize]
		for c != nil {
			next := c.next
			if c.slotTick == w.now {
				w.Disarm(c)
				if c.deadline <= w.now {
					c.deadline = 0
					expire(c.Of)
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

// Next is when the wheel's next tick is due, zero when no timer is
// armed.
func (w *Wheel[T]) Next() time.Time {
	if w.count == 0 {
		return time.Time{}
	}
	return w.start.Add(time.Duration(w.now) * tick)
}

// Wait is how long the worker may sleep before the next tick, in
// milliseconds, -1 for as long as it likes.
func (w *Wheel[T]) Wait(now time.Time) int {
	next := w.Next()
	if next.IsZero() {
		return -1
	}
	// Past the tick already (the loop's work since the wheel turned took
	// that long): no sleep at all, where a negative timeout would have
	// epoll_wait sleep until the next event, however late.
	return max(0, int(next.Sub(now)/time.Millisecond))
}
