package l4

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
)

// dialTCP connects to addr until the test ends.
func dialTCP(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reports whether hostgate closes c within d, reading
// nothing else from it.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		// A reset is a close too.
		return true
	}
	return err != nil
}

// TestTCPDrainRemovedRoute: once its route is gone, an open connection
// goes on for the grace and is then closed; a connection whose route
// stays (another listener's table keeps it) is not; one whose route comes
// back within the grace stays.
func TestTCPDrainRemovedRoute(t *testing.T) { paths(t, testTCPDrainRemovedRoute) }

func testTCPDrainRemovedRoute(t *testing.T, path func(*Options)) {
	const grace = 300 * time.Millisecond
	plain := func(c net.Conn) net.Conn { return c }
	blue := startBackend(t, plain, "blue")
	green := startBackend(t, plain, "green")
	app := route(router.KindTCPRoute, "app", []string{"blue"})
	l, addr, m := serveL4With(t, TCP, compile(t, app), map[string]*backend{"blue": blue, "green": green}, func(o *Options) {
		path(o)
		o.DrainGrace = grace
	})

	// Removed and back within the grace: kept.
	kept := dialTCP(t, addr)
	roundTrip(t, kept, "one")
	l.Publish(compile(t, route(router.KindTCPRoute, "other", []string{"green"})), nil)
	time.Sleep(grace / 3)
	l.Publish(compile(t, app), nil)
	if closedWithin(t, kept, 2*grace) {
		t.Fatal("a connection whose route came back within the grace was closed")
	}
	if got := roundTrip(t, kept, "two"); got != "blue two\n" {
		t.Fatalf("answer %q", got)
	}

	// Removed for good: served during the grace, then closed.
	l.Publish(compile(t, route(router.KindTCPRoute, "other", []string{"green"})), nil)
	start := time.Now()
	if got := roundTrip(t, kept, "three"); got != "blue three\n" {
		t.Errorf("during the grace: answer %q, want from blue", got)
	}
	if !closedWithin(t, kept, 5*grace) {
		t.Fatal("a connection of a removed route was not closed after the grace")
	}
	if waited := time.Since(start); waited < grace {
		t.Errorf("closed after %v, before the grace of %v", waited, grace)
	}
	if got := value(t, m.drainedTotal.WithLabelValues("test")); got != 1 {
		t.Errorf("hostgate_l4_drained_total = %v, want 1", got)
	}
	// The new route's connections are untouched.
	fresh := dialTCP(t, addr)
	roundTrip(t, fresh, "four")
	if closedWithin(t, fresh, 2*grace) {
		t.Error("a connection of the current route was closed")
	}
}

// TestTCPDrainRemovedEndpoint: a connection to an endpoint that left its
// backend's set is closed after the grace; one to an endpoint that stays
// is not.
func TestTCPDrainRemovedEndpoint(t *testing.T) { paths(t, testTCPDrainRemovedEndpoint) }

func testTCPDrainRemovedEndpoint(t *testing.T, path func(*Options)) {
	const grace = 200 * time.Millisecond
	plain := func(c net.Conn) net.Conn { return c }
	a := startBackend(t, plain, "a")
	b := startBackend(t, plain, "b")
	registry := upstream.NewRegistry(upstream.RoundRobin, upstream.Health{FailureThreshold: 5, BaseEjection: time.Second, MaxEjection: time.Second})
	var sets atomic.Pointer[upstream.Sets]
	use := func(addrs ...string) {
		var eps []upstream.Endpoint
		for _, addr := range addrs {
			eps = append(eps, upstream.Endpoint{Address: addr})
		}
		sets.Store(registry.Sets(map[string][]upstream.Endpoint{"app": eps}))
	}
	use(a.addr)
	_, addr, _ := serveL4With(t, TCP, compile(t, route(router.KindTCPRoute, "app", []string{"app"})), nil, func(o *Options) {
		path(o)
		o.DrainGrace = grace
		o.Sets = sets.Load
	})
	toA := dialTCP(t, addr)
	if got := roundTrip(t, toA, "x"); got != "a x\n" {
		t.Fatalf("answer %q", got)
	}
	use(b.addr)
	toB := dialTCP(t, addr)
	if got := roundTrip(t, toB, "y"); got != "b y\n" {
		t.Fatalf("answer %q", got)
	}
	if !closedWithin(t, toA, 5*grace) {
		t.Error("a connection to a removed endpoint was not closed after the grace")
	}
	if closedWithin(t, toB, 2*grace) {
		t.Error("a connection to an endpoint in the set was closed")
	}
}

// TestUDPDrainRemovedEndpoint: a flow to an endpoint that left the set
// ends after the grace, its access log record says so, and the client's
// next datagram starts a flow to the new endpoint.
func TestUDPDrainRemovedEndpoint(t *testing.T) {
	const grace = 200 * time.Millisecond
	f := serveUDPWith(t, 10*time.Second, 0, func(o *Options) { o.DrainGrace = grace }, startUDPEcho(t, "old"))
	c := f.client(t)
	if name, _ := ask(t, c, "before"); name != "old" {
		t.Fatalf("answered by %s", name)
	}
	f.setEndpoints(startUDPEcho(t, "new"))
	select {
	case r := <-f.records:
		if !r.Drained || r.Endpoint == "" {
			t.Errorf("record = %+v, want drained", r)
		}
	case <-time.After(5 * grace):
		t.Fatal("the flow to a removed endpoint did not end after the grace")
	}
	if name, _ := ask(t, c, "after"); name != "new" {
		t.Errorf("after the drain the client reached %s, want the new endpoint", name)
	}
}
