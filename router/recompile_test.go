package router

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"
)

// changeSource makes routes and the changes a translator tells of them,
// at random from small pools, so that routes share hosts, tables, IDs
// and precedence ties.
type changeSource struct {
	rng  *rand.Rand
	next int // names of new routes
}

var changeListeners = []string{"", "*.a.com", "b.a.com"}

func (s *changeSource) route(id RouteID) *Route {
	r := &Route{
		ID:       id,
		Created:  fuzzEpoch.Add(time.Duration(s.rng.IntN(3)) * time.Second),
		Listener: changeListeners[s.rng.IntN(len(changeListeners))],
	}
	switch k := s.rng.IntN(20); {
	case k < 13:
		r.Hostnames = []string{fmt.Sprintf("h%d.a.com", s.rng.IntN(200))}
	case k < 16:
		r.Hostnames = []string{fmt.Sprintf("*.w%d.a.com", s.rng.IntN(20))}
	case k < 17:
		r.Hostnames = []string{fmt.Sprintf("h%d.a.com", s.rng.IntN(200)), "*.a.com"}
	} // else none: the catch-all
	for range 1 + s.rng.IntN(2) {
		rule := Rule{Backends: []BackendRef{{Name: "ns/svc:80", Weight: 1}}}
		if s.rng.IntN(10) == 0 {
			rule.Backends[0].Protocol, rule.Backends[0].TLS = "https", &BackendTLS{ServerName: "svc.example.com"}
		}
		for range s.rng.IntN(3) {
			m := Match{Path: PathMatch{Type: PathPrefix, Value: fmt.Sprintf("/p%d", s.rng.IntN(4))}}
			if s.rng.IntN(3) == 0 {
				m.Path.Type = PathExact
			}
			if s.rng.IntN(4) == 0 {
				m.Headers = []ValueMatch{{Name: "X-A", Value: "1"}}
			}
			rule.Matches = append(rule.Matches, m)
		}
		r.Rules = append(r.Rules, rule)
	}
	return r
}

func (s *changeSource) newID() RouteID {
	s.next++
	return RouteID{Kind: KindHTTPRoute, Namespace: fmt.Sprintf("n%d", s.next%3), Name: fmt.Sprintf("r%d", s.next)}
}

// change returns routes after a few changes, and the IDs of the routes
// that changed, as a translator tells them: routes that did not change
// are the same pointers, in the same order.
func (s *changeSource) change(routes []*Route) ([]*Route, []RouteID) {
	next := slices.Clone(routes)
	var changed []RouteID
	// A route that did not compile is mended at once: until then the
	// Table lacks a route of the list it is recompiled from, and
	// RecompileChanged pairs routes as Recompile does.
	for k, r := range next {
		if r.Rules[0].Matches != nil && r.Rules[0].Matches[0].Path.Type == PathRegularExpression {
			next[k] = s.route(r.ID)
			changed = append(changed, r.ID)
		}
	}
	for range 1 + s.rng.IntN(3) {
		k := s.rng.IntN(len(next) + 1)
		if s.rng.IntN(8) == 0 { // at the end of the list, past base's last chunk
			k = max(len(next)-s.rng.IntN(2), 0)
		}
		if k == len(next) || s.rng.IntN(4) == 0 { // a route comes
			id := s.newID()
			if len(next) > 0 && s.rng.IntN(8) == 0 { // an object's route at one more listener hostname, or its twin
				id = next[s.rng.IntN(len(next))].ID
			}
			next = slices.Insert(next, k, s.route(id))
			changed = append(changed, id)
			continue
		}
		id := next[k].ID
		switch s.rng.IntN(6) {
		case 0: // it goes
			next = slices.Delete(next, k, k+1)
		case 1: // it no longer compiles, now and then
			if s.rng.IntN(4) > 0 {
				continue
			}
			broken := *next[k]
			broken.Rules = []Rule{{Matches: []Match{{Path: PathMatch{Type: PathRegularExpression, Value: "("}}}}}
			next[k] = &broken
		case 2: // told, though the same
		case 3: // a copy, not told: the same route for the Table
			same := *next[k]
			if s.rng.IntN(2) == 0 {
				same.Hostnames = slices.Clone(same.Hostnames) // in other memory
			}
			next[k] = &same
			continue
		case 4: // now and then, a caller that does not say it all: RecompileChanged pairs the routes
			switch {
			case s.rng.IntN(8) > 0:
				next[k] = s.route(id)
				changed = append(changed, id)
			case k+1 < len(next) && s.rng.IntN(2) == 0: // two routes swap places
				next[k], next[k+1] = next[k+1], next[k]
			default: // a route comes at the end
				next = append(next, s.route(s.newID()))
			}
			continue
		default:
			next[k] = s.route(id)
		}
		changed = append(changed, id)
	}
	return next, changed
}

