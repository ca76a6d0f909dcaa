package guard

import (
	"testing"
	"time"
)

// TestClosedToMakeRoom covers the race the sockets of proxy's cap tests do
// not show on demand: a request that comes as its connection is closed to
// make room is not served, whoever marks the connection afterwards.
func TestClosedToMakeRoom(t *testing.T) {
	var c TrackedConn
	now := time.Now()
	c.MarkIdle(now)
	from := c.idleFrom.Load()
	c.MarkIdle(now.Add(time.Second))
	if c.idleFrom.Load() != from {
		t.Fatal("marking an idle connection idle again moved its time")
	}
	if !c.Claim() || c.Idle() {
		t.Fatal("an idle connection could not be claimed")
	}
	c.MarkIdle(now)
	c.idleFrom.CompareAndSwap(from, connEvicted) // as closeIdlest does
	c.MarkIdle(now)
	if c.Claim() || !c.Evicted() {
		t.Fatal("a connection closed to make room was claimed")
	}

}
