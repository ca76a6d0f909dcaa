package main

// Robustness under load (issue 8, "Keeps serving"): hostgate runs as users
// run it, against a real kube-apiserver (internal/kubetest) or, for the
// stop on SIGTERM, as a process of its own, while the load driver of
// load_test.go keeps clients busy and counts what they saw.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/hostgate/hostgate/internal/kubetest"
	"github.com/hostgate/hostgate/internal/streamtest"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
	"github.com/hostgate/hostgate/watch"
)

// runAsHostgate makes the test binary run main instead of the tests, so
// that a test can start hostgate as a process of its own and signal it.
const runAsHostgate = "HOSTGATE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsHostgate) == "1" {
		main()
		os.Exit(0)
	}
	// ClusterTrustBundles are served for TestClusterTrustBundles; every
	// other test's hostgate then watches them too, as on a cluster that
	// serves them.
	os.Exit(kubetest.Main(m, kubetest.WithClusterTrustBundles()))
}

// podAddress is an IPv4 address of this host that EndpointSlices may
// carry, for backends the API server points at: kube-apiserver refuses
// loopback addresses there. Traffic to it never leaves the host.
func podAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip := n.IP.To4(); ip != nil && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
				return ip.String()
			}
		}
	}
	if os.Geteuid() == 0 {
		return extraAddress(t)
	}
	t.Fatalf("no IPv4 address other than loopback on this host (%v): the API server refuses loopback endpoints; run as root to have the test add one", addrs)
	return ""
}

// extraAddress gives a host with only loopback (a bare CI sandbox) a
// second address on lo for the test's life, from the benchmarking range
// (RFC 2544) so that it clashes with no real network: the API server looks
// at the address, not at the link it is on.
func extraAddress(t *testing.T) string {
	const addr = "198.18.0.1"
	if out, err := exec.Command("ip", "addr", "add", addr+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("no IPv4 address other than loopback, and adding one to lo failed: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "addr", "del", addr+"/32", "dev", "lo").Run() })
	return addr
}

// serveHTTP serves h on host at a free port until the test ends.
func serveHTTP(t *testing.T, host string, h http.Handler) (*http.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return srv, ln.Addr().String()
}

func answer(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) })
}

// cluster creates the objects of one test in its own namespace, with a
// GatewayClass of hostgate's controller of the same name.
type cluster struct {
	t    *testing.T
	ns   string
	kube kubernetes.Interface
	gw   gatewayclient.Interface
}

func newCluster(t *testing.T, env *kubetest.Env, ns string) *cluster {
	t.Helper()
	c := &cluster{t: t, ns: ns, kube: kubernetes.NewForConfigOrDie(env.Config), gw: gatewayclient.NewForConfigOrDie(env.Config)}
	c.must(c.kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	c.must(c.gw.GatewayV1().GatewayClasses().Create(t.Context(), &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: watch.DefaultGatewayController},
	}, metav1.CreateOptions{}))
	// The Gateway goes with the test, so that hostgates of later tests on
	// the shared control plane do not serve it.
	t.Cleanup(func() {
		_ = c.gw.GatewayV1().Gateways(ns).Delete(context.Background(), "gw", metav1.DeleteOptions{})
	})
	return c
}

func (c *cluster) must(_ any, err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
}

// hostgate runs hostgate on the cluster, with args added to its flags;
// its status writer's Lease lives in the test's namespace.
func (c *cluster) hostgate(env *kubetest.Env, args ...string) *runningHostgate {
	c.t.Helper()
	h := startHostgate(c.t, append([]string{"--kubeconfig", env.Kubeconfig, "--gateway-class", "", "--lease-namespace", c.ns, "--access-log=false"}, args...)...)
	c.t.Cleanup(func() {
		if c.t.Failed() {
			c.t.Logf("hostgate's log:\n%s", h.logs)
		}
	})
	return h
}

// backend creates a Service name (port 80, "http") and an EndpointSlice of
// the same name for the backend at address.
func (c *cluster) backend(name, address string) {
	c.t.Helper()
	c.must(c.kube.CoreV1().Services(c.ns).Create(c.t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{}))
	c.endpoints(name, name, address)
}

