package router

import (
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/heaptest"
)

// benchRoutes makes n routes shaped like a large multi-tenant cluster: ten
// routes per host, every tenth host a wildcard, nested API prefixes, exact
// health paths, a fifth of the matches on a header, and a few catch-all
// routes.
func benchRoutes(n int) []Route {
	routes := make([]Route, n)
	for i := range routes {
		hostIndex := i / 10
		host := fmt.Sprintf("host-%d.example.com", hostIndex)
		if hostIndex%10 == 9 {
			host = fmt.Sprintf("*.tenant-%d.example.com", hostIndex)
		}
		service := fmt.Sprintf("svc%d", i%10)
		m := []Match{
			{Path: PathMatch{Type: PathPrefix, Value: "/api/v1/" + service}},
			{Path: PathMatch{Type: PathPrefix, Value: "/api/v1/" + service + "/items"}, Method: "GET"},
			{Path: PathMatch{Type: PathExact, Value: "/" + service + "/healthz"}},
		}
		if i%5 == 0 {
			m[0].Headers = []ValueMatch{{Name: "X-Canary", Value: "true"}}
		}
		routes[i] = Route{
			ID:        RouteID{Kind: KindHTTPRoute, Namespace: fmt.Sprintf("ns-%d", hostIndex%100), Name: fmt.Sprintf("route-%d", i)},
			Created:   fuzzEpoch.Add(time.Duration(i) * time.Second),
			Hostnames: []string{host},
			Rules:     []Rule{{Matches: m, Backends: []BackendRef{{Name: fmt.Sprintf("ns/%s:80", service), Weight: 1}}}},
		}
	}
	for i := 0; i < n && i < 5; i++ {
		routes[i].Hostnames = nil
	}
	return routes
}

func benchRequests(n int) []Request {
	header := http.Header{"X-Canary": {"false"}, "Accept": {"*/*"}}
	reqs := make([]Request, 1024)
	for i := range reqs {
		hostIndex := (i * 7919) % (n / 10)
		host := fmt.Sprintf("host-%d.example.com", hostIndex)
		if hostIndex%10 == 9 {
			host = fmt.Sprintf("App.Tenant-%d.example.com:443", hostIndex)
		}
		paths := []string{"/api/v1/svc3/items/42", "/api/v1/svc7", "/svc1/healthz", "/api/v1/svc2/orders"}
		reqs[i] = Request{Host: host, Method: "GET", Path: paths[i%len(paths)], Header: header}
	}
	return reqs
}

func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			table, errs := Compile(benchRoutes(n))
			if len(errs) > 0 {
				b.Fatal(errs)
			}
			reqs := benchRequests(n)
			for _, r := range reqs {
				if table.Lookup(r) == nil {
					b.Fatalf("no route for %s%s", r.Host, r.Path)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				table.Lookup(reqs[i%len(reqs)])
			}
		})
	}
}

// BenchmarkLookupPathLength shows that lookup cost follows the number of
// path segments: each request's most specific prefix is extra_segments
// deeper than the usual ones, so the trie walk descends all of them.
func BenchmarkLookupPathLength(b *testing.B) {
	routes := benchRoutes(10_000)
	depths := []int{1, 4, 16}
	paths := map[int]string{}
	for _, depth := range depths {
		prefix := "/api/v1/svc3/items" + strings.Repeat("/x", depth)
		paths[depth] = prefix + "/leaf"
		routes = append(routes, Route{
			ID:        RouteID{Kind: KindHTTPRoute, Namespace: "deep", Name: fmt.Sprintf("depth-%d", depth)},
			Hostnames: []string{"host-7.example.com"},
			Rules:     []Rule{{Matches: []Match{{Path: PathMatch{Type: PathPrefix, Value: prefix}}}, Backends: []BackendRef{{Name: "ns/deep:80", Weight: 1}}}},
		})
	}
	table, errs := Compile(routes)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	for _, depth := range depths {
		req := Request{Host: "host-7.example.com", Method: "GET", Path: paths[depth]}
		if tg := table.Lookup(req); tg == nil || tg.Route.ID.Name != fmt.Sprintf("depth-%d", depth) {
			b.Fatalf("%s did not reach the route %d segments deeper", req.Path, depth)
		}
		b.Run(fmt.Sprintf("extra_segments=%d", depth), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				table.Lookup(req)
			}
		})
	}
}

// BenchmarkLookupHeader looks up a path whose most specific match has a
// header condition, which the requests of BenchmarkLookup never reach: once
// where the header matches, once where it does not and the catch-all wins.
func BenchmarkLookupHeader(b *testing.B) {
	table, _ := Compile(benchRoutes(10_000))
	for _, canary := range []string{"true", "false"} {
		req := Request{Host: "host-10.example.com", Method: "GET", Path: "/api/v1/svc0/x", Header: http.Header{"X-Canary": {canary}, "Accept": {"*/*"}}}
		b.Run("X-Canary="+canary, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				table.Lookup(req)
			}
		})
	}
}