// table makes n new routes and the Table compiled from them, where a
// sequence of changes starts.
func (s *changeSource) table(n int) ([]*Route, *Table) {
	routes := make([]*Route, n)
	for i := range routes {
		routes[i] = s.route(s.newID())
	}
	table, _ := Recompile(nil, routes, changeListeners...)
	return routes, table
}

// TestRecompileChangedSequence: a Table recompiled change after change,
// each from the last, told what changed, serves what a fresh Compile of
// the same routes serves, says the same errors, lists the same routes,
// filters and backend identities, and tells what went.
func TestRecompileChangedSequence(t *testing.T) {
	for seed := range uint64(2) {
		s := &changeSource{rng: rand.New(rand.NewPCG(seed, 29))}
		routes, table := s.table(400)
		told := 0
		for step := range 100 {
			next, changed := s.change(routes)
			var got *Table
			var errs []error
			if step%10 == 9 { // now and then by pairing, as after a change the caller could not tell
				got, errs = Recompile(table, next, changeListeners...)
			} else {
				got, errs = RecompileChanged(table, routes, next, changed, changeListeners...)
			}
			want, wantErrs := Compile(values(next), changeListeners...)
			where := fmt.Sprintf("seed %d step %d (changed %v)", seed, step, changed)
			if fmt.Sprint(errs) != fmt.Sprint(wantErrs) {
				t.Fatalf("%s: errors\n %v\nwant\n %v", where, errs, wantErrs)
			}
			sameTables(t, where, got, want)
			if gone, ok := got.GoneSince(table.Serial()); ok {
				told++
				if !slices.Equal(sortedIDs(gone), goneBetween(table, got)) {
					t.Fatalf("%s: gone %v, want %v", where, sortedIDs(gone), goneBetween(table, got))
				}
			}
			table, routes = got, next
		}
		if told < 60 {
			t.Fatalf("seed %d: %d changes of 100 recompiled as told", seed, told)
		}
	}
}

// sameTables fails t unless got serves, lists and describes what want
// does.
func sameTables(t *testing.T, where string, got, want *Table) {
	t.Helper()
	if got.Shared() != want.Shared() {
		t.Fatalf("%s: shared by listeners: %v, want %v", where, got.Shared(), want.Shared())
	}
	if g, w := slices.Collect(got.RouteIDs()), slices.Collect(want.RouteIDs()); !slices.Equal(g, w) {
		t.Fatalf("%s: routes\n %v\nwant\n %v", where, g, w)
	}
	if g, w := slices.Collect(got.Filters()), slices.Collect(want.Filters()); !slices.Equal(g, w) {
		t.Fatalf("%s: filters %v, want %v", where, g, w)
	}
	if g, w := slices.Collect(got.BackendTLS()), slices.Collect(want.BackendTLS()); !slices.Equal(g, w) {
		t.Fatalf("%s: backend TLS %v, want %v", where, g, w)
	}
	if g, w := got.Describe(), want.Describe(); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: describes\n %+v\nwant\n %+v", where, g, w)
	}
	var hosts []string
	for i := range 201 {
		hosts = append(hosts, fmt.Sprintf("h%d.a.com", i))
	}
	for i := range 21 {
		hosts = append(hosts, fmt.Sprintf("x.w%d.a.com", i), fmt.Sprintf("y.x.w%d.a.com", i))
	}
	hosts = append(hosts, "b.a.com", "z.b.a.com", "x.a.com", "a.com", "other.com")
	for _, host := range hosts {
		for _, path := range []string{"/", "/p0", "/p1/x", "/p2", "/p3/"} {
			for _, header := range []Headers{nil, http.Header{"X-A": {"1"}}} {
				req := Request{Host: host, Method: "GET", Path: path, Header: header}
				if g, w := got.Lookup(req), want.Lookup(req); !sameTarget(g, w) {
					t.Fatalf("%s: %s%s: %s, want %s", where, host, path, describeTarget(g), describeTarget(w))
				}
			}
		}
	}
}

