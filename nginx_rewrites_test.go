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
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "session=s3cr3t; Domain=internal.local; Path=/app; HttpOnly")
		http.Redirect(w, r, "http://internal.local/x", http.StatusFound)
	}))
	defer backend.Close()
	httpPort := freePort(t)
	dir := t.TempDir()
	config := nginxRewritesConfig + loopbackService("default", "web", 80, backend.Listener.Addr().(*net.TCPAddr).Port)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	startHostgate(t, "--config", dir, "--ingress-class", "nginx", "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	eventually(t, "rewritten cookie and redirect", func() string {
		req, err := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/login", httpPort), nil)
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
