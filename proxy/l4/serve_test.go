package l4

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hostgate/hostgate/proxy/l4/relay"
	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
)

// backend is a TLS or TCP server on loopback that counts its connections.
type backend struct {
	addr     string
	accepted atomic.Int32
}

// startTLSBackend serves TLS with its own certificate for hosts and
// answers each line with name and the line.
func startTLSBackend(t *testing.T, ca *tlstest.CA, name string, hosts ...string) *backend {
	return startBackend(t, tlsServer(t, ca, hosts...), name)
}

// tlsServer serves TLS over a connection with a certificate of ca for
// hosts.
func tlsServer(t *testing.T, ca *tlstest.CA, hosts ...string) func(net.Conn) net.Conn {
	certPEM, keyPEM := ca.Issue(t, hosts...)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return func(c net.Conn) net.Conn {
		return tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
	}
}

func startBackend(t *testing.T, wrap func(net.Conn) net.Conn, name string) *backend {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	b := &backend{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.accepted.Add(1)
			go func() {
				defer c.Close()
				c = wrap(c)
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, name+" "+line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return b
}

func route(kind router.Kind, name string, backends []string, hosts ...string) router.Route {
	r := router.Route{ID: router.RouteID{Kind: kind, Namespace: "ns", Name: name}, Hostnames: hosts, Rules: []router.Rule{{}}}
	for _, b := range backends {
		r.Rules[0].Backends = append(r.Rules[0].Backends, router.BackendRef{Name: b, Weight: 1})
	}
	return r
}

func compile(t *testing.T, routes ...router.Route) *router.L4Table {
	table, errs := router.CompileL4(routes, "")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return table
}

// serveL4 runs a Listener of mode on loopback with endpoint sets of
// backends by name.
func serveL4(t *testing.T, mode Mode, table *router.L4Table, backends map[string]*backend) (*Listener, string, *Metrics) {
	return serveL4With(t, mode, table, backends, nil)
}

// serveL4With is serveL4 with options that change sets.
func serveL4With(t *testing.T, mode Mode, table *router.L4Table, backends map[string]*backend, change func(*Options)) (*Listener, string, *Metrics) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveL4On(t, ln, mode, table, backends, change)
}

// serveL4On is serveL4With on ln.
func serveL4On(t *testing.T, ln net.Listener, mode Mode, table *router.L4Table, backends map[string]*backend, change func(*Options)) (*Listener, string, *Metrics) {
	eps := map[string][]upstream.Endpoint{}
	for name, b := range backends {
		eps[name] = []upstream.Endpoint{{Address: b.addr}}
	}
	sets := upstream.NewRegistry(upstream.RoundRobin, upstream.Health{FailureThreshold: 5, BaseEjection: time.Second, MaxEjection: time.Second}).Sets(eps)
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		Mode: mode, Address: "test", HelloTimeout: time.Second, DialTimeout: time.Second, ConnectAttempts: 2,
		Sets: func() *upstream.Sets { return sets }, Metrics: m,
	}
	if change != nil {
		change(&o)
	}
	if o.Relay != nil {
		ln = relay.Listen(ln)
	}
	l := New(o, table, nil)
	done := make(chan error, 1)
	go func() { done <- l.Serve(ln) }()
	t.Cleanup(func() {
		ln.Close()
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve: %v", err)
		}
		l.Drain(t.Context())
	})
	return l, ln.Addr().String(), m
}

// paths runs test with TCP and TLS passthrough connections carried by
// goroutines and by relay loops (relay.go), which must behave alike: path
// sets the Options of the one tested.
func paths(t *testing.T, test func(t *testing.T, path func(*Options))) {
	t.Run("goroutines", func(t *testing.T) { test(t, func(*Options) {}) })
	t.Run("loop", func(t *testing.T) {
		loop, err := relay.New()
		if err != nil {
			t.Skip(err)
		}
		// After the listeners' Drain, which cleanups registered later
		// run first.
		t.Cleanup(loop.Close)
		test(t, func(o *Options) {
			o.Relay = loop
			o.RelaySocket = func(c net.Conn) *relay.Socket {
				s, _ := c.(*relay.Socket)
				return s
			}
		})
	})
}

func roundTrip(t *testing.T, c net.Conn, line string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read answer to %q: %v", line, err)
	}
	return got
}

// TestPassthrough: the client verifies the backend's own certificate, so
// hostgate did not terminate TLS; the server name chooses the route,
// exact before wildcard; each connection is counted by route and logged
// with its server name and bytes, its ClientHello's included. A
// BackendTLSPolicy of a passthrough backend is not applied: the client's
// TLS is the backend's.
func TestPassthrough(t *testing.T) { paths(t, testPassthrough) }

