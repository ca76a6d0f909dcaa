package l4

// TCP connections on relay loops (package relay). A TCP listener's
// connection needs nothing read before it is routed, so the accept loop
// routes it at once, with no goroutine of its own, and a loop connects to
// its endpoint and carries its bytes: the same route, backend draw,
// endpoint attempts, passive health, drain, metrics and access log as on
// a goroutine, called back by the loop.

import (
	"net"
	"net/netip"

	"github.com/hostgate/hostgate/proxy/l4/relay"
	"github.com/hostgate/hostgate/router"
)

// relaySocket is c's socket when a loop is to carry c, else nil.
func (l *Listener) relaySocket(c net.Conn) *relay.Socket {
	if l.opts.Relay == nil || l.opts.Mode != TCP {
		return nil
	}
	return l.opts.RelaySocket(c)
}

// relay routes c, tracked, and has a loop carry it through s, its socket.
func (l *Listener) relay(c net.Conn, s *relay.Socket) {
	r := &relayed{l: l, c: c, rec: l.record(c)}
	if r.target = l.lookup(l.state.Load(), &r.rec); r.target != nil {
		if b := chooseBackend(&l.opts, r.target, &r.rec); b != nil {
			r.attempts = newAttempts(&l.opts, b, &r.rec)
			l.opts.Relay.Relay(s, r, header(b, &r.rec, c), l.opts.DialTimeout)
			return
		}
	}
	r.Ended(0, 0)
}

// relayed is a connection on a loop: the relay.Handler that its loop
// calls back.
type relayed struct {
	l      *Listener
	c      net.Conn
	rec    Record
	target *router.L4Target
	attempts
	// bound is what the connection is bound to once connected, for the
	// drain.
	bound *binding
}

func (r *relayed) Next(failed error) (netip.AddrPort, bool) {
	if failed != nil {
		r.failed(failed)
	}
	for h := r.next(); h != nil; h = r.next() {
		ap, err := netip.ParseAddrPort(h.Address())
		if err == nil {
			return ap, true
		}
		// Endpoints are IP addresses (EndpointSlices of type FQDN are
		// left out): this one cannot be connected to.
		r.failed(err)
	}
	return netip.AddrPort{}, false
}

func (r *relayed) Connected() {
	r.host.Succeeded()
	r.bound = newBinding(r.rec.ServerName, r.target, r.rec.Backend, r.host, func() { r.c.Close() })
	r.l.bind(r.c, r.bound)
	r.l.opts.Metrics.opened(r.l.opts.Address, r.rec.Route)
}

func (r *relayed) Ended(in, out int64) {
	r.rec.BytesIn, r.rec.BytesOut = in, out
	if r.host != nil {
		r.host.End()
	}
	if r.bound != nil {
		r.rec.Drained = r.bound.drained.Load()
		r.l.opts.Metrics.ended(&r.rec)
	}
	r.l.log(&r.rec)
	r.c.Close()
	r.l.untrack(r.c)
}