// endpoints creates an EndpointSlice name of service with one endpoint.
func (c *cluster) endpoints(name, service, address string) {
	c.t.Helper()
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		c.t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	c.must(c.kube.DiscoveryV1().EndpointSlices(c.ns).Create(c.t.Context(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(p))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}}},
	}, metav1.CreateOptions{}))
}

// gateway creates the Gateway gw on 127.0.0.1 with an HTTP listener on
// httpPort and, unless tlsSecret is empty, an HTTPS one on httpsPort.
func (c *cluster) gateway(httpPort int, httpsPort int, tlsSecret string) {
	c.t.Helper()
	listeners := []gatewayv1.Listener{{Name: "http", Port: gatewayv1.PortNumber(httpPort), Protocol: gatewayv1.HTTPProtocolType}}
	if tlsSecret != "" {
		listeners = append(listeners, gatewayv1.Listener{Name: "https", Port: gatewayv1.PortNumber(httpsPort), Protocol: gatewayv1.HTTPSProtocolType,
			TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: gatewayv1.ObjectName(tlsSecret)}}}})
	}
	c.must(c.gw.GatewayV1().Gateways(c.ns).Create(c.t.Context(), &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "gw"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(c.ns),
			Addresses:        []gatewayv1.GatewaySpecAddress{{Type: new(gatewayv1.IPAddressType), Value: "127.0.0.1"}},
			Listeners:        listeners,
		},
	}, metav1.CreateOptions{}))
}

// route creates an HTTPRoute name that sends host's requests under path
// to service.
func (c *cluster) route(name, host, path, service string) {
	c.t.Helper()
	c.must(c.gw.GatewayV1().HTTPRoutes(c.ns).Create(c.t.Context(), &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(host)},
			Rules: []gatewayv1.HTTPRouteRule{{
				Matches:     []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchPathPrefix), Value: new(path)}}},
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(service), Port: new(gatewayv1.PortNumber(80))}}}},
			}},
		},
	}, metav1.CreateOptions{}))
}

// mergePatch is change as a JSON merge patch, as kubectl patch sends:
// nothing is read first, so it never conflicts with hostgate's status
// writes.
func (c *cluster) mergePatch(change any) []byte {
	c.t.Helper()
	data, err := json.Marshal(change)
	if err != nil {
		c.t.Fatal(err)
	}
	return data
}

// routePath points HTTPRoute name's only rule at path.
func (c *cluster) routePath(ctx context.Context, name, path, service string) error {
	_, err := c.gw.GatewayV1().HTTPRoutes(c.ns).Patch(ctx, name, types.MergePatchType, c.mergePatch(map[string]any{"spec": map[string]any{"rules": []any{map[string]any{
		"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": path}}},
		"backendRefs": []any{map[string]any{"name": service, "port": 80}},
	}}}}), metav1.PatchOptions{})
	return err
}

// rotate replaces the certificate and key of Secret name.
func (c *cluster) rotate(ctx context.Context, name string, certPEM, keyPEM []byte) error {
	_, err := c.kube.CoreV1().Secrets(c.ns).Patch(ctx, name, types.MergePatchType,
		c.mergePatch(map[string]any{"data": map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}), metav1.PatchOptions{})
	return err
}

func (c *cluster) tlsSecret(name string, certPEM, keyPEM []byte) {
	c.t.Helper()
	c.must(c.kube.CoreV1().Secrets(c.ns).Create(c.t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	}, metav1.CreateOptions{}))
}

// eventuallyWithin polls check until it returns "" or d passes.
func eventuallyWithin(t *testing.T, d time.Duration, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		problem := check()
		if problem == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after %v: %s", what, d, problem)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metric returns the line of /metrics that starts with name.
func metric(admin, name string) string {
	_, body := get(admin+"/metrics", "")
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, name+" ") {
			return strings.TrimSpace(line)
		}
	}
	return name + " missing"
}

