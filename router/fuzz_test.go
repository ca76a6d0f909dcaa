package router

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// fuzzSource turns fuzz input into choices from small pools, so that random
// bytes make route sets full of overlaps and ties: the cases where
// precedence decides.
type fuzzSource struct{ data []byte }

func (s *fuzzSource) intn(n int) int {
	if len(s.data) == 0 {
		return 0
	}
	b := s.data[0]
	s.data = s.data[1:]
	return int(b) % n
}

func pick[T any](s *fuzzSource, pool ...T) T { return pool[s.intn(len(pool))] }

var fuzzEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (s *fuzzSource) routes() []Route {
	routes := make([]Route, 1+s.intn(6))
	for i := range routes {
		kind := pick(s, KindHTTPRoute, KindIngress, KindGRPCRoute)
		r := Route{
			ID:       RouteID{Kind: kind, Namespace: pick(s, "a", "b"), Name: pick(s, "r1", "r2", "r3")},
			Created:  fuzzEpoch.Add(time.Duration(s.intn(3)) * time.Second),
			Listener: pick(s, "", "", "", "", "a.com", "*.a.com", "*.b.a.com", "b.a.com"),
		}
		for range s.intn(3) {
			r.Hostnames = append(r.Hostnames, pick(s, "a.com", "b.a.com", "*.a.com", "*.b.a.com", "x.b.a.com", "*.com", "c.a.com", "Bad_Host"))
		}
		for range 1 + s.intn(3) {
			rule := Rule{Backends: []BackendRef{{Name: "svc", Weight: 1}}}
			for range s.intn(3) {
				rule.Matches = append(rule.Matches, s.match(kind))
			}
			r.Rules = append(r.Rules, rule)
		}
		routes[i] = r
	}
	return routes
}

func (s *fuzzSource) match(kind Kind) Match {
	var m Match
	if kind == KindGRPCRoute {
		g := &GRPCMatch{Type: pick(s, MatchExact, MatchExact, MatchRegularExpression)}
		if g.Type == MatchExact {
			g.Service, g.Method = pick(s, "", "s.S", "s.T"), pick(s, "", "M", "N")
		} else {
			g.Service, g.Method = pick(s, "", `s\..*`, "s.S"), pick(s, "", "M|N", "M")
		}
		m.GRPC = g
	} else {
		switch pick(s, PathPrefix, PathExact, PathRegularExpression) {
		case PathPrefix:
			m.Path = PathMatch{Type: PathPrefix, Value: pick(s, "/", "", "/a", "/a/", "/a/b", "/ab", "/a/b/", "/b", "/s.S")}
		case PathExact:
			m.Path = PathMatch{Type: PathExact, Value: pick(s, "/", "/a", "/a/", "/a/b", "/ab", "//a")}
		case PathRegularExpression:
			m.Path = PathMatch{Type: PathRegularExpression, Value: pick(s, "/a.*", "/a/[^/]+", ".*", "/b", "(")}
		}
		m.Method = pick(s, "", "", "GET", "POST")
		for range s.intn(3) {
			m.Query = append(m.Query, s.valueMatch("q", "r"))
		}
	}
	for range s.intn(3) {
		m.Headers = append(m.Headers, s.valueMatch("X-A", "x-a", "X-B"))
	}
	return m
}

func (s *fuzzSource) valueMatch(names ...string) ValueMatch {
	v := ValueMatch{Name: pick(s, names...), Type: pick(s, MatchExact, MatchExact, MatchRegularExpression)}
	if v.Type == MatchExact {
		v.Value = pick(s, "1", "2", "")
	} else {
		v.Value = pick(s, "1|2", "[0-9]", ".*")
	}
	return v
}

