package pipeline

import (
	"encoding/base64"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/hostgate/hostgate/internal/htpasswd"
	"github.com/hostgate/hostgate/proxy/h1wire"
	"github.com/hostgate/hostgate/router"
)

// guardTable is a table of one route whose rule has filters.
func guardTable(t testing.TB, filters ...router.Filter) *router.Table {
	t.Helper()
	tbl, errs := router.Compile([]router.Route{{
		ID:    router.RouteID{Kind: router.KindIngress, Namespace: "default", Name: "web"},
		Rules: []router.Rule{{Filters: filters, Backends: []router.BackendRef{{Name: "web", Weight: 1}}}},
	}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return tbl
}

func mustAddresses(t testing.TB, list string) *router.AddressSet {
	t.Helper()
	s, err := router.ParseAddressSet(list)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func basicAuthFilter(t testing.TB) router.Filter {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return router.Filter{Type: router.FilterBasicAuth, BasicAuth: &router.BasicAuth{Source: "test", Realm: "Team", Users: []htpasswd.Entry{
		{User: "alice", Hash: string(hash)},
		{User: "bob", Hash: "{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g="},
	}}}
}

// guardView is a view of a request from client with the Authorization
// field authorization, as the HTTP/1.1 engine parses it, against routes
// resolved by reg.
func guardView(t testing.TB, reg *guardRegistry, routes *router.Table, client, authorization string) view {
	t.Helper()
	head := "GET / HTTP/1.1\r\nHost: a\r\n"
	if authorization != "" {
		head += "Authorization: " + authorization + "\r\n"
	}
	var req h1wire.Head
	if !h1wire.ParseRequest(head+"\r\n", &req) {
		t.Fatal("parse")
	}
	return view{Request: router.Request{Host: "a", Method: "GET", Path: "/", Header: &req}, client: netip.MustParseAddr(client), guards: reg.resolve(routes)}
}

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

func TestGuards(t *testing.T) {
	access := router.Filter{Type: router.FilterAccess, Access: &router.Access{Deny: mustAddresses(t, "10.0.0.5"), Allow: mustAddresses(t, "10.0.0.0/8")}}
	auth := basicAuthFilter(t)
	reg := newGuardRegistry()
	tbl := guardTable(t, access, auth)
	for _, c := range []struct {
		name, client, authorization string
		status                      int
	}{
		{"allowed, good password", "10.1.2.3", basic("alice", "secret"), 0},
		{"allowed, SHA user", "10.1.2.3", basic("bob", "password"), 0},
		{"cached", "10.1.2.3", basic("alice", "secret"), 0},
		{"lower-case scheme", "10.1.2.3", "basic " + base64.StdEncoding.EncodeToString([]byte("alice:secret")), 0},
		{"wrong password", "10.1.2.3", basic("alice", "nope"), http.StatusUnauthorized},
		{"unknown user", "10.1.2.3", basic("carol", "secret"), http.StatusUnauthorized},
		{"no credentials", "10.1.2.3", "", http.StatusUnauthorized},
		{"bearer", "10.1.2.3", "Bearer x", http.StatusUnauthorized},
		{"denied before the password", "10.0.0.5", basic("alice", "secret"), http.StatusForbidden},
		{"outside the allow list", "192.168.0.1", "", http.StatusForbidden},
		{"IPv4-mapped", "::ffff:10.1.2.3", basic("alice", "secret"), 0},
	} {
		v := guardView(t, reg, tbl, c.client, c.authorization)
		p := decide(tbl, nil, &v)
		got := 0
		if p.action == actDenied {
			got = p.status
		}
		if got != c.status {
			t.Errorf("%s: status %d, want %d", c.name, got, c.status)
		}
		if c.status == http.StatusUnauthorized && p.challenge != `Basic realm="Team"` {
			t.Errorf("%s: challenge %q", c.name, p.challenge)
		}
	}
	closed := guardTable(t, router.Filter{Type: router.FilterAccess, Access: &router.Access{Closed: "auth-secret: not found"}})
	v := guardView(t, reg, closed, "10.1.2.3", "")
	if p := decide(closed, nil, &v); p.action != actDenied || p.status != http.StatusServiceUnavailable {
		t.Errorf("closed: %+v", p)
	}
}

// TestGuardsSatisfyAny: with satisfy any, the address lists and the
// password are two ways in; a client with neither gets 401 and its
// challenge, as nginx answers.
func TestGuardsSatisfyAny(t *testing.T) {
	access := router.Filter{Type: router.FilterAccess, Access: &router.Access{Deny: mustAddresses(t, "10.0.0.5"), Allow: mustAddresses(t, "10.0.0.0/8"), SatisfyAny: true}}
	reg := newGuardRegistry()
	tbl := guardTable(t, access, basicAuthFilter(t))
	for _, c := range []struct {
		name, client, authorization string
		status                      int
	}{
		{"allowed, no password", "10.1.2.3", "", 0},
		{"allowed, wrong password", "10.1.2.3", basic("alice", "nope"), 0},
		{"outside the list, good password", "192.168.0.1", basic("alice", "secret"), 0},
		{"denied, good password", "10.0.0.5", basic("alice", "secret"), 0},
		{"outside the list, no password", "192.168.0.1", "", http.StatusUnauthorized},
		{"denied, wrong password", "10.0.0.5", basic("alice", "nope"), http.StatusUnauthorized},
	} {
		v := guardView(t, reg, tbl, c.client, c.authorization)
		p := decide(tbl, nil, &v)
		got := 0
		if p.action == actDenied {
			got = p.status
		}
		if got != c.status {
			t.Errorf("%s: status %d, want %d", c.name, got, c.status)
		}
	}
}

func rateFilter(key string, rate int, per time.Duration, burst int) router.Filter {
	return router.Filter{Type: router.FilterRateLimit, RateLimit: &router.RateLimit{Key: key, Rate: rate, Per: per, Burst: burst, StatusCode: 503}}
}

// admitted counts the requests of client that decide lets through out of n.
func admitted(t *testing.T, reg *guardRegistry, tbl *router.Table, client string, n int) int {
	t.Helper()
	ok := 0
	for range n {
		v := guardView(t, reg, tbl, client, "")
		p := decide(tbl, nil, &v)
		if p.action != actDenied {
			ok++
		} else if p.status != 503 {
			t.Fatalf("status %d", p.status)
		}
		p.release(&v, false)
	}
	return ok
}

func TestRateLimit(t *testing.T) {
	reg := newGuardRegistry()
	tbl := guardTable(t, rateFilter("Ingress default/web rpm", 60, time.Minute, 2))
	// nginx's burst=2 nodelay lets 1+2 requests through at once.
	if got := admitted(t, reg, tbl, "10.0.0.1", 10); got != 3 {
		t.Errorf("admitted %d of 10, want 3", got)
	}
	if got := admitted(t, reg, tbl, "10.0.0.2", 10); got != 3 {
		t.Errorf("another client: admitted %d of 10, want 3", got)
	}
	// A new table with the same key, as after a route change, keeps the
	// client's count; another key starts afresh.
	reg.dropUnused()
	changed := guardTable(t, rateFilter("Ingress default/web rpm", 60, time.Minute, 2), router.Filter{Type: router.FilterRequestHeaderModifier, RequestHeaders: &router.HeaderModifier{Set: []router.Header{{Name: "X", Value: "y"}}}})
	if got := admitted(t, reg, changed, "10.0.0.1", 1); got != 0 {
		t.Errorf("after a route change: admitted %d, want 0", got)
	}
	reg.dropUnused()
	other := guardTable(t, rateFilter("Ingress default/other rpm", 60, time.Minute, 2))
	if got := admitted(t, reg, other, "10.0.0.1", 1); got != 1 {
		t.Errorf("another limit: admitted %d, want 1", got)
	}
	// The first one is gone with the Apply that no longer used it.
	reg.dropUnused()
	if _, ok := reg.limiters["Ingress default/web rpm"]; ok {
		t.Error("unused limiter kept")
	}

	// Exempt clients are not counted; an undone request is given back.
	fast := rateFilter("fast", 1, time.Second, 0)
	fast.RateLimit.Exempt = mustAddresses(t, "10.9.0.0/16")
	tbl = guardTable(t, fast)
	if got := admitted(t, reg, tbl, "10.9.1.1", 5); got != 5 {
		t.Errorf("exempt: admitted %d of 5", got)
	}
	v := guardView(t, reg, tbl, "10.0.0.3", "")
	p := decide(tbl, nil, &v)
	p.release(&v, true)
	if got := admitted(t, reg, tbl, "10.0.0.3", 2); got != 1 {
		t.Errorf("after undo: admitted %d of 2, want 1", got)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	reg := newGuardRegistry()
	tbl := guardTable(t, router.Filter{Type: router.FilterRateLimit, RateLimit: &router.RateLimit{Key: "conn", Concurrent: 2, StatusCode: 429}})
	var held []plan
	var views []view
	for i := range 3 {
		v := guardView(t, reg, tbl, "10.0.0.1", "")
		p := decide(tbl, nil, &v)
		if denied := p.action == actDenied; denied != (i == 2) || denied && p.status != 429 {
			t.Fatalf("request %d: %+v", i, p)
		}
		held, views = append(held, p), append(views, v)
	}
	held[0].release(&views[0], false)
	v := guardView(t, reg, tbl, "10.0.0.1", "")
	if p := decide(tbl, nil, &v); p.action == actDenied {
		t.Error("refused after one request ended")
	}
}

// The access filters on their own, on the HTTP/1.1 engine's view, each
// within a microsecond and without allocating.
func BenchmarkGuards(b *testing.B) {
	reg := newGuardRegistry()
	for _, c := range []struct {
		name   string
		filter router.Filter
		auth   string
	}{
		{"basic-auth-cached", basicAuthFilter(b), basic("alice", "secret")},
		{"rate-limit", rateFilter("bench", 1_000_000_000, time.Second, 1000), ""},
		{"allow-list", router.Filter{Type: router.FilterAccess, Access: &router.Access{
			Allow: mustAddresses(b, "192.168.0.0/16,172.16.0.0/12,10.0.0.0/8,2001:db8::/32,203.0.113.7"),
		}}, ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			tbl := guardTable(b, c.filter)
			v := guardView(b, reg, tbl, "10.1.2.3", c.auth)
			var f *router.Filter
			for f = range tbl.Filters() {
				break
			}
			var p plan
			if !p.guard(f, &v) {
				b.Fatal("denied")
			}
			b.ReportAllocs()
			for b.Loop() {
				p = plan{}
				if !p.guard(f, &v) {
					b.Fatal("denied")
				}
			}
		})
	}
}
