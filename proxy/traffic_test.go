package proxy

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/router"
)

// TestTraffic runs a rule's canary and backends' balances on every
// engine and protocol (native HTTP/1.1, net/http's HTTP/1.1, h2c, h2 and
// HTTP/3): the canary by header value, pattern and cookie, affinity's
// cookie and the return to the endpoint it names, and a hash that keeps a
// key on one endpoint.
func TestTraffic(t *testing.T) {
	f := newTLSFixture(t)
	answer := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })
	}
	endpoints := map[string][]Endpoint{
		"main":   {{Address: startBackend(t, answer("main"))}},
		"canary": {{Address: startBackend(t, answer("canary"))}},
		"pool":   {{Address: startBackend(t, answer("p0"))}, {Address: startBackend(t, answer("p1"))}, {Address: startBackend(t, answer("p2"))}},
	}
	canary := func(path string, c router.Canary) router.Route {
		return route(path, nil, router.Rule{Matches: prefix(path), Canary: &c, Backends: []router.BackendRef{
			{Name: "main", Weight: 100}, {Name: "canary", Weight: 0, Canary: true},
		}})
	}
	pool := func(path string, b router.Balance) router.Route {
		return route(path, nil, router.Rule{Matches: prefix(path), Backends: []router.BackendRef{{Name: "pool", Weight: 1, Balance: &b}}})
	}
	routes := compile(t,
		canary("/value", router.Canary{Header: "X-Version", HeaderValue: "v2", Cookie: "c"}),
		canary("/pattern", router.Canary{Header: "X-Version", HeaderPattern: regexp.MustCompile(`v[2-9]`)}),
		pool("/persistent", router.Balance{Affinity: &router.Affinity{Cookie: "route", Path: "/persistent", Persistent: true}}),
		pool("/balanced", router.Balance{Affinity: &router.Affinity{Cookie: "route", SameSite: "Lax"}}),
		pool("/hash", router.Balance{Hash: []router.HashPart{{Source: router.HashHeader, Name: "X-User"}}}),
	)
	for _, engine := range []Engine{EngineNative, EngineStdlib} {
		s := startServer(t, func() Options { o := testOptions(); o.HTTP1Engine = engine; return o }())
		s.UpdateEndpoints(endpoints)
		secure := freeAddr(t)
		addrs := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: routes}, Listener{Address: secure, Protocol: HTTPS, TLS: f.store(t, "app.test"), Routes: routes})
		for proto, cl := range map[string]struct {
			c    *http.Client
			base string
		}{
			"HTTP/1.1": {http.DefaultClient, "http://" + addrs[0]},
			"h2c":      {&http.Client{Transport: h2cTransport()}, "http://" + addrs[0]},
			"h2":       {&http.Client{Transport: f.client(secure, true).Transport}, "https://app.test"},
			"HTTP/3":   {&http.Client{Transport: f.h3Transport(t, secure)}, "https://app.test"},
		} {
			checkTraffic(t, string(engine)+" "+proto, cl.c, cl.base)
		}
	}
}

func checkTraffic(t *testing.T, name string, c *http.Client, base string) {
	for _, tc := range []struct {
		path   string
		header []string
		want   string
	}{
		{"/value", nil, "main"},
		{"/value", []string{"X-Version", "v2"}, "canary"},
		{"/value", []string{"X-Version", "always"}, "main"},
		{"/value", []string{"X-Version", "v3", "Cookie", "c=always"}, "canary"},
		{"/value", []string{"Cookie", "a=b; c=never"}, "main"},
		{"/pattern", []string{"X-Version", "release-v7"}, "canary"},
		{"/pattern", []string{"X-Version", "v1"}, "main"},
	} {
		if _, got := get(t, c, base+tc.path, tc.header...); got != tc.want {
			t.Errorf("%s: %s %q: answered by %s, want %s", name, tc.path, tc.header, got, tc.want)
		}
	}
	for _, path := range []string{"/persistent", "/balanced"} {
		resp, first := get(t, c, base+path)
		set := resp.Header.Get("Set-Cookie")
		value, _, _ := strings.Cut(strings.TrimPrefix(set, "route="), ";")
		if len(value) != 16 || !strings.Contains(set, "HttpOnly") {
			t.Errorf("%s: %s: Set-Cookie %q", name, path, set)
			continue
		}
		for range 10 {
			if resp, got := get(t, c, base+path, "Cookie", "route="+value); got != first || resp.Header.Get("Set-Cookie") != "" {
				t.Errorf("%s: %s with its cookie: answered by %s (Set-Cookie %q), want %s", name, path, got, resp.Header.Get("Set-Cookie"), first)
			}
		}
		if resp, _ := get(t, c, base+path, "Cookie", "route=127.0.0.1"); resp.Header.Get("Set-Cookie") == "" {
			t.Errorf("%s: %s with a cookie naming no endpoint: no new cookie", name, path)
		}
	}
	// The backends' addresses, which the hash mixes in, change with each
	// run: with six users all fell on one of three endpoints in about one
	// run of 250 (3 × 3⁻⁶); with thirty, in one of 10¹³.
	seen := map[string]bool{}
	for i := range 30 {
		user := fmt.Sprint("user", i)
		_, first := get(t, c, base+"/hash", "X-User", user)
		seen[first] = true
		for range 2 {
			if _, got := get(t, c, base+"/hash", "X-User", user); got != first {
				t.Errorf("%s: hash of X-User %s: %s then %s", name, user, first, got)
			}
		}
	}
	if len(seen) < 2 {
		t.Errorf("%s: thirty users hashed onto %v", name, seen)
	}
}
