package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/udptest"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
)

// TestFileModeTCPRoute: a TCP listener with a TCPRoute, read from files,
// carries bytes both ways to its backend, and /debug/routes and the access
// log show it.
func TestFileModeTCPRoute(t *testing.T) {
	backend := lineEcho(t, "echo", nil)
	port := freePort(t)
	config := gatewayHead + fmt.Sprintf("  - {name: db, port: %d, protocol: TCP}\n", port) +
		routeYAML("TCPRoute", "db", "db", 5432) + loopbackService("default", "db", 5432, backend)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "l4.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHostgate(t, "--config", dir, "--access-log")
	eventually(t, "debug routes", expect(h.admin+"/debug/routes", "", 200, "sni * -> TCPRoute default/db"))
	eventually(t, "debug routes as JSON", func() string {
		_, body := get(h.admin+"/debug/routes?format=json", "")
		var state struct {
			Listeners []struct {
				Protocol string
				L4Routes []struct {
					Host, Route string
					Backends    []string
				}
			}
		}
		if err := json.Unmarshal([]byte(body), &state); err != nil {
			return err.Error()
		}
		if l := state.Listeners; len(l) != 1 || l[0].Protocol != "TCP" || len(l[0].L4Routes) != 1 ||
			l[0].L4Routes[0].Host != "*" || l[0].L4Routes[0].Route != "TCPRoute default/db" || !slices.Equal(l[0].L4Routes[0].Backends, []string{"default/db:5432 weight=1"}) {
			return fmt.Sprintf("listeners %+v, want the TCP listener's route to default/db:5432", l)
		}
		return ""
	})
	eventually(t, "echo through the TCP listener", func() string {
		if got := ping(net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)); got != "echo ping\n" {
			return fmt.Sprintf("answer %q, want %q", got, "echo ping\n")
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
	answer := func(c net.Conn) {
		defer c.Close()
		if cfg != nil {
			c = tls.Server(c, cfg)
		}
		line, _ := bufio.NewReader(c).ReadString('\n')
		_, _ = io.WriteString(c, name+" "+line)
	}
	go func() {
		for c, err := ln.Accept(); err == nil; c, err = ln.Accept() {
			go answer(c)
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// tlsLineEcho is lineEcho over TLS with a certificate of ca for host: a
// backend that holds its own certificate, of a CA hostgate has nothing
// of, for passthrough.
func tlsLineEcho(t *testing.T, name string, ca *tlstest.CA, host string) int {
	certPEM, keyPEM := ca.Issue(t, host)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return lineEcho(t, name, &tls.Config{Certificates: []tls.Certificate{pair}})
}

// ping sends a line on c, dialled with err, and returns the line that
// comes back, or why none did.
func ping(c net.Conn, err error) string {
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	_, _ = io.WriteString(c, "ping\n")
	got, err := bufio.NewReader(c).ReadString('\n')
	if got == "" && err != nil {
		return err.Error()
	}
	return got
}

// routeYAML is a route of kind called default/name, of the listener of
// Gateway default/web called section, to port of Service default/name.
func routeYAML(kind, name, section string, port int) string {
	return fmt.Sprintf(`---
apiVersion: gateway.networking.k8s.io/v1
kind: %s
metadata: {name: %s, namespace: default}
spec:
  parentRefs: [{name: web, sectionName: %s}]
  rules: [{backendRefs: [{name: %[2]s, port: %[4]d}]}]
`, kind, name, section, port)
}

// TestFileModeSharedTLSPort: on one port, read from files, an HTTPS
// listener for www.example.com, a TLS listener in mode Passthrough for
// vault.example.com (the client verifies the backend's own certificate,
// of a CA hostgate has nothing of) and one in mode Terminate for
// mq.example.com (the client verifies hostgate's certificate; the backend
// speaks no TLS). The ClientHello's server name chooses.
func TestFileModeSharedTLSPort(t *testing.T) {
	ca, backendCA := tlstest.NewCA(t), tlstest.NewCA(t)
	vault := tlsLineEcho(t, "vault", backendCA, "vault.example.com")
	mq := lineEcho(t, "mq", nil)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "web") }))
	defer web.Close()
	port := freePort(t)
	config := gatewayHead + fmt.Sprintf(`  - {name: www, port: %[1]d, protocol: HTTPS, hostname: www.example.com, tls: {certificateRefs: [{name: www}]}}
  - {name: vault, port: %[1]d, protocol: TLS, hostname: vault.example.com, tls: {mode: Passthrough}}
  - {name: mq, port: %[1]d, protocol: TLS, hostname: mq.example.com, tls: {mode: Terminate, certificateRefs: [{name: mq}]}}
`, port) + routeYAML("HTTPRoute", "web", "www", 80) + routeYAML("TLSRoute", "vault", "vault", 8200) + routeYAML("TLSRoute", "mq", "mq", 5672) + tlsSecret(t, ca, "default", "www", "www.example.com") + tlsSecret(t, ca, "default", "mq", "mq.example.com") +
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
		return ping(tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{ServerName: serverName, RootCAs: roots}))
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
	if status, body := getVia(t, addr, ca.Pool, "https://www.example.com/"); status != http.StatusOK || body != "web" {
		t.Errorf("www.example.com: %d %q, want 200 from web", status, body)
	}
}

