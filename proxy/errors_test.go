package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

// TestErrorStatuses checks every status the proxy answers itself, as plain
// HTTP and as gRPC statuses for gRPC calls.
func TestErrorStatuses(t *testing.T) {
	s := startServer(t, testOptions())
	slow := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	}))
	reset := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 {
			panic(http.ErrAbortHandler) // resets the stream
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}
	}))
	s.UpdateEndpoints(map[string][]Endpoint{
		"dead":  {{Address: deadAddr(t)}},
		"slow":  {{Address: slow}},
		"reset": {{Address: reset}},
		"empty": {},
	})
	r := func(name string, rule router.Rule) router.Route {
		rule.Matches = prefix("/" + name)
		return route(name, nil, rule)
	}
	routes := compile(t,
		r("unknown", router.Rule{Backends: backends("not-published")}),
		r("empty", router.Rule{Backends: backends("empty")}),
		r("dead", router.Rule{Backends: backends("dead")}),
		r("reset", router.Rule{Backends: backends("reset")}),
		r("slow", router.Rule{Backends: backends("slow"), Timeouts: router.Timeouts{Request: 200 * time.Millisecond}}),
		r("slowbackend", router.Rule{Backends: backends("slow"), Timeouts: router.Timeouts{BackendRequest: 200 * time.Millisecond}}),
		r("grpctimeout", router.Rule{Backends: backends("slow")}),
		r("invalid", router.Rule{Backends: []router.BackendRef{{Name: "x", Weight: 1, Invalid: true}}}),
		r("noweight", router.Rule{Backends: []router.BackendRef{{Name: "slow", Weight: 0}}}),
		r("nobackends", router.Rule{}),
	)
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: routes})[0]

	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	grpcClient := &http.Client{Transport: h2c, Timeout: 10 * time.Second}

	tests := []struct {
		path       string
		status     int
		body       string
		grpcStatus string
	}{
		{"/nowhere", 404, "no route\n", "12"},
		{"/unknown", 503, "no ready endpoint\n", "14"},
		{"/empty", 503, "no ready endpoint\n", "14"},
		{"/dead", 502, "backend unreachable\n", "14"},
		{"/reset", 502, "backend unreachable\n", "14"},
		{"/slow", 504, "backend timeout\n", "4"},
		{"/slowbackend", 504, "backend timeout\n", "4"},
		{"/invalid", 500, "invalid backend\n", "13"},
		{"/noweight", 500, "invalid backend\n", "13"},
		{"/nobackends", 500, "invalid backend\n", "13"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, body := get(t, http.DefaultClient, "http://"+addr+tt.path)
			if resp.StatusCode != tt.status || body != tt.body || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
				t.Errorf("HTTP: %d %q (%s), want %d %q", resp.StatusCode, body, resp.Header.Get("Content-Type"), tt.status, tt.body)
			}
			resp, body = get(t, grpcClient, "http://"+addr+tt.path, "Content-Type", "application/grpc", "Te", "trailers")
			if resp.StatusCode != 200 || body != "" || resp.Header.Get("Grpc-Status") != tt.grpcStatus {
				t.Errorf("gRPC: %d grpc-status %q body %q, want 200 grpc-status %s and no body", resp.StatusCode, resp.Header.Get("Grpc-Status"), body, tt.grpcStatus)
			}
		})
	}
	t.Run("grpc-timeout", func(t *testing.T) {
		start := time.Now()
		resp, _ := get(t, grpcClient, "http://"+addr+"/grpctimeout", "Content-Type", "application/grpc", "Grpc-Timeout", "150m")
		if resp.Header.Get("Grpc-Status") != "4" || time.Since(start) > 2*time.Second {
			t.Errorf("grpc-status %q after %v, want 4 (DEADLINE_EXCEEDED) after 150ms", resp.Header.Get("Grpc-Status"), time.Since(start))
		}
	})
}

// TestConnectRetry puts a refusing endpoint next to a live one: no request
// fails, and passive health ejects the refusing one.
func TestConnectRetry(t *testing.T) {
	opts := testOptions()
	opts.FailureThreshold = 2
	s := startServer(t, opts)
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: deadAddr(t)}, {Address: startBackend(t, echo("live"))}}})
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, route("web", nil, router.Rule{Backends: backends("web")}))})[0]
	for i := range 10 {
		// A body that can still be replayed, as nothing has read it.
		resp, err := http.Post("http://"+addr+"/", "text/plain", strings.NewReader("payload"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	// Each failure to connect was retried, and after FailureThreshold
	// failures the endpoint was no longer picked.
	wantMetric(t, s, 2, "hostgate_upstream_connect_retries_total")
}

// TestResetBeforeAnswer puts an endpoint that resets each connection after
// reading the request next to a live one, as a backend does that stops
// while its removal is on the way (TestRollingUpdateUnderLoad met it): a
// request that is safe to repeat goes to the live endpoint, over HTTP/1.1
// and HTTP/2 alike; a POST is never sent twice, and fails.
func TestResetBeforeAnswer(t *testing.T) {
	opts := testOptions()
	opts.FailureThreshold = 1000 // keep the resetting endpoint in rotation
	s := startServer(t, opts)
	var resets, lives atomic.Int64
	resetting := rawBackend(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			resets.Add(1)
		}
		c.(*net.TCPConn).SetLinger(0)
	})
	live := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lives.Add(1)
		io.WriteString(w, "live")
	}))
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: resetting}, {Address: live}}})
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, route("web", nil, router.Rule{Backends: backends("web")}))})[0]

	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	for _, client := range []*http.Client{http.DefaultClient, {Transport: h2c}} {
		for i := range 6 {
			resp, body := get(t, client, "http://"+addr+"/")
			if resp.StatusCode != 200 || body != "live" {
				t.Errorf("GET %d over HTTP/%d: %d %q, want 200 from the live endpoint", i, resp.ProtoMajor, resp.StatusCode, body)
			}
		}
	}
	if resets.Load() == 0 {
		t.Fatal("no GET reached the resetting endpoint; the test proves nothing")
	}

	resets.Store(0)
	lives.Store(0)
	failed := 0
	const posts = 4
	for range posts {
		resp, err := http.Post("http://"+addr+"/", "text/plain", strings.NewReader("order"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusBadGateway {
			failed++
		}
	}
	if sent := resets.Load() + lives.Load(); sent != posts || failed != int(resets.Load()) || failed == 0 {
		t.Errorf("POSTs: %d sent to the resetting endpoint, %d to the live one, %d failed; want %d sent once each, those to the resetting endpoint failed",
			resets.Load(), lives.Load(), failed, posts)
	}
}