func BenchmarkCompile(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			routes := benchRoutes(n)
			b.ReportAllocs()
			for b.Loop() {
				Compile(routes)
			}
		})
	}
}

// recompileRoutes makes n routes shaped like those of a real cluster at
// one listener without hostname, as the control plane's benchmark makes
// HTTPRoutes: one exact hostname per route, one route in a hundred for a
// wildcard hostname, five routes without hostnames. benchRoutes' ten
// routes per host and a wildcard every tenth host put a tenth of the
// routes in the wildcard tables, which a change then laid out whole.
func recompileRoutes(n int) []*Route {
	routes := benchRoutes(n)
	for i := range routes {
		if len(routes[i].Hostnames) == 0 {
			continue
		}
		routes[i].Hostnames = []string{fmt.Sprintf("app-%d.example.com", i)}
		if i%100 == 99 {
			routes[i].Hostnames = []string{fmt.Sprintf("*.tenant-%d.example.com", i)}
		}
	}
	return pointers(routes)
}

// BenchmarkRecompile is what a route change costs: one route of n gets a
// new rule, and the table is built again from the previous one.
func BenchmarkRecompile(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			routes := recompileRoutes(n)
			table, _ := Recompile(nil, routes)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				next := slices.Clone(routes)
				k := (i * 7919) % n
				changed := *next[k]
				changed.Rules = []Rule{{
					Matches:  []Match{{Path: PathMatch{Type: PathPrefix, Value: fmt.Sprintf("/changed-%d", i)}}},
					Backends: changed.Rules[0].Backends,
				}}
				next[k] = &changed
				table, _ = Recompile(table, next)
			}
		})
	}
	// RecompileChanged told one route changed, or one removed, as
	// translation tells the controller. The list of routes with the
	// change is made in place and put back, so that what is measured is
	// the router's, not a copy of the list.
	for _, n := range []int{10_000, 50_000} {
		for _, removal := range []bool{false, true} {
			name := map[bool]string{false: "change", true: "removal"}[removal]
			b.Run(fmt.Sprintf("routes=%d/told-%s", n, name), func(b *testing.B) {
				routes := recompileRoutes(n)
				table, _ := Recompile(nil, routes)
				next := slices.Clone(routes)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					k := (i * 7919) % len(routes)
					if removal {
						next = slices.Delete(next, k, k+1)
					} else {
						changed := *next[k]
						changed.Rules = []Rule{{Matches: []Match{{Path: PathMatch{Type: PathPrefix, Value: "/changed"}}}, Backends: changed.Rules[0].Backends}}
						next[k] = &changed
					}
					if _, errs := RecompileChanged(table, routes, next, []RouteID{routes[k].ID}); len(errs) > 0 {
						b.Fatal(errs)
					}
					if removal {
						next = slices.Insert(next, k, routes[k])
					} else {
						next[k] = routes[k]
					}
				}
			})
		}
	}
}

// BenchmarkTableHeap reports the live heap a compiled Table keeps per
// route for n HTTPRoutes as a cluster of Services behind one Gateway
// listener has them: each its own hostname, one rule, one path prefix and
// one backend. The routes themselves are made before and not counted.
func BenchmarkTableHeap(b *testing.B) {
	const n = 10_000
	routes := make([]*Route, n)
	for i := range routes {
		name := fmt.Sprintf("r%d", i)
		routes[i] = &Route{
			ID:        RouteID{Kind: KindHTTPRoute, Namespace: fmt.Sprintf("ns%d", i%50), Name: name},
			Created:   fuzzEpoch,
			Hostnames: []string{name + ".example.com"},
			Rules: []Rule{{
				Matches:  []Match{{Path: PathMatch{Type: PathPrefix, Value: "/api"}}},
				Backends: []BackendRef{{Name: fmt.Sprintf("ns%d/%s:80", i%50, name), Weight: 1}},
			}},
		}
	}
	var perRoute float64
	b.ReportAllocs()
	for b.Loop() {
		before := heaptest.Live()
		table, errs := Recompile(nil, routes)
		perRoute = float64(heaptest.Live()-before) / n
		if len(errs) > 0 || table.Lookup(Request{Host: "r7.example.com", Method: "GET", Path: "/api/x"}) == nil {
			b.Fatal("r7.example.com/api/x has no route", errs)
		}
		runtime.KeepAlive(table)
	}
	b.ReportMetric(perRoute, "live-B/route")
}
