package router

import (
	"strings"
	"testing"
)

func l4Route(kind Kind, name, listener string, hosts ...string) Route {
	return Route{
		ID:        RouteID{Kind: kind, Namespace: "ns", Name: name},
		Listener:  listener,
		Hostnames: hosts,
		Rules:     []Rule{{Backends: []BackendRef{{Name: "ns/" + name + ":443", Weight: 1}}}},
	}
}

// TestL4Lookup: exact before wildcard, the longest wildcard first, a
// server name goes to the most specific listener that admits it and only
// its routes serve it, the oldest route keeps a hostname claimed twice.
func TestL4Lookup(t *testing.T) {
	routes := []Route{
		l4Route(KindTLSRoute, "exact", "", "db.example.com"),
		l4Route(KindTLSRoute, "wild", "", "*.example.com"),
		l4Route(KindTLSRoute, "wild-longer", "", "*.eu.example.com"),
		l4Route(KindTLSRoute, "exact-newer", "", "db.example.com"),
		l4Route(KindTLSRoute, "any", ""),
		// A listener of its own for *.shop.example.com with no route for
		// pay.shop.example.com: the wildcard of "" must not serve it.
		l4Route(KindTLSRoute, "shop-www", "*.shop.example.com", "www.shop.example.com"),
		// Narrowed to the listener's hostname.
		l4Route(KindTLSRoute, "broad", "api.example.org", "*.example.org"),
	}
	table, errs := CompileL4(routes, "", "*.shop.example.com", "api.example.org")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, c := range []struct{ sni, want string }{
		{"db.example.com", "exact"},
		{"x.example.com", "wild"},
		{"a.b.example.com", "wild"},
		{"x.eu.example.com", "wild-longer"},
		{"other.net", "any"},
		{"", "any"},
		{"www.shop.example.com", "shop-www"},
		{"pay.shop.example.com", ""},
		{"api.example.org", "broad"},
		{"x.example.org", "any"},
	} {
		got := ""
		if target := table.Lookup(c.sni); target != nil {
			got = target.Route.Name
		}
		if got != c.want {
			t.Errorf("Lookup(%q) = %q, want %q", c.sni, got, c.want)
		}
	}
	var nilTable *L4Table
	if nilTable.Lookup("x") != nil {
		t.Error("a nil table served a name")
	}
}

// TestL4Validate: what an L4 proxy cannot serve is left out with an error
// naming the field.
func TestL4Validate(t *testing.T) {
	withHost := l4Route(KindTCPRoute, "tcp-host", "", "a.example.com")
	twoRules := l4Route(KindTLSRoute, "two", "")
	twoRules.Rules = append(twoRules.Rules, twoRules.Rules[0])
	noBackends := l4Route(KindTCPRoute, "none", "")
	noBackends.Rules[0].Backends = nil
	matches := l4Route(KindTLSRoute, "matches", "")
	matches.Rules[0].Matches = []Match{{}}
	http := l4Route(KindHTTPRoute, "http", "")
	badHost := l4Route(KindTLSRoute, "bad", "", "A.example.com")
	for _, c := range []struct {
		r    Route
		want string
	}{
		{withHost, "hostnames: a TCPRoute has none"},
		{twoRules, "rules: exactly one rule"},
		{noBackends, "rules[0].backendRefs: must not be empty"},
		{matches, "rules[0].matches"},
		{http, "not a Layer 4 route kind"},
		{badHost, "hostnames[0]"},
	} {
		_, errs := CompileL4([]Route{c.r})
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want) {
			t.Errorf("%s: errors %v, want one with %q", c.r.ID, errs, c.want)
		}
	}
}

// TestChooseBackendWeights: weights hold, and zero weights take nothing.
func TestChooseBackendWeights(t *testing.T) {
	refs := []BackendRef{{Name: "a", Weight: 3}, {Name: "b", Weight: 1}, {Name: "c", Weight: 0}}
	counts := map[string]int{}
	for range 4000 {
		counts[ChooseBackend(refs).Name]++
	}
	if counts["c"] != 0 || counts["a"] < 2700 || counts["a"] > 3300 {
		t.Errorf("counts %v, want about 3000/1000/0", counts)
	}
	if ChooseBackend([]BackendRef{{Name: "z"}}) != nil {
		t.Error("a backend of weight 0 was chosen")
	}
}

