package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestIngressNginxCustomHeaders serves Ingresses with custom-headers and
// session-cookie-conditional-samesite-none over real sockets: the allowed
// headers of the ConfigMap are on every answer, the others are not, a
// change of the ConfigMap shows on the next answers; the affinity cookie
// has SameSite=None but for a browser that rejects it.
func TestIngressNginxCustomHeaders(t *testing.T) {
	ports := trafficBackends(t, "a")
	configMap := func(frame string) string {
		return fmt.Sprintf(`
---
apiVersion: v1
kind: ConfigMap
metadata: {name: headers, namespace: default}
data:
  X-Frame-Options: %s
  X-Powered-By: hostgate
  X-Secret: not allowed
`, frame)
	}
	ingresses := trafficService("web", ports["a"]) +
		trafficIngress("custom", "custom.example.com", "web", "custom-headers", "headers") +
		trafficIngress("samesite", "samesite.example.com", "web",
			"affinity", "cookie", "session-cookie-samesite", "None", "session-cookie-conditional-samesite-none", "true")
	httpPort := freePort(t)
	dir := t.TempDir()
	writeConfig(t, dir, configMap("DENY")+ingresses)
	startHostgate(t, "--config", dir, "--ingress-class", "hostgate,nginx", "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--ingress-allowed-response-headers", "X-Frame-Options, X-Powered-By")
	url := fmt.Sprintf("http://127.0.0.1:%d/x", httpPort)
	eventually(t, "served", expect(url, "custom.example.com", 200, "a"))
	headers := func(want string) func() string {
		return func() string {
			body, resp := trafficGet(t, url, "custom.example.com")
			if got := resp.Header.Get("X-Frame-Options"); body != "a" || got != want || resp.Header.Get("X-Powered-By") != "hostgate" || resp.Header.Get("X-Secret") != "" {
				return fmt.Sprintf("answer %q with headers %v, want a with X-Frame-Options %s and X-Powered-By, without X-Secret", body, resp.Header, want)
			}
			return ""
		}
	}
	eventually(t, "custom headers", headers("DENY"))
	writeConfig(t, dir, configMap("SAMEORIGIN")+ingresses)
	eventually(t, "custom headers after the ConfigMap changed", headers("SAMEORIGIN"))

	for _, tc := range []struct {
		userAgent string
		sameSite  bool
	}{
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36", true},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/51.0.2704.103 Safari/537.36", false},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 12_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/12.1.2 Mobile/15E148 Safari/604.1", false},
	} {
		_, resp := trafficGet(t, url, "samesite.example.com", "User-Agent: "+tc.userAgent)
		set := resp.Header.Get("Set-Cookie")
		if !strings.HasPrefix(set, "INGRESSCOOKIE=") || strings.Contains(set, "SameSite=None") != tc.sameSite {
			t.Errorf("User-Agent %q: Set-Cookie %q, want SameSite=None %t", tc.userAgent, set, tc.sameSite)
		}
	}
}
