package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/hostgate/hostgate/proxy"
)

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// gatewayHead is our GatewayClass and the start of Gateway default/web on
// 127.0.0.1, up to its listeners.
const gatewayHead = `
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: hostgate}
spec: {controllerName: hostgate.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: default}
spec:
  gatewayClassName: hostgate
  addresses: [{type: IPAddress, value: 127.0.0.1}]
  listeners:
`

const exampleTemplate = gatewayHead + `  - {name: http, port: %[1]d, protocol: HTTP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: app, namespace: default}
spec:
  parentRefs: [{name: web}]
  hostnames: [app.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: %[3]q}}]
    backendRefs: [{name: app, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: default}
spec:
  ports: [{port: 80, targetPort: %[2]d}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: app-1
  namespace: default
  labels: {kubernetes.io/service-name: app}
addressType: IPv4
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
ports: [{port: %[2]d}]
`

// loopbackService is a config folder's YAML of a Service name in
// namespace whose port leads to the backend listening on 127.0.0.1:target,
// and of its EndpointSlice.
func loopbackService(namespace, name string, port, target int) string {
	return fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  ports: [{port: %[3]d, targetPort: %[4]d}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[2]s-1
  namespace: %[1]s
  labels: {kubernetes.io/service-name: %[2]s}
addressType: IPv4
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
ports: [{port: %[4]d}]
`, namespace, name, port, target)
}

type runningHostgate struct {
	admin  string
	cancel context.CancelFunc
	done   chan error
	logs   *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startHostgate(t *testing.T, args ...string) *runningHostgate {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan net.Addr, 1)
	h := &runningHostgate{cancel: cancel, done: make(chan error, 1), logs: &syncBuffer{}}
	// A zero --shutdown-delay would mean the default, 5s on every stop.
	defaults := []string{"--admin-addr", "127.0.0.1:0", "--http-addr", "", "--https-addr", "", "--shutdown-delay", "1ms"}
	// HOSTGATE_TEST_HTTP1_ENGINE runs every hostgate of these tests on
	// that HTTP/1.1 engine, as it does the proxy's tests; a test that
	// names an engine itself still gets it, its flag coming later.
	if engine := os.Getenv("HOSTGATE_TEST_HTTP1_ENGINE"); engine != "" {
		defaults = append(defaults, "--http1-engine", engine)
	}
	args = append(defaults, args...)
	go func() { h.done <- run(ctx, args, h.logs, &hooks{adminListening: listening}) }()
	select {
	case addr := <-listening:
		h.admin = "http://" + addr.String()
	case err := <-h.done:
		t.Fatalf("hostgate stopped: %v\n%s", err, h.logs)
	case <-time.After(10 * time.Second):
		t.Fatalf("admin server did not start\n%s", h.logs)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			t.Errorf("hostgate did not stop\n%s", h.logs)
		}
	})
	return h
}

// eventually polls check until it returns "" or 10 s pass.
func eventually(t *testing.T, what string, check func() string) {
	t.Helper()
	eventuallyWithin(t, 10*time.Second, what, check)
}

func get(url, host string) (int, string) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, err.Error()
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func expect(url, host string, wantCode int, wantBody string) func() string {
	return func() string {
		code, body := get(url, host)
		if code != wantCode || !strings.Contains(body, wantBody) {
			return fmt.Sprintf("GET %s (Host %s) = %d %q, want %d with %q", url, host, code, body, wantCode, wantBody)
		}
		return ""
	}
}

// TestFileModeServesAndReloads runs hostgate on a folder of objects, as a
// newcomer does: traffic is proxied, the admin server reports it, and an
// edited file is served without a restart.
func TestFileModeServesAndReloads(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "backend saw %s %s", r.Host, r.URL.Path)
	}))
	defer backend.Close()
	backendPort := backend.Listener.Addr().(*net.TCPAddr).Port
	port := freePort(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "example.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, exampleTemplate, port, backendPort, "/"), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: broken, namespace: default}
spec:
  parentRefs: [{name: web}]
  hostnames: [broken.example.com]
  rules:
  - backendRefs: [{name: ghost, port: 80}]
`
	if err := os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHostgate(t, "--config", dir)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	// What cannot be served is visible where the user looks first.
	eventually(t, "problem in debug routes", expect(h.admin+"/debug/routes", "", 200, "HTTPRoute default/broken: ResolvedRefs=False BackendNotFound"))
	eventually(t, "unresolved backend answers 500", expect(url+"/", "broken.example.com", 500, ""))

	eventually(t, "proxied request", expect(url+"/hello", "app.example.com", 200, "backend saw app.example.com /hello"))
	eventually(t, "unknown host", expect(url+"/hello", "other.example.com", 404, ""))
	eventually(t, "healthz", expect(h.admin+"/healthz", "", 200, "ok"))
	eventually(t, "readyz", expect(h.admin+"/readyz", "", 200, "ok"))
	eventually(t, "debug routes", expect(h.admin+"/debug/routes", "", 200, "PathPrefix / -> HTTPRoute default/app rules[0]"))
	eventually(t, "endpoint health", expect(h.admin+"/debug/routes", "", 200, fmt.Sprintf("127.0.0.1:%d weight=1 healthy", backendPort)))
	eventually(t, "metrics", expect(h.admin+"/metrics", "", 200, "hostgate_config_generation 1"))

	resp, err := http.Get(h.admin + "/debug/routes?format=json")
	if err != nil {
		t.Fatal(err)
	}
	var gen generation
	if err := json.NewDecoder(resp.Body).Decode(&gen); err != nil {
		t.Fatalf("debug/routes JSON: %v", err)
	}
	resp.Body.Close()
	if len(gen.Listeners) != 1 || gen.Listeners[0].Address != fmt.Sprintf("127.0.0.1:%d", port) {
		t.Errorf("JSON listeners = %+v, want one on 127.0.0.1:%d", gen.Listeners, port)
	}

	// Narrow the route to /api: /hello must now miss, /api hit.
	if err := os.WriteFile(file, fmt.Appendf(nil, exampleTemplate, port, backendPort, "/api"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "reloaded route", expect(url+"/hello", "app.example.com", 404, ""))
	eventually(t, "reloaded route", expect(url+"/api/x", "app.example.com", 200, "backend saw app.example.com /api/x"))
}

func TestBadFlagsAreRejected(t *testing.T) {
	for _, args := range [][]string{
		{"--log-format", "xml"},
		{"--load-balancing", "random"},
		{"--http1-engine", "fast"},
		{"--config", "x", "--kubeconfig", "y"},
		{"--config", "x", "--state-file", "y"},
		{"--config", "x", "--gateway-services"},
		{"stray"},
		{"--address-pool", "not-an-ip", "--config", "testdata"},
		{"--config-settle", "-1s", "--config", "examples/quickstart"},
		{"--trusted-proxies", "10.0.0.0/33", "--config", "examples/quickstart"},
		{"--trusted-proxies", "", "--config", "examples/quickstart"},
		{"--proxy-protocol-from", "fe80::1%eth0", "--config", "examples/quickstart"},
		{"--proxy-protocol", "--config", "examples/quickstart"},
		{"--trust-forwarded-headers", "--trusted-proxies", "10.0.0.0/8", "--config", "examples/quickstart"},
	} {
		err := run(context.Background(), args, io.Discard, nil)
		if err == nil {
			t.Errorf("run %q succeeded, want an error", args)
		}
	}
	// The same pool address twice, once in another spelling: refused,
	// with the flag named.
	err := run(context.Background(), []string{"--address-pool", "2001:db8::1,2001:DB8::1", "--config", "examples/quickstart"}, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "-address-pool") || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("--address-pool with a repeated address: %v, want an error naming the flag", err)
	}
	for _, flag := range []string{"-max-connections", "-max-connections-per-address"} {
		err = run(context.Background(), []string{flag, "-1", "--config", "examples/quickstart"}, io.Discard, nil)
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s -1: %v, want an error naming the flag", flag, err)
		}
	}
	for _, ports := range []string{"80,http", "0", "70000", "80,80", "53/sctp", "53/udp,53/UDP"} {
		err := run(context.Background(), []string{"--host-ports", ports, "--config", "examples/quickstart"}, io.Discard, nil)
		if err == nil || !strings.Contains(err.Error(), "-host-ports") {
			t.Errorf("--host-ports %s: %v, want an error naming the flag", ports, err)
		}
	}
	// A bound of 0 would keep no backend connection alive: refused
	// before anything starts, with the flag named.
	err = run(context.Background(), []string{"--max-idle-per-endpoint", "0", "--config", "examples/quickstart"}, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "-max-idle-per-endpoint") {
		t.Errorf("--max-idle-per-endpoint 0: %v, want an error naming the flag", err)
	}
}

