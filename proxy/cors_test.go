package proxy

import (
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

// TestCORS sends preflight and other cross-origin requests to rules with
// a CORS filter on every engine: the native HTTP/1.1 engine, ReverseProxy
// (the stdlib engine) and the bridge (HTTP/2 on the native engine). A
// preflight is answered without reaching the backend, whether its origin
// is allowed or not; other requests reach it and come back with the allow
// fields for allowed origins only.
func TestCORS(t *testing.T) {
	var forwarded atomic.Int64
	backend := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forwarded.Add(1)
		w.Header().Set("X-Header-3", "exposed")
		io.WriteString(w, "from backend")
	}))
	origins := func(values ...string) []router.Origin {
		parsed := make([]router.Origin, len(values))
		for i, v := range values {
			o, err := router.ParseOrigin(v)
			if err != nil {
				t.Fatal(err)
			}
			parsed[i] = o
		}
		return parsed
	}
	corsRule := func(path string, c router.CORS) router.Route {
		return route(path[1:], nil, router.Rule{Matches: prefix(path), Backends: backends("web"),
			Filters: []router.Filter{{Type: router.FilterCORS, CORS: &c}}})
	}
	routes := compile(t,
		corsRule("/listed", router.CORS{
			AllowOrigins: origins("https://www.foo.com", "https://*.bar.com"),
			AllowMethods: []string{"GET", "OPTIONS"}, AllowHeaders: []string{"x-header-1", "x-header-2"},
			ExposeHeaders: []string{"x-header-3", "x-header-4"}, AllowCredentials: true, MaxAge: time.Hour,
		}),
		corsRule("/any", router.CORS{AllowOrigins: origins("*"), AllowMethods: []string{"PUT"}, ExposeHeaders: []string{"*"}, MaxAge: 5 * time.Second}),
		corsRule("/any-credentials", router.CORS{
			AllowOrigins: origins("*"), AllowMethods: []string{"*"}, AllowHeaders: []string{"*"}, ExposeHeaders: []string{"*"}, AllowCredentials: true,
		}),
		corsRule("/literal", router.CORS{
			AllowOrigins: origins("*"), AllowMethods: []string{"GET", "PUT"}, AllowCredentials: true, LiteralWildcard: true,
		}),
		route("plain", nil, router.Rule{Matches: prefix("/plain"), Backends: backends("web")}),
	)

	const (
		preflightMethod  = "Access-Control-Request-Method"
		preflightHeaders = "Access-Control-Request-Headers"
		allowOrigin      = "Access-Control-Allow-Origin"
		allowMethods     = "Access-Control-Allow-Methods"
		allowHeaders     = "Access-Control-Allow-Headers"
		allowCredentials = "Access-Control-Allow-Credentials"
		exposeHeaders    = "Access-Control-Expose-Headers"
		maxAge           = "Access-Control-Max-Age"
	)
	tests := []struct {
		name, method, path string
		header             []string
		status             int
		// reaches says the backend gets the request.
		reaches bool
		// want maps response fields to their values, "" for absent.
		want map[string]string
		vary bool
	}{
		{name: "preflight from a listed origin", method: "OPTIONS", path: "/listed",
			header: []string{"Origin", "https://www.foo.com", preflightMethod, "GET", preflightHeaders, "x-header-1, x-header-2"},
			status: 204, vary: true, want: map[string]string{
				allowOrigin: "https://www.foo.com", allowMethods: "GET, OPTIONS", allowHeaders: "x-header-1, x-header-2",
				exposeHeaders: "x-header-3, x-header-4", maxAge: "3600", allowCredentials: "true",
			}},
		{name: "preflight from an origin under a wildcard, two labels deep", method: "OPTIONS", path: "/listed",
			header: []string{"Origin", "https://xpto.www.bar.com", preflightMethod, "GET"},
			status: 204, vary: true, want: map[string]string{allowOrigin: "https://xpto.www.bar.com", allowMethods: "GET, OPTIONS", allowCredentials: "true"}},
		{name: "preflight from the wildcard's own domain", method: "OPTIONS", path: "/listed",
			header: []string{"Origin", "https://bar.com", preflightMethod, "GET"},
			status: 204, vary: true, want: map[string]string{allowOrigin: "", allowMethods: "", allowCredentials: "", maxAge: ""}},
		{name: "preflight from an origin not listed", method: "OPTIONS", path: "/listed",
			header: []string{"Origin", "https://foobar.com", preflightMethod, "GET"},
			status: 204, vary: true, want: map[string]string{allowOrigin: "", allowMethods: "", allowHeaders: "", exposeHeaders: ""}},
		{name: "preflight from a listed host on another port", method: "OPTIONS", path: "/listed",
			header: []string{"Origin", "https://www.foo.com:8443", preflightMethod, "GET"},
			status: 204, vary: true, want: map[string]string{allowOrigin: ""}},
		{name: "preflight from a listed host over http", method: "OPTIONS", path: "/listed",
			header: []string{"Origin", "http://www.foo.com", preflightMethod, "GET"},
			status: 204, vary: true, want: map[string]string{allowOrigin: ""}},
		{name: "request from a listed origin", method: "GET", path: "/listed", header: []string{"Origin", "https://www.foo.com"},
			status: 200, reaches: true, vary: true, want: map[string]string{
				allowOrigin: "https://www.foo.com", allowCredentials: "true", exposeHeaders: "x-header-3, x-header-4", allowMethods: "", maxAge: "",
			}},
		{name: "request from an origin under a wildcard, default port given", method: "POST", path: "/listed", header: []string{"Origin", "https://api.bar.com:443"},
			status: 200, reaches: true, vary: true, want: map[string]string{allowOrigin: "https://api.bar.com:443", allowCredentials: "true"}},
		{name: "request from an origin not listed", method: "GET", path: "/listed", header: []string{"Origin", "https://foobar.com"},
			status: 200, reaches: true, vary: true, want: map[string]string{allowOrigin: "", allowCredentials: "", exposeHeaders: ""}},
		{name: "request without origin", method: "GET", path: "/listed",
			status: 200, reaches: true, vary: true, want: map[string]string{allowOrigin: ""}},
		{name: "OPTIONS without a requested method is no preflight", method: "OPTIONS", path: "/listed", header: []string{"Origin", "https://www.foo.com"},
			status: 200, reaches: true, vary: true, want: map[string]string{allowOrigin: "https://www.foo.com", allowMethods: ""}},
		{name: "preflight to any origin without credentials", method: "OPTIONS", path: "/any",
			header: []string{"Origin", "https://foobar.com:12345", preflightMethod, "PUT"},
			status: 204, want: map[string]string{allowOrigin: "*", allowMethods: "PUT", allowCredentials: "", exposeHeaders: "*", maxAge: "5"}},
		{name: "request to any origin without credentials", method: "PUT", path: "/any", header: []string{"Origin", "https://foobar.com"},
			status: 200, reaches: true, want: map[string]string{allowOrigin: "*", allowCredentials: "", exposeHeaders: "*"}},
		{name: "preflight to any origin with credentials echoes what it asks", method: "OPTIONS", path: "/any-credentials",
			header: []string{"Origin", "https://other.foo.com", preflightMethod, "PUT", preflightHeaders, "x-header-1, x-header-2"},
			status: 204, vary: true, want: map[string]string{
				allowOrigin: "https://other.foo.com", allowMethods: "PUT", allowHeaders: "x-header-1, x-header-2", allowCredentials: "true", exposeHeaders: "", maxAge: "",
			}},
		{name: "request to any origin with credentials", method: "GET", path: "/any-credentials", header: []string{"Origin", "null"},
			status: 200, reaches: true, vary: true, want: map[string]string{allowOrigin: "null", allowCredentials: "true", exposeHeaders: ""}},
		{name: "preflight to any origin with credentials and LiteralWildcard says * (ingress-nginx)", method: "OPTIONS", path: "/literal",
			header: []string{"Origin", "https://other.foo.com", preflightMethod, "PUT"},
			status: 204, want: map[string]string{allowOrigin: "*", allowMethods: "GET, PUT", allowCredentials: "true"}},
		{name: "request to any origin with credentials and LiteralWildcard says * (ingress-nginx)", method: "GET", path: "/literal", header: []string{"Origin", "https://other.foo.com"},
			status: 200, reaches: true, want: map[string]string{allowOrigin: "*", allowCredentials: "true"}},
		{name: "preflight to a rule without CORS goes to the backend", method: "OPTIONS", path: "/plain",
			header: []string{"Origin", "https://www.foo.com", preflightMethod, "GET"},
			status: 200, reaches: true, want: map[string]string{allowOrigin: "", allowMethods: ""}},
	}

	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(h2c.CloseIdleConnections)
	for _, e := range []struct {
		name   string
		engine Engine
		client *http.Client
	}{
		{"native HTTP/1.1", EngineNative, http.DefaultClient},
		{"ReverseProxy", EngineStdlib, http.DefaultClient},
		{"bridge", EngineNative, &http.Client{Transport: h2c}},
	} {
		t.Run(e.name, func(t *testing.T) {
			opts := testOptions()
			opts.HTTP1Engine = e.engine
			s := startServer(t, opts)
			s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
			base := "http://" + apply(t, s, Listener{Address: "127.0.0.1:0", Routes: routes})[0]
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					req, err := http.NewRequest(tt.method, base+tt.path, nil)
					if err != nil {
						t.Fatal(err)
					}
					for i := 0; i+1 < len(tt.header); i += 2 {
						req.Header.Set(tt.header[i], tt.header[i+1])
					}
					before := forwarded.Load()
					resp, err := e.client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != tt.status {
						t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
					}
					if reached := forwarded.Load() > before; reached != tt.reaches {
						t.Errorf("reached the backend: %v, want %v", reached, tt.reaches)
					}
					for name, want := range tt.want {
						if got := resp.Header.Values(name); want == "" && len(got) > 0 || want != "" && !slices.Equal(got, []string{want}) {
							t.Errorf("%s = %q, want %q", name, got, want)
						}
					}
					if vary := slices.Contains(resp.Header.Values("Vary"), "Origin"); vary != tt.vary {
						t.Errorf("Vary: Origin = %v, want %v (Vary %q)", vary, tt.vary, resp.Header.Values("Vary"))
					}
				})
			}
		})
	}
}