func (s *fuzzSource) request() Request {
	header := http.Header{}
	for range s.intn(3) {
		header.Add(pick(s, "X-A", "X-B"), pick(s, "1", "2", ""))
	}
	return Request{
		Host:     pick(s, "a.com", "A.COM:80", "b.a.com", "x.b.a.com", "y.x.b.a.com", "c.a.com", "z.com", "other", "a.com."),
		Method:   pick(s, "GET", "POST"),
		Path:     pick(s, "/", "/a", "/a/", "/a/b", "/a/b/", "/ab", "/b", "/a/b/c", "//a", "/s.S/M", "/s.T/N", "/s.S/M/x", "/s.S", "*"),
		RawQuery: pick(s, "", "q=1", "q=2&q=1", "r=2&q=1", "q=%31", "q", "q=1;r=2&q=2", "%zz=1&q=2"),
		Header:   header,
	}
}

// sameTarget reports whether two lookups found the same rule and match of
// the same route. A Table keeps its own copy of each Route, but shares its
// Rules: the rule's address tells two routes of equal IDs apart.
func sameTarget(a, b *Target) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Route.ID == b.Route.ID && a.Rule == b.Rule && a.RuleIndex == b.RuleIndex && a.MatchIndex == b.MatchIndex
}

func describeTarget(t *Target) string {
	if t == nil {
		return "no match"
	}
	return fmt.Sprintf("%s rules[%d] match %d", t.Route.ID, t.RuleIndex, t.MatchIndex)
}

func FuzzLookup(f *testing.F) {
	f.Add([]byte("\x00"))
	f.Add([]byte("\x03\x00\x01\x00\x02\x02\x01\x01\x02\x00\x05\x01\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09"))
	f.Add([]byte("\x05\x02\x01\x00\x00\x02\x02\x03\x02\x02\x01\x01\x00\x01\x01\x01\x02\x01\x00\x03\x02\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &fuzzSource{data: data}
		routes := s.routes()
		var listeners []string
		for range s.intn(3) {
			listeners = append(listeners, pick(s, "", "c.a.com", "*.com", "*.a.com"))
		}
		table, errs := Compile(routes, listeners...)
		skipped := map[int]bool{}
		for _, err := range errs {
			re, ok := err.(*RouteError)
			if !ok {
				t.Fatalf("Compile returned %T, want *RouteError: %v", err, err)
			}
			skipped[re.Index] = true
		}
		for range 8 {
			req := s.request()
			got, want := table.Lookup(req), referenceLookup(routes, listeners, skipped, req)
			if got == nil && want == nil {
				continue
			}
			if !sameTarget(got, want) {
				t.Fatalf("request %+v:\n table:     %s\n reference: %s", req, describeTarget(got), describeTarget(want))
			}
		}
	})
}

