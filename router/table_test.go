package router

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// route is a compact constructor for test routes: one rule per match list.
func route(kind Kind, name string, created int, hostnames []string, rules ...[]Match) Route {
	r := Route{
		ID:        RouteID{Kind: kind, Namespace: "default", Name: name},
		Created:   fuzzEpoch.Add(time.Duration(created) * time.Minute),
		Hostnames: hostnames,
	}
	for _, m := range rules {
		r.Rules = append(r.Rules, Rule{Matches: m, Backends: []BackendRef{{Name: "default/" + name + ":80", Weight: 1}}})
	}
	return r
}

func prefix(v string) Match { return Match{Path: PathMatch{Type: PathPrefix, Value: v}} }
func exact(v string) Match  { return Match{Path: PathMatch{Type: PathExact, Value: v}} }

func withHeaders(m Match, kv ...string) Match {
	for i := 0; i < len(kv); i += 2 {
		m.Headers = append(m.Headers, ValueMatch{Name: kv[i], Value: kv[i+1]})
	}
	return m
}

func TestLookup(t *testing.T) {
	hosts := func(h ...string) []string { return h }
	tests := []struct {
		name   string
		routes []Route
		req    Request
		want   string // "name rules[i]" or "" for no match
	}{
		{"prefix is element-wise: /foo matches /foo/bar",
			[]Route{route(KindHTTPRoute, "foo", 0, nil, []Match{prefix("/foo")})},
			Request{Path: "/foo/bar"}, "foo rules[0]"},
		{"prefix is element-wise: /foo does not match /foobar",
			[]Route{route(KindHTTPRoute, "foo", 0, nil, []Match{prefix("/foo")})},
			Request{Path: "/foobar"}, ""},
		{"trailing slash of a prefix is ignored",
			[]Route{route(KindHTTPRoute, "foo", 0, nil, []Match{prefix("/foo/")})},
			Request{Path: "/foo"}, "foo rules[0]"},
		{"exact does not match a trailing slash",
			[]Route{route(KindHTTPRoute, "foo", 0, nil, []Match{exact("/foo")})},
			Request{Path: "/foo/"}, ""},
		{"exact beats a longer prefix",
			[]Route{
				route(KindHTTPRoute, "pre", 0, nil, []Match{prefix("/foo/")}),
				route(KindHTTPRoute, "ex", 1, nil, []Match{exact("/foo")}),
			},
			Request{Path: "/foo"}, "ex rules[0]"},
		{"longer prefix wins",
			[]Route{
				route(KindHTTPRoute, "short", 0, nil, []Match{prefix("/")}),
				route(KindHTTPRoute, "long", 1, nil, []Match{prefix("/a/b")}),
			},
			Request{Path: "/a/b/c"}, "long rules[0]"},
		{"method match beats none",
			[]Route{
				route(KindHTTPRoute, "any", 0, nil, []Match{prefix("/")}),
				route(KindHTTPRoute, "get", 1, nil, []Match{{Path: PathMatch{Value: "/"}, Method: "GET"}}),
			},
			Request{Path: "/x", Method: "GET"}, "get rules[0]"},
		{"more header matches win",
			[]Route{
				route(KindHTTPRoute, "one", 0, nil, []Match{withHeaders(prefix("/"), "X-A", "1")}),
				route(KindHTTPRoute, "two", 1, nil, []Match{withHeaders(prefix("/"), "x-a", "1", "X-B", "2")}),
			},
			Request{Path: "/", Header: http.Header{"X-A": {"1"}, "X-B": {"2"}}}, "two rules[0]"},
		{"header names are case-insensitive, values are not",
			[]Route{route(KindHTTPRoute, "h", 0, nil, []Match{withHeaders(prefix("/"), "x-version", "V2")})},
			Request{Path: "/", Header: http.Header{"X-Version": {"v2"}}}, ""},
		{"query parameter matches count after headers",
			[]Route{
				route(KindHTTPRoute, "q", 0, nil, []Match{{Path: PathMatch{Value: "/"}, Query: []ValueMatch{{Name: "v", Value: "2"}}}}),
				route(KindHTTPRoute, "plain", 1, nil, []Match{prefix("/")}),
			},
			Request{Path: "/", RawQuery: "a=1&v=2"}, "q rules[0]"},
		{"the older route wins a tie",
			[]Route{
				route(KindHTTPRoute, "newer", 5, nil, []Match{prefix("/")}),
				route(KindHTTPRoute, "older", 1, nil, []Match{prefix("/")}),
			},
			Request{Path: "/"}, "older rules[0]"},
		{"namespace/name breaks a tie of age",
			[]Route{
				route(KindHTTPRoute, "b", 1, nil, []Match{prefix("/")}),
				route(KindHTTPRoute, "a", 1, nil, []Match{prefix("/")}),
			},
			Request{Path: "/"}, "a rules[0]"},
		{"the first rule of a route wins a full tie",
			[]Route{route(KindHTTPRoute, "r", 0, nil, []Match{prefix("/")}, []Match{prefix("/")})},
			Request{Path: "/"}, "r rules[0]"},
		{"exact host beats wildcard beats catch-all",
			[]Route{
				route(KindHTTPRoute, "all", 0, nil, []Match{prefix("/")}),
				route(KindHTTPRoute, "wild", 0, hosts("*.example.com"), []Match{prefix("/")}),
				route(KindHTTPRoute, "exact", 0, hosts("foo.example.com"), []Match{prefix("/")}),
			},
			Request{Host: "Foo.Example.com:8443", Path: "/"}, "exact rules[0]"},
		{"the most specific wildcard wins",
			[]Route{
				route(KindHTTPRoute, "short", 0, hosts("*.com"), []Match{prefix("/")}),
				route(KindHTTPRoute, "long", 1, hosts("*.example.com"), []Match{prefix("/")}),
			},
			Request{Host: "a.example.com", Path: "/"}, "long rules[0]"},
		{"a host whose routes do not match falls through to the wildcard",
			[]Route{
				route(KindHTTPRoute, "exact", 0, hosts("foo.example.com"), []Match{exact("/only")}),
				route(KindHTTPRoute, "wild", 0, hosts("*.example.com"), []Match{prefix("/")}),
			},
			Request{Host: "foo.example.com", Path: "/other"}, "wild rules[0]"},
		{"Gateway API wildcard matches several labels",
			[]Route{route(KindHTTPRoute, "wild", 0, hosts("*.example.com"), []Match{prefix("/")})},
			Request{Host: "a.b.example.com", Path: "/"}, "wild rules[0]"},
		{"Ingress wildcard matches exactly one label",
			[]Route{route(KindIngress, "wild", 0, hosts("*.example.com"), []Match{prefix("/")})},
			Request{Host: "a.b.example.com", Path: "/"}, ""},
		{"a wildcard does not match its own suffix",
			[]Route{route(KindHTTPRoute, "wild", 0, hosts("*.example.com"), []Match{prefix("/")})},
			Request{Host: "example.com", Path: "/"}, ""},
		{"regular expression matches the whole path",
			[]Route{route(KindHTTPRoute, "re", 0, nil, []Match{{Path: PathMatch{Type: PathRegularExpression, Value: "/v[0-9]+"}}})},
			Request{Path: "/v2/extra"}, ""},
		{"regular expression ranks between exact and prefix",
			[]Route{
				route(KindHTTPRoute, "pre", 0, nil, []Match{prefix("/v2")}),
				route(KindHTTPRoute, "re", 1, nil, []Match{{Path: PathMatch{Type: PathRegularExpression, Value: "/v[0-9]+"}}}),
			},
			Request{Path: "/v2"}, "re rules[0]"},
		{"gRPC exact service and method",
			[]Route{route(KindGRPCRoute, "g", 0, nil, []Match{{GRPC: &GRPCMatch{Service: "pkg.Svc", Method: "Get"}}})},
			Request{Path: "/pkg.Svc/Get", Method: "POST"}, "g rules[0]"},
		{"gRPC service match beats method-only match",
			[]Route{
				route(KindGRPCRoute, "method", 0, nil, []Match{{GRPC: &GRPCMatch{Method: "Get"}}}),
				route(KindGRPCRoute, "service", 1, nil, []Match{{GRPC: &GRPCMatch{Service: "pkg.Svc"}}}),
			},
			Request{Path: "/pkg.Svc/Get"}, "service rules[0]"},
		{"gRPC rule without matches takes any call but not other paths",
			[]Route{route(KindGRPCRoute, "g", 0, nil, nil)},
			Request{Path: "/index.html"}, ""},
		{"a path that does not start with / matches nothing",
			[]Route{route(KindHTTPRoute, "all", 0, nil, []Match{prefix("/")})},
			Request{Path: "*"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table, errs := Compile(tt.routes)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			got := ""
			if tg := table.Lookup(tt.req); tg != nil {
				got = tg.Route.ID.Name + " " + strings.Split(describeTarget(tg), " ")[2]
			}
			if got != tt.want {
				t.Errorf("Lookup = %q, want %q", got, tt.want)
			}
			want := referenceLookup(tt.routes, nil, nil, tt.req)
			if (want == nil) != (tt.want == "") {
				t.Errorf("reference disagrees: %s", describeTarget(want))
			}
		})
	}
}