func testPassthrough(t *testing.T, path func(*Options)) {
	ca := tlstest.NewCA(t)
	db := startTLSBackend(t, ca, "db", "db.example.com")
	web := startTLSBackend(t, ca, "web", "*.example.com")
	dbRoute := route(router.KindTLSRoute, "db", []string{"db"}, "db.example.com")
	dbRoute.Rules[0].Backends[0].TLS = &router.BackendTLS{ServerName: "db.example.com"}
	table := compile(t, dbRoute, route(router.KindTLSRoute, "web", []string{"web"}, "*.example.com"))
	var log records
	_, addr, m := serveL4With(t, Passthrough, table, map[string]*backend{"db": db, "web": web}, func(o *Options) {
		path(o)
		o.AccessLog = log.log
		o.BackendTLS = func(*router.BackendTLS) (*tls.Config, error) {
			t.Error("TLS to a passthrough backend")
			return nil, errors.New("not for passthrough")
		}
	})
	for i, sni := range []string{"db.example.com", "shop.example.com"} {
		c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: sni, RootCAs: ca.Pool})
		if err != nil {
			t.Fatalf("%s: handshake through hostgate: %v", sni, err)
		}
		want := "web hello\n"
		if sni == "db.example.com" {
			want = "db hello\n"
		}
		if got := roundTrip(t, c, "hello"); got != want {
			t.Errorf("%s: answer %q, want %q", sni, got, want)
		}
		c.Close()
		rec := log.wait(t, i+1)[i]
		if rec.ServerName != sni || rec.Refused != "" || rec.BytesIn < 100 || rec.BytesOut < 100 {
			t.Errorf("%s: access log %+v, want the server name and the handshake's bytes both ways", sni, rec)
		}
	}
	for _, route := range []string{"TLSRoute ns/db", "TLSRoute ns/web"} {
		waitValue(t, m.connsTotal.WithLabelValues("test", route), 1, "hostgate_l4_connections_total of "+route)
	}
}

// TestPassthroughRefused: a server name without route, a malformed and a
// slow ClientHello are closed (with an alert only for the malformed one),
// counted, and reach no backend.
func TestPassthroughRefused(t *testing.T) { paths(t, testPassthroughRefused) }

func testPassthroughRefused(t *testing.T, path func(*Options)) {
	ca := tlstest.NewCA(t)
	db := startTLSBackend(t, ca, "db", "db.example.com")
	_, addr, m := serveL4With(t, Passthrough, compile(t, route(router.KindTLSRoute, "db", []string{"db"}, "db.example.com")), map[string]*backend{"db": db}, path)

	_, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "other.example.com", RootCAs: ca.Pool})
	if !errors.Is(err, io.EOF) {
		t.Errorf("unknown server name: handshake error %v, want EOF (closed without an alert)", err)
	}

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte{recordHandshake, 3, 1, 0, 4, 1, 0, 0, 0}) // a ClientHello of no bytes
	if got := readAll(t, c); len(got) != 7 || got[0] != 21 || got[6] != alertDecodeError {
		t.Errorf("malformed hello: got %v, want a decode_error alert", got)
	}

	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = slow.Write([]byte{recordHandshake, 3, 1}) // and nothing more
	if got := readAll(t, slow); len(got) != 0 {
		t.Errorf("slow hello: got %v, want the connection closed", got)
	}

	tooLarge, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	// A handshake message of MaxHelloSize+1 bytes, announced whole.
	_, _ = tooLarge.Write([]byte{recordHandshake, 3, 1, 0, 4, handshakeHello, 0, 0x40, 0x01})
	if got := readAll(t, tooLarge); len(got) != 7 || got[0] != 21 || got[6] != alertDecodeError {
		t.Errorf("oversized hello: got %v, want a decode_error alert", got)
	}

	for reason, want := range map[string]float64{refusedNoRoute: 1, refusedMalformed: 1, refusedTimeout: 1, refusedTooLarge: 1} {
		waitValue(t, m.refusedTotal.WithLabelValues("test", reason), want, "hostgate_l4_refused_total{reason="+reason+"}")
	}
	if n := db.accepted.Load(); n != 0 {
		t.Errorf("the backend got %d connections, want none", n)
	}
}

// TestPassthroughSplitHello: a ClientHello in records sent apart, as a
// slow client or small packets bring it, is read across reads: whole
// within HelloTimeout it reaches its backend; not whole by then the
// connection is closed, counted as a timeout, and no backend is
// connected to.
func TestPassthroughSplitHello(t *testing.T) { paths(t, testPassthroughSplitHello) }