// FuzzRecompile checks Recompile against Compile. A second route set is
// made from a first by keeping, dropping, changing and reordering its
// routes and adding others; the Table that Recompile builds for it from
// the first set's Table must report the same errors, describe the same
// hosts and answer every request as Compile's for it does, and so must a
// second Recompile that keeps everything. When the second set keeps the
// order of the first, RecompileChanged told the IDs of the routes that
// changed must build the same Table.
func FuzzRecompile(f *testing.F) {
	f.Add([]byte("\x05\x02\x01\x00\x00\x02\x02\x03\x02\x02\x01\x01\x00\x01\x01\x01\x02\x01\x00\x03\x02\x01\x00\x01\x02\x03"))
	f.Add([]byte("\x03\x00\x01\x00\x02\x02\x01\x01\x02\x00\x05\x01\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x02\x02\x03\x03"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &fuzzSource{data: data}
		// Mostly unique IDs, as translators make them; Recompile pairs
		// routes by ID, and must not mistake one for another of its ID.
		unique := s.intn(4) > 0
		routes := func(tag string) []Route {
			rs := s.routes()
			for i := range rs {
				if unique {
					rs[i].ID.Name += fmt.Sprintf("-%s%d", tag, i)
				}
			}
			return rs
		}
		var listeners []string
		for range s.intn(3) {
			listeners = append(listeners, pick(s, "", "c.a.com", "*.com", "*.a.com"))
		}
		beforeRoutes := routes("a")
		before := pointers(beforeRoutes)
		prev, _ := Compile(beforeRoutes, listeners...)
		var after []*Route
		var changedIDs []RouteID
		for _, r := range before {
			switch s.intn(6) {
			case 0, 1:
				after = append(after, r)
				continue
			case 5: // a copy, as a translator may hand out
				kept := *r
				after = append(after, &kept)
				continue
			case 2: // dropped
			case 3:
				changed := routes("c")[0]
				changed.ID = r.ID
				after = append(after, &changed)
			case 4:
				moved := *r
				moved.Hostnames = []string{pick(s, "a.com", "*.a.com", "x.b.a.com")}
				moved.Created = moved.Created.Add(time.Duration(s.intn(2)) * time.Second)
				after = append(after, &moved)
			}
			changedIDs = append(changedIDs, r.ID)
		}
		added := routes("b")
		added = added[:s.intn(len(added)+1)]
		for _, r := range added {
			changedIDs = append(changedIDs, r.ID)
		}
		after = append(after, pointers(added)...)
		inOrder := true
		if k := s.intn(len(after) + 1); k > 0 && k < len(after) {
			after = append(after[k:], after[:k]...)
			inOrder = false
		}
		want, wantErrs := Compile(values(after), listeners...)
		got, gotErrs := Recompile(prev, after, listeners...)
		again, _ := Recompile(got, after, listeners...)
		tables := map[string]*Table{"recompiled": got, "recompiled again": again}
		if inOrder {
			told, changedErrs := RecompileChanged(prev, before, after, changedIDs, listeners...)
			if fmt.Sprint(changedErrs) != fmt.Sprint(wantErrs) {
				t.Fatalf("errors:\n recompiled with changes: %v\n compiled:   %v", changedErrs, wantErrs)
			}
			if gone, ok := told.GoneSince(prev.Serial()); ok && !slices.Equal(sortedIDs(gone), goneBetween(prev, told)) {
				t.Fatalf("gone since the first Table: %v, want %v", sortedIDs(gone), goneBetween(prev, told))
			}
			tables["recompiled with changes"] = told
		}
		if fmt.Sprint(gotErrs) != fmt.Sprint(wantErrs) {
			t.Fatalf("errors:\n recompiled: %v\n compiled:   %v", gotErrs, wantErrs)
		}
		for name, table := range tables {
			if g, w := table.Describe(), want.Describe(); !reflect.DeepEqual(g, w) {
				t.Fatalf("%s describes\n %+v\nwant\n %+v", name, g, w)
			}
		}
		for range 8 {
			req := s.request()
			w := want.Lookup(req)
			for name, table := range tables {
				g := table.Lookup(req)
				if g == nil && w == nil {
					continue
				}
				if !sameTarget(g, w) {
					t.Fatalf("request %+v:\n %s: %s\n compiled: %s", req, name, describeTarget(g), describeTarget(w))
				}
			}
		}
	})
}

// FuzzParseOrigin checks that an origin ParseOrigin takes reads back the
// same from its String, which validation relies on, and that one without
// a wildcard allows itself; and that no Origin field value, allowed or
// not, upsets AllowsOrigin.
func FuzzParseOrigin(f *testing.F) {
	for _, s := range []string{"*", "https://www.foo.com", "http://*.bar.com:8080", "https://*", "https://foo.com:+80", "http://[::1]:80", "null"} {
		f.Add(s)
	}
	wildcards := &CORS{AllowOrigins: []Origin{{Scheme: "https", Host: "*.bar.com"}, {Scheme: "http", Host: "*", Port: 8080}}}
	f.Fuzz(func(t *testing.T, s string) {
		wildcards.AllowsOrigin(s)
		o, err := ParseOrigin(s)
		if err != nil {
			return
		}
		again, err := ParseOrigin(o.String())
		if err != nil || again != o {
			t.Fatalf("%q parsed as %+v, whose String %q parses as %+v, %v", s, o, o.String(), again, err)
		}
		if !strings.Contains(o.Host, "*") && !(&CORS{AllowOrigins: []Origin{o}}).AllowsOrigin(o.String()) {
			t.Fatalf("%q does not allow itself", o)
		}
	})
}
