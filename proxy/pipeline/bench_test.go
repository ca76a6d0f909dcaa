package pipeline

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
)

// benchRoutes is a table of a few hosts with a prefix each, and a catch-all
// route, all to the backend "web".
func benchRoutes(b *testing.B) *router.Table {
	var routes []router.Route
	for _, host := range []string{"a.example.com", "b.example.com", "*.example.com", ""} {
		r := router.Route{ID: router.RouteID{Kind: router.KindHTTPRoute, Namespace: "default", Name: host}, Rules: []router.Rule{{Backends: []router.BackendRef{{Name: "web", Weight: 1}}}}}
		if host != "" {
			r.Hostnames = []string{host}
			r.Rules[0].Matches = []router.Match{{Path: router.PathMatch{Type: router.PathPrefix, Value: "/api"}}}
		}
		routes = append(routes, r)
	}
	tbl, errs := router.Compile(routes)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	return tbl
}

// BenchmarkDecide is the engine-independent pipeline alone: lookup,
// filters and the choice of backend and endpoint set.
func BenchmarkDecide(b *testing.B) {
	tbl := benchRoutes(b)
	sets := upstream.NewRegistry(upstream.RoundRobin, upstream.Health{}).Sets(map[string][]upstream.Endpoint{"web": {{Address: "127.0.0.1:1"}}})
	v := view{Request: router.Request{Host: "b.example.com", Method: "GET", Path: "/api/users", Header: http.Header{}}, scheme: "http", port: 80}
	b.ReportAllocs()
	for b.Loop() {
		if p := decide(tbl, sets, &v); p.action != actForward {
			b.Fatal(p.action)
		}
	}
}

// BenchmarkRequestMetrics is what metrics add to a request: finding the
// route's series, then counting and timing into them, from every core at
// once as a busy listener would.
func BenchmarkRequestMetrics(b *testing.B) {
	m, err := newMetrics(nil)
	if err != nil {
		b.Fatal(err)
	}
	l := &Listener{stats: m.listener("bench")}
	st := &listenerState{routes: benchRoutes(b)}
	target := st.routes.Lookup(router.Request{Host: "a.example.com", Method: "GET", Path: "/api/users", Header: http.Header{}})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rm := l.routeStats(st, target)
			rm.requests(http.StatusOK).Inc()
			rm.duration.Observe(0.001)
		}
	})
}

// BenchmarkPruneMetrics is what a configuration change costs the route
// metrics of a listener with 10,000 routes, 100 of which served requests:
// walked, with a table that cannot tell what went, and told, with one
// recompiled from the last with what changed.
func BenchmarkPruneMetrics(b *testing.B) {
	m, err := newMetrics(nil)
	if err != nil {
		b.Fatal(err)
	}
	lm := m.listener("bench")
	routes := make([]*router.Route, 10000)
	for i := range routes {
		host := fmt.Sprintf("r%d.example.com", i)
		routes[i] = &router.Route{ID: router.RouteID{Kind: router.KindHTTPRoute, Namespace: "ns", Name: fmt.Sprintf("r%d", i)}, Hostnames: []string{host}, Rules: []router.Rule{{Backends: []router.BackendRef{{Name: "web", Weight: 1}}}}}
		if i%100 == 0 {
			lm.route(routes[i].ID, 0)
		}
	}
	tbl, errs := router.Recompile(nil, routes)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	changed := slices.Clone(routes)
	changed[5] = &router.Route{ID: routes[5].ID, Hostnames: routes[5].Hostnames, Rules: []router.Rule{{Backends: []router.BackendRef{{Name: "other", Weight: 1}}}}}
	told, errs := router.RecompileChanged(tbl, routes, changed, []router.RouteID{changed[5].ID})
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	b.Run("walked", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			// Else every prune but the first is of the table last
			// pruned against, which is not walked.
			lm.pruned = 0
			lm.prune(tbl)
		}
	})
	b.Run("told", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lm.pruned = tbl.Serial()
			lm.prune(told)
		}
	})
	if len(lm.routes) != 100 {
		b.Fatalf("%d routes with series after pruning, want 100", len(lm.routes))
	}
}
