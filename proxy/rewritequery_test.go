package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/proxy/h1loop"
	"github.com/hostgate/hostgate/router"
)

// TestRewriteQueryOnEngines: a rewrite of regex captures with a query
// (ingress-nginx's rewrite-target "/index.php?q=$1") reaches the backend
// with nginx's path and query through every engine: the HTTP/1.1 loop,
// native and stdlib engines, HTTP/2 native (bridged or not) and stdlib,
// over TLS and h2c, and HTTP/3; to an HTTP/1.1 backend and to an h2c one.
// The client's query follows the template's after "&", unless the
// template ends with '?'; a capture of a path with a '%' or a '+' is
// escaped for the query as nginx escapes it.
func TestRewriteQueryOnEngines(t *testing.T) {
	f := newTLSFixture(t)
	backend := startBackend(t, echo("web"))
	regex := func(expr string) []router.Match {
		return []router.Match{{Path: router.PathMatch{Type: router.PathRegularExpression, Value: expr}}}
	}
	rewrite := func(name, expr, template string, to ...router.BackendRef) router.Route {
		if to == nil {
			to = backends("web")
		}
		return route(name, nil, router.Rule{Matches: regex(expr), Backends: to, Filters: []router.Filter{{
			Type: router.FilterURLRewrite, Rewrite: &router.Rewrite{Path: &router.PathModifier{Type: router.ReplaceRegexCaptures, Value: template}},
		}}})
	}
	routes := compile(t,
		rewrite("php", "/php/(.*)", "/index.php?q=$1"),
		rewrite("h2c", "/h2c/(.*)", "/index.php?q=$1", router.BackendRef{Name: "web", Weight: 1, Protocol: "h2c"}),
		rewrite("drop", "/drop/(.*)", "/index.php?q=$1?"),
		rewrite("bare", "/bare/(.*)", "/new/$1?"),
	)
	cases := []struct{ target, want string }{
		{"/php/foo/bar?x=1&y=2", "proto=HTTP/1.1 method=GET host=app.test path=/index.php query=q=foo/bar&x=1&y=2 "},
		{"/php/foo", "path=/index.php query=q=foo "},
		// Decoded and escaped again: "+" and "&" stay in the one value.
		{"/php/a+b%26c?x=1", "path=/index.php query=q=a%2Bb%26c&x=1 "},
		// Copied as it is from a path without '%' or '+', as nginx does.
		{"/php/a&b", "path=/index.php query=q=a&b "},
		{"/h2c/foo?x=1", "proto=HTTP/2.0 method=GET host=app.test path=/index.php query=q=foo&x=1 "},
		{"/drop/foo?x=1", "path=/index.php query=q=foo "},
		{"/bare/foo?x=1", "path=/new/foo query= "},
	}

	type engines struct{ h1, h2 Engine }
	servers := []engines{{EngineNative, EngineNative}, {EngineStdlib, EngineNative}, {EngineNative, EngineStdlib}}
	if h1loop.Supported {
		servers = append(servers, engines{EngineLoop, EngineNative})
	}
	for _, e := range servers {
		opts := testOptions()
		opts.HTTP1Engine, opts.HTTP2Engine = e.h1, e.h2
		s := startServer(t, opts)
		s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
		secure := freeAddr(t)
		plain := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: routes}, Listener{Address: secure, Protocol: HTTPS, TLS: f.store(t, "app.test"), Routes: routes})[0]
		clients := []struct {
			proto string
			c     *http.Client
			base  string
		}{
			{"HTTP/1.1", http.DefaultClient, "http://" + plain},
			{"h2c", &http.Client{Transport: h2cTransport()}, "http://" + plain},
			{"h2", f.client(secure, true), "https://app.test"},
			{"HTTP/3", &http.Client{Transport: f.h3Transport(t, secure)}, "https://app.test"},
		}
		for _, cl := range clients {
			for _, tc := range cases {
				resp, body := get(t, cl.c, cl.base+tc.target, "Host", "app.test")
				if resp.StatusCode != http.StatusOK || !strings.Contains(body, tc.want) {
					t.Errorf("HTTP/1.1 engine %s, HTTP/2 engine %s, %s GET %s: %d, backend saw\n%s\nwant %q", e.h1, e.h2, cl.proto, tc.target, resp.StatusCode, body, tc.want)
				}
			}
		}
	}
}