// webSocket opens a WebSocket to the echo backend through addr and
// returns a function that sends msg and checks the echo.
func webSocket(t *testing.T, addr, host string) func(msg string) error {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	br, err := streamtest.Handshake(conn, host, "/chat")
	if err != nil {
		t.Fatal(err)
	}
	return func(msg string) error {
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := conn.Write(streamtest.Frame(msg, true)); err != nil {
			return fmt.Errorf("WebSocket write: %w", err)
		}
		if got, err := streamtest.ReadFrame(br); err != nil || got != "echo: "+msg {
			return fmt.Errorf("WebSocket read = %q, %v; want %q", got, err, "echo: "+msg)
		}
		return nil
	}
}

// grpcChat opens a bidirectional gRPC stream (test.Echo/Chat) through addr
// over h2c and returns a function that sends msg and checks the answer.
func grpcChat(t *testing.T, addr, host string) func(msg string) error {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority(host),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(streamtest.RawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var desc *grpc.StreamDesc
	for i := range streamtest.EchoService.Streams {
		if streamtest.EchoService.Streams[i].StreamName == "Chat" {
			desc = &streamtest.EchoService.Streams[i]
		}
	}
	stream, err := conn.NewStream(ctx, desc, "/test.Echo/Chat")
	if err != nil {
		t.Fatal(err)
	}
	return func(msg string) error {
		// A stream that died would block RecvMsg until the test's
		// timeout; a watchdog makes it an error that says so.
		watchdog := time.AfterFunc(30*time.Second, cancel)
		defer watchdog.Stop()
		out := []byte(msg)
		if err := stream.SendMsg(&out); err != nil {
			return fmt.Errorf("gRPC send: %w", err)
		}
		var in []byte
		if err := stream.RecvMsg(&in); err != nil || string(in) != "re: "+msg {
			return fmt.Errorf("gRPC receive = %q, %v; want %q", in, err, "re: "+msg)
		}
		return nil
	}
}

// servedCert returns the certificate a new TLS connection to addr gets
// for host.
func servedCert(addr, host string, roots *x509.CertPool) ([]byte, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{ServerName: host, RootCAs: roots})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Raw, nil
}

func certDER(t *testing.T, certPEM []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("no PEM certificate")
	}
	return block.Bytes
}

// Sizes of the reconfiguration test: route changes spread over
// churnRoutes HTTPRoutes, and a certificate rotation for every
// changesPerRotation of them.
const (
	routeChanges       = 1000
	churnRoutes        = 20
	changesPerRotation = 10
)

