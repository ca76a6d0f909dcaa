package main

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostgate/hostgate/proxy"
	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/watch"
)

// TestEndpointChurnDoesNotRecompile: a snapshot that differs only in its
// endpoints swaps the endpoint sets and keeps the compiled generation, so
// pod churn never recompiles routes; a route change makes a new one.
func TestEndpointChurnDoesNotRecompile(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := proxy.New(proxy.Options{Logger: quiet, ShutdownDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var current atomic.Pointer[generation]
	ctrl := newController(srv, &current, quiet, prometheus.NewRegistry())
	listener := func(path string) []watch.Listener {
		return []watch.Listener{{Name: "127.0.0.1:0", Address: "127.0.0.1", Port: 0, Protocol: watch.ProtocolHTTP, Routes: []router.Route{{
			ID:    router.RouteID{Kind: router.KindHTTPRoute, Namespace: "default", Name: "web"},
			Rules: []router.Rule{{Matches: []router.Match{{Path: router.PathMatch{Value: path}}}, Backends: []router.BackendRef{{Name: "default/web:80", Weight: 1}}}},
		}}}}
	}
	endpoints := func(addr string) map[string][]watch.Endpoint {
		return map[string][]watch.Endpoint{"default/web:80": {{Address: addr, Ready: true}}}
	}

	ctrl.publish(&watch.Snapshot{Listeners: listener("/"), Endpoints: endpoints("10.0.0.1:8080")}, nil)
	first := current.Load()
	ctrl.publish(&watch.Snapshot{Listeners: listener("/"), Endpoints: endpoints("10.0.0.2:8080")}, nil)
	if current.Load() != first {
		t.Error("an endpoint-only change compiled a new generation")
	}
	if got := srv.Endpoints()["default/web:80"]; len(got) != 1 || got[0].Address != "10.0.0.2:8080" {
		t.Errorf("endpoints after the change = %+v, want 10.0.0.2:8080", got)
	}
	ctrl.publish(&watch.Snapshot{Listeners: listener("/api"), Endpoints: endpoints("10.0.0.2:8080")}, nil)
	if gen := current.Load(); gen == first || gen.Number != 2 {
		t.Errorf("a route change did not make generation 2 (got %d)", gen.Number)
	}
	srv.Shutdown(t.Context())
}