func TestCompileReportsInvalidRoutesAndKeepsTheRest(t *testing.T) {
	good := route(KindHTTPRoute, "good", 0, nil, []Match{prefix("/")})
	tests := []struct {
		name    string
		route   Route
		wantErr string
	}{
		{"upper-case hostname", route(KindHTTPRoute, "bad", 0, []string{"Foo.com"}, nil), `hostnames[0] "Foo.com": must be lower case`},
		{"wildcard inside", route(KindHTTPRoute, "bad", 0, []string{"a.*.com"}, nil), "wildcard is allowed only"},
		{"IP hostname", route(KindHTTPRoute, "bad", 0, []string{"10.0.0.1"}, nil), "not an IP address"},
		{"relative path", route(KindHTTPRoute, "bad", 0, nil, []Match{prefix("foo")}), `rules[0].matches[0].path.value "foo": must start with "/"`},
		{"control character in path", route(KindHTTPRoute, "bad", 0, nil, []Match{exact("/a\nb")}), "control characters"},
		{"bad regular expression", route(KindHTTPRoute, "bad", 0, nil, []Match{{Path: PathMatch{Type: PathRegularExpression, Value: "("}}}), "invalid regular expression"},
		{"bad header name", route(KindHTTPRoute, "bad", 0, nil, []Match{withHeaders(prefix("/"), "X A", "1")}), `headers[0].name "X A"`},
		{"header value with CR", route(KindHTTPRoute, "bad", 0, nil, []Match{withHeaders(prefix("/"), "X-A", "1\r")}), "headers[0].value: must not contain control characters"},
		{"gRPC match in an HTTPRoute", route(KindHTTPRoute, "bad", 0, nil, []Match{{GRPC: &GRPCMatch{Service: "s"}}}), "only valid in a GRPCRoute"},
		{"path in a GRPCRoute", route(KindGRPCRoute, "bad", 0, nil, []Match{exact("/x")}), "needs a gRPC service/method match"},
		{"not a route kind", Route{ID: RouteID{Kind: "Service", Name: "x"}}, `kind "Service"`},
		{"filter without its configuration", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Filters: []Filter{{Type: FilterURLRewrite}}}}}, "rules[0].filters[0].type: URLRewrite filter without its configuration"},
		{"redirect status", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Filters: []Filter{{Type: FilterRequestRedirect, Redirect: &Redirect{StatusCode: 200}}}}}}, "requestRedirect.statusCode 200"},
		{"prefix replacement on an exact match", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{
			Matches: []Match{exact("/a")},
			Filters: []Filter{{Type: FilterURLRewrite, Rewrite: &Rewrite{Path: &PathModifier{Type: ReplacePrefixMatch, Value: "/b"}}}},
		}}}, "ReplacePrefixMatch needs a PathPrefix match"},
		{"backend's prefix replacement on an exact match", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{
			Matches: []Match{exact("/a")},
			Backends: []BackendRef{{Name: "x", Weight: 1, Filters: []Filter{{Type: FilterURLRewrite, Rewrite: &Rewrite{
				Path: &PathModifier{Type: ReplacePrefixMatch, Value: "/b"}}}}}},
		}}}, "ReplacePrefixMatch needs a PathPrefix match"},
		{"rewrite's query with a space", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{
			Matches: []Match{{Path: PathMatch{Type: PathRegularExpression, Value: "/(.*)"}}},
			Filters: []Filter{{Type: FilterURLRewrite, Rewrite: &Rewrite{Path: &PathModifier{Type: ReplaceRegexCaptures, Value: "/index.php?q=$1 x"}}}},
		}}}, `urlRewrite.path "/index.php?q=$1 x": its query must be at most 1024 characters of visible ASCII without '#'`},
		{"redirect's path with a query", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{
			Matches: []Match{{Path: PathMatch{Type: PathRegularExpression, Value: "/(.*)"}}},
			Filters: []Filter{{Type: FilterRequestRedirect, Redirect: &Redirect{Path: &PathModifier{Type: ReplaceRegexCaptures, Value: "/index.php?q=$1"}}}},
		}}}, `requestRedirect.path "/index.php?q=$1": must be at most 1024 characters without spaces, control characters, '?' or '#'`},
		{"redirect to the request's host and another", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Filters: []Filter{{Type: FilterRequestRedirect, Redirect: &Redirect{
			Hostname: "a.example", RequestHost: true}}}}}}, "requestRedirect.requestHost: the request's host leaves hostname and port empty"},
		{"negative weight", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Backends: []BackendRef{{Name: "x", Weight: -1}}}}}, "backendRefs[0].weight -1"},
		{"CORS on a backend", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Backends: []BackendRef{{Name: "x", Weight: 1, Filters: []Filter{{Type: FilterCORS, CORS: &CORS{}}}}}}}}, "backendRefs[0].filters[0].type: a CORS filter applies to a whole rule"},
		{"CORS without its configuration", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Filters: []Filter{{Type: FilterCORS}}}}}, "rules[0].filters[0].type: CORS filter without its configuration"},
		{"CORS origin not parsed", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Filters: []Filter{{Type: FilterCORS, CORS: &CORS{AllowOrigins: []Origin{{Scheme: "ftp", Host: "a.com"}}}}}}}}, `cors.allowOrigins[0] "ftp://a.com": must be "*" or begin with http:// or https://`},
		{"CORS any origin among others", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Filters: []Filter{{Type: FilterCORS, CORS: &CORS{AllowOrigins: []Origin{{Scheme: "https", Host: "a.com"}, {}}}}}}}}, `cors.allowOrigins[1]: "*" must be the only origin`},
		{"CORS any method among others", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Filters: []Filter{{Type: FilterCORS, CORS: &CORS{AllowMethods: []string{"GET", "*"}}}}}}}, `cors.allowMethods[1]: "*" must be the only value`},
		{"CORS header name", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Filters: []Filter{{Type: FilterCORS, CORS: &CORS{ExposeHeaders: []string{"X A"}}}}}}}, `cors.exposeHeaders[0] "X A": not an HTTP token`},
		{"client certificate without key", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Backends: []BackendRef{{Name: "b", Weight: 1, Protocol: "https",
			TLS: &BackendTLS{ServerName: "b.example.com", ClientCertificate: &ClientCertificate{Name: "ns/client", CertPEM: []byte("cert")}}}}}}}, `tls.clientCertificate ns/client: needs a certificate and a key`},
		{"backend timeout above request timeout", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Timeouts: Timeouts{Request: time.Second, BackendRequest: time.Minute}}}}, "timeouts.backendRequest"},
		{"retry code out of range", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Retry: &Retry{Codes: []int{503, 600}, Attempts: 1}}}}, "rules[0].retry.codes[1] 600: must be 400 to 599"},
		{"negative retry attempts", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Retry: &Retry{Attempts: -1}}}}, "rules[0].retry.attempts -1"},
		{"authorization request field the proxy sets", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Filters: []Filter{{Type: FilterExternalAuth, ExternalAuth: &ExternalAuth{
			Backend: BackendRef{Name: "auth", Weight: 1}, RequestHeaders: []Header{{Name: "X-Realm", Value: "a"}, {Name: "Content-Length", Value: "0"}}}}}}}}, `externalAuth.requestHeaders[1] "Content-Length": set by the proxy`},
		{"authorization request field with a line break", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Filters: []Filter{{Type: FilterExternalAuth, ExternalAuth: &ExternalAuth{
			Backend: BackendRef{Name: "auth", Weight: 1}, RequestHeaders: []Header{{Name: "X-Realm", Value: "a\r\nX-Evil: 1"}}}}}}}}, `requestHeaders[0] "X-Realm": must not contain control characters`},
		{"negative retry backoff", Route{ID: RouteID{Kind: KindHTTPRoute, Name: "bad"}, Rules: []Rule{{Retry: &Retry{Attempts: 1, Backoff: -time.Second}}}}, "rules[0].retry.backoff -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table, errs := Compile([]Route{tt.route, good})
			if len(errs) != 1 {
				t.Fatalf("errors = %v, want one", errs)
			}
			var re *RouteError
			if !errors.As(errs[0], &re) || re.Index != 0 || re.Route != tt.route.ID {
				t.Fatalf("error %v does not name route 0 (%s)", errs[0], tt.route.ID)
			}
			if !strings.Contains(errs[0].Error(), tt.wantErr) || !strings.Contains(errs[0].Error(), tt.route.ID.String()) {
				t.Errorf("error %q does not contain %q and the route", errs[0], tt.wantErr)
			}
			if err := Validate(&tt.route); err == nil || err.Error() != re.Err.Error() {
				t.Errorf("Validate = %v, want the error Compile gives: %v", err, re.Err)
			}
			if tg := table.Lookup(Request{Path: "/x"}); tg == nil || tg.Route.ID.Name != "good" {
				t.Errorf("the valid route is not served: %s", describeTarget(tg))
			}
		})
	}
}

