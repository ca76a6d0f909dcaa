package main

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestIngressNginxNextUpstreamTimeout serves two Ingresses whose backend
// answers 503 after 700ms, both retrying 503s (proxy-next-upstream,
// ingress-nginx's 3 tries): the one with proxy-next-upstream-timeout: 1
// makes a second try, started within the second, and no third; the one
// without makes all three.
func TestIngressNginxNextUpstreamTimeout(t *testing.T) {
	var mu sync.Mutex
	tries := map[string]int{}
	_, addr := serveHTTP(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tries[r.Host]++
		mu.Unlock()
		time.Sleep(700 * time.Millisecond)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	config := trafficService("app", addr2port(t, addr)) +
		trafficIngress("bounded", "bounded.example.com", "app", "proxy-next-upstream", "error timeout http_503", "proxy-next-upstream-timeout", "1") +
		trafficIngress("unbounded", "unbounded.example.com", "app", "proxy-next-upstream", "error timeout http_503")
	dir := t.TempDir()
	writeConfig(t, dir, config)
	httpPort := freePort(t)
	h := startHostgate(t, "--config", dir, "--ingress-class", "nginx", "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
	eventually(t, "retry budget in /debug/routes", expect(h.admin+"/debug/routes", "", 200, "budget=1s"))
	url := fmt.Sprintf("http://127.0.0.1:%d/", httpPort)
	for host, want := range map[string]int{"bounded.example.com": 2, "unbounded.example.com": 3} {
		_, resp := trafficGet(t, url, host)
		mu.Lock()
		got := tries[host]
		mu.Unlock()
		if resp.StatusCode != 503 || got != want {
			t.Errorf("%s: %d after %d tries, want 503 after %d", host, resp.StatusCode, got, want)
		}
	}
}