// TestReconfigurationUnderLoad keeps clients busy on one route, over
// HTTP/1.1 and HTTP/2, cleartext and TLS, while 1,000 changes to other
// routes and 100 rotations of the route's own certificate go through the
// API server: no request fails, no connection is reset, and a gRPC stream
// and a WebSocket opened before the changes still work after them.
func TestReconfigurationUnderLoad(t *testing.T) {
	env := kubetest.Shared(t)
	pod := podAddress(t)
	c := newCluster(t, env, "reconfig")
	ca := tlstest.NewCA(t)
	_, loadAddr := serveHTTP(t, pod, answer("load ok"))
	_, wsAddr := serveHTTP(t, pod, streamtest.WebSocketEcho)
	c.backend("load", loadAddr)
	c.backend("ws", wsAddr)
	c.backend("grpc", streamtest.StartGRPC(t, net.JoinHostPort(pod, "0")))
	certPEM, keyPEM := ca.Issue(t, "load.example.com")
	c.tlsSecret("load-tls", certPEM, keyPEM)
	httpPort, httpsPort := freePort(t), freePort(t)
	c.gateway(httpPort, httpsPort, "load-tls")
	c.route("load", "load.example.com", "/", "load")
	c.route("ws", "ws.example.com", "/", "ws")
	c.must(c.gw.GatewayV1().GRPCRoutes(c.ns).Create(t.Context(), &gatewayv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "grpc"},
		Spec: gatewayv1.GRPCRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Hostnames:       []gatewayv1.Hostname{"grpc.example.com"},
			Rules: []gatewayv1.GRPCRouteRule{{BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "grpc", Port: new(gatewayv1.PortNumber(80))},
			}}}}},
		},
	}, metav1.CreateOptions{}))
	h := c.hostgate(env)
	plainAddr, tlsAddr := fmt.Sprintf("127.0.0.1:%d", httpPort), fmt.Sprintf("127.0.0.1:%d", httpsPort)
	plain, secure := "http://"+plainAddr, "https://"+tlsAddr
	eventuallyWithin(t, time.Minute, "the load route", expect(plain+"/", "load.example.com", 200, "load ok"))

	ws := webSocket(t, plainAddr, "ws.example.com")
	chat := grpcChat(t, plainAddr, "grpc.example.com")
	for _, exchange := range []func(string) error{ws, chat} {
		if err := exchange("before"); err != nil {
			t.Fatal(err)
		}
	}
	clientTLS := &tls.Config{RootCAs: ca.Pool, ServerName: "load.example.com"}
	l := startLoad(t, "load ok", 2,
		loadClient{name: "h1", url: plain + "/", host: "load.example.com"},
		loadClient{name: "h2c", url: plain + "/", host: "load.example.com", h2: true},
		loadClient{name: "h1 tls", url: secure + "/", host: "load.example.com", tls: clientTLS},
		loadClient{name: "h2 tls", url: secure + "/", host: "load.example.com", tls: clientTLS, h2: true},
	)
	time.Sleep(500 * time.Millisecond) // every client connected

	// The changes go out from several clients at once, as from several
	// users, each route's in order; the first ones create the routes.
	var certs [][2][]byte
	for range routeChanges / changesPerRotation {
		certPEM, keyPEM := ca.Issue(t, "load.example.com")
		certs = append(certs, [2][]byte{certPEM, keyPEM})
	}
	began := time.Now()
	for n := range churnRoutes {
		name := fmt.Sprintf("churn-%d", n)
		c.route(name, name+".example.com", fmt.Sprintf("/v%d", n), "load")
	}
	errs := make(chan error, churnRoutes+1)
	var changes sync.WaitGroup
	send := func(f func() error) { changes.Go(func() { errs <- f() }) }
	for n := range churnRoutes {
		send(func() error {
			name := fmt.Sprintf("churn-%d", n)
			for i := n + churnRoutes; i < routeChanges; i += churnRoutes {
				if err := c.routePath(t.Context(), name, fmt.Sprintf("/v%d", i), "load"); err != nil {
					return err
				}
			}
			return nil
		})
	}
	send(func() error {
		for _, cert := range certs {
			if err := c.rotate(t.Context(), "load-tls", cert[0], cert[1]); err != nil {
				return err
			}
		}
		return nil
	})
	changes.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d route changes and %d certificate rotations sent in %v", routeChanges, len(certs), time.Since(began).Round(time.Millisecond))

	// The last change of each kind is served: it went all the way.
	last := fmt.Sprintf("churn-%d.example.com", (routeChanges-1)%churnRoutes)
	eventuallyWithin(t, time.Minute, "the last route change", expect(fmt.Sprintf("%s/v%d", plain, routeChanges-1), last, 200, "load ok"))
	eventuallyWithin(t, time.Minute, "the route before the last change gone", expect(fmt.Sprintf("%s/v%d", plain, routeChanges-1-churnRoutes), last, 404, ""))
	want := certDER(t, certs[len(certs)-1][0])
	eventuallyWithin(t, time.Minute, "the last certificate", func() string {
		got, err := servedCert(tlsAddr, "load.example.com", ca.Pool)
		if err != nil {
			return err.Error()
		}
		if string(got) != string(want) {
			return "an older certificate"
		}
		return ""
	})
	t.Logf("applied in %v; %s", time.Since(began).Round(time.Millisecond), metric(h.admin, "hostgate_config_generation"))
	time.Sleep(500 * time.Millisecond) // load on the final configuration

	for _, exchange := range []func(string) error{ws, chat} {
		if err := exchange("after"); err != nil {
			t.Errorf("stream opened before the changes: %v", err)
		}
	}
	l.check(t)
}

