package l4

// TCP and TLS passthrough connections on relay loops (package relay). A
// TCP listener's connection needs nothing read before it is routed, so
// it is routed as it is accepted, on the loop's worker that accepts
// (relay.Loop.Serve), with no goroutine of its own; a TLS
// listener's is routed by its ClientHello, which the loop reads and hands
// back (Peek) to the same parser as a goroutine's, within the same
// HelloTimeout and size limits, refused with the same alerts. Then a loop
// connects to its endpoint, sends the ClientHello first, and carries its
// bytes: the same route, backend draw, endpoint attempts, passive health,
// PROXY header, drain, metrics and access log as on a goroutine, called
// back by the loop.
//
// TLS that ends here needs crypto/tls, on a goroutine: while a TLS
// listener has a listener in mode Terminate on its socket (a Terminate or
// mixed one), its connections all go to Go's netpoller as they are
// accepted, those that pass TLS through too, as a ClientHello read on a
// loop could not go on to a handshake in Go without moving its socket
// back.

import (
	"errors"
	"io"
	"net"
	"net/netip"

	"github.com/hostgate/hostgate/proxy/l4/relay"
	"github.com/hostgate/hostgate/router"
)

// relaySocket is c's socket when a loop is to carry c, routed by st,
// else nil: then c is Go's to serve.
func (l *Listener) relaySocket(c net.Conn, st *state) *relay.Socket {
	s := l.opts.RelaySocket(c)
	if s == nil || l.opts.Mode != Passthrough || !st.routes.Terminates() {
		return s
	}
	// A socket Go could not take is closed: the goroutine finds so,
	// and logs the connection as any other that ended before its hello.
	_ = s.Go()
	return nil
}

// relay has a loop carry c, tracked, through s, its socket, routed by st:
// at once, or by its ClientHello once the loop read it.
func (l *Listener) relay(c net.Conn, s *relay.Socket, st *state) {
	r := &relayed{l: l, c: c, st: st, rec: l.record(c)}
	if l.opts.Mode == Passthrough {
		l.opts.Relay.RelayPeeked(s, r, l.opts.HelloTimeout, l.opts.DialTimeout)
		return
	}
	if first, ok := r.route(); ok {
		l.opts.Relay.Relay(s, r, first, l.opts.DialTimeout)
		return
	}
	r.Ended(0, 0)
}

// relayed is a connection on a loop: the relay.Handler that its loop
// calls back.
type relayed struct {
	l *Listener
	c net.Conn
	// st is what the connection is routed by, read when it was
	// accepted: whether TLS may end here was decided by it.
	st     *state
	hello  helloParser
	rec    Record
	target *router.L4Target
	attempts
	// bound is what the connection is bound to once connected, for the
	// drain.
	bound *binding
}

// route chooses r's route and backend, and returns the PROXY header the
// backend gets first; false when refused (counted).
func (r *relayed) route() (first []byte, ok bool) {
	if r.target = r.l.lookup(r.st, &r.rec); r.target == nil {
		return nil, false
	}
	b := chooseBackend(&r.l.opts, r.target, &r.rec)
	if b == nil {
		return nil, false
	}
	r.attempts = newAttempts(&r.l.opts, b, &r.rec)
	return header(b, &r.rec, r.c), true
}

// Peek reads the ClientHello in what the client sent so far, and routes
// by its server name.
func (r *relayed) Peek(read []byte, err error) (relay.Step, []byte) {
	need, serverName, helloErr := r.hello.parse(read)
	if need > 0 {
		if err == nil {
			return relay.More, nil
		}
		helloErr = err
		if errors.Is(err, io.EOF) && len(read) > 0 {
			// As readHello: a hello cut short is a malformed one.
			helloErr = errMalformed
		}
	}
	if helloErr != nil {
		return relay.Refuse, r.l.opts.refuseHello(&r.rec, helloErr)
	}
	r.rec.ServerName = serverName
	if first, ok := r.route(); ok {
		return relay.Connect, first
	}
	return relay.Refuse, nil
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
	if r.l.opts.Mode == Passthrough && r.target == nil && r.rec.Refused == "" {
		// Closed before its ClientHello said where to (by a drain, the
		// caps), which Peek never heard of: as a goroutine's read
		// failing then says.
		r.rec.Refused = clientClosed
	}
	if r.host != nil {
		r.host.End()
	}
	if r.bound != nil {
		r.bound.noteShut(&r.rec)
		r.l.opts.Metrics.ended(&r.rec)
	}
	r.l.log(&r.rec)
	r.c.Close()
	r.l.untrack(r.c)
}