func testPassthroughSplitHello(t *testing.T, path func(*Options)) {
	const timeout = 400 * time.Millisecond
	ca := tlstest.NewCA(t)
	db := startTLSBackend(t, ca, "db", "db.example.com")
	_, addr, m := serveL4With(t, Passthrough, compile(t, route(router.KindTLSRoute, "db", []string{"db"}, "db.example.com")), map[string]*backend{"db": db}, func(o *Options) {
		path(o)
		o.HelloTimeout = timeout
	})
	hello := clientHello(t, "db.example.com")
	records := splitRecords(hello, len(hello)/4)
	// sendSplit writes the records in four pieces, pause apart.
	sendSplit := func(pause time.Duration) net.Conn {
		c := dialTCP(t, addr)
		step := (len(records) + 3) / 4
		for i := 0; i < len(records); i += step {
			if _, err := c.Write(records[i:min(i+step, len(records))]); err != nil {
				break
			}
			time.Sleep(pause)
		}
		return c
	}

	c := sendSplit(10 * time.Millisecond)
	// The backend's ServerHello: it read a whole ClientHello.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAtLeast(c, make([]byte, 5), 5); err != nil {
		t.Fatalf("hello in pieces within the timeout: %v", err)
	}
	if n := db.accepted.Load(); n != 1 {
		t.Fatalf("the backend got %d connections, want 1", n)
	}

	start := time.Now()
	slow := sendSplit(timeout / 2)
	if got := readAll(t, slow); len(got) != 0 {
		t.Errorf("hello in pieces past the timeout: got %v, want the connection closed", got)
	}
	if waited := time.Since(start); waited < timeout {
		t.Errorf("closed after %v, before the timeout of %v", waited, timeout)
	}
	waitValue(t, m.refusedTotal.WithLabelValues("test", refusedTimeout), 1, "hostgate_l4_refused_total{reason=hello_timeout}")
	if n := db.accepted.Load(); n != 1 {
		t.Errorf("the backend got %d connections, want only the first", n)
	}
}

// waitValue waits for a counter or gauge to read want: what the proxy
// counts when a connection ends, it counts after the client sees the end.
func waitValue(t *testing.T, c prometheus.Metric, want float64, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); value(t, c) != want; {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v", what, value(t, c), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// value reads a counter's or gauge's value.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

func readAll(t *testing.T, c net.Conn) []byte {
	t.Helper()
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read until closed: %v", err)
	}
	return got
}

// TestTCPRouteChange: a TCP connection is echoed by the route's backend,
// and keeps its backend when the route changes, while a new connection
// gets the new one.
func TestTCPRouteChange(t *testing.T) { paths(t, testTCPRouteChange) }

func testTCPRouteChange(t *testing.T, path func(*Options)) {
	plain := func(c net.Conn) net.Conn { return c }
	blue := startBackend(t, plain, "blue")
	green := startBackend(t, plain, "green")
	l, addr, m := serveL4With(t, TCP, compile(t, route(router.KindTCPRoute, "app", []string{"blue"})), map[string]*backend{"blue": blue, "green": green}, path)
	old, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if got := roundTrip(t, old, "one"); got != "blue one\n" {
		t.Fatalf("answer %q, want from blue", got)
	}
	l.Publish(compile(t, route(router.KindTCPRoute, "app", []string{"green"})), nil)
	if got := roundTrip(t, old, "two"); got != "blue two\n" {
		t.Errorf("open connection after the change: answer %q, want from blue", got)
	}
	fresh, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if got := roundTrip(t, fresh, "three"); got != "green three\n" {
		t.Errorf("new connection: answer %q, want from green", got)
	}
	if got := value(t, m.connsOpen.WithLabelValues("test", "TCPRoute ns/app")); got != 2 {
		t.Errorf("hostgate_l4_connections_open = %v, want 2", got)
	}
}

// TestRouteSeries counts connections by route, and drops the series of a
// route taken off the listener at the first change after its last
// connection ended: not under an open connection, whose gauge would come
// back at -1, nor before what its last connection carried can be scraped.
func TestRouteSeries(t *testing.T) { paths(t, testRouteSeries) }