// rollingRounds is how many backends a rolling update replaces, one by
// one, in a set of rollingPods.
const rollingRounds, rollingPods = 6, 3

// TestRollingUpdateUnderLoad replaces the backends of a route one by one,
// as a Deployment's rolling update does: a new backend starts and gets its
// EndpointSlice, then the oldest loses its EndpointSlice and stops
// gracefully at once, without waiting for hostgate to see the change. No
// GET fails.
func TestRollingUpdateUnderLoad(t *testing.T) {
	env := kubetest.Shared(t)
	pod := podAddress(t)
	c := newCluster(t, env, "rolling")
	c.must(c.kube.CoreV1().Services(c.ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{}))
	type backend struct {
		slice string
		srv   *http.Server
	}
	start := func(n int) backend {
		srv, addr := serveHTTP(t, pod, answer(fmt.Sprintf("app ok from pod %d", n)))
		b := backend{slice: fmt.Sprintf("app-%d", n), srv: srv}
		c.endpoints(b.slice, "app", addr)
		return b
	}
	var running []backend
	for n := range rollingPods {
		running = append(running, start(n))
	}
	port := freePort(t)
	c.gateway(port, 0, "")
	c.route("app", "app.example.com", "/", "app")
	c.hostgate(env)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	eventuallyWithin(t, time.Minute, "the route", expect(url, "app.example.com", 200, "app ok"))

	l := startLoad(t, "app ok", 3,
		loadClient{name: "h1", url: url, host: "app.example.com"},
		loadClient{name: "h2c", url: url, host: "app.example.com", h2: true},
	)
	for n := rollingPods; n < rollingPods+rollingRounds; n++ {
		old := running[0]
		running = append(running[1:], start(n))
		if err := c.kube.DiscoveryV1().EndpointSlices(c.ns).Delete(t.Context(), old.slice, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := old.srv.Shutdown(ctx); err != nil {
			t.Errorf("stop %s: %v", old.slice, err)
		}
		cancel()
		time.Sleep(time.Second) // load on the new set
	}
	lastPod := fmt.Sprintf("app ok from pod %d", rollingPods+rollingRounds-1)
	eventuallyWithin(t, time.Minute, "the newest backend", expect(url, "app.example.com", 200, lastPod))
	l.check(t)
}

// apiServerOutage is how long TestAPIServerOutageUnderLoad keeps the API
// server down; a route created after it must be served within
// resumeWithin, less than the 30 to 60 s client-go's default backoff
// would take after such an outage, more than a slow machine needs.
const apiServerOutage, resumeWithin = 60 * time.Second, 20 * time.Second

// TestAPIServerOutageUnderLoad stops the API server for a minute while
// clients are busy: no request fails, hostgate does not mistake the outage
// for Gateway API CRDs gone, and once the API server is back its watches
// resume: a route created then is served within seconds.
func TestAPIServerOutageUnderLoad(t *testing.T) {
	env := kubetest.Start(t)
	pod := podAddress(t)
	c := newCluster(t, env, "outage")
	_, addr := serveHTTP(t, pod, answer("outage ok"))
	c.backend("app", addr)
	port := freePort(t)
	c.gateway(port, 0, "")
	c.route("before", "before.example.com", "/", "app")
	h := c.hostgate(env)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	eventuallyWithin(t, time.Minute, "the route", expect(url, "before.example.com", 200, "outage ok"))

	l := startLoad(t, "outage ok", 2,
		loadClient{name: "h1", url: url, host: "before.example.com"},
		loadClient{name: "h2c", url: url, host: "before.example.com", h2: true},
	)
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(apiServerOutage)
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	c.route("after", "after.example.com", "/", "app")
	eventuallyWithin(t, resumeWithin, "the route created after the outage", expect(url, "after.example.com", 200, "outage ok"))
	t.Logf("route created after the outage served %v after the API server was back", time.Since(back).Round(time.Millisecond))
	if strings.Contains(h.logs.String(), "Gateway API kinds are not installed") {
		t.Error("hostgate logged that the Gateway API kinds are not installed while the API server was down")
	}
	l.check(t)
}

// TestSIGTERMUnderLoad stops a hostgate process with SIGTERM while
// requests are in flight and keep-alive clients keep sending: /readyz
// fails at once, the requests in flight finish, answers during the
// shutdown delay close their connections cleanly (Connection: close on
// HTTP/1.1, GOAWAY on HTTP/2), and the process exits 0. The only requests
// that fail are those sent after hostgate stopped listening.
func TestSIGTERMUnderLoad(t *testing.T) {
	const shutdownDelay = 3 * time.Second
	var slowStarted atomic.Int32
	_, backendAddr := serveHTTP(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			slowStarted.Add(1)
			time.Sleep(5 * time.Second)
		}
		io.WriteString(w, "stop ok")
	}))
	_, backendPort, _ := net.SplitHostPort(backendAddr)
	bp, _ := strconv.Atoi(backendPort)
	port, adminPort := freePort(t), freePort(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "example.yaml"), fmt.Appendf(nil, exampleTemplate, port, bp, "/"), 0o644); err != nil {
		t.Fatal(err)
	}
	admin := fmt.Sprintf("http://127.0.0.1:%d", adminPort)
	cmd := exec.Command(os.Args[0], "--config", dir, "--admin-addr", fmt.Sprintf("127.0.0.1:%d", adminPort),
		"--http-addr", "", "--https-addr", "", "--access-log=false",
		"--shutdown-delay", shutdownDelay.String(), "--shutdown-grace", "30s")
	cmd.Env = append(os.Environ(), runAsHostgate+"=1")
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("hostgate's log:\n%s", logs)
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	eventuallyWithin(t, time.Minute, "ready", expect(admin+"/readyz", "", 200, "ok"))
	eventuallyWithin(t, time.Minute, "the route", expect(url+"/", "app.example.com", 200, "stop ok"))

	const perClient = 3
	l := startLoad(t, "stop ok", perClient,
		loadClient{name: "h1", url: url + "/", host: "app.example.com"},
		loadClient{name: "h2c", url: url + "/", host: "app.example.com", h2: true},
	)
	const slow = 4
	slowResults := make(chan string, slow)
	for range slow {
		go func() {
			code, body := get(url+"/slow", "app.example.com")
			slowResults <- fmt.Sprint(code, " ", body)
		}()
	}
	eventuallyWithin(t, time.Minute, "slow requests in flight", func() string {
		if n := slowStarted.Load(); n < slow {
			return fmt.Sprintf("%d of %d at the backend", n, slow)
		}
		return ""
	})
	signalled := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventuallyWithin(t, 10*time.Second, "readyz during the drain", expect(admin+"/readyz", "", 503, "not ready"))
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("hostgate exited with %v, want 0", err)
		}
		exited <- err
	case <-time.After(time.Minute):
		t.Fatal("hostgate did not stop within a minute of SIGTERM")
	}
	for range slow {
		if got := <-slowResults; got != "200 stop ok" {
			t.Errorf("request in flight at SIGTERM = %q, want 200 stop ok", got)
		}
	}
	// Requests sent once the sockets were closed cannot succeed: refused,
	// or reset while waiting to be accepted as the socket closed.
	l.check(t, "refused", "not accepted")
	if first := l.firstFailure(); !first.IsZero() && first.Before(signalled.Add(shutdownDelay)) {
		t.Errorf("a request failed %v after SIGTERM, within the shutdown delay of %v", first.Sub(signalled), shutdownDelay)
	}
	if l.closes.Load() == 0 {
		t.Error("no HTTP/1.1 answer during the shutdown delay said Connection: close")
	}
	// HTTP/2 clients open a new connection after a GOAWAY; only those
	// during the delay find a listener.
	if n := l.opened("h2c"); n <= perClient {
		t.Errorf("h2c clients opened %d connections for %d clients: no GOAWAY during the shutdown delay", n, perClient)
	}
}
