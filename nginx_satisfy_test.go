package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// nginxSatisfyConfig has two Ingresses with satisfy: any, an allow list
// and a password: one whose list holds the test's client (127.0.0.1),
// one whose list does not.
const nginxSatisfyConfig = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: inside
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/satisfy: any
    nginx.ingress.kubernetes.io/whitelist-source-range: 127.0.0.0/8
    nginx.ingress.kubernetes.io/auth-type: basic
    nginx.ingress.kubernetes.io/auth-secret: users
spec:
  ingressClassName: nginx
  rules:
  - host: inside.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: outside
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/satisfy: any
    nginx.ingress.kubernetes.io/whitelist-source-range: 10.0.0.0/8
    nginx.ingress.kubernetes.io/auth-type: basic
    nginx.ingress.kubernetes.io/auth-secret: users
spec:
  ingressClassName: nginx
  rules:
  - host: outside.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: v1
kind: Secret
metadata: {name: users, namespace: default}
type: Opaque
stringData:
  auth: "alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g="
`

// TestIngressNginxSatisfyAny: under satisfy: any a client in the allow
// list needs no password, and one outside it gets in with its password
// alone, 401 without.
func TestIngressNginxSatisfyAny(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "served")
	}))
	defer backend.Close()
	httpPort := freePort(t)
	dir := t.TempDir()
	config := nginxSatisfyConfig + loopbackService("default", "web", 80, backend.Listener.Addr().(*net.TCPAddr).Port)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	startHostgate(t, "--config", dir, "--ingress-class", "nginx", "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
	url := fmt.Sprintf("http://127.0.0.1:%d/", httpPort)
	do := func(host, user, password string) int {
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	eventually(t, "the allow list admits without a password", expect(url, "inside.example.com", 200, "served"))
	for _, c := range []struct {
		host, user, password string
		want                 int
	}{
		{"inside.example.com", "alice", "wrong", 200},
		{"outside.example.com", "", "", 401},
		{"outside.example.com", "alice", "wrong", 401},
		{"outside.example.com", "alice", "password", 200},
	} {
		if got := do(c.host, c.user, c.password); got != c.want {
			t.Errorf("%s as %q/%q: %d, want %d", c.host, c.user, c.password, got, c.want)
		}
	}
}