func TestLookupAllocatesNothing(t *testing.T) {
	table, _ := Compile(benchRoutes(1000))
	req := Request{Host: "App.Tenant-9.example.com:443", Method: "GET", Path: "/api/v1/svc3/items/1", Header: http.Header{"X-Canary": {"true"}}}
	if table.Lookup(req) == nil {
		t.Fatal("no match")
	}
	if n := testing.AllocsPerRun(100, func() { table.Lookup(req) }); n != 0 {
		t.Errorf("Lookup allocates %v times per call", n)
	}
}

// TestDescribeGolden pins the text that /debug/routes prints.
func TestDescribeGolden(t *testing.T) {
	routes := []Route{
		route(KindHTTPRoute, "web", 0, []string{"shop.example.com", "*.example.com"},
			[]Match{exact("/healthz"), withHeaders(prefix("/api"), "X-Canary", "true")},
			[]Match{{Path: PathMatch{Type: PathRegularExpression, Value: "/v[0-9]+/.*"}, Method: "POST", Query: []ValueMatch{{Name: "debug", Type: MatchRegularExpression, Value: "1|true"}}}}),
		route(KindIngress, "legacy", 1, []string{"*.example.com"}, []Match{prefix("/")}),
		route(KindGRPCRoute, "grpc", 2, []string{"grpc.example.com"}, []Match{{GRPC: &GRPCMatch{Service: "pkg.Svc", Method: "Get"}}}, nil),
		route(KindHTTPRoute, "fallback", 3, nil, nil),
	}
	routes[0].Rules[0].Filters = []Filter{
		{Type: FilterRequestHeaderModifier, RequestHeaders: &HeaderModifier{Set: []Header{{Name: "X-Env", Value: "prod"}}, Remove: []string{"X-Debug"}}},
		{Type: FilterURLRewrite, Rewrite: &Rewrite{Path: &PathModifier{Type: ReplacePrefixMatch, Value: "/"}}},
	}
	routes[0].Rules[0].Matches[0] = prefix("/healthz")
	routes[0].Rules[0].Backends = []BackendRef{{Name: "default/web:80", Weight: 9}, {Name: "default/web-canary:80", Weight: 1, Protocol: "h2c"}}
	routes[0].Rules[1].Timeouts = Timeouts{Request: 10 * time.Second, BackendRequest: 2 * time.Second}
	routes[0].Rules[1].Retry = &Retry{Codes: []int{502, 503}, Attempts: 2, Backoff: 25 * time.Millisecond}
	routes[3].Rules = []Rule{{Filters: []Filter{{Type: FilterRequestRedirect, Redirect: &Redirect{Scheme: "https", StatusCode: 301}}}}}
	routes[1].Rules[0].Filters = []Filter{{Type: FilterCORS, CORS: &CORS{
		AllowOrigins:     []Origin{{Scheme: "https", Host: "www.example.com"}, {Scheme: "http", Host: "*.example.com", Port: 8080}},
		AllowMethods:     []string{"GET", "PUT"},
		AllowHeaders:     []string{"*"},
		ExposeHeaders:    []string{"X-Total"},
		AllowCredentials: true,
		MaxAge:           time.Hour,
	}}}
	table, errs := Compile(routes)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var b strings.Builder
	if err := table.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "describe.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("description changed (run with -update if intended):\n%s", b.String())
	}
}