// getVia GETs url over a connection to addr, trusting roots, and returns
// the answer's status and body.
func getVia(t *testing.T, addr string, roots *x509.CertPool, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(body)
}

// TestFileModeUDPRoute: a UDP listener with a UDPRoute, read from files,
// carries datagrams both ways to its backend (the Service's UDP port),
// beside a TCP listener of the same port number; the access log has the
// flow's line with its datagrams.
func TestFileModeUDPRoute(t *testing.T) {
	udpBackend := udptest.Serve(t, udptest.Prefixed("dns "))
	tcpBackend := lineEcho(t, "tcp", nil)
	port := freePort(t)
	config := gatewayHead + fmt.Sprintf("  - {name: dns, port: %[1]d, protocol: UDP}\n  - {name: dns-tcp, port: %[1]d, protocol: TCP}\n", port) +
		routeYAML("UDPRoute", "dns", "dns", 53) + routeYAML("TCPRoute", "dns", "dns-tcp", 53) + fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: dns, namespace: default}
spec:
  ports: [{name: dns, port: 53, protocol: UDP}, {name: dns-tcp, port: 53, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: dns-1, namespace: default, labels: {kubernetes.io/service-name: dns}}
addressType: IPv4
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
ports: [{name: dns, port: %d, protocol: UDP}, {name: dns-tcp, port: %d, protocol: TCP}]
`, udpBackend.Port, tcpBackend)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "l4.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHostgate(t, "--config", dir, "--access-log", "--udp-flow-idle-timeout", "100ms")
	eventually(t, "debug routes", expect(h.admin+"/debug/routes", "", 200, "sni * -> UDPRoute default/dns"))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	eventually(t, "echo through the UDP listener", func() string {
		c, err := net.Dial("udp", addr)
		if err != nil {
			return err.Error()
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(c, "q")
		buf := make([]byte, 100)
		n, err := c.Read(buf)
		if got := string(buf[:n]); got != "dns q" {
			return fmt.Sprintf("answer %q (%v), want %q", got, err, "dns q")
		}
		return ""
	})
	if got := ping(net.DialTimeout("tcp", addr, time.Second)); got != "tcp ping\n" {
		t.Errorf("TCP listener of the same port: answer %q", got)
	}
	eventually(t, "access log line of the flow", func() string {
		for _, want := range []string{`"msg":"flow"`, `"route":"UDPRoute default/dns"`, `"packets_received":1`, `"packets_sent":1`, `"bytes_sent":5`} {
			if !strings.Contains(h.logs.String(), want) {
				return "no access log line with " + want
			}
		}
		return ""
	})
}

// TestFileModeIngressSSLPassthrough: with --enable-ssl-passthrough, the
// TLS of an Ingress host with ingress-nginx's ssl-passthrough reaches its
// backend unchanged (the client verifies the backend's own certificate,
// of a CA hostgate has nothing of), while another Ingress's host on the
// same HTTPS address is terminated by hostgate as always.
func TestFileModeIngressSSLPassthrough(t *testing.T) {
	ca, backendCA := tlstest.NewCA(t), tlstest.NewCA(t)
	vault := tlsLineEcho(t, "vault", backendCA, "vault.example.com")
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "web") }))
	defer web.Close()
	ingress := func(name, host, annotations, tls string) string {
		return fmt.Sprintf(`---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: %[1]s, namespace: default, annotations: {%[3]s}}
spec:
  ingressClassName: hostgate
  %[4]s
  rules:
  - host: %[2]s
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: %[1]s, port: {number: 443}}}}]}
`, name, host, annotations, tls)
	}
	config := ingress("vault", "vault.example.com", `nginx.ingress.kubernetes.io/ssl-passthrough: "true"`, "") +
		ingress("web", "www.example.com", "", "tls: [{hosts: [www.example.com], secretName: www}]") +
		tlsSecret(t, ca, "default", "www", "www.example.com") +
		loopbackService("default", "vault", 443, vault) + loopbackService("default", "web", 443, web.Listener.Addr().(*net.TCPAddr).Port)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ingress.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	h := startHostgate(t, "--config", dir, "--https-addr", addr, "--enable-ssl-passthrough")
	eventually(t, "debug routes", expect(h.admin+"/debug/routes", "", 200, "Ingress(ssl-passthrough) default/vault"))
	eventually(t, "passthrough", func() string {
		got := ping(tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{ServerName: "vault.example.com", RootCAs: backendCA.Pool}))
		if got != "vault ping\n" {
			return fmt.Sprintf("vault.example.com: %q", got)
		}
		return ""
	})
	if status, body := getVia(t, addr, ca.Pool, "https://www.example.com/"); status != http.StatusOK || body != "web" {
		t.Errorf("www.example.com: %d %q, want 200 from web", status, body)
	}
}
