package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// trafficBackends serves one backend per name on its own port, each
// answering with its name, and returns their ports.
func trafficBackends(t *testing.T, names ...string) map[string]int {
	t.Helper()
	ports := map[string]int{}
	for _, name := range names {
		_, addr := serveHTTP(t, "127.0.0.1", answer(name))
		ports[name] = addr2port(t, addr)
	}
	return ports
}

func addr2port(t *testing.T, addr string) int {
	t.Helper()
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return a.Port
}

// trafficService is a Service whose endpoints are 127.0.0.1 at ports, one
// EndpointSlice each.
func trafficService(name string, ports ...int) string {
	s := fmt.Sprintf(`
---
apiVersion: v1
kind: Service
metadata: {name: %s, namespace: default}
spec:
  ports: [{name: http, port: 80, targetPort: http}]
`, name)
	for i, port := range ports {
		s += fmt.Sprintf(`---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s-%d
  namespace: default
  labels: {kubernetes.io/service-name: %s}
addressType: IPv4
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
ports: [{name: http, port: %d}]
`, name, i, name, port)
	}
	return s
}

// trafficIngress is an Ingress of class nginx for host and "/" with the
// given annotations (without their prefix).
func trafficIngress(name, host, service string, annotations ...string) string {
	return nginxIngress(name, host, service, []string{"/"}, annotations...)
}

// nginxIngress is an Ingress of class nginx for host and paths (Prefix)
// with the given annotations (without their prefix).
func nginxIngress(name, host, service string, paths []string, annotations ...string) string {
	s := fmt.Sprintf(`
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: %s
  namespace: default
  annotations:
`, name)
	for i := 0; i+1 < len(annotations); i += 2 {
		s += fmt.Sprintf("    nginx.ingress.kubernetes.io/%s: %q\n", annotations[i], annotations[i+1])
	}
	if len(annotations) == 0 {
		s += "    {}\n"
	}
	s += fmt.Sprintf(`spec:
  ingressClassName: nginx
  rules:
  - host: %s
    http:
      paths:
`, host)
	for _, p := range paths {
		s += fmt.Sprintf("      - {path: %s, pathType: Prefix, backend: {service: {name: %s, port: {number: 80}}}}\n", p, service)
	}
	return s
}

// writeConfig writes config as the only file of dir, in one rename so
// that hostgate never reads half of it.
func writeConfig(t *testing.T, dir, config string) {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(tmp, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "config.yaml")); err != nil {
		t.Fatal(err)
	}
}