// TestListenerIsolation: a request belongs to the most specific listener
// hostname on its socket, and routes of other listeners never serve it.
func TestListenerIsolation(t *testing.T) {
	through := func(r Route, listener string) Route { r.Listener = listener; return r }
	routes := []Route{
		through(route(KindHTTPRoute, "exact", 0, []string{"a.example.com"}, []Match{exact("/a")}), "a.example.com"),
		through(route(KindHTTPRoute, "wild", 0, []string{"*.example.com"}, []Match{prefix("/")}), "*.example.com"),
		through(route(KindHTTPRoute, "any", 0, nil, []Match{prefix("/")}), ""),
	}
	table, errs := Compile(routes, "a.example.com", "*.example.com", "quiet.example.com", "")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, tt := range []struct{ host, path, want string }{
		{"a.example.com", "/a", "exact"},
		{"a.example.com", "/b", ""}, // not the wildcard listener's, nor the catch-all's
		{"b.example.com", "/b", "wild"},
		{"quiet.example.com", "/", ""}, // a listener without routes still owns its host
		{"other.org", "/", "any"},
	} {
		got := ""
		if tg := table.Lookup(Request{Host: tt.host, Path: tt.path}); tg != nil {
			got = tg.Route.ID.Name
		}
		if got != tt.want {
			t.Errorf("%s%s served by %q, want %q", tt.host, tt.path, got, tt.want)
		}
	}
}

