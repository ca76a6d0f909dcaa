//go:build linux

package h1loop

import (
	"testing"
	"time"
)

// TestWheelWaitAfterTick: a loop whose work since the wheel last turned
// ran past the next tick sleeps not at all, rather than until the next
// event (epoll_wait's negative timeout), which left a request past its
// backend timeout waiting for the backend's answer.
func TestWheelWaitAfterTick(t *testing.T) {
	t0 := time.Now()
	w := wheel{now: ticks(t0)}
	w.arm(&conn{}, t0.Add(time.Second))
	if got := w.wait(t0.Add(3 * tick)); got != 0 {
		t.Errorf("wait %d ms three ticks after the wheel turned, want 0", got)
	}
}

// TestWheelRearmDue: a connection that expire arms again for a deadline
// already due (a try that failed at its deadline, answered or tried
// again at once) expires again on the next tick.
func TestWheelRearmDue(t *testing.T) {
	t0 := time.Now()
	w := wheel{now: ticks(t0)}
	c := &conn{}
	w.arm(c, t0.Add(tick))
	expired := 0
	expire := func(c *conn) {
		if expired++; expired == 1 {
			w.arm(c, t0)
		}
	}
	w.advance(t0.Add(5*tick), expire)
	w.advance(t0.Add(7*tick), expire)
	if expired != 2 {
		t.Errorf("expired %d times, want 2", expired)
	}
}