// trafficGet sends GET url for host with the header and cookies given
// ("Name: value" or "name=value") and returns the body and the response.
func trafficGet(t *testing.T, url, host string, extra ...string) (string, *http.Response) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for _, e := range extra {
		if name, value, ok := strings.Cut(e, ": "); ok {
			req.Header.Set(name, value)
		} else {
			req.Header.Add("Cookie", e)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp
}

// share sends n requests and returns the fraction answered by want.
func share(t *testing.T, n int, url, host, want string) float64 {
	t.Helper()
	hits := 0
	for range n {
		if body, _ := trafficGet(t, url, host); body == want {
			hits++
		}
	}
	return float64(hits) / float64(n)
}

// TestIngressNginxCanary serves a main Ingress and its canary over real
// sockets: the canary's header sends requests to it ("always") or away
// from it ("never") whatever the cookie, then its cookie decides, then its
// weight, checked over 1,000 requests before and after the weight changes;
// a canary of a path no main Ingress serves is ignored and reported.
func TestIngressNginxCanary(t *testing.T) {
	ports := trafficBackends(t, "main", "canary")
	services := trafficService("web", ports["main"]) + trafficService("web-canary", ports["canary"])
	config := func(weight string) string {
		return services + trafficIngress("main", "canary.example.com", "web") +
			trafficIngress("canary", "canary.example.com", "web-canary",
				"canary", "true", "canary-by-header", "X-Canary", "canary-by-cookie", "use-canary", "canary-weight", weight) +
			trafficIngress("orphan", "orphan.example.com", "web-canary", "canary", "true")
	}
	httpPort := freePort(t)
	dir := t.TempDir()
	writeConfig(t, dir, config("30"))
	h := startHostgate(t, "--config", dir, "--ingress-class", "hostgate,nginx", "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
	url := fmt.Sprintf("http://127.0.0.1:%d/x", httpPort)
	eventually(t, "canary by header", expect(url, "canary.example.com", 200, "canary"))
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"X-Canary: always"}, "canary"},
		{[]string{"X-Canary: never", "use-canary=always"}, "main"},
		{[]string{"X-Canary: always", "use-canary=never"}, "canary"},
		{[]string{"use-canary=always"}, "canary"},
		{[]string{"other=1; use-canary=always"}, "canary"},
		{[]string{"X-Canary: maybe", "use-canary=always"}, "canary"},
		{[]string{"use-canary=never"}, "main"},
		{[]string{"X-Canary: maybe", "use-canary=never"}, "main"},
	} {
		for range 20 {
			if body, _ := trafficGet(t, url, "canary.example.com", tc.extra...); body != tc.want {
				t.Errorf("%q: answered by %q, want %q", tc.extra, body, tc.want)
				break
			}
		}
	}
	// 1,000 draws of 30%: the standard deviation is 1.45%, so 6% is
	// over four of them.
	if got := share(t, 1000, url, "canary.example.com", "canary"); got < 0.24 || got > 0.36 {
		t.Errorf("canary-weight 30: %.1f%% of requests went to the canary", got*100)
	}
	writeConfig(t, dir, config("80"))
	eventually(t, "new weight", func() string {
		if got := share(t, 200, url, "canary.example.com", "canary"); got < 0.65 {
			return fmt.Sprintf("canary-weight 80: %.1f%% so far", got*100)
		}
		return ""
	})
	if got := share(t, 1000, url, "canary.example.com", "canary"); got < 0.74 || got > 0.86 {
		t.Errorf("canary-weight 80: %.1f%% of requests went to the canary", got*100)
	}
	if code, _ := get(fmt.Sprintf("http://127.0.0.1:%d/", httpPort), "orphan.example.com"); code != 404 {
		t.Errorf("a canary without main Ingress: %d, want 404 (not served)", code)
	}
	eventually(t, "orphan canary reported", expect(h.admin+"/debug/routes", "", 200,
		`ignored: no Ingress that is not a canary serves host "orphan.example.com" path "/" (Prefix)`))
}

