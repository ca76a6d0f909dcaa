package h1

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/pipeline"
	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
)

// TestDrainMeetsArrivingRequest plays the race between draining and a
// request that arrives on a kept-alive connection as draining starts:
// CloseIdle found the connection idle and cuts its wait short just after
// the request's first bytes ended that wait. The request, body and all, is
// still served, and the connection closes after it.
func TestDrainMeetsArrivingRequest(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "got %s", body)
	}))
	t.Cleanup(backend.Close)
	l, addr := serveEngine(t, backend.Listener.Addr().String())

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	fmt.Fprint(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\none")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(resp.Body); string(body) != "got one" {
		t.Fatalf("first request: %d %q", resp.StatusCode, body)
	}
	var hc *conn
	waitFor(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for c := range l.conns {
			hc = c
		}
		return hc != nil && hc.tc.Idle()
	})

	// CloseIdle begins, and finds hc idle...
	l.closing.Store(true)
	l.mu.Lock()
	// ...as the next request's head comes, and the wait for it ends.
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n")
	waitFor(t, func() bool { return !hc.tc.Idle() })
	_ = hc.gc.SetReadDeadline(time.Now())
	l.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	io.WriteString(c, "two")

	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the request that came as draining began: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "got two" {
		t.Errorf("the request that came as draining began: %d %q", resp.StatusCode, body)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("connection after the last request: %v, want it closed", err)
	}
}

// serveEngine serves a socket on loopback with the engine alone, and its
// requests with a table of one rule, to backend.
func serveEngine(t *testing.T, backend string) (*Server, string) {
	t.Helper()
	pool := upstream.NewPool(time.Second, 16, time.Minute)
	t.Cleanup(pool.Close)
	shared, err := pipeline.New(pipeline.Config{Pool: pool, ConnectAttempts: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	registry := upstream.NewRegistry(upstream.RoundRobin, upstream.Health{FailureThreshold: 5, BaseEjection: time.Second, MaxEjection: time.Second})
	shared.SetEndpoints(registry.Sets(map[string][]upstream.Endpoint{"web": {{Address: backend}}}))
	tbl, errs := router.Compile([]router.Route{{
		ID:    router.RouteID{Kind: router.KindHTTPRoute, Namespace: "ns", Name: "web"},
		Rules: []router.Rule{{Backends: []router.BackendRef{{Name: "web", Weight: 1}}}},
	}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	path := shared.NewListener("test", "http", 0, nil, nil)
	path.Publish(tbl, nil)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := guard.NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	tracked := guard.Listener{Listener: guard.NewTracker(ln, guard.NewRegistry(0, 0, m), m)}
	s := New(Config{Path: path, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second, MaxHeaderBytes: 64 << 10, Metrics: m})
	go func() {
		for {
			c, err := tracked.Accept()
			if err != nil {
				return
			}
			go s.ServeConn(tracked.Guard(c))
		}
	}()
	t.Cleanup(func() { tracked.Close() })
	return s, ln.Addr().String()
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
	}
}
