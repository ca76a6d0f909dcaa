package l4

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostgate/hostgate/internal/udptest"
	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
)

// startUDPEcho answers each datagram with name, the sender's address and
// the datagram, so that a test sees which endpoint answered and from which
// of hostgate's sockets the datagram came.
func startUDPEcho(t *testing.T, name string) string {
	t.Helper()
	return udptest.Serve(t, func(from net.Addr, p []byte) []byte {
		return []byte(name + " " + from.String() + " " + string(p))
	}).String()
}

// udpFixture is a UDPListener on loopback whose endpoint set "echo" the
// test changes.
type udpFixture struct {
	u        *UDPListener
	addr     string
	m        *Metrics
	registry *upstream.Registry
	mu       sync.Mutex
	sets     *upstream.Sets
	records  chan *Record
}

func serveUDP(t *testing.T, idle time.Duration, maxFlows int, endpoints ...string) *udpFixture {
	t.Helper()
	return serveUDPWith(t, idle, maxFlows, nil, endpoints...)
}

// serveUDPWith is serveUDP with options that change.
func serveUDPWith(t *testing.T, idle time.Duration, maxFlows int, change func(*Options), endpoints ...string) *udpFixture {
	t.Helper()
	f := &udpFixture{
		registry: upstream.NewRegistry(upstream.RoundRobin, upstream.Health{FailureThreshold: 5, BaseEjection: time.Second, MaxEjection: time.Second}),
		records:  make(chan *Record, 100),
	}
	f.setEndpoints(endpoints...)
	var err error
	if f.m, err = NewMetrics(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = pc.LocalAddr().String()
	o := Options{
		Address: "test", ConnectAttempts: 2, FlowIdleTimeout: idle, MaxFlows: maxFlows,
		Sets: func() *upstream.Sets {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.sets
		},
		Metrics: f.m,
		AccessLog: func(r *Record) {
			c := *r
			f.records <- &c
		},
	}
	if change != nil {
		change(&o)
	}
	f.u = NewUDP(o, compile(t, route(router.KindUDPRoute, "dns", []string{"echo"})), pc.(*net.UDPConn))
	done := make(chan error, 1)
	go func() { done <- f.u.Serve() }()
	t.Cleanup(func() {
		pc.Close()
		<-done
		f.u.Close()
	})
	return f
}

func (f *udpFixture) setEndpoints(addrs ...string) {
	var eps []upstream.Endpoint
	for _, a := range addrs {
		eps = append(eps, upstream.Endpoint{Address: a})
	}
	sets := f.registry.Sets(map[string][]upstream.Endpoint{"echo": eps})
	f.mu.Lock()
	f.sets = sets
	f.mu.Unlock()
}

// client is a UDP socket of its own (a flow) connected to the listener.
func (f *udpFixture) client(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.Dial("udp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.UDPConn)
}

// ask sends msg and returns the answer: endpoint name, the address the
// endpoint saw, and msg.
func ask(t *testing.T, c *net.UDPConn, msg string) (name, from string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("answer to %q: %v", msg, err)
	}
	parts := strings.SplitN(string(buf[:n]), " ", 3)
	if len(parts) != 3 || parts[2] != msg {
		t.Fatalf("answer to %q: %q", msg, buf[:n])
	}
	return parts[0], parts[1]
}

// TestUDPFlowEcho: datagrams go both ways over one flow, all from one
// socket of hostgate's to the endpoint; another client is another flow;
// the flow's access log record counts both ways once it idles out.
func TestUDPFlowEcho(t *testing.T) {
	f := serveUDP(t, 300*time.Millisecond, 0, startUDPEcho(t, "a"))
	c := f.client(t)
	_, from1 := ask(t, c, "one")
	_, from2 := ask(t, c, "two")
	if from1 != from2 {
		t.Errorf("one flow reached the endpoint from %s and %s", from1, from2)
	}
	_, other := ask(t, f.client(t), "three")
	if other == from1 {
		t.Errorf("a second client shares the first's flow (%s)", other)
	}
	if got := f.u.Flows(); got != 2 {
		t.Errorf("Flows() = %d, want 2", got)
	}
	var rec *Record
	for range 2 {
		select {
		case r := <-f.records:
			if r.PacketsIn == 2 {
				rec = r
			}
		case <-time.After(3 * time.Second):
			t.Fatal("no access log record after the idle timeout")
		}
	}
	if rec == nil || rec.PacketsOut != 2 || rec.BytesIn != 6 || rec.Route.Name != "dns" || rec.Backend != "echo" || rec.Mode != UDP {
		t.Errorf("record of the first flow = %+v", rec)
	}
	if got := value(t, f.m.datagramsTotal.WithLabelValues("test", "UDPRoute ns/dns", "in")); got != 3 {
		t.Errorf("datagrams in = %v, want 3", got)
	}
}

// TestUDPFlowsAcrossEndpointChange: a flow keeps its endpoint when the set
// changes; a new flow goes to the new endpoint.
func TestUDPFlowsAcrossEndpointChange(t *testing.T) {
	f := serveUDP(t, 5*time.Second, 0, startUDPEcho(t, "old"))
	c := f.client(t)
	if name, _ := ask(t, c, "before"); name != "old" {
		t.Fatalf("answered by %s", name)
	}
	f.setEndpoints(startUDPEcho(t, "new"))
	if name, _ := ask(t, c, "after"); name != "old" {
		t.Errorf("the open flow moved to %s", name)
	}
	if name, _ := ask(t, f.client(t), "fresh"); name != "new" {
		t.Errorf("a new flow went to %s, want the new endpoint", name)
	}
}

// TestUDPFlowIdleExpiry: a flow idle past the timeout ends, and the
// client's next datagram starts another (another socket towards the
// endpoint); datagrams keep a flow alive past the timeout.
func TestUDPFlowIdleExpiry(t *testing.T) {
	idle := 200 * time.Millisecond
	f := serveUDP(t, idle, 0, startUDPEcho(t, "a"))
	c := f.client(t)
	_, from1 := ask(t, c, "one")
	for range 4 {
		time.Sleep(idle / 2)
		if _, from := ask(t, c, "alive"); from != from1 {
			t.Fatalf("a busy flow was replaced (%s, then %s)", from1, from)
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for f.u.Flows() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d flows open after the idle timeout", f.u.Flows())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, from2 := ask(t, c, "two"); from2 == from1 {
		t.Errorf("after expiry the client reached the endpoint from the old flow's socket %s", from2)
	}
}

// TestUDPFlowCap: past MaxFlows a new client's datagrams are dropped and
// counted while the open flows are served; once one ends, a new client
// is served.
func TestUDPFlowCap(t *testing.T) {
	idle := 300 * time.Millisecond
	f := serveUDP(t, idle, 2, startUDPEcho(t, "a"))
	first := f.client(t)
	ask(t, first, "1")
	ask(t, f.client(t), "2")
	third := f.client(t)
	if _, err := third.Write([]byte("3")); err != nil {
		t.Fatal(err)
	}
	_ = third.SetReadDeadline(time.Now().Add(idle / 2))
	if n, err := third.Read(make([]byte, 100)); err == nil {
		t.Fatalf("a flow past the cap was answered (%d bytes)", n)
	}
	if got := value(t, f.m.refusedTotal.WithLabelValues("test", refusedFlowLimit)); got != 1 {
		t.Errorf("refused flow_limit = %v, want 1", got)
	}
	ask(t, first, "still served")
	deadline := time.Now().Add(3 * time.Second)
	for f.u.Flows() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d flows open after the idle timeout", f.u.Flows())
		}
		time.Sleep(10 * time.Millisecond)
	}
	ask(t, third, "now")
}

