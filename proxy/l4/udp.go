package l4

// UDP listeners. UDP has no connections, so the unit served is a flow: the
// datagrams of one client address and port. The first datagram of a flow
// chooses the route's backend and an endpoint, as a TCP connection does,
// and the flow gets its own UDP socket connected to that endpoint: the
// endpoint's answers arrive on it alone, so they belong to the flow without
// a lookup, and go back to the client from the listener's socket, whose
// address the client sent to. A flow ends after FlowIdleTimeout without a
// datagram either way.
//
// One goroutine reads the listener's socket and owns the creation of
// flows; each flow has one goroutine reading its endpoint's answers. The
// per-datagram path takes no lock: flows are found in a sync.Map, whose
// reads of existing keys do not lock, and counted with atomics.

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
)

// maxDatagram is the largest UDP payload (65,535 bytes less the IPv4 and
// UDP headers): a read into less would cut larger datagrams short without
// saying so.
const maxDatagram = 65507

// UDPListener serves the flows of one UDP socket.
type UDPListener struct {
	opts   Options
	routes atomic.Pointer[router.L4Table]
	conn   *net.UDPConn

	flows  sync.Map // netip.AddrPort → *flow
	count  atomic.Int64
	active sync.WaitGroup
	closed atomic.Bool
	stop   chan struct{}
}

// flow is one client's datagrams and the socket connected to its
// endpoint.
type flow struct {
	u       *UDPListener
	client  netip.AddrPort
	backend *net.UDPConn
	host    *upstream.Host
	rec     Record
	bound   *binding
	// last is when a datagram last went either way (Unix nanoseconds).
	last atomic.Int64
	// packetsIn and bytesIn are written by the listener's reader,
	// packetsOut and bytesOut by the flow's own goroutine; all are read
	// when the flow ends.
	packetsIn, bytesIn   atomic.Int64
	packetsOut, bytesOut atomic.Int64
	// refused says the report that the endpoint's port is unreachable
	// was taken and counted (endpointRefused): the kernel gives it
	// whichever call on the socket comes first, and when a send took it,
	// the flow's goroutine, which writes its record, learns it here.
	refused atomic.Bool
	once    sync.Once
}

// NewUDP returns a UDPListener serving routes on conn once Serve runs.
func NewUDP(opts Options, routes *router.L4Table, conn *net.UDPConn) *UDPListener {
	opts.Mode = UDP
	if opts.ConnectAttempts < 1 {
		opts.ConnectAttempts = 1
	}
	if opts.FlowIdleTimeout <= 0 {
		opts.FlowIdleTimeout = 30 * time.Second
	}
	if opts.Log == nil {
		opts.Log = defaultLog()
	}
	u := &UDPListener{opts: opts, conn: conn, stop: make(chan struct{})}
	u.routes.Store(routes)
	go sweep(opts.DrainGrace, 0, u.stop, u.sweep)
	return u
}

// Publish makes routes what new flows are served by; open flows keep
// their endpoint.
func (u *UDPListener) Publish(routes *router.L4Table) {
	u.routes.Store(routes)
	u.opts.Metrics.retire(u.opts.Address, routes)
}

// Serve reads the listener's socket until it is closed.
func (u *UDPListener) Serve() error {
	buf := make([]byte, maxDatagram)
	for {
		n, client, err := u.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// An ICMP error of an earlier answer to a client, and the
			// like: the socket still serves.
			continue
		}
		u.deliver(client, buf[:n])
	}
}

// deliver sends a client's datagram on its flow, starting one when it has
// none (or the one found ended meanwhile).
func (u *UDPListener) deliver(client netip.AddrPort, p []byte) {
	for range 2 {
		var f *flow
		if found, ok := u.flows.Load(client); ok {
			f = found.(*flow)
		} else if f = u.start(client); f == nil {
			return
		}
		if f.send(p) {
			return
		}
	}
}

// send writes p to the flow's endpoint and reports whether the flow was
// still open.
func (f *flow) send(p []byte) bool {
	_, err := f.backend.Write(p)
	if errors.Is(err, syscall.ECONNREFUSED) {
		// Reported for an earlier datagram, and taken here rather than
		// by the flow's reader: left alone, the flow would carry the
		// client's datagrams to a closed port until it idled out. The
		// datagram goes on a flow of its own, to another endpoint
		// where there is one.
		f.endpointRefused(err)
		f.u.flows.CompareAndDelete(f.client, f)
		f.close()
		return false
	}
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	f.last.Store(time.Now().UnixNano())
	f.packetsIn.Add(1)
	f.bytesIn.Add(int64(len(p)))
	return true
}

