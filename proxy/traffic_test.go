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

// TestAffinityCookieAttributes: the session cookie carries what the
// affinity asks for, Partitioned (CHIPS) among them, and Secure on HTTPS
// unless told otherwise.
func TestAffinityCookieAttributes(t *testing.T) {
	yes := true
	for _, tc := range []struct {
		affinity router.Affinity
		https    bool
		want     string
	}{
		{router.Affinity{Cookie: "route"}, false, "route=0000000000000001; HttpOnly"},
		{router.Affinity{Cookie: "route"}, true, "route=0000000000000001; Secure; HttpOnly"},
		{router.Affinity{Cookie: "route", Path: "/app", Domain: ".example.com", SameSite: "None", Secure: &yes, Partitioned: true}, false,
			"route=0000000000000001; Path=/app; Domain=.example.com; Secure; HttpOnly; SameSite=None; Partitioned"},
	} {
		if got := affinityCookie(&tc.affinity, 1, tc.https, tc.affinity.SameSite); got != tc.want {
			t.Errorf("%+v (https %t): %q, want %q", tc.affinity, tc.https, got, tc.want)
		}
	}
}

// TestConditionalSameSiteNone: with session-cookie-conditional-samesite-
// none, the browsers that reject SameSite=None get the cookie without it,
// the others with it.
func TestConditionalSameSiteNone(t *testing.T) {
	const (
		with    = "route=0000000000000001; HttpOnly; SameSite=None"
		without = "route=0000000000000001; HttpOnly"
	)
	for _, tc := range []struct {
		name, userAgent, want string
	}{
		{"no User-Agent", "", with},
		{"Chrome 51", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/51.0.2704.103 Safari/537.36", without},
		{"Chrome 66", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/66.0.3359.181 Safari/537.36", without},
		{"Chrome 80", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/80.0.3987.87 Safari/537.36", with},
		{"Chrome 120", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36", with},
		{"iOS 12 Safari", "Mozilla/5.0 (iPhone; CPU iPhone OS 12_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/12.1.2 Mobile/15E148 Safari/604.1", without},
		{"iPadOS 12", "Mozilla/5.0 (iPad; CPU OS 12_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148", without},
		{"iOS 13 Safari", "Mozilla/5.0 (iPhone; CPU iPhone OS 13_3 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.0.5 Mobile/15E148 Safari/604.1", with},
		{"macOS 10.14 Safari", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/12.1.2 Safari/605.1.15", without},
		{"macOS 10.14 Chrome 80", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_14_6) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/80.0.3987.87 Safari/537.36", with},
		{"macOS 10.15 Safari", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15", with},
		{"UC Browser 12.13.0", "Mozilla/5.0 (Linux; U; Android 9; en-US; SM-G960F) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/57.0.2987.108 UCBrowser/12.13.0.1207 Mobile Safari/537.36", without},
		{"UC Browser 12.13.2 on Chrome 57", "Mozilla/5.0 (Linux; U; Android 9; en-US) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/57.0.2987.108 UCBrowser/12.13.2.1208 Mobile Safari/537.36", without},
		{"UC Browser 12.13.5 on Chrome 78", "Mozilla/5.0 (Linux; U; Android 10; en-US) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/78.0.3904.108 UCBrowser/12.13.5.1209 Mobile Safari/537.36", with},
		{"UC Browser 11 on Chrome 78", "Mozilla/5.0 (Linux; U; Android 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/78.0.3904.108 UCBrowser/11.4 Mobile Safari/537.36", without},
		{"Firefox", "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0", with},
		{"curl", "curl/8.5.0", with},
	} {
		h := http.Header{}
		if tc.userAgent != "" {
			h.Set("User-Agent", tc.userAgent)
		}
		a := router.Affinity{Cookie: "route", SameSite: "None", ConditionalSameSiteNone: true}
		if got := affinityCookie(&a, 1, false, a.SameSiteFor(h)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		a.ConditionalSameSiteNone = false
		if got := affinityCookie(&a, 1, false, a.SameSiteFor(h)); got != with {
			t.Errorf("%s without the condition: %q, want %q", tc.name, got, with)
		}
	}
	lax := router.Affinity{Cookie: "route", SameSite: "Lax", ConditionalSameSiteNone: true}
	if got := lax.SameSiteFor(http.Header{"User-Agent": {"Chrome/51.0"}}); got != "Lax" {
		t.Errorf("SameSite Lax for Chrome 51: %q, want Lax", got)
	}
}
