package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

const nginxRewritesConfig = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/proxy-cookie-domain: internal.local shop.example.com
    nginx.ingress.kubernetes.io/proxy-cookie-path: /app /
    nginx.ingress.kubernetes.io/proxy-redirect-from: http://internal.local/
    nginx.ingress.kubernetes.io/proxy-redirect-to: http://shop.example.com/
spec:
  ingressClassName: nginx
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
`

// TestIngressNginxResponseRewrites: a backend that names its own host and
// path in its cookies and redirects is served under another name, and
// the client sees that name (proxy-cookie-domain, proxy-cookie-path,
// proxy-redirect-from/-to).
func TestIngressNginxResponseRewrites(t *testing.T) {
	base := serveNginxIngresses(t, nginxRewritesConfig, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "session=s3cr3t; Domain=internal.local; Path=/app; HttpOnly")
		http.Redirect(w, r, "http://internal.local/x", http.StatusFound)
	}))
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	eventually(t, "rewritten cookie and redirect", func() string {
		req, err := http.NewRequest("GET", base+"/login", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "shop.example.com"
		resp, err := client.Do(req)
		if err != nil {
			return err.Error()
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		cookies, location := resp.Header.Values("Set-Cookie"), resp.Header.Get("Location")
		if resp.StatusCode != http.StatusFound || location != "http://shop.example.com/x" ||
			!slices.Equal(cookies, []string{"session=s3cr3t; Domain=shop.example.com; Path=/; HttpOnly"}) {
			return fmt.Sprintf("%d Location %q Set-Cookie %q", resp.StatusCode, location, cookies)
		}
		// What a browser would do with it: the cookie is for the shop.
		if c := resp.Cookies(); len(c) != 1 || c[0].Domain != "shop.example.com" || c[0].Path != "/" {
			return fmt.Sprintf("cookies %v", c)
		}
		return ""
	})
}

// phpIngress is an Ingress of class nginx whose path of php.example.com
// leads to the Service web with rewrite-target target.
func phpIngress(name, path, target string) string {
	return fmt.Sprintf(`---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: %s
  namespace: default
  annotations: {nginx.ingress.kubernetes.io/rewrite-target: %q}
spec:
  ingressClassName: nginx
  rules:
  - host: php.example.com
    http:
      paths:
      - {path: %q, pathType: ImplementationSpecific, backend: {service: {name: web, port: {number: 80}}}}
`, name, target, path)
}

// TestIngressNginxRewriteTargetQuery: a PHP application's rewrite-target
// with a query reaches the backend as nginx's rewrite sends it: the
// capture in the query, the client's query after "&", none of it for a
// target that ends with '?'.
func TestIngressNginxRewriteTargetQuery(t *testing.T) {
	ingresses := phpIngress("shop", "/shop/(.*)", "/index.php?q=$1") + phpIngress("legacy", "/legacy/(.*)", "/index.php?page=$1?")
	base := serveNginxIngresses(t, ingresses, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s?%s", r.URL.EscapedPath(), r.URL.RawQuery)
	}))
	eventually(t, "rewrite-target with a query", func() string {
		if code, body := get(base+"/shop/cart/items?sort=asc", "php.example.com"); code != 200 || body != "/index.php?q=cart/items&sort=asc" {
			return fmt.Sprintf("backend saw %d %q, want /index.php?q=cart/items&sort=asc", code, body)
		}
		return ""
	})
	for target, want := range map[string]string{
		"/shop/cart":              "/index.php?q=cart",
		"/shop/a+b?x=1":           "/index.php?q=a%2Bb&x=1",
		"/legacy/about?utm=email": "/index.php?page=about",
	} {
		if code, body := get(base+target, "php.example.com"); code != 200 || body != want {
			t.Errorf("%s: backend saw %d %q, want %q", target, code, body, want)
		}
	}
}

// serveNginxIngresses serves ingresses, of class nginx, in file mode, the
// Service default/web (port 80) leading to backend, until the test ends,
// and returns the base URL of hostgate's plain HTTP listener.
func serveNginxIngresses(t *testing.T, ingresses string, backend http.Handler) string {
	t.Helper()
	web := httptest.NewServer(backend)
	t.Cleanup(web.Close)
	httpPort := freePort(t)
	dir := t.TempDir()
	config := ingresses + loopbackService("default", "web", 80, web.Listener.Addr().(*net.TCPAddr).Port)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	startHostgate(t, "--config", dir, "--ingress-class", "nginx", "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
	return fmt.Sprintf("http://127.0.0.1:%d", httpPort)
}
