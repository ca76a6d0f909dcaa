package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// extAuthConfig has an Ingress of class nginx with auth-url and its
// companions, an HTTPRoute with an ExternalAuth filter, a Gateway
// listener whose filter asks before route matching, on the Gateway's
// port %[1]d.
const extAuthConfig = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: protected
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/auth-url: http://auth.security.svc.cluster.local/check?from=nginx
    nginx.ingress.kubernetes.io/auth-response-headers: X-Auth-User, X-Auth-Groups
    nginx.ingress.kubernetes.io/auth-request-redirect: /after
spec:
  ingressClassName: nginx
  rules:
  - host: nginx.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: signin
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/auth-url: http://auth.security.svc/check
    nginx.ingress.kubernetes.io/auth-signin: https://$host/oauth2/start
    nginx.ingress.kubernetes.io/auth-method: POST
spec:
  ingressClassName: nginx
  rules:
  - host: signin.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: down
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/auth-url: http://gone.security.svc/check
spec:
  ingressClassName: nginx
  rules:
  - host: down.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: bad-method
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/auth-url: http://auth.security.svc/check
    nginx.ingress.kubernetes.io/auth-method: FOO
spec:
  ingressClassName: nginx
  rules:
  - host: bad-method.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: hostgate}
spec: {controllerName: hostgate.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: default}
spec:
  gatewayClassName: hostgate
  addresses: [{type: IPAddress, value: 127.0.0.1}]
  listeners:
  - {name: http, port: %[1]d, protocol: HTTP, hostname: route.example.com}
  - name: guarded
    port: %[1]d
    protocol: HTTP
    hostname: listener.example.com
    filters:
      requests:
      - type: ExternalAuth
        externalAuth:
          protocol: HTTP
          backendRef: {name: auth, namespace: security, port: 80}
          http: {path: /gate, allowedHeaders: [X-Token], allowedResponseHeaders: [X-Tier]}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: auth, namespace: security}
spec:
  from:
  - {group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: default}
  - {group: gateway.networking.k8s.io, kind: Gateway, namespace: default}
  to: [{group: "", kind: Service}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route, namespace: default}
spec:
  parentRefs: [{name: web, sectionName: http}]
  hostnames: [route.example.com]
  rules:
  - filters:
    - type: ExternalAuth
      externalAuth:
        protocol: HTTP
        backendRef: {name: auth, namespace: security, port: 80}
        http: {path: /gw, allowedHeaders: [X-Token]}
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: tiers, namespace: default}
spec:
  parentRefs: [{name: web, sectionName: guarded}]
  hostnames: [listener.example.com]
  rules:
  - matches: [{headers: [{name: X-Tier, value: gold}]}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: X-Route, value: gold}]}
    backendRefs: [{name: web, port: 80}]
  - backendRefs: [{name: web, port: 80}]