// TestL4Shared: on a socket shared with HTTPS listeners, a server name
// belongs to the most specific listener of either kind; those the HTTPS
// listeners take are not claimed, and names no listener admits neither.
// The routes of a listener in mode Terminate say so.
func TestL4Shared(t *testing.T) {
	routes := []Route{
		l4Route(KindTLSRoute, "db", "db.example.com"),
		l4Route(KindTLSRoute, "wild", "*.example.com"),
	}
	table, errs := CompileL4Socket(pointers(routes), L4Listeners{
		Hostnames: []string{"db.example.com", "*.example.com"},
		Terminate: []string{"*.example.com"},
		HTTPS:     []string{"www.example.com", "*.shop.example.com", "*.org"},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, c := range []struct {
		sni    string
		claims bool
		route  string
	}{
		{"db.example.com", true, "db"},
		{"x.example.com", true, "wild"},
		{"www.example.com", false, ""},
		{"pay.shop.example.com", false, ""},
		{"example.org", false, ""},
		{"x.example.org", false, ""},
		{"example.net", false, ""},
		{"", false, ""},
	} {
		got := ""
		if target := table.Lookup(c.sni); target != nil {
			got = target.Route.Name
		}
		if table.Claims(c.sni) != c.claims || got != c.route {
			t.Errorf("%q: Claims %t, Lookup %q; want %t, %q", c.sni, table.Claims(c.sni), got, c.claims, c.route)
		}
		if target := table.Lookup(c.sni); target != nil && target.Terminate != (c.route == "wild") {
			t.Errorf("%q: Terminate %t, want it only for the listener *.example.com", c.sni, target.Terminate)
		}
	}
}

// TestL4RouteOfAnHTTPSListener: a route bound to a listener hostname that
// is one of the socket's HTTPS listeners (a snapshot out of step, a state
// file edited by hand) is left out and reported, not compiled into that
// listener's scope, which has no table of server names.
func TestL4RouteOfAnHTTPSListener(t *testing.T) {
	routes := []Route{l4Route(KindTLSRoute, "stray", "www.example.com", "www.example.com"), l4Route(KindTLSRoute, "db", "db.example.com")}
	table, errs := CompileL4Socket(pointers(routes), L4Listeners{Hostnames: []string{"db.example.com"}, HTTPS: []string{"www.example.com"}})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "stray") || !strings.Contains(errs[0].Error(), "HTTPS") {
		t.Errorf("errors %v, want one naming the route and its HTTPS listener", errs)
	}
	if table.Claims("www.example.com") || table.Lookup("db.example.com") == nil {
		t.Errorf("www.example.com claimed %t, db.example.com found %v; want the HTTPS listener's and the route of db", table.Claims("www.example.com"), table.Lookup("db.example.com"))
	}
}

// TestL4RouteHostnamePrecedence: within a listener, a route's own
// hostname decides, not its intersection with the listener's: an exact
// hostname over an older route's wildcard the listener narrows to the
// same name, a longer wildcard over an older shorter one.
func TestL4RouteHostnamePrecedence(t *testing.T) {
	table, errs := CompileL4([]Route{
		l4Route(KindTLSRoute, "wild-older", "abc.example.com", "*.example.com"),
		l4Route(KindTLSRoute, "exact-newer", "abc.example.com", "abc.example.com"),
		l4Route(KindTLSRoute, "short-older", "*.example.org", "*.org"),
		l4Route(KindTLSRoute, "long-newer", "*.example.org", "*.example.org"),
	}, "abc.example.com", "*.example.org")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for sni, want := range map[string]string{"abc.example.com": "exact-newer", "abc.example.org": "long-newer"} {
		if got := table.Lookup(sni); got == nil || got.Route.Name != want {
			t.Errorf("Lookup(%q) = %v, want %s", sni, got, want)
		}
	}
}
