//go:build linux

package evloop

import (
	"strings"
	"testing"
	"time"
)

// TestWheelWaitAfterTick: a loop whose work since the wheel last turned
// ran past the next tick sleeps not at all, rather than until the next
// event (epoll_wait's negative timeout), which left a request past its
// backend timeout waiting for the backend's answer.
func TestWheelWaitAfterTick(t *testing.T) {
	t0 := time.Now()
	var w Wheel[int]
	w.Start(t0)
	w.Arm(&Timer[int]{}, t0.Add(time.Second))
	if got := w.Wait(t0.Add(3 * tick)); got != 0 {
		t.Errorf("wait %d ms three ticks after the wheel turned, want 0", got)
	}
}

// TestWheelRearmDue: a timer that expire arms again for a deadline
// already due (a try that failed at its deadline, answered or tried
// again at once) expires again on the next tick.
func TestWheelRearmDue(t *testing.T) {
	t0 := time.Now()
	type conn struct{ timer Timer[*conn] }
	var w Wheel[*conn]
	w.Start(t0)
	c := &conn{}
	c.timer.Of = c
	w.Arm(&c.timer, t0.Add(tick))
	expired := 0
	expire := func(c *conn) {
		if expired++; expired == 1 {
			w.Arm(&c.timer, t0)
		}
	}
	w.Advance(t0.Add(5*tick), expire)
	w.Advance(t0.Add(7*tick), expire)
	if expired != 2 {
		t.Errorf("expired %d times, want 2", expired)
	}
}

// TestWheelNeverEarly: a timer expires at its deadline or up to a tick
// after, never before.
func TestWheelNeverEarly(t *testing.T) {
	t0 := time.Now()
	var w Wheel[int]
	w.Start(t0)
	at := t0.Add(250 * time.Millisecond)
	w.Arm(&Timer[int]{}, at)
	var when time.Time
	for now := t0; when.IsZero(); now = now.Add(10 * time.Millisecond) {
		w.Advance(now, func(int) { when = now })
	}
	if when.Before(at) || when.Sub(at) > tick+10*time.Millisecond {
		t.Errorf("expired %v after the deadline, want within [0, %v]", when.Sub(at), tick)
	}
}

// TestWheelMonotonic: ticks are counted on the monotonic clock, as the
// netpoller's deadlines are: a time read without it (its wall clock alone,
// as after the clock was set) counts as the wall clock says, but a timer
// armed and a wheel turned with readings of time.Now expire on time
// whatever the wall clock did.
func TestWheelMonotonic(t *testing.T) {
	t0 := time.Now()
	var w Wheel[int]
	w.Start(t0)
	w.Arm(&Timer[int]{}, t0.Add(tick))
	// The netpoller's deadline, a wait of Next less time.Now, is on the
	// monotonic clock when both have a reading of it.
	if next := w.Next(); next.Sub(t0) != tick || !strings.Contains(next.String(), "m=") {
		t.Errorf("next tick %v (%v) after the start, want %v with a monotonic reading", next.Sub(t0), next, tick)
	}
	expired := false
	w.Advance(t0.Add(2*tick+time.Millisecond), func(int) { expired = true })
	if !expired {
		t.Error("a timer one tick ahead did not expire two ticks later")
	}
}
