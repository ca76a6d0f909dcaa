package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// authCacheIngress is an Ingress of class nginx for host with paths /a
// and /b, asking the Service auth.security about every request, with
// the annotations given (without their prefix).
func authCacheIngress(name, host string, annotations ...string) string {
	return nginxIngress(name, host, "web", []string{"/a", "/b"}, append([]string{
		"auth-url", "http://auth.security.svc/check", "auth-response-headers", "X-Auth-User",
	}, annotations...)...)
}

// TestIngressNginxAuthCache serves Ingresses whose authorization service
// counts what it is asked: with auth-cache-key, an answer the durations
// keep is reused for the same key on the same path (its fields copied
// as the service gave them), until it expires, across a configuration
// change; other keys, other paths, answers that set a cookie or say
// no-store, and statuses the durations do not list are asked about each
// time, and so is every request without auth-cache-key.
func TestIngressNginxAuthCache(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "backend user=%s", r.Header.Get("X-Auth-User"))
	}))
	defer backend.Close()
	var mu sync.Mutex
	asked := map[string]int{}
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := r.Header.Get("Authorization")
		mu.Lock()
		asked[r.Header.Get("X-Original-Url")+" "+token]++
		mu.Unlock()
		switch token {
		case "alice", "bob":
			w.Header().Set("X-Auth-User", token)
		case "cookie":
			w.Header().Set("X-Auth-User", token)
			w.Header().Set("Set-Cookie", "session=1")
		case "nostore":
			w.Header().Set("X-Auth-User", token)
			w.Header().Set("Cache-Control", "no-store")
		case "forbidden":
			w.WriteHeader(http.StatusForbidden)
		default:
			w.Header().Set("Www-Authenticate", `Bearer realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer auth.Close()
	services := loopbackService("default", "web", 80, addr2port(t, backend.Listener.Addr().String())) +
		loopbackService("security", "auth", 80, addr2port(t, auth.Listener.Addr().String()))
	ingresses := authCacheIngress("cached", "cached.example.com", "auth-cache-key", "$http_authorization", "auth-cache-duration", "200 401 3s") +
		authCacheIngress("plain", "plain.example.com")
	dir := t.TempDir()
	writeConfig(t, dir, services+ingresses)
	httpPort := freePort(t)
	startHostgate(t, "--config", dir, "--ingress-class", "nginx", "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	eventually(t, "served", expect(base+"/a", "plain.example.com", 401, ""))

	// ask sends a request and says how many times the service was asked
	// about it, with what the client got.
	ask := func(host, path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Host = host
		req.Header.Set("Authorization", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		return asked["http://"+host+path+" "+token], fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("Www-Authenticate"))
	}
	check := func(what, host, path, token string, wantAsked int, wantAnswer string) {
		t.Helper()
		if n, answer := ask(host, path, token); n != wantAsked || answer != wantAnswer {
			t.Errorf("%s: %s%s with %q: %q, service asked %d times; want %q, %d", what, host, path, token, answer, n, wantAnswer, wantAsked)
		}
	}
	for i := range 3 {
		check("kept allow", "cached.example.com", "/a", "alice", 1, "200 ")
		check("kept 401", "cached.example.com", "/a", "eve", 1, `401 Bearer realm="test"`)
		check("403 not in the durations", "cached.example.com", "/a", "forbidden", i+1, "403 ")
		check("sets a cookie", "cached.example.com", "/a", "cookie", i+1, "200 ")
		check("no-store", "cached.example.com", "/a", "nostore", i+1, "200 ")
		check("without auth-cache-key", "plain.example.com", "/a", "alice", i+1, "200 ")
	}
	check("another key", "cached.example.com", "/a", "bob", 1, "200 ")
	check("another path", "cached.example.com", "/b", "alice", 1, "200 ")
	// The kept answer's fields reach the backend as the service's did.
	if body, _ := trafficGet(t, base+"/a", "cached.example.com", "Authorization: alice"); body != "backend user=alice" {
		t.Errorf("a kept allow gave the backend %q, want its X-Auth-User", body)
	}

	// A configuration change keeps the answers of the Ingress it keeps.
	writeConfig(t, dir, services+ingresses+authCacheIngress("new", "new.example.com"))
	eventually(t, "new Ingress", expect(base+"/a", "new.example.com", 401, ""))
	check("kept across a configuration change", "cached.example.com", "/a", "alice", 1, "200 ")

	time.Sleep(3100 * time.Millisecond)
	check("expired", "cached.example.com", "/a", "alice", 2, "200 ")
	check("kept again", "cached.example.com", "/a", "alice", 2, "200 ")
}

// TestIngressNginxAuthSetCookie: the Set-Cookie fields of the
// authorization service's answer reach the client with the backend's own
// on answers nginx's add_header adds to (2xx but 202, 301-304, 307, 308,
// the 302 to auth-signin), and, with auth-always-set-cookie, on every
// answer: a backend's 404 and 503, a 401 from the service.
func TestIngressNginxAuthSetCookie(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "app", Value: "1"})
		switch r.URL.Path {
		case "/a/missing":
			w.WriteHeader(http.StatusNotFound)
		case "/a/fail":
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer backend.Close()
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "alice" {
			http.SetCookie(w, &http.Cookie{Name: "auth", Value: "alice"})
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "auth", Value: "expired"})
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer auth.Close()
	dir := t.TempDir()
	writeConfig(t, dir, loopbackService("default", "web", 80, addr2port(t, backend.Listener.Addr().String()))+
		loopbackService("security", "auth", 80, addr2port(t, auth.Listener.Addr().String()))+
		authCacheIngress("plain", "plain.example.com")+
		authCacheIngress("always", "always.example.com", "auth-always-set-cookie", "true")+
		authCacheIngress("signin", "signin.example.com", "auth-signin", "https://login.example.com/start"))
	httpPort := freePort(t)
	startHostgate(t, "--config", dir, "--ingress-class", "nginx", "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	eventually(t, "served", expect(base+"/a", "always.example.com", 401, ""))
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		host, path, token string
		status            int
		cookies           string
	}{
		{"plain.example.com", "/a/ok", "alice", 200, "app=1 auth=alice"},
		{"plain.example.com", "/a/missing", "alice", 404, "app=1"},
		{"plain.example.com", "/a/fail", "alice", 503, "app=1"},
		{"plain.example.com", "/a/ok", "eve", 401, ""},
		{"always.example.com", "/a/ok", "alice", 200, "app=1 auth=alice"},
		{"always.example.com", "/a/missing", "alice", 404, "app=1 auth=alice"},
		{"always.example.com", "/a/fail", "alice", 503, "app=1 auth=alice"},
		{"always.example.com", "/a/ok", "eve", 401, "auth=expired"},
		{"signin.example.com", "/a/ok", "eve", 302, "auth=expired"},
	} {
		req, _ := http.NewRequest("GET", base+tc.path, nil)
		req.Host = tc.host
		req.Header.Set("Authorization", tc.token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var cookies []string
		for _, c := range resp.Cookies() {
			cookies = append(cookies, c.Name+"="+c.Value)
		}
		slices.Sort(cookies)
		if got := strings.Join(cookies, " "); resp.StatusCode != tc.status || got != tc.cookies {
			t.Errorf("%s%s with %s: %d with cookies %q, want %d with %q", tc.host, tc.path, tc.token, resp.StatusCode, got, tc.status, tc.cookies)
		}
	}
}

// TestIngressNginxAuthProxySetHeaders: the fields of auth-proxy-set-headers'
// ConfigMap reach the authorization service over what the client sent
// under those names, follow an edit of the ConfigMap without a restart,
// and a value hostgate cannot send as nginx would (a variable) answers
// 500 without asking the service or reaching the backend.
func TestIngressNginxAuthProxySetHeaders(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "backend")
	}))
	defer backend.Close()
	var mu sync.Mutex
	var seen []string
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s realm=%s tenant=%q", r.Host, r.Header.Get("X-Auth-Realm"), r.Header.Values("X-Tenant")))
		mu.Unlock()
	}))
	defer auth.Close()
	services := loopbackService("default", "web", 80, addr2port(t, backend.Listener.Addr().String())) +
		loopbackService("security", "auth", 80, addr2port(t, auth.Listener.Addr().String()))
	configMap := func(name string, data string) string {
		return fmt.Sprintf("\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: default}\ndata: {%s}\n", name, data)
	}
	ingresses := nginxIngress("app", "app.example.com", "web", []string{"/"},
		"auth-url", "http://auth.security.svc/check", "auth-proxy-set-headers", "default/auth-fields") +
		nginxIngress("vars", "vars.example.com", "web", []string{"/"},
			"auth-url", "http://auth.security.svc/check", "auth-proxy-set-headers", "nginx-fields") +
		configMap("nginx-fields", `X-Tenant: "$remote_addr"`)
	dir := t.TempDir()
	writeConfig(t, dir, services+ingresses+configMap("auth-fields", `X-Auth-Realm: internal, X-Tenant: team-a, config.yaml: "not a field"`))
	httpPort := freePort(t)
	startHostgate(t, "--config", dir, "--ingress-class", "nginx", "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
	base := fmt.Sprintf("http://127.0.0.1:%d/", httpPort)
	eventually(t, "served", expect(base, "app.example.com", 200, "backend"))

	lastSeen := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			return ""
		}
		return seen[len(seen)-1]
	}
	if body, resp := trafficGet(t, base, "app.example.com", "X-Tenant: spoofed"); resp.StatusCode != 200 || body != "backend" {
		t.Errorf("allowed request: %d %q, want 200 from the backend", resp.StatusCode, body)
	}
	if got, want := lastSeen(), `auth.security.svc realm=internal tenant=["team-a"]`; got != want {
		t.Errorf("the authorization service saw %s, want %s: the ConfigMap's fields, not the client's", got, want)
	}

	writeConfig(t, dir, services+ingresses+configMap("auth-fields", `X-Auth-Realm: partners`))
	eventually(t, "the edited ConfigMap", func() string {
		if _, resp := trafficGet(t, base, "app.example.com"); resp.StatusCode != 200 {
			return fmt.Sprintf("status %d", resp.StatusCode)
		}
		if got, want := lastSeen(), `auth.security.svc realm=partners tenant=[]`; got != want {
			return fmt.Sprintf("the authorization service saw %s, want %s", got, want)
		}
		return ""
	})

	mu.Lock()
	asked := len(seen)
	mu.Unlock()
	if body, resp := trafficGet(t, base, "vars.example.com"); resp.StatusCode != http.StatusInternalServerError || body == "backend" {
		t.Errorf("a ConfigMap with an nginx variable: %d %q, want 500 without the backend", resp.StatusCode, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != asked {
		t.Errorf("the authorization service was asked about a path that fails closed: %s", seen[len(seen)-1])
	}
}