`

// TestExternalAuth serves requests that an authorization service, a
// real HTTP server, allows or denies, over real sockets in file mode:
// ingress-nginx's auth-url (allowed with the answer's headers copied,
// 401 and 403 passed on, a 302 to auth-signin for a 401, 500 when the
// service is down or an annotation of the group is invalid), an HTTPRoute's ExternalAuth filter (a denial relayed
// as the service gave it) and a Gateway listener's, which runs before
// route matching: a header its answer sets selects the route.
func TestExternalAuth(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "backend %s user=%s groups=%s tier=%s route=%s", r.URL.RequestURI(), r.Header.Get("X-Auth-User"), r.Header.Get("X-Auth-Groups"), r.Header.Get("X-Tier"), r.Header.Get("X-Route"))
	}))
	defer backend.Close()
	type seen struct{ method, uri, host, originalURL, originalMethod, redirect, cookie, token string }
	asked := make(chan seen, 100)
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked <- seen{r.Method, r.URL.RequestURI(), r.Host, r.Header.Get("X-Original-Url"), r.Header.Get("X-Original-Method"), r.Header.Get("X-Auth-Request-Redirect"), r.Header.Get("Cookie"), r.Header.Get("X-Token")}
		switch token := r.Header.Get("Authorization"); token {
		case "Bearer alice":
			w.Header().Set("X-Auth-User", "alice")
			w.Header().Set("X-Tier", "gold")
		case "Bearer bob":
			w.Header().Set("X-Tier", "silver")
		case "Bearer mallory":
			w.WriteHeader(http.StatusForbidden)
			return
		case "Bearer broken":
			w.WriteHeader(http.StatusTeapot)
			io.WriteString(w, "short and stout")
			return
		default:
			w.Header().Set("Www-Authenticate", `Bearer realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, "who are you?")
			return
		}
	}))
	defer auth.Close()
	// A port nothing listens on: the service behind "gone" is down.
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downPort := down.Addr().(*net.TCPAddr).Port
	down.Close()

	httpPort := freePort(t)
	gwPort := freePort(t)
	dir := t.TempDir()
	config := fmt.Sprintf(extAuthConfig, gwPort) + loopbackService("default", "web", 80, backend.Listener.Addr().(*net.TCPAddr).Port) +
		loopbackService("security", "auth", 80, auth.Listener.Addr().(*net.TCPAddr).Port) + loopbackService("security", "gone", 80, downPort)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHostgate(t, "--config", dir, "--ingress-class", "nginx", "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, url, host, authorization string, extra ...string) (int, http.Header, string) {
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		for i := 0; i+1 < len(extra); i += 2 {
			req.Header.Set(extra[i], extra[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	drain := func() {
		for len(asked) > 0 {
			<-asked
		}
	}
	plain := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	gw := fmt.Sprintf("http://127.0.0.1:%d", gwPort)

	eventually(t, "auth-url allows", func() string {
		// The client's own X-Auth-Groups must not reach the backend:
		// only the service says who is in which group.
		code, _, body := do("GET", plain+"/app?x=1", "nginx.example.com", "Bearer alice", "X-Auth-Groups", "admins", "Cookie", "session=1")
		if code != 200 || body != "backend /app?x=1 user=alice groups= tier= route=" {
			return fmt.Sprintf("%d %q", code, body)
		}
		return ""
	})
	drain()
	do("GET", plain+"/app?x=1", "nginx.example.com", "Bearer alice", "Cookie", "session=1")
	got := <-asked
	want := seen{"GET", "/check?from=nginx", "auth.security.svc.cluster.local", "http://nginx.example.com/app?x=1", "GET", "/after", "session=1", ""}
	if got != want {
		t.Errorf("auth-url request: %+v, want %+v", got, want)
	}
	if code, hdr, _ := do("GET", plain+"/app", "nginx.example.com", ""); code != 401 || hdr.Get("Www-Authenticate") != `Bearer realm="test"` {
		t.Errorf("auth-url without credentials: %d %v, want 401 with the service's WWW-Authenticate", code, hdr)
	}
	if code, _, _ := do("GET", plain+"/app", "nginx.example.com", "Bearer mallory"); code != 403 {
		t.Errorf("auth-url denied: %d, want 403", code)
	}
	if code, _, body := do("GET", plain+"/app", "nginx.example.com", "Bearer broken"); code != 500 || strings.Contains(body, "stout") {
		t.Errorf("auth-url answering 418: %d %q, want 500 (ingress-nginx)", code, body)
	}
	drain()
	code, hdr, _ := do("GET", plain+"/some/page?a=b", "signin.example.com", "")
	if loc := hdr.Get("Location"); code != 302 || loc != "https://signin.example.com/oauth2/start?rd=http://signin.example.com%2Fsome%2Fpage%3Fa%3Db" {
		t.Errorf("auth-signin: %d Location %q, want 302 to the sign-in URL with rd", code, loc)
	}
	if got := <-asked; got.method != "POST" {
		t.Errorf("auth-method POST: the service got %s", got.method)
	}
	if code, _, _ := do("GET", plain+"/", "down.example.com", "Bearer alice"); code != 500 {
		t.Errorf("authorization service down: %d, want 500", code)
	}
	// An invalid auth-method neither asks with GET nor lets the request
	// through: 500, as for a service down, and the report says why.
	drain()
	if code, _, body := do("GET", plain+"/", "bad-method.example.com", "Bearer alice"); code != 500 || strings.HasPrefix(body, "backend /") {
		t.Errorf("auth-method FOO: %d %q, want 500 without reaching the backend", code, body)
	}
	if len(asked) > 0 {
		t.Errorf("auth-method FOO: the service was asked %+v", <-asked)
	}
	eventually(t, "auth-method FOO reported", expect(h.admin+"/debug/routes", "", 200,
		`Ingress default/bad-method: annotation nginx.ingress.kubernetes.io/auth-method="FOO": invalid: must be one of GET, HEAD, POST, PUT, PATCH, DELETE, CONNECT, OPTIONS, TRACE; the Ingress's paths answer 500`))

	eventually(t, "HTTPRoute ExternalAuth allows", func() string {
		code, _, body := do("GET", gw+"/r?q=1", "route.example.com", "Bearer bob", "X-Token", "t1", "X-Other", "no")
		if code != 200 || body != "backend /r?q=1 user= groups= tier=silver route=" {
			return fmt.Sprintf("%d %q", code, body)
		}
		return ""
	})
	drain()
	do("GET", gw+"/r?q=1", "route.example.com", "Bearer bob", "X-Token", "t1")
	if got := <-asked; got.uri != "/gw/r?q=1" || got.token != "t1" || got.method != "GET" || got.host != "route.example.com" {
		t.Errorf("HTTPRoute ExternalAuth request: %+v, want GET /gw/r?q=1 with X-Token for route.example.com", got)
	}
	if code, hdr, body := do("GET", gw+"/r", "route.example.com", ""); code != 401 || body != "who are you?" || hdr.Get("Www-Authenticate") == "" {
		t.Errorf("HTTPRoute ExternalAuth denial: %d %q %v, want the service's answer", code, body, hdr)
	}
	if code, _, body := do("GET", gw+"/r", "route.example.com", "Bearer broken"); code != 418 || body != "short and stout" {
		t.Errorf("HTTPRoute ExternalAuth 418: %d %q, want it relayed", code, body)
	}

	// The listener's filter copies only X-Tier, which selects the rule.
	eventually(t, "listener filter before matching", func() string {
		code, _, body := do("GET", gw+"/l", "listener.example.com", "Bearer alice")
		if code != 200 || body != "backend /l user= groups= tier=gold route=gold" {
			return fmt.Sprintf("%d %q", code, body)
		}
		return ""
	})
	if code, _, body := do("GET", gw+"/l", "listener.example.com", "Bearer bob", "X-Tier", "gold"); code != 200 || body != "backend /l user= groups= tier=silver route=" {
		t.Errorf("listener filter with the client's own X-Tier: %d %q, want the service's", code, body)
	}
	if code, _, _ := do("GET", gw+"/l", "listener.example.com", ""); code != 401 {
		t.Errorf("listener filter denial: %d, want 401", code)
	}
	eventually(t, "debug routes", expect(h.admin+"/debug/routes", "", 200, `listener "listener.example.com" filter ExternalAuth`))
}
