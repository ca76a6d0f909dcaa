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
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// nginxAccessIngresses are Ingresses with ingress-nginx's access
// annotations; %[1]d is the backend's port, %[2]s the htpasswd file
// (indented), %[3]s paths added to the rate-limited Ingress.
const nginxAccessIngresses = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: private
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/whitelist-source-range: 127.0.0.0/8
    nginx.ingress.kubernetes.io/denylist-source-range: 127.0.0.2
    nginx.ingress.kubernetes.io/auth-type: basic
    nginx.ingress.kubernetes.io/auth-secret: htpasswd
    nginx.ingress.kubernetes.io/auth-realm: Team only
spec:
  ingressClassName: nginx
  rules:
  - host: private.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: v1
kind: Secret
metadata: {name: htpasswd, namespace: default}
type: Opaque
stringData:
  auth: |
%[2]s
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: per-minute
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/limit-rpm: "1"
    nginx.ingress.kubernetes.io/limit-burst-multiplier: "1"
    nginx.ingress.kubernetes.io/limit-allowlist: 127.0.0.4
spec:
  ingressClassName: nginx
  rules:
  - host: minute.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
%[3]s
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: per-second
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/limit-rps: "2"
    nginx.ingress.kubernetes.io/limit-burst-multiplier: "1"
spec:
  ingressClassName: nginx
  rules:
  - host: second.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: concurrent
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/limit-connections: "1"
spec:
  ingressClassName: nginx
  rules:
  - host: concurrent.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
`

// TestIngressNginxAccess serves ingress-nginx's access annotations over
// real sockets, clients on several loopback addresses: deny before allow
// (403), basic auth from an htpasswd Secret with bcrypt, apr1 and {SHA}
// users (401 with the realm, the password kept from the backend), rate
// limits per client address that refuse with --ingress-limit-status,
// recover, exempt limit-allowlist and keep their count across a change of
// the Ingress, and a limit of requests in flight.
func TestIngressNginxAccess(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-release
		}
		fmt.Fprintf(w, "ok authorization=%q", r.Header.Get("Authorization"))
	}))
	defer backend.Close()
	hash, err := bcrypt.GenerateFromPassword([]byte("bcrypt-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := "    alice:" + string(hash) + "\n" +
		"    bob:$apr1$saltsalt$LrttParrLPdxvgutaSXWJ0\n" + // secret
		"    carol:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=" // password
	dir := t.TempDir()
	port := backend.Listener.Addr().(*net.TCPAddr).Port
	write := func(extraPaths string) {
		tmp := filepath.Join(dir, ".config.tmp")
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf(nginxAccessIngresses, port, htpasswd, extraPaths)+loopbackService("default", "web", 80, port)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "config.yaml")); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	httpPort := freePort(t)
	startHostgate(t, "--config", dir, "--ingress-class", "hostgate,nginx", "--ingress-limit-status", "429",
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
	clients := map[string]*http.Client{}
	for _, from := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		clients[from] = &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	// do sends a GET from the loopback address from.
	do := func(from, host, path, user, password string) (int, string, string) {
		c := clients[from]
		req, err := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d%s", httpPort, path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
	}
	eventually(t, "the protected Ingress", func() string {
		if code, _, body := do("127.0.0.1", "private.example.com", "/", "alice", "bcrypt-pw"); code != 200 {
			return fmt.Sprintf("%d %q", code, body)
		}
		return ""
	})

	for _, c := range []struct {
		from, user, password string
		code                 int
	}{
		{"127.0.0.1", "alice", "bcrypt-pw", 200},
		{"127.0.0.1", "alice", "bcrypt-pw", 200}, // from the cache
		{"127.0.0.1", "bob", "secret", 200},
		{"127.0.0.1", "carol", "password", 200},
		{"127.0.0.1", "alice", "wrong", 401},
		{"127.0.0.1", "mallory", "password", 401},
		{"127.0.0.1", "", "", 401},
		{"127.0.0.3", "carol", "password", 200},
		{"127.0.0.2", "alice", "bcrypt-pw", 403},
		{"127.0.0.2", "", "", 403},
	} {
		code, challenge, body := do(c.from, "private.example.com", "/", c.user, c.password)
		if code != c.code {
			t.Errorf("%s as %q: %d %q, want %d", c.from, c.user, code, body, c.code)
		}
		if code == 200 && body != `ok authorization=""` {
			t.Errorf("%s as %q: the backend saw %q", c.from, c.user, body)
		}
		if code == 401 && challenge != `Basic realm="Team only"` {
			t.Errorf("%s as %q: WWW-Authenticate %q", c.from, c.user, challenge)
		}
	}

	// limit-rps 2 with a burst of 2: three at once, then 429 until the
	// next half second.
	var codes []int
	for range 4 {
		code, _, _ := do("127.0.0.1", "second.example.com", "/", "", "")
		codes = append(codes, code)
	}
	if fmt.Sprint(codes) != "[200 200 200 429]" {
		t.Errorf("limit-rps: %v, want [200 200 200 429]", codes)
	}
	if code, _, _ := do("127.0.0.3", "second.example.com", "/", "", ""); code != 200 {
		t.Errorf("limit-rps, another client: %d", code)
	}
	time.Sleep(600 * time.Millisecond)
	if code, _, _ := do("127.0.0.1", "second.example.com", "/", "", ""); code != 200 {
		t.Errorf("limit-rps after 600ms: %d, want recovered", code)
	}

	// limit-rpm 1: two at once, then nothing for a minute, even after the
	// Ingress changes; limit-allowlist's client is not counted.
	codes = codes[:0]
	for range 3 {
		code, _, _ := do("127.0.0.1", "minute.example.com", "/", "", "")
		codes = append(codes, code)
	}
	if fmt.Sprint(codes) != "[200 200 429]" {
		t.Errorf("limit-rpm: %v, want [200 200 429]", codes)
	}
	for range 5 {
		if code, _, _ := do("127.0.0.4", "minute.example.com", "/", "", ""); code != 200 {
			t.Errorf("limit-allowlist's client: %d", code)
		}
	}
	write("      - {path: /new, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}")
	// A client of its own sees the change: polling spends its budget.
	eventually(t, "the changed Ingress", func() string {
		if code, _, body := do("127.0.0.5", "minute.example.com", "/new/x", "", ""); code != 200 || !strings.HasPrefix(body, "ok") {
			return fmt.Sprintf("%d %q", code, body)
		}
		return ""
	})
	if code, _, _ := do("127.0.0.1", "minute.example.com", "/", "", ""); code != 429 {
		t.Errorf("limit-rpm after a change of the Ingress: %d, want the count kept (429)", code)
	}

	// limit-connections 1: a second request while one is in flight is
	// refused; once it ends, the next one passes.
	var wg sync.WaitGroup
	wg.Go(func() {
		if code, _, body := do("127.0.0.1", "concurrent.example.com", "/slow", "", ""); code != 200 {
			t.Errorf("slow request: %d %q", code, body)
		}
	})
	<-arrived
	if code, _, _ := do("127.0.0.1", "concurrent.example.com", "/", "", ""); code != 429 {
		t.Errorf("second request in flight: %d, want 429", code)
	}
	if code, _, _ := do("127.0.0.3", "concurrent.example.com", "/", "", ""); code != 200 {
		t.Errorf("another client while one is in flight: %d", code)
	}
	close(release)
	wg.Wait()
	if code, _, _ := do("127.0.0.1", "concurrent.example.com", "/", "", ""); code != 200 {
		t.Errorf("after the request in flight ended: %d", code)
	}
}