// TestUDPEndpointRefused: an endpoint whose port is closed ends the flow
// and counts against the endpoint; the client's next datagram gets a new
// flow.
func TestUDPEndpointRefused(t *testing.T) {
	closed := closedUDPPort(t)
	f := serveUDP(t, 5*time.Second, 0, closed)
	c := f.client(t)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	f.wantRefused(t, closed)
}

// wantRefused waits for the access log record of a flow that ended as
// its endpoint, at closed, refused it.
func (f *udpFixture) wantRefused(t *testing.T, closed string) {
	t.Helper()
	select {
	case r := <-f.records:
		if r.Refused != refusedDial || r.Endpoint != closed {
			t.Errorf("record = %+v, want refused %s at %s", r, refusedDial, closed)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the flow to a closed port did not end")
	}
}

// refusedFlow is a flow of a client to the endpoint at closed, made as
// the listener makes one but with its goroutine left to the test, and
// the port unreachable report of a first datagram already waiting on
// its socket for whichever call comes first.
func (f *udpFixture) refusedFlow(t *testing.T, closed string) *flow {
	t.Helper()
	backend, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(closed)))
	if err != nil {
		t.Fatal(err)
	}
	client := netip.MustParseAddrPort("127.0.0.1:9")
	target := f.u.routes.Load().Lookup("")
	rec := Record{Start: time.Now(), Listener: "test", Mode: UDP, Client: client, Route: target.Route, Backend: "echo", Endpoint: closed}
	host := f.sets.Get("echo").Pick(nil)
	host.Begin()
	fl := f.u.track(client, backend, host, rec, target)
	if _, err := backend.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	// The report comes back over loopback in microseconds.
	time.Sleep(100 * time.Millisecond)
	return fl
}

