package proxy

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

func TestFilters(t *testing.T) {
	s := startServer(t, testOptions())
	var mirrored atomic.Int32
	mirrorSeen := make(chan string, 16)
	s.UpdateEndpoints(map[string][]Endpoint{
		"web":   {{Address: startBackend(t, echo("web"))}},
		"other": {{Address: startBackend(t, echo("other"))}},
		"mirror": {{Address: startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mirrored.Add(1)
			mirrorSeen <- r.Host + " " + r.URL.Path + " " + r.Header.Get("X-Test")
			time.Sleep(2 * time.Second) // a slow mirror must not delay the response
		}))}},
	})
	headerMod := &router.HeaderModifier{
		Set:    []router.Header{{Name: "X-Test", Value: "set"}},
		Add:    []router.Header{{Name: "X-Added", Value: "added"}},
		Remove: []string{"X-Remove"},
	}
	rule := func(path string, filters ...router.Filter) router.Rule {
		return router.Rule{Matches: prefix(path), Filters: filters, Backends: backends("web")}
	}
	redirect := func(rd router.Redirect) router.Filter {
		return router.Filter{Type: router.FilterRequestRedirect, Redirect: &rd}
	}
	rewrite := func(rw router.Rewrite) router.Filter {
		return router.Filter{Type: router.FilterURLRewrite, Rewrite: &rw}
	}
	routes := []router.Route{
		route("reqhdr", nil, rule("/reqhdr", router.Filter{Type: router.FilterRequestHeaderModifier, RequestHeaders: headerMod})),
		route("resphdr", nil, rule("/resphdr", router.Filter{Type: router.FilterResponseHeaderModifier, ResponseHeaders: &router.HeaderModifier{
			Set: []router.Header{{Name: "X-Resp", Value: "yes"}}, Remove: []string{"X-Backend"},
		}})),
		route("backendhdr", nil, router.Rule{Matches: prefix("/backendhdr"), Backends: []router.BackendRef{{
			Name: "web", Weight: 1, Filters: []router.Filter{{Type: router.FilterRequestHeaderModifier, RequestHeaders: headerMod}},
		}}}),
		route("scheme", nil, rule("/scheme", redirect(router.Redirect{Scheme: "https"}))),
		route("hostname", nil, rule("/hostname", redirect(router.Redirect{Hostname: "elsewhere.test", StatusCode: 301}))),
		route("port", nil, rule("/port", redirect(router.Redirect{Scheme: "https", Port: 8443}))),
		route("fullpath", nil, rule("/fullpath", redirect(router.Redirect{Path: &router.PathModifier{Type: router.ReplaceFullPath, Value: "/new"}}))),
		route("prefixpath", nil, rule("/prefixpath", redirect(router.Redirect{Path: &router.PathModifier{Type: router.ReplacePrefixMatch, Value: "/moved"}}))),
		route("requesthost", nil, rule("/requesthost", redirect(router.Redirect{
			Path: &router.PathModifier{Type: router.ReplaceFullPath, Value: "/app"}, RequestHost: true, DropQuery: true,
		}))),
		route("rwhost", nil, rule("/rwhost", rewrite(router.Rewrite{Hostname: "rewritten.test"}))),
		route("rwfull", nil, rule("/rwfull", rewrite(router.Rewrite{Path: &router.PathModifier{Type: router.ReplaceFullPath, Value: "/full"}}))),
		route("rwprefix", nil, rule("/rwprefix/", rewrite(router.Rewrite{Path: &router.PathModifier{Type: router.ReplacePrefixMatch, Value: "/p"}}))),
		route("rwstrip", nil, rule("/rwstrip", rewrite(router.Rewrite{Path: &router.PathModifier{Type: router.ReplacePrefixMatch, Value: "/"}}))),
		// The backend's rewrite applies after the rule's, whose host it
		// keeps.
		route("rwbackend", nil, router.Rule{Matches: prefix("/rwbackend"),
			Filters: []router.Filter{rewrite(router.Rewrite{Hostname: "rule.test"})},
			Backends: []router.BackendRef{{Name: "web", Weight: 1, Filters: []router.Filter{
				rewrite(router.Rewrite{Path: &router.PathModifier{Type: router.ReplacePrefixMatch, Value: "/rewritten-prefix"}}),
			}}}}),
		route("mirror", nil, rule("/mirror",
			router.Filter{Type: router.FilterRequestHeaderModifier, RequestHeaders: headerMod},
			router.Filter{Type: router.FilterRequestMirror, Mirror: &router.Mirror{Backend: router.BackendRef{Name: "mirror", Weight: 1}}})),
		route("mirrornone", nil, rule("/mirrornone",
			router.Filter{Type: router.FilterRequestMirror, Mirror: &router.Mirror{Backend: router.BackendRef{Name: "mirror", Weight: 1}, Numerator: 0, Denominator: 100}})),
	}
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, routes...)})[0]
	_, port, _ := strings.Cut(addr, ":")
	base := "http://" + addr

	tests := []struct {
		name, path string
		header     []string
		status     int
		location   string
		// body and respHeader hold "Name=value" lines expected in the
		// echoed request and in the response header.
		body       []string
		respHeader []string
	}{
		{name: "request header modifier", path: "/reqhdr", header: []string{"X-Test", "old", "X-Added", "first", "X-Remove", "gone"}, status: 200,
			body: []string{"X-Test=set\n", "X-Added=first,added\n"}},
		{name: "response header modifier", path: "/resphdr", status: 200, respHeader: []string{"X-Resp=yes", "X-Backend="}},
		{name: "backend filter", path: "/backendhdr", status: 200, body: []string{"X-Test=set\n"}},
		{name: "redirect scheme drops default port", path: "/scheme/a?q=1", header: []string{"Host", "app.test:" + port}, status: 302, location: "https://app.test/scheme/a?q=1"},
		{name: "redirect hostname keeps listener port", path: "/hostname", status: 301, location: "http://elsewhere.test:" + port + "/hostname"},
		{name: "redirect port", path: "/port", header: []string{"Host", "app.test"}, status: 302, location: "https://app.test:8443/port"},
		{name: "redirect full path", path: "/fullpath/x", header: []string{"Host", "app.test"}, status: 302, location: "http://app.test:" + port + "/new"},
		{name: "redirect prefix", path: "/prefixpath/x/y", header: []string{"Host", "app.test"}, status: 302, location: "http://app.test:" + port + "/moved/x/y"},
		{name: "redirect to the Host as sent, without the query", path: "/requesthost?q=1", header: []string{"Host", "App.test:8080"}, status: 302, location: "http://App.test:8080/app"},
		{name: "rewrite hostname", path: "/rwhost/x", status: 200, body: []string{"host=rewritten.test ", "path=/rwhost/x "}},
		{name: "rewrite full path", path: "/rwfull/x?q=1", status: 200, body: []string{"path=/full ", "query=q=1 "}},
		{name: "rewrite prefix", path: "/rwprefix/x/y", status: 200, body: []string{"path=/p/x/y "}},
		{name: "rewrite prefix of the whole path", path: "/rwprefix", status: 200, body: []string{"path=/p "}},
		{name: "rewrite prefix to root", path: "/rwstrip/x", status: 200, body: []string{"path=/x "}},
		{name: "rewrite prefix to root, whole path", path: "/rwstrip", status: 200, body: []string{"path=/ "}},
		{name: "backend rewrite", path: "/rwbackend/original", status: 200, body: []string{"host=rule.test ", "path=/rewritten-prefix/original "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, noRedirects, base+tt.path, tt.header...)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if got := resp.Header.Get("Location"); got != tt.location {
				t.Errorf("Location = %q, want %q", got, tt.location)
			}
			for _, want := range tt.body {
				if !strings.Contains(body, want) {
					t.Errorf("backend saw no %q:\n%s", want, body)
				}
			}
			for _, kv := range tt.respHeader {
				name, value, _ := strings.Cut(kv, "=")
				if got := resp.Header.Get(name); got != value {
					t.Errorf("response %s = %q, want %q", name, got, value)
				}
			}
		})
	}

	t.Run("mirror", func(t *testing.T) {
		start := time.Now()
		resp, body := get(t, noRedirects, base+"/mirror/x", "Host", "app.test")
		if resp.StatusCode != 200 || !strings.Contains(body, "backend=web") {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("the mirror delayed the response by %v", d)
		}
		select {
		case got := <-mirrorSeen:
			if got != "app.test /mirror/x set" {
				t.Errorf("mirror saw %q", got)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("mirror backend got no request")
		}
		for range 5 {
			get(t, noRedirects, base+"/mirrornone")
		}
		time.Sleep(100 * time.Millisecond)
		if n := mirrored.Load(); n != 1 {
			t.Errorf("mirror got %d requests, want 1 (0/100 mirrors none)", n)
		}
	})
}