// TestMisdirected follows the cases of the Gateway API's
// HTTPRouteHTTPSListenerDetectMisdirectedRequests: the server name and the
// host must select the same listener.
func TestMisdirected(t *testing.T) {
	table, errs := Compile(nil, "", "second-example.org", "*.wildcard.org", "fourth-example.wildcard.org")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, tt := range []struct {
		serverName, host string
		want             bool
	}{
		{"example.org", "example.org", false},
		{"example.org", "second-example.org", true},
		{"example.org", "unknown-example.org", false}, // both the listener without hostname
		{"second-example.org", "second-example.org:443", false},
		{"second-example.org", "Second-Example.org", false},
		{"second-example.org", "example.org", true},
		{"second-example.org", "unknown-example.org", true},
		{"third-example.wildcard.org", "fith-example.wildcard.org", false},
		{"third-example.wildcard.org", "fourth-example.wildcard.org", true},
		{"fourth-example.wildcard.org", "fith-example.wildcard.org", true},
		{"unknown-example.org", "example.org", false},
		{"", "second-example.org", false}, // no SNI: nothing to compare
	} {
		if got := table.Misdirected(tt.serverName, tt.host); got != tt.want {
			t.Errorf("Misdirected(%q, %q) = %t, want %t", tt.serverName, tt.host, got, tt.want)
		}
	}
	one, _ := Compile(nil, "a.example.com")
	if one.Misdirected("a.example.com", "b.example.com") {
		t.Error("a table of one listener hostname calls a request misdirected")
	}
}

