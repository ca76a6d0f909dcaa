package proxy

import (
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/hostgate/hostgate/router"
)

var testResponseRewrite = &router.ResponseRewrite{
	CookieDomain: &router.Replacement{From: "internal.local", To: "example.com"},
	CookiePath:   &router.Replacement{From: "/app", To: "/"},
	Redirect:     &router.Replacement{From: "http://internal.local/", To: "https://example.com/shop/"},
}

// TestResponseRewrite has a backend answer with cookies and a redirect
// naming its own host, on every engine: the client sees them rewritten,
// and a rule without the filter passes them as they are.
func TestResponseRewrite(t *testing.T) {
	backend := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "session=1; Domain=internal.local; Path=/app")
		w.Header().Add("Set-Cookie", "theme=dark; Path=/app/settings; HttpOnly")
		w.Header().Set("Location", "http://internal.local/x")
		w.Header().Set("Refresh", "3; url=http://internal.local/later")
		w.WriteHeader(http.StatusFound)
		io.WriteString(w, "moved")
	}))
	routes := compile(t,
		route("rewritten", nil, router.Rule{Matches: prefix("/rewritten"), Backends: backends("web"),
			Filters: []router.Filter{{Type: router.FilterResponseRewrite, ResponseRewrite: testResponseRewrite}}}),
		route("plain", nil, router.Rule{Matches: prefix("/plain"), Backends: backends("web")}),
	)
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(h2c.CloseIdleConnections)
	noFollow := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, e := range []struct {
		name   string
		engine Engine
		client *http.Client
	}{
		{"native HTTP/1.1", EngineNative, &http.Client{CheckRedirect: noFollow}},
		{"ReverseProxy", EngineStdlib, &http.Client{CheckRedirect: noFollow}},
		{"bridge", EngineNative, &http.Client{Transport: h2c, CheckRedirect: noFollow}},
	} {
		t.Run(e.name, func(t *testing.T) {
			opts := testOptions()
			opts.HTTP1Engine = e.engine
			s := startServer(t, opts)
			s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
			base := "http://" + apply(t, s, Listener{Address: "127.0.0.1:0", Routes: routes})[0]
			for _, tt := range []struct {
				path                string
				cookies             []string
				location, refreshed string
			}{
				{"/rewritten", []string{"session=1; Domain=example.com; Path=/", "theme=dark; Path=//settings; HttpOnly"},
					"https://example.com/shop/x", "3; url=https://example.com/shop/later"},
				{"/plain", []string{"session=1; Domain=internal.local; Path=/app", "theme=dark; Path=/app/settings; HttpOnly"},
					"http://internal.local/x", "3; url=http://internal.local/later"},
			} {
				resp, err := e.client.Get(base + tt.path)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusFound {
					t.Errorf("%s: status %d, want 302", tt.path, resp.StatusCode)
				}
				if got := resp.Header.Values("Set-Cookie"); !slices.Equal(got, tt.cookies) {
					t.Errorf("%s: Set-Cookie %q, want %q", tt.path, got, tt.cookies)
				}
				if got := resp.Header.Get("Location"); got != tt.location {
					t.Errorf("%s: Location %q, want %q", tt.path, got, tt.location)
				}
				if got := resp.Header.Get("Refresh"); got != tt.refreshed {
					t.Errorf("%s: Refresh %q, want %q", tt.path, got, tt.refreshed)
				}
			}
		})
	}
}

// TestResponseRewriteConcurrent rewrites the answers of requests at once
// through ReverseProxy, whose answers without a Server field of the
// backend's get the one every response shares: no request writes to it
// (the race detector tells).
func TestResponseRewriteConcurrent(t *testing.T) {
	backend := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://internal.local/x")
	}))
	opts := testOptions()
	opts.HTTP1Engine = EngineStdlib
	s := startServer(t, opts)
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
	base := "http://" + apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t,
		route("rewritten", nil, router.Rule{Matches: prefix("/"), Backends: backends("web"),
			Filters: []router.Filter{{Type: router.FilterResponseRewrite, ResponseRewrite: testResponseRewrite}}}))})[0]
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				resp, err := http.Get(base)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if got := resp.Header.Get("Location"); got != "https://example.com/shop/x" || resp.Header.Get("Server") != "hostgate" {
					t.Errorf("Location %q, Server %q", got, resp.Header.Get("Server"))
				}
			}
		})
	}
	wg.Wait()
}