func TestWeightedBackends(t *testing.T) {
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{
		"a": {{Address: startBackend(t, echo("a"))}},
		"b": {{Address: startBackend(t, echo("b"))}},
		"c": {{Address: startBackend(t, echo("c"))}},
	})
	refs := []router.BackendRef{{Name: "a", Weight: 3}, {Name: "b", Weight: 1}, {Name: "c", Weight: 0}}
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, route("w", nil, router.Rule{Backends: refs}))})[0]
	counts := map[string]int{}
	const n = 400
	for range n {
		resp, _ := get(t, http.DefaultClient, "http://"+addr+"/")
		counts[resp.Header.Get("X-Backend")]++
	}
	if counts["c"] != 0 || counts["a"] < n*3/4-60 || counts["a"] > n*3/4+60 {
		t.Errorf("counts %v, want about 300/100/0", counts)
	}
}

// TestMirrorBodies sends requests with bodies through mirrors: the copy
// carries the whole body, of known length or chunked, or none where the
// mirror says so; a body past the mirror's bound is not mirrored, and the
// request itself is served either way.
func TestMirrorBodies(t *testing.T) {
	s := startServer(t, testOptions())
	seen := make(chan string, 16)
	s.UpdateEndpoints(map[string][]Endpoint{
		"web": {{Address: startBackend(t, echo("web"))}},
		"mirror": {{Address: startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				seen <- "error: " + err.Error()
				return
			}
			seen <- fmt.Sprintf("%s %s %d %d", r.Method, r.URL.Path, r.ContentLength, len(b))
		}))}},
	})
	// Both the backend and the mirror speak protocol: the body is copied
	// as the backend's request reads it, which over h2c ends at its
	// declared length, without a read for EOF.
	mirrorTo := func(path, protocol string, m router.Mirror) router.Route {
		m.Backend = router.BackendRef{Name: "mirror", Weight: 1, Protocol: protocol}
		return route(path, nil, router.Rule{Matches: prefix(path),
			Backends: []router.BackendRef{{Name: "web", Weight: 1, Protocol: protocol}},
			Filters:  []router.Filter{{Type: router.FilterRequestMirror, Mirror: &m}}})
	}
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t,
		mirrorTo("/copy", "", router.Mirror{}), mirrorTo("/nobody", "", router.Mirror{NoBody: true}),
		mirrorTo("/h2c", "h2c", router.Mirror{}))})[0]
	chunked := func(s string) io.Reader { return io.MultiReader(strings.NewReader(s)) }
	big := strings.Repeat("x", 1<<20+1)
	for _, tt := range []struct {
		name, path string
		body       io.Reader
		want       string
	}{
		{"known length", "/copy", strings.NewReader("hello"), "POST /copy 5 5"},
		{"chunked", "/copy", chunked("hello, chunked"), "POST /copy 14 14"},
		{"to an h2c backend", "/h2c", strings.NewReader("hello"), "POST /h2c 5 5"},
		{"without the body", "/nobody", strings.NewReader("hello"), "POST /nobody 0 0"},
		{"past the bound", "/copy", strings.NewReader(big), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post("http://"+addr+tt.path, "text/plain", tt.body)
			if body := bodyOf(t, resp, err); resp.StatusCode != http.StatusOK || !strings.Contains(body, "backend=web") {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			select {
			case got := <-seen:
				if got != tt.want {
					t.Errorf("mirror saw %q, want %q", got, tt.want)
				}
			case <-time.After(2 * time.Second):
				if tt.want != "" {
					t.Errorf("mirror saw nothing, want %q", tt.want)
				}
			}
		})
	}
}