// TestLookupWideNodes covers nodes with more children than a lookup step
// scans, and hosts with more labels than any wildcard suffix has, neither of
// which the fuzz's small pools reach.
func TestLookupWideNodes(t *testing.T) {
	var routes []Route
	for i := range 3 * maxLinearChildren {
		seg := fmt.Sprintf("s%d", i)
		routes = append(routes,
			route(KindHTTPRoute, "exact-"+seg, i, []string{"a.example.com"}, []Match{exact("/" + seg), exact("/x/" + seg + "/y")}),
			route(KindHTTPRoute, "prefix-"+seg, i, []string{"*.b.example.com"}, []Match{prefix("/x/" + seg)}),
			route(KindIngress, "ingress-"+seg, i, []string{"*.example.com"}, []Match{prefix("/" + seg)}))
	}
	routes = append(routes, route(KindHTTPRoute, "fallback", 0, nil, nil))
	table, errs := Compile(routes)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	check := func(name string, table *Table, routes []Route) {
		for _, host := range []string{"a.example.com", "x.a.example.com", "A.B.Example.com", "c.b.example.com", "d.c.b.example.com", "e.d.c.b.example.com", "example.com", "com"} {
			for i := range 3*maxLinearChildren + 1 {
				seg := fmt.Sprintf("s%d", i)
				for _, path := range []string{"/" + seg, "/" + seg + "/z", "/x/" + seg, "/x/" + seg + "/y", "/x/" + seg + "0/y"} {
					req := Request{Host: host, Path: path}
					got, want := table.Lookup(req), referenceLookup(routes, nil, nil, req)
					if !sameTarget(got, want) {
						t.Fatalf("%s: %s%s: table %s, reference %s", name, host, path, describeTarget(got), describeTarget(want))
					}
				}
			}
		}
	}
	check("compiled", table, routes)
	// A change of the catch-all route only: Recompile copies the tables
	// with wide nodes, whose index of children must move with them.
	changed := slices.Clone(routes)
	changed[len(changed)-1] = route(KindHTTPRoute, "fallback", 0, nil, []Match{prefix("/")})
	recompiled, errs := Recompile(table, pointers(changed))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	check("recompiled", recompiled, changed)
}

func TestHasUpper(t *testing.T) {
	for b := range 256 {
		for pos := range 20 {
			s := []byte("abc.def-0123.example")[:pos+1]
			s[pos] = byte(b)
			want := 'A' <= b && b <= 'Z'
			if got := hasUpper(string(s)); got != want {
				t.Errorf("hasUpper(%q) = %v", s, got)
			}
		}
	}
}

// TestRecompileManyChanges: a change of more host tables than a short
// list holds (an apply of many routes at once) recompiles to the table
// Compile makes, serving each changed route's new rules.
func TestRecompileManyChanges(t *testing.T) {
	routes := benchRoutes(1000)
	table, _ := Compile(routes)
	changed := append([]Route(nil), routes...)
	for i := 5; i < len(changed); i += 20 { // one route of each of 50 hosts
		changed[i].Rules = []Rule{{Matches: []Match{{Path: PathMatch{Type: PathExact, Value: "/changed"}}}, Backends: changed[i].Rules[0].Backends}}
	}
	recompiled, errs := Recompile(table, pointers(changed))
	want, wantErrs := Compile(changed)
	if fmt.Sprint(errs) != fmt.Sprint(wantErrs) {
		t.Fatalf("errors: recompiled %v, compiled %v", errs, wantErrs)
	}
	if !reflect.DeepEqual(recompiled.Describe(), want.Describe()) {
		t.Fatal("the recompiled table describes otherwise than the compiled one")
	}
	for i := 5; i < len(changed); i += 20 {
		host := changed[i].Hostnames[0]
		if strings.HasPrefix(host, "*.") {
			host = "x" + host[1:]
		}
		got := recompiled.Lookup(Request{Host: host, Path: "/changed", Method: "GET"})
		if got == nil || got.Route.ID != changed[i].ID {
			t.Errorf("GET %s/changed: %s; want %s", host, describeTarget(got), changed[i].ID)
		}
	}
}

