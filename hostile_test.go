package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/tlsstore/tlstest"
)

// tlsSecret is a kubernetes.io/tls Secret of a certificate for host.
func tlsSecret(t *testing.T, ca *tlstest.CA, namespace, name, host string) string {
	cert, key := ca.Issue(t, host)
	data, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
		"metadata":   map[string]string{"name": name, "namespace": namespace},
		"stringData": map[string]string{"tls.crt": string(cert), "tls.key": string(key)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return "---\n" + string(data) + "\n"
}

// TestOnlyReferencedSecretsServed runs hostgate in file mode with three TLS
// Secrets: one a listener refers to, one nothing refers to, and one of
// another namespace that a listener refers to without a ReferenceGrant.
// A client asking for the hostnames of the last two by SNI never gets
// their certificates.
func TestOnlyReferencedSecretsServed(t *testing.T) {
	ca := tlstest.NewCA(t)
	port := freePort(t)
	config := fmt.Sprintf(gatewayHead+`  - {name: a, port: %[1]d, protocol: HTTPS, hostname: a.example.com, tls: {certificateRefs: [{name: a}]}}
  - {name: c, port: %[1]d, protocol: HTTPS, hostname: c.example.com, tls: {certificateRefs: [{name: c, namespace: other}]}}
`, port) + tlsSecret(t, ca, "default", "a", "a.example.com") + tlsSecret(t, ca, "default", "b", "b.example.com") + tlsSecret(t, ca, "other", "c", "c.example.com")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHostgate(t, "--config", dir)
	eventually(t, "refused certificate reference", expect(h.admin+"/debug/routes", "", 200, "RefNotPermitted"))
	// served is the subject of the certificate presented for sni, or why
	// there was none.
	served := func(sni string) string {
		c, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		if err != nil {
			return "handshake failed"
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	eventually(t, "referenced certificate", func() string {
		if got := served("a.example.com"); got != "a.example.com" {
			return "a.example.com got " + got
		}
		return ""
	})
	for _, sni := range []string{"b.example.com", "c.example.com"} {
		if got := served(sni); got == sni {
			t.Errorf("SNI %s: served the certificate of an unreferenced or unpermitted Secret", sni)
		} else {
			t.Logf("SNI %s: %s", sni, got)
		}
	}
}

// TestLogsEscapeUserStrings has hostgate log an object name and a request
// path carrying a newline and terminal escapes, in both log formats and the
// access log: each record stays one line, and the bytes arrive escaped, so
// neither a route's author nor a client can forge records or drive the
// terminal of whoever reads the logs.
func TestLogsEscapeUserStrings(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer backend.Close()
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			port := freePort(t)
			config := fmt.Sprintf(exampleTemplate, port, backend.Listener.Addr().(*net.TCPAddr).Port, "/") + `
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: "evil\nlevel=ERROR msg=forged \e[31mred", namespace: default}
spec:
  parentRefs: [{name: web}]
  rules: [{backendRefs: [{name: ghost, port: 80}]}]
`
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o644); err != nil {
				t.Fatal(err)
			}
			h := startHostgate(t, "--config", dir, "--log-format", format, "--log-level", "debug", "--access-log")
			url := fmt.Sprintf("http://127.0.0.1:%d", port)
			eventually(t, "request with a hostile path", expect(url+"/x%0Alevel=ERROR%20msg=forged%1B[2J", "app.example.com", 200, ""))
			eventually(t, "access record", func() string {
				if !strings.Contains(h.logs.String(), "forged") {
					return "no record of the request yet"
				}
				return ""
			})
			logs := h.logs.String()
			if bytes.IndexByte([]byte(logs), 0x1b) >= 0 {
				t.Error("logs hold a raw ESC byte")
			}
			// The object's name is in a problem record, the path in an
			// access record.
			var name, path bool
			for _, line := range strings.Split(strings.TrimSuffix(logs, "\n"), "\n") {
				switch {
				case format == "json" && !json.Valid([]byte(line)):
					t.Errorf("not one JSON record per line: %q", line)
				case format == "text" && !strings.HasPrefix(line, "time="):
					t.Errorf("a line that does not start a record: %q", line)
				}
				name = name || strings.Contains(line, "evil") && strings.Contains(line, "forged")
				path = path || strings.Contains(line, "access") && strings.Contains(line, "forged")
			}
			if !name || !path {
				t.Errorf("object name logged: %v, path logged: %v; want both:\n%s", name, path, logs)
			}
		})
	}
}