// start makes the flow of client, or returns nil when its datagram is to
// be dropped (no route, no endpoint, too many flows), counted.
func (u *UDPListener) start(client netip.AddrPort) *flow {
	rec := Record{Start: time.Now(), Listener: u.opts.Address, Mode: UDP, Client: client}
	if u.closed.Load() {
		return nil
	}
	if u.opts.MaxFlows > 0 && u.count.Load() >= int64(u.opts.MaxFlows) {
		// No access log line: a flood past the cap would make one per
		// datagram. The metric says how many.
		u.opts.Metrics.refused(u.opts.Address, refusedFlowLimit)
		return nil
	}
	target := u.routes.Load().Lookup("")
	if target == nil {
		u.opts.refuse(&rec, refusedNoRoute)
		return nil
	}
	rec.Route = target.Route
	b := chooseBackend(&u.opts, target, &rec)
	if b == nil {
		return nil
	}
	// A connected socket per flow: the kernel gives it only its
	// endpoint's datagrams, and the endpoint sees one client port per
	// client, as it would without a proxy.
	backend, host := connectEndpoint(&u.opts, b, &rec, func(address string) (*net.UDPConn, error) {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return nil, err
		}
		return net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(ap))
	}, false)
	if backend == nil {
		return nil
	}
	f := u.track(client, backend, host, rec, target)
	go f.answer()
	return f
}

// track makes the flow of client over backend, connected to host for
// target, and counts it; its goroutine is the caller's to start.
func (u *UDPListener) track(client netip.AddrPort, backend *net.UDPConn, host *upstream.Host, rec Record, target *router.L4Target) *flow {
	f := &flow{u: u, client: client, backend: backend, host: host, rec: rec}
	f.bound = newBinding("", target, rec.Backend, host, f.close)
	f.last.Store(rec.Start.UnixNano())
	u.count.Add(1)
	u.active.Add(1)
	u.flows.Store(client, f)
	u.opts.Metrics.opened(u.opts.Address, rec.Route)
	return f
}

// answer copies the endpoint's datagrams to the client until the flow is
// idle for FlowIdleTimeout, the endpoint refuses, or the flow is closed.
func (f *flow) answer() {
	defer f.end()
	u := f.u
	idle := u.opts.FlowIdleTimeout
	buf := make([]byte, maxDatagram)
	answered := false
	// The deadline moves only when it passes: datagrams just note the
	// time, which costs less than a deadline per datagram.
	_ = f.backend.SetReadDeadline(time.Unix(0, f.last.Load()).Add(idle))
	for {
		n, err := f.backend.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				if f.refused.Load() {
					f.rec.Refused = refusedDial
				}
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				next := time.Unix(0, f.last.Load()).Add(idle)
				if !time.Now().Before(next) {
					return
				}
				_ = f.backend.SetReadDeadline(next)
				continue
			}
			if errors.Is(err, syscall.ECONNREFUSED) {
				f.endpointRefused(err)
				f.rec.Refused = refusedDial
				return
			}
			return
		}
		if !answered {
			answered = true
			f.host.Succeeded()
		}
		f.last.Store(time.Now().UnixNano())
		if _, err := u.conn.WriteToUDPAddrPort(buf[:n], f.client); err != nil && errors.Is(err, net.ErrClosed) {
			return
		}
		f.packetsOut.Add(1)
		f.bytesOut.Add(int64(n))
	}
}

// endpointRefused counts that nothing listens on the endpoint's port: a
// failure of the endpoint, as a refused TCP connect is, once for the flow
// (refused), whether its reader or a send took the report, and however
// many came: each datagram sent to the closed port has one, and the
// reader and a send may each take one before the flow's socket closes.
func (f *flow) endpointRefused(err error) {
	if !f.refused.CompareAndSwap(false, true) {
		return
	}
	if f.host.Failed() {
		f.u.opts.Log.Warn("endpoint ejected", "listener", f.u.opts.Address, "backend", f.rec.Backend, "endpoint", f.host.Address(), "error", err)
	}
}

// close ends the flow from outside its goroutine.
func (f *flow) close() { f.backend.Close() }

// end removes the flow, once, and writes its access log record.
func (f *flow) end() {
	f.once.Do(func() {
		u := f.u
		u.flows.CompareAndDelete(f.client, f)
		f.backend.Close()
		f.host.End()
		u.count.Add(-1)
		rec := &f.rec
		rec.Duration = time.Since(rec.Start)
		rec.PacketsIn, rec.BytesIn = f.packetsIn.Load(), f.bytesIn.Load()
		rec.PacketsOut, rec.BytesOut = f.packetsOut.Load(), f.bytesOut.Load()
		f.bound.noteShut(rec)
		u.opts.Metrics.ended(rec)
		if u.opts.AccessLog != nil {
			u.opts.AccessLog(rec)
		}
		u.active.Done()
	})
}

// sweep ends the flows whose route or endpoint has been gone for
// DrainGrace.
func (u *UDPListener) sweep(now time.Time) {
	routes, sets := u.routes.Load(), u.opts.Sets()
	u.flows.Range(func(_, v any) bool {
		if b := v.(*flow).bound; b.expired(b.served(routes, sets), now, u.opts.DrainGrace) {
			b.shutFor(shutDrained, &u.opts)
		}
		return true
	})
}

// Flows is the number of open flows.
func (u *UDPListener) Flows() int { return int(u.count.Load()) }

// Close ends every flow and starts no other; the socket is the caller's
// to close (which ends Serve). Answers in flight are lost: with the
// socket gone they could not reach their clients.
func (u *UDPListener) Close() {
	if !u.closed.Swap(true) {
		close(u.stop)
	}
	u.flows.Range(func(_, f any) bool {
		f.(*flow).close()
		return true
	})
	u.active.Wait()
}
