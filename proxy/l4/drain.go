package l4

// Draining what a change took away. A connection (or UDP flow) keeps the
// route and endpoint it was given when it began: a new table or endpoint
// set changes only what new connections get. Left at that, a connection
// to a route that was deleted, or to a pod that is gone from its Service,
// would go on as long as its peers keep it open, which for a database or
// MQTT client is forever. So each listener looks, a few times per grace,
// at what its open connections are bound to; one whose route no longer
// serves its server name, whose backend left the route, or whose endpoint
// left the backend's set, is closed once that has lasted Options.DrainGrace
// (a route that comes back within the grace keeps it). The look runs
// beside the connections, never on their path, and reads the same
// snapshots they do.

import (
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
)

// binding is what an open connection or flow was routed to.
type binding struct {
	serverName string
	route      router.RouteID
	backend    string
	host       *upstream.Host
	// orphaned is when the binding was first seen no longer served;
	// zero while it is. Only the sweeper touches it.
	orphaned time.Time
	// lookQuiet is when the sweeper next asks how long the connection
	// has been quiet (Options.IdleTimeout): not before it could have
	// been quiet for the timeout, so that a busy connection's socket is
	// asked once per timeout. Only bind, then the sweeper, touch it.
	lookQuiet time.Time
	// close ends the connection or flow; shut is the shutReason the
	// sweeper closed it for, once.
	close func()
	shut  atomic.Uint32
}

// shutReason is why the sweeper closed a connection or flow.
type shutReason uint32

const (
	notShut shutReason = iota
	// shutDrained: its route or endpoint had been gone for DrainGrace.
	shutDrained
	// shutIdle: it carried nothing either way for IdleTimeout.
	shutIdle
)

func newBinding(serverName string, target *router.L4Target, backend string, host *upstream.Host, close func()) *binding {
	return &binding{serverName: serverName, route: target.Route, backend: backend, host: host, close: close}
}

// shutFor closes b for why, and counts it, unless the sweeper closed it
// already.
func (b *binding) shutFor(why shutReason, o *Options) {
	if b.shut.CompareAndSwap(uint32(notShut), uint32(why)) {
		o.Metrics.shutDown(o.Address, why)
		b.close()
	}
}

// noteShut says in rec why the sweeper closed b, if it did.
func (b *binding) noteShut(rec *Record) {
	why := shutReason(b.shut.Load())
	rec.Drained, rec.IdleTimedOut = why == shutDrained, why == shutIdle
}

// quietFor reports whether c, bound to b, has been quiet for
// o.IdleTimeout at now. A socket that cannot tell (Quiet's 0, false) is
// asked again a whole timeout later.
func (b *binding) quietFor(c net.Conn, now time.Time, o *Options) bool {
	if now.Before(b.lookQuiet) {
		return false
	}
	quiet, known := o.Quiet(c)
	if known && quiet >= o.IdleTimeout {
		return true
	}
	b.lookQuiet = now.Add(o.IdleTimeout - quiet)
	return false
}

// served reports whether routes and sets still serve b: its route is
// still the one for its server name, its backend is among the route's,
// and its endpoint is in the backend's set (the registry keeps one Host
// per endpoint across sets, so the pointer says it).
func (b *binding) served(routes *router.L4Table, sets *upstream.Sets) bool {
	target := routes.Lookup(b.serverName)
	if target == nil || target.Route != b.route {
		return false
	}
	if !slices.ContainsFunc(target.Rule.Backends, func(r router.BackendRef) bool { return r.Name == b.backend && !r.Invalid }) {
		return false
	}
	set := sets.Get(b.backend)
	return set != nil && set.Find(b.host.Token()) == b.host
}

// expired reports whether b, served or not at now, has not been served
// for grace.
func (b *binding) expired(served bool, now time.Time, grace time.Duration) bool {
	if served {
		b.orphaned = time.Time{}
		return false
	}
	if b.orphaned.IsZero() {
		b.orphaned = now
	}
	return now.Sub(b.orphaned) >= grace
}

// sweepEvery is how often a listener looks at its connections: a quarter
// of the drain grace or idle timeout, the shorter of those set, so that a
// connection is closed at most a quarter late, within bounds that keep
// the look cheap.
func sweepEvery(grace, idle time.Duration) time.Duration {
	shortest := grace
	if shortest <= 0 || (idle > 0 && idle < shortest) {
		shortest = idle
	}
	return min(max(shortest/4, 10*time.Millisecond), time.Second)
}

// sweep calls look every sweepEvery(grace, idle) until stop is closed. It
// does nothing when neither is positive: connections then run until
// their peers end them.
func sweep(grace, idle time.Duration, stop <-chan struct{}, look func(now time.Time)) {
	if grace <= 0 && idle <= 0 {
		return
	}
	tick := time.NewTicker(sweepEvery(grace, idle))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			look(now)
		}
	}
}