// TestRecompileChangedTwinAfterShift: a route's entries keep the place it
// had when it was compiled, which the routes that went before it since
// have shifted; a twin that comes after it, closer to the start than its
// old place, still comes second, as in a fresh Compile.
func TestRecompileChangedTwinAfterShift(t *testing.T) {
	first := route(KindHTTPRoute, "x", 0, []string{"x.example.com"}, []Match{prefix("/")})
	second := first
	second.Rules = []Rule{{Backends: []BackendRef{{Name: "default/second:80", Weight: 1}}}}
	a, b := route(KindHTTPRoute, "a", 0, []string{"a.example.com"}), route(KindHTTPRoute, "b", 0, []string{"b.example.com"})
	routes := []*Route{&a, &b, &first}
	table, _ := Compile(values(routes))
	shifted, _ := RecompileChanged(table, routes, routes[2:], []RouteID{a.ID, b.ID})
	twins := []*Route{&first, &second}
	got, _ := RecompileChanged(shifted, routes[2:], twins, []RouteID{first.ID})
	want, _ := Compile(values(twins))
	sameTables(t, "a twin after a shift", got, want)
}

// TestRecompileChangedScopes: the scope of a listener hostname that no
// listener has comes with its first route and goes with its last, as in
// a fresh Compile, whether a change adds or removes it.
func TestRecompileChangedScopes(t *testing.T) {
	a := route(KindHTTPRoute, "a", 0, nil, []Match{prefix("/")})
	x := route(KindHTTPRoute, "x", 0, []string{"h1.a.com"}, []Match{prefix("/")})
	x.Listener = "x.a.com"
	steps := [][]*Route{{&a}, {&a, &x}, {&a}, {&x}, {}}
	table, _ := Compile(values(steps[0]), "")
	for k := 1; k < len(steps); k++ {
		var changed []RouteID
		for _, r := range append(slices.Clone(steps[k-1]), steps[k]...) {
			if slices.Contains(steps[k-1], r) != slices.Contains(steps[k], r) {
				changed = append(changed, r.ID)
			}
		}
		got, _ := RecompileChanged(table, steps[k-1], steps[k], changed, "")
		if _, told := got.GoneSince(table.Serial()); !told {
			t.Fatalf("step %d: not recompiled as told", k)
		}
		want, _ := Compile(values(steps[k]), "")
		sameTables(t, fmt.Sprintf("step %d", k), got, want)
		table = got
	}
}

// TestRecompileChangedBulk: runs of routes come and go at once
// (a namespace deleted, a chart installed), so that whole chunks empty,
// chunks grow past 2*routesPerChunk and scopes reshard.
func TestRecompileChangedBulk(t *testing.T) {
	for seed := range uint64(4) {
		s := &changeSource{rng: rand.New(rand.NewPCG(seed, 7))}
		routes, table := s.table(1200)
		for step := range 60 {
			next := slices.Clone(routes)
			var changed []RouteID
			switch s.rng.IntN(4) {
			case 0: // a run goes
				if len(next) > 0 {
					k := s.rng.IntN(len(next))
					n := min(len(next)-k, 1+s.rng.IntN(700))
					for _, r := range next[k : k+n] {
						changed = append(changed, r.ID)
					}
					next = slices.Delete(next, k, k+n)
				}
			case 1: // a run comes
				k := s.rng.IntN(len(next) + 1)
				var add []*Route
				for range 1 + s.rng.IntN(700) {
					r := s.route(s.newID())
					add = append(add, r)
					changed = append(changed, r.ID)
				}
				next = slices.Insert(next, k, add...)
			case 2: // many change in place
				for k := range next {
					if s.rng.IntN(5) == 0 {
						next[k] = s.route(next[k].ID)
						changed = append(changed, next[k].ID)
					}
				}
			default:
				next, changed = s.change(routes)
			}
			got, errs := RecompileChanged(table, routes, next, changed, changeListeners...)
			want, wantErrs := Compile(values(next), changeListeners...)
			where := fmt.Sprintf("seed %d step %d (%d routes, %d changed)", seed, step, len(next), len(changed))
			if fmt.Sprint(errs) != fmt.Sprint(wantErrs) {
				t.Fatalf("%s: errors\n %v\nwant\n %v", where, errs, wantErrs)
			}
			sameTables(t, where, got, want)
			table, routes = got, next
		}
		t.Logf("seed %d: %d routes in %d chunks", seed, table.routes.len, len(table.routes.chunks))
	}
}
