package l4

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/tcptest"
	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
)

// records keeps the access log records of a listener.
type records struct {
	mu   sync.Mutex
	recs []Record
}

func (r *records) log(rec *Record) {
	r.mu.Lock()
	r.recs = append(r.recs, *rec)
	r.mu.Unlock()
}

// wait returns the first n records once they came.
func (r *records) wait(t *testing.T, n int) []Record {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		r.mu.Lock()
		got := append([]Record(nil), r.recs...)
		r.mu.Unlock()
		if len(got) >= n {
			return got[:n]
		}
	}
	t.Fatalf("fewer than %d access log records", n)
	return nil
}

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// withEndpoints has a listener's backend "app" be the endpoints addrs.
func withEndpoints(addrs ...string) func(*Options) {
	var eps []upstream.Endpoint
	for _, a := range addrs {
		eps = append(eps, upstream.Endpoint{Address: a})
	}
	sets := upstream.NewRegistry(upstream.RoundRobin, upstream.Health{FailureThreshold: 5, BaseEjection: time.Second, MaxEjection: time.Second}).Sets(map[string][]upstream.Endpoint{"app": eps})
	return func(o *Options) { o.Sets = func() *upstream.Sets { return sets } }
}

// TestTCPBackendRefuses: an endpoint that refuses the connection is
// passed over for the next of its set; with none that takes it the
// client's connection is closed, counted and logged as connect_failed.
func TestTCPBackendRefuses(t *testing.T) { paths(t, testTCPBackendRefuses) }

func testTCPBackendRefuses(t *testing.T, path func(*Options)) {
	up := startBackend(t, func(c net.Conn) net.Conn { return c }, "up")
	down := closedAddr(t)
	app := compile(t, route(router.KindTCPRoute, "app", []string{"app"}))
	_, addr, _ := serveL4With(t, TCP, app, nil, func(o *Options) {
		path(o)
		withEndpoints(down, up.addr)(o)
	})
	// Round robin starts one of them at the endpoint that refuses.
	for _, line := range []string{"one", "two"} {
		if got := roundTrip(t, dialTCP(t, addr), line); got != "up "+line+"\n" {
			t.Errorf("answer %q, want from the endpoint that takes connections", got)
		}
	}

	var log records
	_, addr, m := serveL4With(t, TCP, app, nil, func(o *Options) {
		path(o)
		withEndpoints(down)(o)
		o.AccessLog = log.log
	})
	if got := readAll(t, dialTCP(t, addr)); len(got) != 0 {
		t.Errorf("got %q, want the connection closed", got)
	}
	if got := value(t, m.refusedTotal.WithLabelValues("test", refusedDial)); got != 1 {
		t.Errorf("refused connect_failed = %v, want 1", got)
	}
	if rec := log.wait(t, 1)[0]; rec.Refused != refusedDial || rec.Endpoint != down || rec.Route.Name != "app" {
		t.Errorf("access log: refused %q, endpoint %q, route %v; want connect_failed to %s by route app", rec.Refused, rec.Endpoint, rec.Route, down)
	}
}

// TestTCPLongTransfer: megabytes each way, to a client that reads only
// once it sent all of its own, so that the proxy holds bytes back while a
// peer takes no more; all arrive in order, and the access log and the
// byte counters have them.
func TestTCPLongTransfer(t *testing.T) { paths(t, testTCPLongTransfer) }

func testTCPLongTransfer(t *testing.T, path func(*Options)) {
	const size = 8 << 20
	down, up := make([]byte, size), make([]byte, size)
	rand.Read(down)
	rand.Read(up)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		// Sends its megabytes while the client is still sending its
		// own, and reads them to the client's half-close.
		go func() { _, _ = c.Write(down); _ = c.(*net.TCPConn).CloseWrite() }()
		got, _ := io.ReadAll(c)
		received <- got
	}()
	var log records
	_, addr, m := serveL4With(t, TCP, compile(t, route(router.KindTCPRoute, "app", []string{"app"})), nil, func(o *Options) {
		path(o)
		withEndpoints(ln.Addr().String())(o)
		o.AccessLog = log.log
	})
	c := dialTCP(t, addr)
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write(up); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, down) {
		t.Errorf("the client got %d bytes, not the %d the backend sent", len(got), len(down))
	}
	if got := <-received; !bytes.Equal(got, up) {
		t.Errorf("the backend got %d bytes, not the %d the client sent", len(got), len(up))
	}
	rec := log.wait(t, 1)[0]
	if rec.BytesIn != size || rec.BytesOut != size || rec.Duration <= 0 || rec.Refused != "" {
		t.Errorf("access log: in %d, out %d, duration %v, refused %q; want %d each way", rec.BytesIn, rec.BytesOut, rec.Duration, rec.Refused, size)
	}
	if got := value(t, m.bytesTotal.WithLabelValues("test", "TCPRoute ns/app", "out")); got != size {
		t.Errorf("hostgate_l4_bytes_total{direction=out} = %v, want %d", got, size)
	}
}

// TestTCPListenerDrain: a listener that drains lets its open connection
// run until the drain's time is up, then closes it, and counts and logs
// its end.
func TestTCPListenerDrain(t *testing.T) { paths(t, testTCPListenerDrain) }

func testTCPListenerDrain(t *testing.T, path func(*Options)) {
	b := startBackend(t, func(c net.Conn) net.Conn { return c }, "b")
	var log records
	l, addr, m := serveL4With(t, TCP, compile(t, route(router.KindTCPRoute, "app", []string{"app"})), nil, func(o *Options) {
		path(o)
		withEndpoints(b.addr)(o)
		o.AccessLog = log.log
	})
	c := dialTCP(t, addr)
	roundTrip(t, c, "one")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if l.Drain(ctx) {
		t.Error("Drain reported the open connection ended by itself")
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("Drain closed the connection after %v, before its time", waited)
	}
	if !closedWithin(t, c, time.Second) {
		t.Error("the connection stayed open after the drain")
	}
	if rec := log.wait(t, 1)[0]; rec.BytesIn != 4 || rec.BytesOut != 6 {
		t.Errorf("access log: in %d, out %d; want 4 and 6", rec.BytesIn, rec.BytesOut)
	}
	if got := value(t, m.connsOpen.WithLabelValues("test", "TCPRoute ns/app")); got != 0 {
		t.Errorf("hostgate_l4_connections_open = %v after the drain, want 0", got)
	}
}

// TestTCPConnectTimeout: a connect that takes longer than DialTimeout
// fails, and the client's connection is closed and counted as
// connect_failed, not held until the system gives up.
func TestTCPConnectTimeout(t *testing.T) { paths(t, testTCPConnectTimeout) }

func testTCPConnectTimeout(t *testing.T, path func(*Options)) {
	const timeout = 200 * time.Millisecond
	full := tcptest.Unreachable(t).String()
	_, addr, m := serveL4With(t, TCP, compile(t, route(router.KindTCPRoute, "app", []string{"app"})), nil, func(o *Options) {
		path(o)
		withEndpoints(full)(o)
		o.DialTimeout, o.ConnectAttempts = timeout, 1
	})
	start := time.Now()
	if !closedWithin(t, dialTCP(t, addr), 5*time.Second) {
		t.Fatal("the connection stayed open past the connect timeout")
	}
	if waited := time.Since(start); waited < timeout {
		t.Errorf("closed after %v, before the connect timeout of %v", waited, timeout)
	}
	if got := value(t, m.refusedTotal.WithLabelValues("test", refusedDial)); got != 1 {
		t.Errorf("refused connect_failed = %v, want 1", got)
	}
}