// TestIngressNginxAffinity: a client with the session cookie stays with
// its endpoint, in persistent and balanced mode, across a configuration
// change; the cookie does not show the endpoint's address; a client whose
// endpoint is gone gets another and a new cookie.
func TestIngressNginxAffinity(t *testing.T) {
	ports := trafficBackends(t, "a", "b", "c")
	service := func(names ...string) string {
		var ps []int
		for _, n := range names {
			ps = append(ps, ports[n])
		}
		return trafficService("web", ps...)
	}
	ingresses := func(maxAge string) string {
		return trafficIngress("persistent", "persistent.example.com", "web",
			"affinity", "cookie", "affinity-mode", "persistent", "session-cookie-max-age", maxAge) +
			trafficIngress("balanced", "balanced.example.com", "web",
				"affinity", "cookie", "session-cookie-name", "route", "session-cookie-samesite", "Strict")
	}
	httpPort := freePort(t)
	dir := t.TempDir()
	writeConfig(t, dir, service("a", "b", "c")+ingresses("3600"))
	startHostgate(t, "--config", dir, "--ingress-class", "hostgate,nginx", "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
	url := fmt.Sprintf("http://127.0.0.1:%d/x", httpPort)
	eventually(t, "served", expect(url, "persistent.example.com", 200, ""))

	// session starts one per host and returns its cookie and endpoint.
	session := func(host, name string) (cookie, endpoint string) {
		body, resp := trafficGet(t, url, host)
		for _, c := range resp.Cookies() {
			if c.Name == name {
				set := resp.Header.Get("Set-Cookie")
				if !strings.Contains(set, "Path=/") || !strings.Contains(set, "HttpOnly") || strings.Contains(c.Value, "127.0.0.1") {
					t.Errorf("%s: Set-Cookie %q", host, set)
				}
				return name + "=" + c.Value, body
			}
		}
		t.Fatalf("%s: no %s cookie in %v", host, name, resp.Header)
		return "", ""
	}
	sticks := func(host, cookie, endpoint, when string) {
		t.Helper()
		for range 30 {
			if body, resp := trafficGet(t, url, host, cookie); body != endpoint || resp.Header.Get("Set-Cookie") != "" {
				t.Errorf("%s %s: %s answered with Set-Cookie %q, want %s's and none", host, when, body, resp.Header.Get("Set-Cookie"), endpoint)
				return
			}
		}
	}
	type sess struct{ host, name, cookie, endpoint string }
	var sessions []sess
	for _, s := range []sess{{host: "persistent.example.com", name: "INGRESSCOOKIE"}, {host: "balanced.example.com", name: "route"}} {
		// Several sessions, so that some start on each endpoint.
		seen := map[string]bool{}
		for range 12 {
			s.cookie, s.endpoint = session(s.host, s.name)
			seen[s.endpoint] = true
			sessions = append(sessions, s)
		}
		if len(seen) < 2 {
			t.Errorf("%s: 12 new sessions all went to %v", s.host, seen)
		}
	}
	for _, s := range sessions {
		sticks(s.host, s.cookie, s.endpoint, "before a change")
	}
	if _, resp := trafficGet(t, url, "persistent.example.com"); !strings.Contains(resp.Header.Get("Set-Cookie"), "Max-Age=3600") {
		t.Errorf("session-cookie-max-age: Set-Cookie %q", resp.Header.Get("Set-Cookie"))
	}
	writeConfig(t, dir, service("a", "b", "c")+ingresses("7200"))
	eventually(t, "changed", func() string {
		if _, resp := trafficGet(t, url, "persistent.example.com"); !strings.Contains(resp.Header.Get("Set-Cookie"), "Max-Age=7200") {
			return "Set-Cookie " + resp.Header.Get("Set-Cookie")
		}
		return ""
	})
	for _, s := range sessions {
		sticks(s.host, s.cookie, s.endpoint, "after a configuration change")
	}

	// Endpoint a goes: its persistent sessions move and get a new cookie.
	writeConfig(t, dir, service("b", "c")+ingresses("7200"))
	eventually(t, "a gone", func() string {
		if share(t, 30, url, "persistent.example.com", "a") > 0 {
			return "a still answers"
		}
		return ""
	})
	for _, s := range sessions {
		if s.host != "persistent.example.com" {
			continue
		}
		body, resp := trafficGet(t, url, s.host, s.cookie)
		moved := resp.Header.Get("Set-Cookie") != ""
		if s.endpoint == "a" && (body == "a" || !moved) || s.endpoint != "a" && (body != s.endpoint || moved) {
			t.Errorf("session on %s after a left: answered by %s, new cookie %t", s.endpoint, body, moved)
		}
	}
}

// TestIngressNginxHashBy: upstream-hash-by on a query parameter sends each
// user to one endpoint, different users to different ones; with
// enable-access-log "false" the access log leaves the route's requests
// out.
func TestIngressNginxHashBy(t *testing.T) {
	ports := trafficBackends(t, "a", "b", "c")
	httpPort := freePort(t)
	dir := t.TempDir()
	writeConfig(t, dir, trafficService("web", ports["a"], ports["b"], ports["c"])+
		trafficIngress("hashed", "hashed.example.com", "web", "upstream-hash-by", "$arg_user", "enable-access-log", "false")+
		trafficIngress("logged", "logged.example.com", "web"))
	h := startHostgate(t, "--config", dir, "--ingress-class", "hostgate,nginx", "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
	base := fmt.Sprintf("http://127.0.0.1:%d/", httpPort)
	eventually(t, "served", expect(base, "logged.example.com", 200, ""))
	seen := map[string]bool{}
	for user := range 20 {
		url := fmt.Sprintf("%s?user=u%d", base, user)
		first, _ := trafficGet(t, url, "hashed.example.com")
		seen[first] = true
		for range 10 {
			if body, _ := trafficGet(t, url, "hashed.example.com"); body != first {
				t.Errorf("user u%d: answered by %s and %s", user, first, body)
				break
			}
		}
	}
	if len(seen) < 2 {
		t.Errorf("20 users all went to %v", seen)
	}
	trafficGet(t, base+"?marker=logged", "logged.example.com")
	eventually(t, "access log", func() string {
		if !strings.Contains(h.logs.String(), "logged.example.com") {
			return "no access log line for logged.example.com"
		}
		return ""
	})
	if strings.Contains(h.logs.String(), "hashed.example.com") {
		t.Errorf("enable-access-log false: the access log has hashed.example.com's requests")
	}
}

// TestIngressNginxCanaryAffinity serves a main Ingress with cookie
// affinity and canaries at half the traffic: with affinity-canary-behavior
// sticky (the default) a client that landed on either backend stays there,
// and a client with a session of the main backend stays with it even when
// the canary header asks for the canary, as ingress-nginx's balancer
// decides; with legacy, the canary keeps no sessions, so its clients are
// drawn by weight each time.
func TestIngressNginxCanaryAffinity(t *testing.T) {
	ports := trafficBackends(t, "main", "canary")
	services := trafficService("web", ports["main"]) + trafficService("web-canary", ports["canary"])
	config := services
	for _, behavior := range []string{"sticky", "legacy"} {
		host := behavior + ".example.com"
		config += trafficIngress(behavior+"-main", host, "web", "affinity", "cookie") +
			trafficIngress(behavior+"-canary", host, "web-canary",
				"canary", "true", "canary-weight", "50", "canary-by-header", "X-Canary", "affinity-canary-behavior", behavior)
	}
	httpPort := freePort(t)
	dir := t.TempDir()
	writeConfig(t, dir, config)
	startHostgate(t, "--config", dir, "--ingress-class", "nginx", "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
	url := fmt.Sprintf("http://127.0.0.1:%d/x", httpPort)
	eventually(t, "served", expect(url, "sticky.example.com", 200, ""))
	// start makes a new session on host and returns its backend and
	// cookie ("" when the answer set none).
	start := func(host string) (string, string) {
		body, resp := trafficGet(t, url, host)
		for _, c := range resp.Cookies() {
			if c.Name == "INGRESSCOOKIE" {
				return body, c.Name + "=" + c.Value
			}
		}
		return body, ""
	}
	landed := map[string]int{}
	for range 20 {
		backend, cookie := start("sticky.example.com")
		landed[backend]++
		if cookie == "" {
			t.Fatalf("sticky: a new client of %s got no session cookie", backend)
		}
		for range 10 {
			if body, _ := trafficGet(t, url, "sticky.example.com", cookie); body != backend {
				t.Fatalf("sticky: a session that started on %s (%s) went to %s", backend, cookie, body)
			}
		}
		if backend == "main" {
			if body, _ := trafficGet(t, url, "sticky.example.com", cookie, "X-Canary: always"); body != "main" {
				t.Errorf("sticky: a main session with X-Canary: always went to %s, want main", body)
			}
		}
	}
	if landed["main"] == 0 || landed["canary"] == 0 {
		t.Errorf("sticky: 20 new clients landed %v, want some on each", landed)
	}
	// Legacy: a client that landed on the canary has no session there.
	for range 20 {
		if backend, cookie := start("legacy.example.com"); backend == "canary" && cookie != "" {
			t.Fatalf("legacy: the canary set a session cookie %s", cookie)
		}
	}
}
