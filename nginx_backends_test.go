package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// nginxBackendIngresses are Ingresses with ingress-nginx's backend
// annotations; %[1]d is the application's port, %[2]d the error pages'.
const nginxBackendIngresses = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: limited
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/proxy-body-size: 8k
spec:
  ingressClassName: nginx
  rules:
  - host: limited.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: plain, namespace: shop}
spec:
  ingressClassName: nginx
  rules:
  - host: plain.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: slow
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/proxy-read-timeout: "1"
spec:
  ingressClassName: nginx
  rules:
  - host: slow.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: pages
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/custom-http-errors: "503,404"
    nginx.ingress.kubernetes.io/default-backend: error-pages
spec:
  ingressClassName: nginx
  rules:
  - host: pages.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: app, port: {name: web}}}}]}
  - host: empty.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: gone, port: {number: 80}}}}]}
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: shop}
spec:
  ports: [{name: web, port: 80, targetPort: %[1]d}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: app-1
  namespace: shop
  labels: {kubernetes.io/service-name: app}
addressType: IPv4
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
ports: [{name: web, port: %[1]d}]
---
apiVersion: v1
kind: Service
metadata: {name: gone, namespace: shop}
spec:
  ports: [{port: 80}]
`

// TestIngressNginxBackends serves Ingresses with ingress-nginx's backend
// annotations and defaults, on the native HTTP/1.1 engine and on
// net/http's: bodies past proxy-body-size, or past the 1 MiB ingress-nginx
// gives every Ingress, are answered 413 whether their length is declared
// or not, and never reach the backend whole; a backend slower than
// proxy-read-timeout gets 504; the answers with custom-http-errors' codes,
// and the requests to a Service without endpoints, come from the
// default-backend with ingress-nginx's X-Code and other fields.
func TestIngressNginxBackends(t *testing.T) {
	var received atomic.Int64
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			time.Sleep(3 * time.Second)
		case "/missing":
			http.Error(w, "the app's own 404", http.StatusNotFound)
			return
		case "/fail":
			http.Error(w, "the app's own 503", http.StatusServiceUnavailable)
			return
		}
		n, err := io.Copy(io.Discard, r.Body)
		if err == nil {
			received.Add(n)
		}
		fmt.Fprintf(w, "app got %d bytes", n)
	}))
	defer app.Close()
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := 404
		fmt.Sscan(r.Header.Get("X-Code"), &code)
		w.WriteHeader(code)
		fmt.Fprintf(w, "error page %s path=%s code=%s format=%s uri=%s ns=%s ingress=%s service=%s port=%s",
			r.Method, r.URL.Path, r.Header.Get("X-Code"), r.Header.Get("X-Format"), r.Header.Get("X-Original-URI"),
			r.Header.Get("X-Namespace"), r.Header.Get("X-Ingress-Name"), r.Header.Get("X-Service-Name"), r.Header.Get("X-Service-Port"))
	}))
	defer pages.Close()
	dir := t.TempDir()
	config := fmt.Sprintf(nginxBackendIngresses, app.Listener.Addr().(*net.TCPAddr).Port) + loopbackService("shop", "error-pages", 8080, pages.Listener.Addr().(*net.TCPAddr).Port)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, engine := range []string{"native", "stdlib"} {
		t.Run(engine, func(t *testing.T) {
			port := freePort(t)
			startHostgate(t, "--config", dir, "--ingress-class", "nginx", "--http1-engine", engine,
				"--http-addr", fmt.Sprintf("127.0.0.1:%d", port))
			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			eventually(t, "served", expect(base+"/", "plain.example.com", 200, "app got 0 bytes"))
			// post sends a body of n bytes, with its length or chunked.
			post := func(host string, n int, chunked bool) (int, string) {
				var body io.Reader = bytes.NewReader(bytes.Repeat([]byte("x"), n))
				if chunked {
					body = io.MultiReader(body) // hides the length
				}
				req, err := http.NewRequest("POST", base+"/upload", body)
				if err != nil {
					t.Fatal(err)
				}
				req.Host = host
				resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			for _, c := range []struct {
				host    string
				n       int
				chunked bool
				code    int
			}{
				{"limited.example.com", 8 << 10, false, 200},
				{"limited.example.com", 8 << 10, true, 200},
				{"limited.example.com", 8<<10 + 1, false, 413},
				{"limited.example.com", 64 << 10, true, 413},
				{"plain.example.com", 1 << 20, false, 200},
				{"plain.example.com", 1<<20 + 1, false, 413},
				{"plain.example.com", 3 << 20, true, 413},
			} {
				before := received.Load()
				code, body := post(c.host, c.n, c.chunked)
				if code != c.code {
					t.Errorf("POST of %d bytes (chunked %t) to %s: %d %q, want %d", c.n, c.chunked, c.host, code, body, c.code)
				}
				if c.code == 413 && received.Load() != before {
					t.Errorf("POST of %d bytes (chunked %t) to %s: the backend read %d bytes of a body past the limit", c.n, c.chunked, c.host, received.Load()-before)
				}
			}

			start := time.Now()
			if code, body := get(base+"/slow", "slow.example.com"); code != 504 {
				t.Errorf("backend slower than proxy-read-timeout: %d %q, want 504", code, body)
			}
			if d := time.Since(start); d < 900*time.Millisecond || d > 2500*time.Millisecond {
				t.Errorf("504 after %v, want about proxy-read-timeout's 1s", d)
			}

			req, _ := http.NewRequest("GET", base+"/fail?x=1", nil)
			req.Host = "pages.example.com"
			req.Header.Set("Accept", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := "error page GET path=/ code=503 format=application/json uri=/fail?x=1 ns=shop ingress=pages service=app port=web"
			if resp.StatusCode != 503 || string(b) != want {
				t.Errorf("custom-http-errors 503: %d %q, want 503 %q", resp.StatusCode, b, want)
			}
			if code, body := get(base+"/missing", "pages.example.com"); code != 404 || !strings.HasPrefix(body, "error page GET path=/ code=404") {
				t.Errorf("custom-http-errors 404: %d %q", code, body)
			}
			if code, body := get(base+"/fine", "pages.example.com"); code != 200 || body != "app got 0 bytes" {
				t.Errorf("an answer without those codes: %d %q", code, body)
			}
			if code, body := get(base+"/any", "empty.example.com"); code != 503 || !strings.HasPrefix(body, "error page GET path=/any code=503") || !strings.Contains(body, "service=gone port=80") {
				t.Errorf("a Service without endpoints: %d %q, want the default backend's answer", code, body)
			}
		})
	}
}
