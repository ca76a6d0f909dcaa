package main

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostgate/hostgate/internal/shardmap"
	"github.com/hostgate/hostgate/proxy"
	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/watch"
)

// BenchmarkPublish takes snapshots of n routes, each with its own host and
// endpoint set, to a proxy listening on loopback: route-change is a
// snapshot in which one route changed its path, saying so as a spliced
// translation does, endpoints-only one in which one endpoint set changed,
// saying so as an EndpointSlice change does;
// route-change-after-status makes each route change after a snapshot of
// the same routes in another list, as a status written on a route gives.
func BenchmarkPublish(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		for _, kind := range []string{"route-change", "route-change-after-status", "endpoints-only"} {
			b.Run(fmt.Sprintf("routes=%d/%s", n, kind), func(b *testing.B) {
				quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
				srv, err := proxy.New(proxy.Options{Logger: quiet, ShutdownDelay: time.Millisecond, Registerer: prometheus.NewRegistry()})
				if err != nil {
					b.Fatal(err)
				}
				defer srv.Shutdown(b.Context())
				var current atomic.Pointer[generation]
				ctrl := newController(srv, &current, quiet, prometheus.NewRegistry())
				snap := benchSnapshot(n)
				ctrl.publish(snap, nil)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					i++
					next := *snap
					next.Listeners = []watch.Listener{snap.Listeners[0]}
					l := &next.Listeners[0]
					if kind == "route-change-after-status" {
						status := next
						status.Listeners = []watch.Listener{snap.Listeners[0]}
						s := &status.Listeners[0]
						s.Routes = slices.Clone(s.Routes)
						s.Changes = &watch.RouteChanges{Base: snap.Listeners[0].Routes, IDs: []router.RouteID{s.Routes[(i+1)%n].ID}}
						ctrl.publish(&status, nil)
						snap = &status
						next.Listeners = []watch.Listener{snap.Listeners[0]}
						l = &next.Listeners[0]
					}
					if kind != "endpoints-only" {
						l.Routes = slices.Clone(l.Routes)
						changed := *l.Routes[i%n]
						changed.Rules = []router.Rule{benchRule(fmt.Sprintf("/changed-%d", i), changed.Rules[0].Backends[0].Name)}
						l.Routes[i%n] = &changed
						l.Changes = &watch.RouteChanges{Base: snap.Listeners[0].Routes, IDs: []router.RouteID{l.Routes[i%n].ID}}
						snap = &next
					} else {
						sets := shardmap.Change(snap.Endpoints)
						name := fmt.Sprintf("default/svc-%d:80", i%n)
						sets.Put(name, []watch.Endpoint{{Address: fmt.Sprintf("10.1.0.%d:8080", i%250), Ready: true, Weight: 1}})
						next.Endpoints = sets.Done()
						next.EndpointChanges = &watch.EndpointChanges{Base: snap.Endpoints, Names: []string{name}}
						snap = &next
					}
					ctrl.publish(&next, nil)
				}
			})
		}
	}
}

func benchSnapshot(n int) *watch.Snapshot {
	snap := &watch.Snapshot{}
	endpoints := map[string][]watch.Endpoint{}
	l := watch.Listener{Name: "127.0.0.1:0", Address: "127.0.0.1", Port: 0, Protocol: watch.ProtocolHTTP, ListenerHostnames: []string{""}}
	for i := range n {
		backend := fmt.Sprintf("default/svc-%d:80", i)
		l.Routes = append(l.Routes, &router.Route{
			ID:        router.RouteID{Kind: router.KindHTTPRoute, Namespace: "default", Name: fmt.Sprintf("r%d", i)},
			Hostnames: []string{fmt.Sprintf("r%d.example.com", i)},
			Rules:     []router.Rule{benchRule("/api", backend), benchRule("/", backend)},
		})
		endpoints[backend] = []watch.Endpoint{{Address: fmt.Sprintf("10.0.%d.%d:8080", i/250, i%250), Ready: true, Weight: 1}}
	}
	snap.Endpoints = watch.NewEndpointSets(endpoints)
	snap.Listeners = []watch.Listener{l}
	return snap
}

func benchRule(prefix, backend string) router.Rule {
	return router.Rule{
		Matches:  []router.Match{{Path: router.PathMatch{Type: router.PathPrefix, Value: prefix}}},
		Backends: []router.BackendRef{{Name: backend, Weight: 1}},
	}
}
