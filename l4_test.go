package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
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

	"github.com/hostgate/hostgate/tlsstore/tlstest"
)

// TestFileModeTCPRoute: a TCP listener with a TCPRoute, read from files,
// carries bytes both ways to its backend, and /debug/routes and the access
// log show it.
func TestFileModeTCPRoute(t *testing.T) {
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = io.WriteString(c, "echo "+line)
			}()
		}
	}()
	port := freePort(t)
	config := gatewayHead + fmt.Sprintf(`  - {name: db, port: %d, protocol: TCP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: db, namespace: default}
spec:
  parentRefs: [{name: web, sectionName: db}]
  rules:
  - backendRefs: [{name: db, port: 5432}]
`, port) + loopbackService("default", "db", 5432, backend.Addr().(*net.TCPAddr).Port)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "l4.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHostgate(t, "--config", dir, "--access-log")
	eventually(t, "debug routes", expect(h.admin+"/debug/routes", "", 200, "sni * -> TCPRoute default/db"))
	eventually(t, "echo through the TCP listener", func() string {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err != nil {
			return err.Error()
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = io.WriteString(c, "ping\n")
		got, err := bufio.NewReader(c).ReadString('\n')
		if got != "echo ping\n" {
			return fmt.Sprintf("answer %q (%v), want %q", got, err, "echo ping\n")
		}
		return ""
	})
	eventually(t, "access log line", func() string {
		for _, want := range []string{`"msg":"connection"`, `"route":"TCPRoute default/db"`, `"bytes_received":5`, `"bytes_sent":10`} {
			if !strings.Contains(h.logs.String(), want) {
				return "no access log line with " + want
			}
		}
		return ""
	})
}

// lineEcho serves, on loopback until the test ends, connections that get
// each line back after name, over TLS with cfg when it is not nil.
func lineEcho(t *testing.T, name string, cfg *tls.Config) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if cfg != nil {
				c = tls.Server(c, cfg)
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				_, _ = io.WriteString(c, name+" "+line)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestFileModeSharedTLSPort: on one port, read from files, an HTTPS
// listener for www.example.com, a TLS listener in mode Passthrough for
// vault.example.com (the client verifies the backend's own certificate,
// of a CA hostgate has nothing of) and one in mode Terminate for
// mq.example.com (the client verifies hostgate's certificate; the backend
// speaks no TLS). The ClientHello's server name chooses.
func TestFileModeSharedTLSPort(t *testing.T) {
	ca, backendCA := tlstest.NewCA(t), tlstest.NewCA(t)
	certPEM, keyPEM := backendCA.Issue(t, "vault.example.com")
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	vault := lineEcho(t, "vault", &tls.Config{Certificates: []tls.Certificate{pair}})
	mq := lineEcho(t, "mq", nil)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "web") }))
	defer web.Close()
	port := freePort(t)
	config := gatewayHead + fmt.Sprintf(`  - {name: www, port: %[1]d, protocol: HTTPS, hostname: www.example.com, tls: {certificateRefs: [{name: www}]}}
  - {name: vault, port: %[1]d, protocol: TLS, hostname: vault.example.com, tls: {mode: Passthrough}}
  - {name: mq, port: %[1]d, protocol: TLS, hostname: mq.example.com, tls: {mode: Terminate, certificateRefs: [{name: mq}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: default}
spec:
  parentRefs: [{name: web, sectionName: www}]
  rules:
  - backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: vault, namespace: default}
spec:
  parentRefs: [{name: web, sectionName: vault}]
  rules:
  - backendRefs: [{name: vault, port: 8200}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: mq, namespace: default}
spec:
  parentRefs: [{name: web, sectionName: mq}]
  rules:
  - backendRefs: [{name: mq, port: 5672}]
`, port) + tlsSecret(t, ca, "default", "www", "www.example.com") + tlsSecret(t, ca, "default", "mq", "mq.example.com") +
		loopbackService("default", "web", 80, web.Listener.Addr().(*net.TCPAddr).Port) +
		loopbackService("default", "vault", 8200, vault) + loopbackService("default", "mq", 5672, mq)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "l4.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHostgate(t, "--config", dir)
	eventually(t, "debug routes", expect(h.admin+"/debug/routes", "", 200, "sni * (listener mq.example.com) terminate -> TLSRoute default/mq"))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	line := func(serverName string, roots *x509.CertPool) string {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{ServerName: serverName, RootCAs: roots})
		if err != nil {
			return err.Error()
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = io.WriteString(c, "ping\n")
		got, _ := bufio.NewReader(c).ReadString('\n')
		return got
	}
	eventually(t, "passthrough", func() string {
		if got := line("vault.example.com", backendCA.Pool); got != "vault ping\n" {
			return fmt.Sprintf("vault.example.com: %q", got)
		}
		return ""
	})
	if got := line("mq.example.com", ca.Pool); got != "mq ping\n" {
		t.Errorf("mq.example.com: %q, want the plain backend's answer", got)
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	resp, err := client.Get("https://www.example.com/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "web" {
		t.Errorf("www.example.com: %d %q, want 200 from web", resp.StatusCode, body)
	}
}