func testRouteSeries(t *testing.T, path func(*Options)) {
	plain := func(c net.Conn) net.Conn { return c }
	blue := startBackend(t, plain, "blue")
	green := startBackend(t, plain, "green")
	app := compile(t, route(router.KindTCPRoute, "app", []string{"blue"}))
	next := compile(t, route(router.KindTCPRoute, "next", []string{"green"}))
	l, addr, m := serveL4With(t, TCP, app, map[string]*backend{"blue": blue, "green": green}, path)
	first := dialTCP(t, addr)
	roundTrip(t, first, "one")
	second := dialTCP(t, addr)
	roundTrip(t, second, "two")
	second.Close()
	l.Publish(next, nil)
	third := dialTCP(t, addr)
	roundTrip(t, third, "three")

	const appSeries, nextSeries = "TCPRoute ns/app", "TCPRoute ns/next"
	if got := value(t, m.connsTotal.WithLabelValues("test", nextSeries)); got != 1 {
		t.Errorf("hostgate_l4_connections_total{route=%q} = %v, want 1", nextSeries, got)
	}
	if got := value(t, m.connsTotal.WithLabelValues("test", appSeries)); got != 2 {
		t.Errorf("hostgate_l4_connections_total{route=%q} = %v, want 2", appSeries, got)
	}
	// Its answers came, so every connection was counted; the second's
	// end is counted once the proxy saw it.
	waitValue(t, m.connsOpen.WithLabelValues("test", appSeries), 1, "hostgate_l4_connections_open{route=\""+appSeries+"\"} while one connection is open")
	l.Publish(next, nil)
	if !hasSeries(t, m.connsOpen, appSeries) {
		t.Fatalf("the series of route %q, removed, were dropped under its open connection", appSeries)
	}
	first.Close()
	// Its bytes are counted once it ended.
	waitValue(t, m.bytesTotal.WithLabelValues("test", appSeries, "in"), 8, "hostgate_l4_bytes_total{route=\""+appSeries+"\",direction=in}")
	l.Publish(next, nil)
	if hasSeries(t, m.connsTotal, appSeries) || hasSeries(t, m.bytesTotal, appSeries) {
		t.Errorf("the series of route %q, removed, outlived its connections and the next change", appSeries)
	}
	if !hasSeries(t, m.connsTotal, nextSeries) || !hasSeries(t, m.connsOpen, nextSeries) {
		t.Errorf("the series of route %q, still served, were dropped", nextSeries)
	}
}

// hasSeries reports whether c has a series labelled route.
func hasSeries(t *testing.T, c prometheus.Collector, route string) bool {
	t.Helper()
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	found := false
	for metric := range ch {
		var m dto.Metric
		if err := metric.Write(&m); err != nil {
			t.Fatal(err)
		}
		for _, l := range m.GetLabel() {
			found = found || l.GetName() == "route" && l.GetValue() == route
		}
	}
	return found
}

// TestTCPHalfClose: the client's half-close reaches the backend, whose
// answer after it still reaches the client.
func TestTCPHalfClose(t *testing.T) { paths(t, testTCPHalfClose) }

func testTCPHalfClose(t *testing.T, path func(*Options)) {
	// Answers with what it read once the client finished sending.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		got, _ := io.ReadAll(c)
		_, _ = c.Write(append([]byte("got "), got...))
	}()
	_, addr, _ := serveL4With(t, TCP, compile(t, route(router.KindTCPRoute, "app", []string{"b"})), map[string]*backend{"b": {addr: ln.Addr().String()}}, path)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "request")
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got := string(readAll(t, c)); got != "got request" {
		t.Errorf("answer %q, want %q", got, "got request")
	}
}

// TestInvalidBackendRefused: a route whose backend did not resolve refuses
// the connection rather than give it to another.
func TestInvalidBackendRefused(t *testing.T) { paths(t, testInvalidBackendRefused) }

func testInvalidBackendRefused(t *testing.T, path func(*Options)) {
	r := route(router.KindTCPRoute, "app", nil)
	r.Rules[0].Backends = []router.BackendRef{{Invalid: true, Weight: 1}}
	_, addr, m := serveL4With(t, TCP, compile(t, r), nil, path)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, c); len(got) != 0 {
		t.Errorf("got %q, want the connection closed", got)
	}
	if got := value(t, m.refusedTotal.WithLabelValues("test", refusedNoBackend)); got != 1 {
		t.Errorf("refused no_backend = %v, want 1", got)
	}
}

// TestDrainDuringHello: a listener that drains closes, once its time is
// up, a connection whose ClientHello is not whole yet; no backend gets
// it, and the access log has its line with the bytes it sent.
func TestDrainDuringHello(t *testing.T) { paths(t, testDrainDuringHello) }