// TestRecompileShards: as routes come and go, in numbers that change how
// many shards hold the exact hosts and in numbers that do not, a recompiled
// table serves each host as a fresh Compile does.
func TestRecompileShards(t *testing.T) {
	// The same Route value for a route that did not change: its Rules
	// must be the very same slice for Recompile to keep it.
	made := map[[2]int]Route{}
	routeOf := func(i, version int) Route {
		if r, ok := made[[2]int{i, version}]; ok {
			return r
		}
		host := fmt.Sprintf("h%d.example.com", i)
		if i%50 == 7 {
			host = fmt.Sprintf("*.w%d.example.com", i)
		}
		r := Route{
			ID:        RouteID{Kind: KindHTTPRoute, Namespace: "ns", Name: fmt.Sprintf("r%d", i)},
			Created:   fuzzEpoch.Add(time.Duration(i) * time.Second),
			Hostnames: []string{host},
			Rules:     []Rule{{Matches: []Match{{Path: PathMatch{Type: PathPrefix, Value: fmt.Sprintf("/v%d", version)}}}, Backends: []BackendRef{{Name: "ns/svc:80", Weight: 1}}}},
		}
		made[[2]int{i, version}] = r
		return r
	}
	versions := map[int]int{}
	var table *Table
	var routes []Route
	for step, change := range []func(){
		func() { // 40 hosts: one shard
			for i := range 40 {
				versions[i] = 0
			}
		},
		func() { versions[40] = 0 },    // one host more
		func() { versions[3] = 1 },     // one changed
		func() { delete(versions, 5) }, // one gone
		func() { // 3,000 hosts: many shards
			for i := range 3000 {
				if _, ok := versions[i]; !ok {
					versions[i] = 0
				}
			}
		},
		func() { versions[2999], versions[1234] = 2, 2 },
		func() { versions[3000] = 0; delete(versions, 17) }, // one in, one out
		func() { // down to 100: fewer shards
			for i := range versions {
				if i >= 100 {
					delete(versions, i)
				}
			}
		},
	} {
		change()
		routes = routes[:0]
		for i := range 3001 {
			if v, ok := versions[i]; ok {
				routes = append(routes, routeOf(i, v))
			}
		}
		var errs []error
		table, errs = Recompile(table, pointers(slices.Clone(routes)))
		want, wantErrs := Compile(routes)
		if fmt.Sprint(errs) != fmt.Sprint(wantErrs) {
			t.Fatalf("step %d: errors: recompiled %v, compiled %v", step, errs, wantErrs)
		}
		if !reflect.DeepEqual(table.Describe(), want.Describe()) {
			t.Fatalf("step %d: the recompiled table describes otherwise than the compiled one", step)
		}
		for i := range 3002 {
			host := fmt.Sprintf("h%d.example.com", i)
			if i%50 == 7 {
				host = fmt.Sprintf("x.w%d.example.com", i)
			}
			v, ok := versions[i]
			got := table.Lookup(Request{Host: host, Path: fmt.Sprintf("/v%d", v)})
			switch {
			case !ok && got != nil:
				t.Fatalf("step %d: %s served by %s after its route went", step, host, describeTarget(got))
			case ok && (got == nil || got.Route.ID.Name != fmt.Sprintf("r%d", i)):
				t.Fatalf("step %d: %s/v%d: %s; want route r%d", step, host, v, describeTarget(got), i)
			}
		}
	}
}

// TestRecompileTwinsReordered: two routes of one ID, equal in everything
// that orders them, swap places while other routes keep theirs; the first
// listed wins, as in a fresh Compile, whether the walk over both lists or
// the lookup of missed routes pairs them.
func TestRecompileTwinsReordered(t *testing.T) {
	twin := func(backend string) Route {
		return Route{ID: RouteID{Kind: KindHTTPRoute, Namespace: "a", Name: "twin"}, Hostnames: []string{"a.example.com"},
			Rules: []Rule{{Backends: []BackendRef{{Name: backend, Weight: 1}}}}}
	}
	other := func(name string) Route {
		return Route{ID: RouteID{Kind: KindHTTPRoute, Namespace: "a", Name: name}, Hostnames: []string{name + ".example.com"},
			Rules: []Rule{{Backends: []BackendRef{{Name: name, Weight: 1}}}}}
	}
	first, second, b, c := twin("first"), twin("second"), other("b"), other("c")
	for _, order := range [][2][]Route{
		{{first, second}, {second, first}},
		{{b, c, first, second}, {second, b, c, first}},
	} {
		prev, _ := Compile(order[0])
		recompiled, _ := Recompile(prev, pointers(order[1]))
		got := recompiled.Lookup(Request{Host: "a.example.com", Path: "/", Method: "GET"})
		if got == nil || got.Rule.Backends[0].Name != "second" {
			t.Errorf("%d routes reordered: %s; want the route listed first, to backend second", len(order[1]), describeTarget(got))
		}
	}
}

