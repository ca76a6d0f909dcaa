package router

import (
	"fmt"
	"net/http"
	"testing"
	"time"
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
// path segments.
func BenchmarkLookupPathLength(b *testing.B) {
	table, _ := Compile(benchRoutes(10_000))
	for _, depth := range []int{1, 4, 16} {
		path := "/api/v1/svc3/items"
		for range depth {
			path += "/x"
		}
		req := Request{Host: "host-7.example.com", Method: "GET", Path: path}
		b.Run(fmt.Sprintf("extra_segments=%d", depth), func(b *testing.B) {
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