func testDrainDuringHello(t *testing.T, path func(*Options)) {
	ca := tlstest.NewCA(t)
	db := startTLSBackend(t, ca, "db", "db.example.com")
	var log records
	l, addr, _ := serveL4With(t, Passthrough, compile(t, route(router.KindTLSRoute, "db", []string{"db"}, "db.example.com")), map[string]*backend{"db": db}, func(o *Options) {
		path(o)
		o.HelloTimeout = time.Minute
		o.AccessLog = log.log
	})
	c := dialTCP(t, addr)
	if _, err := c.Write(clientHello(t, "db.example.com")[:10]); err != nil {
		t.Fatal(err)
	}
	// Taken, and its bytes read, before the drain takes no more.
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if l.Drain(ctx) {
		t.Error("Drain reported the connection ended by itself")
	}
	if !closedWithin(t, c, time.Second) {
		t.Error("the connection stayed open after the drain")
	}
	if rec := log.wait(t, 1)[0]; rec.BytesIn != 10 || rec.Route != (router.RouteID{}) || rec.Refused != "client_closed" {
		t.Errorf("access log %+v, want 10 bytes in, no route, refused client_closed", rec)
	}
	if n := db.accepted.Load(); n != 0 {
		t.Errorf("the backend got %d connections, want none", n)
	}
}

// TestMixedTermination: on one socket a listener in mode Terminate and one
// in mode Passthrough, chosen by server name (TLSRouteModeMixed). For
// tls.example.com the client verifies hostgate's certificate and the
// backend, which speaks no TLS, gets the plaintext; for abc.example.com
// the client verifies the backend's own certificate, of another CA. A
// client that fails hostgate's handshake reaches no backend.
func TestMixedTermination(t *testing.T) { paths(t, testMixedTermination) }

func testMixedTermination(t *testing.T, path func(*Options)) {
	gatewayCA, backendCA := tlstest.NewCA(t), tlstest.NewCA(t)
	plain := startBackend(t, func(c net.Conn) net.Conn { return c }, "plain")
	secure := startTLSBackend(t, backendCA, "secure", "abc.example.com")
	certPEM, keyPEM := gatewayCA.Issue(t, "tls.example.com")
	certs, errs := tlsstore.Build([]tlsstore.Certificate{{Name: "gw", Hosts: []string{"tls.example.com"}, CertPEM: certPEM, KeyPEM: keyPEM}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	terminated := route(router.KindTLSRoute, "terminated", []string{"plain"})
	terminated.Listener = "tls.example.com"
	passed := route(router.KindTLSRoute, "passed", []string{"secure"})
	passed.Listener = "abc.example.com"
	table, errs := router.CompileL4Socket([]*router.Route{&terminated, &passed}, router.L4Listeners{
		Hostnames: []string{"abc.example.com", "tls.example.com"},
		Terminate: []string{"tls.example.com"},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	l, addr, m := serveL4With(t, Passthrough, nil, map[string]*backend{"plain": plain, "secure": secure}, path)
	l.Publish(table, certs)

	for _, c := range []struct{ sni, want string }{
		{"tls.example.com", "plain hello\n"},
		{"abc.example.com", "secure hello\n"},
	} {
		pool := gatewayCA.Pool
		if c.sni == "abc.example.com" {
			pool = backendCA.Pool
		}
		conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: c.sni, RootCAs: pool})
		if err != nil {
			t.Fatalf("%s: handshake through hostgate: %v", c.sni, err)
		}
		if got := roundTrip(t, conn, "hello"); got != c.want {
			t.Errorf("%s: answer %q, want %q", c.sni, got, c.want)
		}
		conn.Close()
	}

	// A client that leaves after its ClientHello fails the handshake.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write(clientHello(t, "tls.example.com"))
	conn.Close()
	waitValue(t, m.refusedTotal.WithLabelValues("test", refusedHandshake), 1, "failed handshakes counted")
	if n := plain.accepted.Load(); n != 1 {
		t.Errorf("the plain backend got %d connections, want the one terminated", n)
	}
}

// exhaustedOnce fails its first Accept as a process out of descriptors
// does.
type exhaustedOnce struct {
	net.Listener
	failed bool
}

func (l *exhaustedOnce) Accept() (net.Conn, error) {
	if !l.failed {
		l.failed = true
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestServeOutlivesDescriptorExhaustion: a TCP listener whose accept
// failed for want of descriptors serves the connections after it, rather
// than stop for good.
func TestServeOutlivesDescriptorExhaustion(t *testing.T) {
	b := startBackend(t, func(c net.Conn) net.Conn { return c }, "app")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, addr, _ := serveL4On(t, &exhaustedOnce{Listener: ln}, TCP, compile(t, route(router.KindTCPRoute, "app", []string{"b"})), map[string]*backend{"b": b}, nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := roundTrip(t, c, "hello"); got != "app hello\n" {
		t.Errorf("answer %q through a listener whose accept failed once, want %q", got, "app hello\n")
	}
}
