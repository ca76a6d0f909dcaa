package proxy

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/router"
)

// TestTraffic runs a rule's canary and backends' balances on the engine
// under test (HTTP/1.1 here; HTTP/2 and HTTP/3 share net/http's path with
// HOSTGATE_TEST_HTTP1_ENGINE=stdlib): the canary by header value, pattern
// and cookie, affinity's cookie and its return to the endpoint it names,
// and a hash that keeps a key on one endpoint.
func TestTraffic(t *testing.T) {
	s := startServer(t, testOptions())
	answer := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })
	}
	s.UpdateEndpoints(map[string][]Endpoint{
		"main":   {{Address: startBackend(t, answer("main"))}},
		"canary": {{Address: startBackend(t, answer("canary"))}},
		"pool":   {{Address: startBackend(t, answer("p0"))}, {Address: startBackend(t, answer("p1"))}, {Address: startBackend(t, answer("p2"))}},
	})
	canary := func(path string, c router.Canary) router.Route {
		return route(path, nil, router.Rule{Matches: prefix(path), Canary: &c, Backends: []router.BackendRef{
			{Name: "main", Weight: 100}, {Name: "canary", Weight: 0, Canary: true},
		}})
	}
	pool := func(path string, b router.Balance) router.Route {
		return route(path, nil, router.Rule{Matches: prefix(path), Backends: []router.BackendRef{{Name: "pool", Weight: 1, Balance: &b}}})
	}
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t,
		canary("/value", router.Canary{Header: "X-Version", HeaderValue: "v2", Cookie: "c"}),
		canary("/pattern", router.Canary{Header: "X-Version", HeaderPattern: regexp.MustCompile(`v[2-9]`)}),
		pool("/persistent", router.Balance{Affinity: &router.Affinity{Cookie: "route", Path: "/persistent", Persistent: true}}),
		pool("/balanced", router.Balance{Affinity: &router.Affinity{Cookie: "route", SameSite: "Lax"}}),
		pool("/hash", router.Balance{Hash: []router.HashPart{{Source: router.HashHeader, Name: "X-User"}}}),
	)})[0]
	do := func(path string, header ...string) (string, *http.Response) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Add(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp
	}
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
		if got, _ := do(tc.path, tc.header...); got != tc.want {
			t.Errorf("%s %q: answered by %s, want %s", tc.path, tc.header, got, tc.want)
		}
	}
	for _, path := range []string{"/persistent", "/balanced"} {
		first, resp := do(path)
		set := resp.Header.Get("Set-Cookie")
		value, _, _ := strings.Cut(strings.TrimPrefix(set, "route="), ";")
		if len(value) != 16 || !strings.Contains(set, "HttpOnly") {
			t.Fatalf("%s: Set-Cookie %q", path, set)
		}
		for range 10 {
			if got, resp := do(path, "Cookie", "route="+value); got != first || resp.Header.Get("Set-Cookie") != "" {
				t.Errorf("%s with its cookie: answered by %s (Set-Cookie %q), want %s", path, got, resp.Header.Get("Set-Cookie"), first)
			}
		}
		if _, resp := do(path, "Cookie", "route=127.0.0.1"); resp.Header.Get("Set-Cookie") == "" {
			t.Errorf("%s with a cookie naming no endpoint: no new cookie", path)
		}
	}
	seen := map[string]bool{}
	for _, user := range []string{"ann", "bob", "cy", "dee", "eve", "fay"} {
		first, _ := do("/hash", "X-User", user)
		seen[first] = true
		for range 5 {
			if got, _ := do("/hash", "X-User", user); got != first {
				t.Errorf("hash of X-User %s: %s then %s", user, first, got)
			}
		}
	}
	if len(seen) < 2 {
		t.Errorf("six users hashed onto %v", seen)
	}
}