// closedUDPPort is a loopback address where nothing listens.
func closedUDPPort(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := pc.LocalAddr().String()
	pc.Close()
	return closed
}

// TestUDPSendTakesRefusal: the kernel reports an endpoint's port
// unreachable to whichever call on the flow's socket comes first. When the
// listener's send of the client's next datagram takes it, and not the
// flow's reader, the flow ends there, the datagram is left to another
// flow, and the record says the endpoint refused: the flow no longer
// carries datagrams to a closed port until it idles out. The flow's
// reader starts only once its send has taken the report, which a running
// reader usually takes first.
func TestUDPSendTakesRefusal(t *testing.T) {
	closed := closedUDPPort(t)
	fx := serveUDP(t, 5*time.Second, 0, closed)
	fl := fx.refusedFlow(t, closed)
	// Errors, not Fatal: the flow's goroutine must run for the
	// listener to close.
	if fl.send([]byte("second")) {
		t.Error("the send that took the endpoint's refusal kept the flow")
	}
	if _, ok := fx.u.flows.Load(fl.client); ok {
		t.Error("the refused flow is still the client's: its next datagram would go to it")
	}
	go fl.answer()
	fx.wantRefused(t, closed)
}

// ejectionLog counts the "endpoint ejected" lines, holding the first until
// released, so that a test can act while the flow that logged it has not
// ended yet.
type ejectionLog struct {
	mu       sync.Mutex
	n        int
	entered  chan struct{}
	released chan struct{}
}

func (h *ejectionLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *ejectionLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *ejectionLog) WithGroup(string) slog.Handler            { return h }
func (h *ejectionLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "endpoint ejected" {
		return nil
	}
	h.mu.Lock()
	h.n++
	first := h.n == 1
	h.mu.Unlock()
	if first {
		close(h.entered)
		<-h.released
	}
	return nil
}

// TestUDPRefusedFlowCountsOnce: a flow whose endpoint's port is closed is
// one failure of the endpoint, whichever of its reader and the listener's
// send takes the report, and however many reports come (one per datagram
// the client sent meanwhile). The reader takes the first and is held, as
// it counts it, before it closes the flow's socket; the send of the
// client's next datagram then takes the second report, and must not count
// the endpoint's failure again: with a threshold of one, the endpoint is
// ejected once.
func TestUDPRefusedFlowCountsOnce(t *testing.T) {
	closed := closedUDPPort(t)
	log := &ejectionLog{entered: make(chan struct{}), released: make(chan struct{})}
	fx := serveUDPWith(t, 5*time.Second, 0, func(o *Options) { o.Log = slog.New(log) }, closed)
	fx.registry = upstream.NewRegistry(upstream.RoundRobin, upstream.Health{FailureThreshold: 1, BaseEjection: time.Millisecond, MaxEjection: time.Millisecond})
	fx.setEndpoints(closed)
	fl := fx.refusedFlow(t, closed)
	go fl.answer()
	select {
	case <-log.entered:
	case <-time.After(3 * time.Second):
		close(log.released)
		t.Fatal("the flow's reader did not take the refusal")
	}
	// The reader is held in its count; the socket is still open, and
	// takes the report of a second datagram.
	if _, err := fl.backend.Write([]byte("second")); err != nil {
		t.Error(err)
	}
	time.Sleep(100 * time.Millisecond)
	if fl.send([]byte("third")) {
		t.Error("the send that took the endpoint's refusal kept the flow")
	}
	close(log.released)
	fx.wantRefused(t, closed)
	log.mu.Lock()
	defer log.mu.Unlock()
	if log.n != 1 {
		t.Errorf("one refused flow ejected its endpoint %d times, want 1", log.n)
	}
}
