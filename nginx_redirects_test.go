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
	"time"
)

// nginxRedirectIngresses mirror to a Service of the cluster, serve an
// alias, and shape the redirect to HTTPS; %d is the app's port.
const nginxRedirectIngresses = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: mirrored
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/mirror-target: "http://shadow.tests.svc.cluster.local:8080$request_uri"
spec:
  ingressClassName: nginx
  rules:
  - host: mirror.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: mirrored-path
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/mirror-target: "http://shadow.tests.svc:8080/copies"
    nginx.ingress.kubernetes.io/mirror-host: copies.example.com
    nginx.ingress.kubernetes.io/mirror-request-body: "off"
spec:
  ingressClassName: nginx
  rules:
  - host: mirror-path.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: aliased
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/server-alias: "alias.example.com, other.example.com"
spec:
  ingressClassName: nginx
  rules:
  - host: main.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: other
  namespace: default
spec:
  ingressClassName: nginx
  rules:
  - host: other.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: other, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: redirects
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/use-port-in-redirects: "false"
    nginx.ingress.kubernetes.io/preserve-trailing-slash: "false"
spec:
  ingressClassName: nginx
  tls: [{hosts: [trimmed.example.com]}]
  rules:
  - host: trimmed.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: redirects-kept
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/use-port-in-redirects: "true"
    nginx.ingress.kubernetes.io/preserve-trailing-slash: "true"
spec:
  ingressClassName: nginx
  tls: [{hosts: [kept.example.com]}]
  rules:
  - host: kept.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
`

// TestIngressNginxMirrorAliasRedirects serves ingress-nginx's
// mirror-target over real sockets: a second backend, named by its
// Service's DNS name, gets a copy of each request with the target's Host
// and the request's path and body, or with mirror-host and the target's
// fixed path and without the body (mirror-request-body: off), while the
// client gets the app's answer; server-alias serves the
// Ingress under another name, except one another Ingress serves as its
// host; use-port-in-redirects and preserve-trailing-slash shape the
// redirect to HTTPS.
func TestIngressNginxMirrorAliasRedirects(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "app") }))
	defer app.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other") }))
	defer other.Close()
	copies := make(chan string, 16)
	shadow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		copy := r.Method + " " + r.Host + " " + r.URL.RequestURI()
		if b, _ := io.ReadAll(r.Body); len(b) > 0 {
			copy += " body=" + string(b)
		}
		copies <- copy
		fmt.Fprint(w, "shadow")
	}))
	defer shadow.Close()
	portOf := func(s *httptest.Server) int { return s.Listener.Addr().(*net.TCPAddr).Port }
	dir := t.TempDir()
	config := nginxRedirectIngresses + loopbackService("default", "web", 80, portOf(app)) +
		loopbackService("default", "other", 80, portOf(other)) + loopbackService("tests", "shadow", 8080, portOf(shadow))
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, engine := range []string{"native", "stdlib"} {
		t.Run(engine, func(t *testing.T) {
			port, httpsPort := freePort(t), freePort(t)
			startHostgate(t, "--config", dir, "--ingress-class", "nginx", "--http1-engine", engine,
				"--http-addr", fmt.Sprintf("127.0.0.1:%d", port), "--https-addr", fmt.Sprintf("127.0.0.1:%d", httpsPort))
			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			eventually(t, "served", expect(base+"/", "main.example.com", 200, "app"))

			mirrored := func(host, path, body, want string) {
				t.Helper()
				method := http.MethodGet
				if body != "" {
					method = http.MethodPost
				}
				req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
				req.Host = host
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				answer, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(answer) != "app" {
					t.Errorf("%s %s%s: %d %q, want the app's answer", method, host, path, resp.StatusCode, answer)
				}
				select {
				case got := <-copies:
					if got != want {
						t.Errorf("%s %s%s: the mirror got %q, want %q", method, host, path, got, want)
					}
				case <-time.After(5 * time.Second):
					t.Errorf("%s %s%s: no copy reached the mirror", method, host, path)
				}
			}
			mirrored("mirror.example.com", "/orders/7?x=1", "", "GET shadow.tests.svc.cluster.local /orders/7?x=1")
			mirrored("mirror-path.example.com", "/orders/7?x=1", "", "GET copies.example.com /copies?x=1")
			mirrored("mirror.example.com", "/orders", "order 8", "POST shadow.tests.svc.cluster.local /orders body=order 8")
			// mirror-request-body: off.
			mirrored("mirror-path.example.com", "/orders", "order 8", "POST copies.example.com /copies")
			if code, body := get(base+"/", "main.example.com"); code != 200 || body != "app" {
				t.Errorf("an Ingress without mirror-target: %d %q", code, body)
			}
			select {
			case got := <-copies:
				t.Errorf("a request of an Ingress without mirror-target was mirrored: %q", got)
			case <-time.After(200 * time.Millisecond):
			}

			if code, body := get(base+"/x", "alias.example.com"); code != 200 || body != "app" {
				t.Errorf("server-alias alias.example.com: %d %q, want the aliased Ingress's app", code, body)
			}
			if code, body := get(base+"/x", "other.example.com"); code != 200 || body != "other" {
				t.Errorf("server-alias other.example.com, another Ingress's host: %d %q, want that Ingress's answer", code, body)
			}

			for _, c := range []struct{ host, path, want string }{
				{"trimmed.example.com", "/docs/", "https://trimmed.example.com/docs"},
				{"trimmed.example.com", "/docs/?q=1", "https://trimmed.example.com/docs/?q=1"},
				{"kept.example.com", "/docs/", fmt.Sprintf("https://kept.example.com:%d/docs/", httpsPort)},
			} {
				req, _ := http.NewRequest("GET", base+c.path, nil)
				req.Host = c.host
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 308 || resp.Header.Get("Location") != c.want {
					t.Errorf("GET http://%s%s: %d Location %q, want 308 %q", c.host, c.path, resp.StatusCode, resp.Header.Get("Location"), c.want)
				}
			}
		})
	}
}