// TestRecompileKeepsFilters: the filters and backend TLS identities the
// proxy keeps state for (rate limits, credentials, transports) are those
// of every route after a recompilation, the unchanged routes' included,
// whether or not the caller says what changed.
func TestRecompileKeepsFilters(t *testing.T) {
	routes := benchRoutes(100)
	routes[10].Rules = []Rule{{
		Filters:  []Filter{{Type: FilterBasicAuth, BasicAuth: &BasicAuth{Source: "Secret default/u", Realm: "r"}}},
		Backends: []BackendRef{{Name: "tls", Weight: 1, Protocol: "https", TLS: &BackendTLS{ServerName: "backend.example.com"}}},
	}}
	table, errs := Compile(routes)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	changed := slices.Clone(routes)
	changed[50].Rules = []Rule{{Matches: []Match{{Path: PathMatch{Type: PathExact, Value: "/changed"}}}, Backends: changed[50].Rules[0].Backends}}
	want, _ := Compile(changed)
	recompiled, _ := Recompile(table, pointers(changed))
	told, _ := RecompileChanged(table, pointers(routes), pointers(changed), []RouteID{changed[50].ID})
	for name, got := range map[string]*Table{"recompiled": recompiled, "recompiled with changes": told} {
		if g, w := slices.Collect(got.Filters()), slices.Collect(want.Filters()); len(w) != 1 || !slices.Equal(g, w) {
			t.Errorf("%s: filters %v, want %v", name, g, w)
		}
		if g, w := slices.Collect(got.BackendTLS()), slices.Collect(want.BackendTLS()); len(w) != 1 || !slices.Equal(g, w) {
			t.Errorf("%s: backend TLS %v, want %v", name, g, w)
		}
	}
}

// goneBetween is what GoneSince should say: the IDs prev serves and next
// does not, sorted.
func goneBetween(prev, next *Table) []RouteID {
	served := map[RouteID]bool{}
	for id := range next.RouteIDs() {
		served[id] = true
	}
	var gone []RouteID
	for id := range prev.RouteIDs() {
		if !served[id] && !slices.Contains(gone, id) {
			gone = append(gone, id)
		}
	}
	return sortedIDs(gone)
}

// values returns the routes of a list of pointers, in order.
func values(routes []*Route) []Route {
	list := make([]Route, len(routes))
	for i, r := range routes {
		list[i] = *r
	}
	return list
}

func sortedIDs(ids []RouteID) []RouteID {
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(a, b RouteID) int { return strings.Compare(a.String(), b.String()) })
	return ids
}

// TestGoneSince: a Table recompiled with what changed names the routes
// that went, and only those: not a route changed, nor one that lost one
// listener hostname of two, and a route that no longer compiles is gone.
func TestGoneSince(t *testing.T) {
	routes := benchRoutes(100)
	twice := routes[20]
	twice.Listener, twice.Hostnames = "*.example.com", []string{"twice.example.com"}
	routes = slices.Insert(routes, 21, twice)
	table, errs := Compile(routes, "", "*.example.com")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	next := slices.Clone(routes)
	next[50].Rules = []Rule{{Matches: []Match{{Path: PathMatch{Type: PathExact, Value: "/changed"}}}, Backends: next[50].Rules[0].Backends}}
	next[60].Rules = []Rule{{Matches: []Match{{Path: PathMatch{Type: PathRegularExpression, Value: "("}}}, Backends: next[60].Rules[0].Backends}}
	changed, broken, removed := next[50].ID, next[60].ID, next[70].ID
	next = slices.Delete(next, 70, 71)
	next = slices.Delete(next, 21, 22) // twice keeps its entry at ""
	told, _ := RecompileChanged(table, pointers(routes), pointers(next), []RouteID{changed, broken, removed, twice.ID}, "", "*.example.com")
	gone, ok := told.GoneSince(table.Serial())
	if !ok {
		t.Fatal("a Table recompiled with what changed cannot tell what went")
	}
	if g, w := sortedIDs(gone), sortedIDs([]RouteID{removed, broken}); !slices.Equal(g, w) || !slices.Equal(g, goneBetween(table, told)) {
		t.Errorf("gone %v, want %v", g, w)
	}
	unrelated, _ := Compile(next, "", "*.example.com")
	if _, ok := told.GoneSince(unrelated.Serial()); ok {
		t.Error("GoneSince answers for a Table it was not recompiled from")
	}
	if gone, ok := told.GoneSince(told.Serial()); !ok || len(gone) > 0 {
		t.Errorf("since itself: gone %v, %v; want none, told", gone, ok)
	}
	recompiled, _ := Recompile(table, pointers(next), "", "*.example.com")
	if _, ok := recompiled.GoneSince(table.Serial()); ok {
		t.Error("a Table recompiled without being told what changed says what went")
	}
}
