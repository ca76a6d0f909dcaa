package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