// TestConnectionCapFlags: 0 lifts a cap, which proxy.Options spells NoCap
// (its zero takes the default).
func TestConnectionCapFlags(t *testing.T) {
	c, err := parseFlags([]string{"--max-connections", "0", "--max-connections-per-address", "7"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.proxy.MaxConnections != proxy.NoCap || c.proxy.MaxConnectionsPerAddress != 7 {
		t.Errorf("caps %d and %d, want %d and 7", c.proxy.MaxConnections, c.proxy.MaxConnectionsPerAddress, proxy.NoCap)
	}
}

// TestHTTP1EngineFlag: each engine is spelled as the README spells it,
// and without the flag plain HTTP is on the loop where the loop runs, as
// the README says.
func TestHTTP1EngineFlag(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := proxy.EngineNative
	if runtime.GOOS == "linux" {
		want = proxy.EngineLoop
	}
	if c.proxy.HTTP1Engine != want {
		t.Errorf("no --http1-engine on %s: engine %q, want %q", runtime.GOOS, c.proxy.HTTP1Engine, want)
	}
	for _, engine := range []proxy.Engine{proxy.EngineNative, proxy.EngineLoop, proxy.EngineStdlib} {
		c, err := parseFlags([]string{"--http1-engine", string(engine)}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.proxy.HTTP1Engine != engine {
			t.Errorf("--http1-engine %s: engine %q", engine, c.proxy.HTTP1Engine)
		}
	}
}

// TestClientFlags: address lists, the deprecated trust-everyone flag, and
// the switches that proxy.Options spells as Disable*.
func TestClientFlags(t *testing.T) {
	c, err := parseFlags([]string{"--trusted-proxies", "10.0.0.1, 192.168.7.0/16,::ffff:172.16.0.0/108", "--proxy-protocol", "--request-id=false", "--server-header=false"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.proxy.TrustedProxies); got != "[10.0.0.1/32 192.168.0.0/16 172.16.0.0/12]" {
		t.Errorf("trusted proxies %s", got)
	}
	if !c.proxy.ProxyProtocol || !c.proxy.DisableRequestID || !c.proxy.DisableServerHeader {
		t.Errorf("options %+v", c.proxy)
	}
	c, err = parseFlags([]string{"--trust-forwarded-headers"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.proxy.TrustedProxies); got != "[0.0.0.0/0 ::/0]" || c.proxy.DisableRequestID || c.proxy.DisableServerHeader {
		t.Errorf("--trust-forwarded-headers: trusted proxies %s, options %+v", got, c.proxy)
	}
}

// TestGracefulStop is SIGTERM with a request in flight: /readyz fails at
// once, the request still completes, and hostgate exits cleanly.
func TestGracefulStop(t *testing.T) {
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "finished")
	}))
	defer backend.Close()
	port := freePort(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "example.yaml"), fmt.Appendf(nil, exampleTemplate, port, backend.Listener.Addr().(*net.TCPAddr).Port, "/"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHostgate(t, "--config", dir, "--shutdown-delay", "200ms", "--shutdown-grace", "10s")
	eventually(t, "ready", expect(h.admin+"/readyz", "", 200, "ok"))

	result := make(chan string, 1)
	go func() {
		code, body := get(fmt.Sprintf("http://127.0.0.1:%d/slow", port), "app.example.com")
		result <- fmt.Sprint(code, " ", body)
	}()
	eventually(t, "request in flight", func() string {
		if !strings.Contains(h.logs.String(), "configuration applied") {
			return "not configured"
		}
		return ""
	})
	time.Sleep(100 * time.Millisecond) // let the request reach the backend
	h.cancel()
	eventually(t, "readyz during drain", expect(h.admin+"/readyz", "", 503, "not ready"))
	close(release)
	if got := <-result; got != "200 finished" {
		t.Errorf("in-flight request = %q, want 200 finished", got)
	}
	h.stop(t)
}

// TestPublishServiceFlag: --publish-service takes a Service's
// NAMESPACE/NAME, and is refused where it could not be honoured.
func TestPublishServiceFlag(t *testing.T) {
	c, err := parseFlags([]string{"--publish-service", "ingress/front"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := (types.NamespacedName{Namespace: "ingress", Name: "front"}); c.watch.PublishService != want {
		t.Errorf("--publish-service ingress/front: %v, want %v", c.watch.PublishService, want)
	}
	for _, args := range [][]string{
		{"--publish-service", "front"},
		{"--publish-service", "ingress/"},
		{"--publish-service", "Ingress/front"},
		{"--publish-service", "a/b/c"},
		{"--publish-service", "ingress/front.lb"},
		{"--publish-service", "ingress/front", "--status-addresses", "192.0.2.1"},
		{"--publish-service", "ingress/front", "--config", "examples/quickstart"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil || !strings.Contains(err.Error(), "publish-service") {
			t.Errorf("%q: %v, want an error naming -publish-service", args, err)
		}
	}
}
