package cpbench

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/hostgate/hostgate/internal/kubetest"
	"github.com/hostgate/hostgate/internal/proc"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
)

const (
	// namespaces spread the objects as a shared cluster would.
	namespaces = 50
	// workers create objects concurrently to keep the setup short.
	workers = 16
	// certs is how many Ingresses of the Ingress scenario have TLS, each
	// with its own Secret.
	certs = 1000
	// burst is how many HTTPRoutes the burst creates at once.
	burst = 1000
	// changeTimeout is how long one change may take to be served before
	// the benchmark fails.
	changeTimeout = 60 * time.Second
	// profileSeconds is how long CPBENCH_CPU_PROFILE,
	// CPBENCH_ALLOC_PROFILE and CPBENCH_TRACE profile or trace each kind
	// of change from its first: enough for 100 changes at 100 ms.
	profileSeconds = 15
)

// changes is how many route (and EndpointSlice) changes each scenario
// times; CPBENCH_CHANGES overrides it.
func changes(b *testing.B) int {
	n := 100
	if s := os.Getenv("CPBENCH_CHANGES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			b.Fatalf("CPBENCH_CHANGES=%q: want a positive number", s)
		}
	}
	return n
}

// BenchmarkControlPlane creates 1,000 and then 10,000 HTTPRoutes (each with
// its own Service and EndpointSlice), then replaces them with 10,000
// Ingresses of which 1,000 have TLS certificates. For each set it starts a
// hostgate process and reports the time from its start until every route
// serves, its memory, and the latency from an API write to the first correct
// response through the proxy, over many changes: a new route, or a new path
// of an existing one, and with 10,000 HTTPRoutes also a new backend address
// in an EndpointSlice and a burst of 1,000 new HTTPRoutes at once. With
// CPBENCH_LARGE set it also measures 50,000 HTTPRoutes, with as many
// Services.
//
// It runs once however large b.N is: one run takes minutes.
func BenchmarkControlPlane(b *testing.B) {
	if os.Getenv("HOSTGATE_KUBE_BIN") == "" {
		b.Skip("HOSTGATE_KUBE_BIN is not set: run hack/perf-controlplane.sh")
	}
	env := kubetest.Start(b)
	hostIP := hostAddress(b)
	backend := startBackend(b, hostIP, "main")
	c := &cluster{
		kube:        kubernetes.NewForConfigOrDie(env.Config),
		gw:          gatewayclient.NewForConfigOrDie(env.Config),
		kubeconfig:  env.Kubeconfig,
		bin:         hostgateBinary(b),
		hostIP:      hostIP,
		gatewayPort: freePort(b),
		httpPort:    freePort(b),
		httpsPort:   freePort(b),
	}
	c.setup(b, backend.port, 10000)
	n := changes(b)

	// httpRoutes adds routes up to a total of to and measures; more
	// measures EndpointSlice changes and a burst of new routes too. -bench
	// may pick any one scenario.
	httpRoutes := func(to int, more bool) func(*testing.B) {
		return func(b *testing.B) {
			c.createHTTPRoutes(b, to)
			h := c.startHostgate(b, httpRouteHost(to-1))
			defer h.stop(b)
			h.reportStartup(b, c.httpRoutesWithoutStatus)
			h.reportChanges(b, "change", n, c.httpRouteChange)
			if more {
				h.reportChanges(b, "endpoints", n, c.endpointChange(b, h))
				h.reportBurst(b, c, burst)
			}
		}
	}
	b.Run("httproutes=1000", httpRoutes(1000, false))
	b.Run("httproutes=10000", httpRoutes(10000, true))
	b.Run("ingresses=10000,certs=1000", func(b *testing.B) {
		c.deleteHTTPRoutes(b)
		c.createIngresses(b, 10000)
		h := c.startHostgate(b, ingressHost(9999))
		defer h.stop(b)
		h.checkTLS(b, net.JoinHostPort("127.0.0.1", strconv.Itoa(c.httpsPort)), ingressHost(certs-1))
		// No Ingress status to wait for: the cluster has no Nodes, so
		// hostgate has no address to write on them.
		h.reportStartup(b, nil)
		h.reportChanges(b, "change", n, c.ingressChange)
	})
	b.Run("httproutes=50000", func(b *testing.B) {
		if os.Getenv("CPBENCH_LARGE") == "" {
			b.Skip("CPBENCH_LARGE is not set: 40,000 more Services and 50,000 HTTPRoutes take more than half an hour to create and settle on a small machine")
		}
		c.deleteIngresses(b)
		c.createServices(b, 50000)
		httpRoutes(50000, false)(b)
	})
}

// cluster holds what the scenarios share: clients, the ports hostgate
// serves on and the binary it runs.
type cluster struct {
	kube       kubernetes.Interface
	gw         gatewayclient.Interface
	kubeconfig string
	bin        string
	hostIP     string
	// gatewayPort serves the Gateway's listener; httpPort and httpsPort
	// serve Ingresses.
	gatewayPort, httpPort, httpsPort int
	// changed counts the changes made so far, so every one has its own
	// names.
	changed int
	// routes is how many HTTPRoutes createHTTPRoutes made, services how
	// many Services createServices made, with EndpointSlices to the
	// backend on backendPort.
	routes, services, backendPort int
}

func namespace(i int) string         { return "bench-" + strconv.Itoa(i%namespaces) }
func serviceName(i int) string       { return "svc-" + strconv.Itoa(i) }
func httpRouteHost(i int) string     { return "route-" + strconv.Itoa(i) + ".example.com" }
func ingressHost(i int) string       { return "ingress-" + strconv.Itoa(i) + ".example.com" }
func changeHost(i int) string        { return "change-" + strconv.Itoa(i) + ".example.com" }
func backendPath(host string) string { return "host=" + host }

// setup creates the namespaces, the GatewayClass and Gateway, and one
// Service with an EndpointSlice to the backend per route.
func (c *cluster) setup(b *testing.B, backendPort, services int) {
	ctx := context.Background()
	began := time.Now()
	parallel(b, namespaces, func(i int) error {
		_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace(i)}}, metav1.CreateOptions{})
		return err
	})
	if _, err := c.gw.GatewayV1().GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "hostgate"},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: "hostgate.dev/gateway-controller"},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := c.gw.GatewayV1().Gateways("default").Create(ctx, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: "hostgate",
			Addresses:        []gatewayv1.GatewaySpecAddress{{Type: new(gatewayv1.IPAddressType), Value: "127.0.0.1"}},
			Listeners: []gatewayv1.Listener{{
				Name: "http", Port: gatewayv1.PortNumber(c.gatewayPort), Protocol: gatewayv1.HTTPProtocolType,
				AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: new(gatewayv1.NamespacesFromAll)}},
			}},
		},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d namespaces, a GatewayClass and a Gateway in %v", namespaces, time.Since(began).Round(time.Millisecond))
	c.backendPort = backendPort
	c.createServices(b, services)
}

// createServices creates Services with EndpointSlices until there are to
// of them.
func (c *cluster) createServices(b *testing.B, to int) {
	from := c.services
	began := time.Now()
	parallel(b, to-from, func(i int) error {
		i += from
		return c.createService(context.Background(), namespace(i), serviceName(i), c.backendPort)
	})
	c.services = to
	b.Logf("created Services with EndpointSlices %d to %d in %v", from, to-1, time.Since(began).Round(time.Millisecond))
}

// createService creates a Service on port 80 and an EndpointSlice that
// sends it to the backend on the host address.
func (c *cluster) createService(ctx context.Context, ns, name string, backendPort int) error {
	_, err := c.kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	_, err = c.kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, c.endpointSlice(name, backendPort), metav1.CreateOptions{})
	return err
}

func (c *cluster) endpointSlice(service string, port int) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: service + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(port))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{c.hostIP}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)}}},
	}
}

// httpRoute is a route for host with a rule for prefix and one for /api,
// both to the Service svc.
func httpRoute(name, host, prefix, svc string) *gatewayv1.HTTPRoute {
	backend := []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
		Name: gatewayv1.ObjectName(svc), Port: new(gatewayv1.PortNumber(80)),
	}}}}
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "bench", Namespace: new(gatewayv1.Namespace("default"))}}},
			Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(host)},
			Rules: []gatewayv1.HTTPRouteRule{
				{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchPathPrefix), Value: new("/api")}}}, BackendRefs: backend},
				{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchPathPrefix), Value: new(prefix)}}}, BackendRefs: backend},
			},
		},
	}
}

// createHTTPRoutes creates HTTPRoutes until there are to of them.
func (c *cluster) createHTTPRoutes(b *testing.B, to int) {
	from := c.routes
	began := time.Now()
	parallel(b, to-from, func(i int) error {
		i += from
		_, err := c.gw.GatewayV1().HTTPRoutes(namespace(i)).Create(context.Background(), httpRoute("route-"+strconv.Itoa(i), httpRouteHost(i), "/", serviceName(i)), metav1.CreateOptions{})
		return err
	})
	c.routes = to
	b.Logf("created HTTPRoutes %d to %d in %v", from, to-1, time.Since(began).Round(time.Millisecond))
}

func (c *cluster) deleteHTTPRoutes(b *testing.B) {
	c.routes = 0
	parallel(b, namespaces, func(i int) error {
		return c.gw.GatewayV1().HTTPRoutes(namespace(i)).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
}

// deleteIngresses deletes the Ingresses and TLS Secrets of
// createIngresses.
func (c *cluster) deleteIngresses(b *testing.B) {
	ctx := context.Background()
	parallel(b, namespaces, func(i int) error {
		if err := c.kube.NetworkingV1().Ingresses(namespace(i)).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return err
		}
		return c.kube.CoreV1().Secrets(namespace(i)).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "type=" + string(corev1.SecretTypeTLS)})
	})
}

func ingress(name, host, prefix, svc, secret string) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.IngressSpec{
			IngressClassName: new("hostgate"),
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: prefix, PathType: new(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}},
				}}},
			}}}},
		},
	}
	if secret != "" {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: secret}}
	}
	return ing
}

// createIngresses creates n Ingresses, the first certs of them with TLS
// from a Secret of their own.
func (c *cluster) createIngresses(b *testing.B, n int) {
	ctx := context.Background()
	began := time.Now()
	ca := tlstest.NewCA(b)
	pairs := make([][2][]byte, certs)
	for i := range pairs {
		pairs[i][0], pairs[i][1] = ca.Issue(b, ingressHost(i))
	}
	parallel(b, n, func(i int) error {
		secret := ""
		if i < certs {
			secret = "tls-" + strconv.Itoa(i)
			if _, err := c.kube.CoreV1().Secrets(namespace(i)).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: secret},
				Type:       corev1.SecretTypeTLS,
				Data:       map[string][]byte{corev1.TLSCertKey: pairs[i][0], corev1.TLSPrivateKeyKey: pairs[i][1]},
			}, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		_, err := c.kube.NetworkingV1().Ingresses(namespace(i)).Create(ctx, ingress("ingress-"+strconv.Itoa(i), ingressHost(i), "/", serviceName(i), secret), metav1.CreateOptions{})
		return err
	})
	b.Logf("created %d Ingresses and %d TLS Secrets in %v", n, certs, time.Since(began).Round(time.Millisecond))
}

// probe is one request that tells whether a change is served.
type probe struct {
	port       int
	host, path string
	// want is what the backend's answer must contain.
	want string
}

// httpRoutesWithoutStatus counts the HTTPRoutes that no status was
// written on yet.
func (c *cluster) httpRoutesWithoutStatus(ctx context.Context) (int, error) {
	n, next := 0, ""
	for {
		list, err := c.gw.GatewayV1().HTTPRoutes("").List(ctx, metav1.ListOptions{Limit: 1000, Continue: next})
		if err != nil {
			return 0, err
		}
		for i := range list.Items {
			if len(list.Items[i].Status.Parents) == 0 {
				n++
			}
		}
		if next = list.Continue; next == "" {
			return n, nil
		}
	}
}

// httpRouteChange creates a route with a new hostname (even changes) or
// moves the path of the route created by the change before (odd ones).
func (c *cluster) httpRouteChange(ctx context.Context) (probe, error) {
	return c.routeChange(ctx, c.gatewayPort,
		func(ns, name, host, prefix string) error {
			_, err := c.gw.GatewayV1().HTTPRoutes(ns).Create(ctx, httpRoute(name, host, prefix, serviceName(0)), metav1.CreateOptions{})
			return err
		},
		func(ns, name, prefix string) error {
			// hostgate writes status meanwhile: a conflict is part of
			// making a change.
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				r, err := c.gw.GatewayV1().HTTPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				r.Spec.Rules[1].Matches[0].Path.Value = new(prefix)
				_, err = c.gw.GatewayV1().HTTPRoutes(ns).Update(ctx, r, metav1.UpdateOptions{})
				return err
			})
		})
}

func (c *cluster) ingressChange(ctx context.Context) (probe, error) {
	return c.routeChange(ctx, c.httpPort,
		func(ns, name, host, prefix string) error {
			_, err := c.kube.NetworkingV1().Ingresses(ns).Create(ctx, ingress(name, host, prefix, serviceName(0), ""), metav1.CreateOptions{})
			return err
		},
		func(ns, name, prefix string) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				ing, err := c.kube.NetworkingV1().Ingresses(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				ing.Spec.Rules[0].HTTP.Paths[0].Path = prefix
				_, err = c.kube.NetworkingV1().Ingresses(ns).Update(ctx, ing, metav1.UpdateOptions{})
				return err
			})
		})
}

// routeChange makes the next change: a new route for a new hostname with
// the path /created-N, or, every other time, that route's path moved to
// /updated-N. Either path answered 404 before the change.
func (c *cluster) routeChange(ctx context.Context, port int, create func(ns, name, host, prefix string) error, update func(ns, name, prefix string) error) (probe, error) {
	i := c.changed
	c.changed++
	ns := namespace(0)
	if i%2 == 0 {
		host, path := changeHost(i), "/created-"+strconv.Itoa(i)
		return probe{port: port, host: host, path: path, want: backendPath(host)}, create(ns, "change-"+strconv.Itoa(i), host, path)
	}
	host, path := changeHost(i-1), "/updated-"+strconv.Itoa(i)
	return probe{port: port, host: host, path: path, want: backendPath(host)}, update(ns, "change-"+strconv.Itoa(i-1), path)
}

// endpointChange returns changes that each start a new backend and point
// the EndpointSlice of a Service (routed to by its own HTTPRoute) at it;
// the probe wants that backend's answer.
func (c *cluster) endpointChange(b *testing.B, h *hostgate) func(context.Context) (probe, error) {
	ctx := context.Background()
	const svc, host = "moving", "moving.example.com"
	first := startBackend(b, c.hostIP, "moving-0")
	created := time.Now()
	if err := c.createService(ctx, "default", svc, first.port); err != nil {
		b.Fatal(err)
	}
	if _, err := c.gw.GatewayV1().HTTPRoutes("default").Create(ctx, httpRoute(svc, host, "/", svc), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	// Served before the first change, so that the translations of the
	// new Service and route are not taken for the changes'.
	h.await(b, fmt.Sprintf("http://127.0.0.1:%d/", c.gatewayPort), host, "backend moving-0 ", created)
	n := 0
	return func(ctx context.Context) (probe, error) {
		n++
		// Old backends keep answering (with their own name) until the
		// benchmark ends, so a stale endpoint is seen as such, not as an
		// error.
		next := startBackend(b, c.hostIP, "moving-"+strconv.Itoa(n))
		slice := c.endpointSlice(svc, next.port)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			existing, err := c.kube.DiscoveryV1().EndpointSlices("default").Get(ctx, slice.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			slice.ResourceVersion = existing.ResourceVersion
			_, err = c.kube.DiscoveryV1().EndpointSlices("default").Update(ctx, slice, metav1.UpdateOptions{})
			return err
		})
		return probe{port: c.gatewayPort, host: host, path: "/", want: "backend moving-" + strconv.Itoa(n) + " "}, err
	}
}

// hostgate is a running hostgate process.
type hostgate struct {
	cmd     *exec.Cmd
	log     string
	admin   string // host:port
	started time.Time
	ready   time.Duration
	exited  chan struct{}
	client  *http.Client
}

// startHostgate starts hostgate on the cluster and waits until /readyz
// answers 200 and lastHost (the last route created) serves.
func (c *cluster) startHostgate(b *testing.B, lastHost string) *hostgate {
	b.Helper()
	logPath := filepath.Join(b.TempDir(), "hostgate.log")
	if dir := os.Getenv("CPBENCH_LOG_DIR"); dir != "" {
		// Kept after the run, e.g. to read GODEBUG=gctrace=1's lines.
		logPath = filepath.Join(dir, fileName(b)+".log")
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	admin := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(b)))
	cmd := exec.Command(c.bin,
		"--kubeconfig", c.kubeconfig,
		"--admin-addr", admin,
		"--http-addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.httpPort)),
		"--https-addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.httpsPort)),
		"--lease-namespace", "default", "--identity", "cpbench", "--gateway-class", "",
		// Thousands of 404s while polling would only measure logging.
		"--access-log=false",
		// For the CPBENCH_*_PROFILE variables.
		"--profiling",
		"--shutdown-delay", "0s", "--shutdown-grace", "1s")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	h := &hostgate{
		cmd: cmd, log: logPath, admin: admin, exited: make(chan struct{}),
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}},
	}
	h.started = time.Now()
	if err := proc.Start(cmd); err != nil {
		b.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(h.exited)
	}()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		code, _ := h.get("http://"+admin+"/readyz", "")
		if code == http.StatusOK {
			if code, body := h.get(fmt.Sprintf("http://127.0.0.1:%d/", c.gatewayOrIngressPort(lastHost)), lastHost); code == http.StatusOK && strings.Contains(body, backendPath(lastHost)) {
				break
			}
		}
		select {
		case <-h.exited:
			b.Fatalf("hostgate exited before it was ready (%s); log:\n%s", cmd.ProcessState, tail(logPath))
		default:
		}
		if time.Now().After(deadline) {
			h.stop(b)
			b.Fatalf("hostgate did not serve %s within 5 minutes; log:\n%s", lastHost, tail(logPath))
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.ready = time.Since(h.started)
	return h
}

func (c *cluster) gatewayOrIngressPort(host string) int {
	if strings.HasPrefix(host, "ingress-") {
		return c.httpPort
	}
	return c.gatewayPort
}

func (h *hostgate) get(url, host string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	req.Host = host
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// reportStartup reports the start-up time and, once hostgate has finished
// writing status (unwritten, if not nil, counts the objects still without
// one) and its CPU time stops growing, its memory.
func (h *hostgate) reportStartup(b *testing.B, unwritten func(context.Context) (int, error)) {
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(h.ready.Seconds(), "startup_s")
	b.ReportMetric(h.memory(b).rss, "ready_rss_MiB")
	settled := h.settle(b, unwritten)
	b.ReportMetric(settled.Seconds(), "settle_s")
	m := h.memory(b)
	if path := os.Getenv("CPBENCH_HEAP_PROFILE"); path != "" {
		// What the live heap holds once every status is written (go tool
		// pprof -sample_index=inuse_space).
		h.saveProfile(b, "heap?gc=1", path, "")
	}
	b.ReportMetric(m.rss, "rss_MiB")
	b.ReportMetric(m.peak, "peak_rss_MiB")
	b.Logf("serving after %v; status written and idle %v later; RSS %.0f MiB (peak %.0f MiB; anonymous %.0f MiB, of files such as the binary %.0f MiB)",
		h.ready.Round(time.Millisecond), settled.Round(time.Second), m.rss, m.peak, m.anon, m.file)
	// hostgate gives its free heap back once it has been quiet for one of
	// its checks, 10 s apart (trimWhenIdle): what it holds for as long as
	// the cluster stays quiet.
	time.Sleep(idleTrimWait)
	idle := h.memory(b)
	b.ReportMetric(idle.rss, "idle_rss_MiB")
	b.Logf("quiet for %v more: RSS %.0f MiB (anonymous %.0f MiB)", idleTrimWait, idle.rss, idle.anon)
}

// idleTrimWait is two of hostgate's checks for quiet and a margin.
const idleTrimWait = 25 * time.Second

// saveProfile writes hostgate's /debug/pprof/<query> to path, with the
// scenario's name (and part, if any) before the extensions of its file
// name. It may be called from another goroutine than the benchmark's.
func (h *hostgate) saveProfile(b *testing.B, query, path, part string) {
	dir, file := filepath.Split(path)
	stem, exts, dotted := strings.Cut(file, ".")
	path = dir + stem + "-" + fileName(b)
	if part != "" {
		path += "-" + part
	}
	if dotted {
		path += "." + exts
	}
	// A CPU profile takes the seconds it was asked for: longer than
	// h.client's timeout.
	client := http.Client{Timeout: profileSeconds*time.Second + time.Minute}
	resp, err := client.Get("http://" + h.admin + "/debug/pprof/" + query)
	if err != nil {
		b.Error(err)
		return
	}
	defer resp.Body.Close()
	profile, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Errorf("profile %s: %d %v", query, resp.StatusCode, err)
		return
	}
	if err := os.WriteFile(path, profile, 0o644); err != nil {
		b.Error(err)
		return
	}
	b.Logf("profile %s in %s", query, path)
}

// fileName is the scenario's name as part of a file name.
func fileName(b *testing.B) string {
	return strings.NewReplacer("/", "-", "=", "-", ",", "-").Replace(b.Name())
}

// memoryUse is hostgate's resident set, in MiB: the whole, its peak, and
// its anonymous (heap, stacks) and file-backed (the binary's pages) parts.
type memoryUse struct{ rss, peak, anon, file float64 }

func (h *hostgate) memory(b *testing.B) memoryUse {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	field := func(name string) float64 {
		for line := range strings.SplitSeq(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, name+":"); ok {
				kib, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				return kib / 1024
			}
		}
		b.Fatalf("no %s in /proc/%d/status", name, h.cmd.Process.Pid)
		return 0
	}
	return memoryUse{rss: field("VmRSS"), peak: field("VmHWM"), anon: field("RssAnon"), file: field("RssFile")}
}

// settle waits until the status of every object is written and hostgate
// then uses less than a tenth of a core over two seconds: the
// translations those writes caused are done. Changes are timed after
// that, in the steady state. (Idle CPU alone was not enough: writing
// statuses at 100 objects/s came to take less than that.)
func (h *hostgate) settle(b *testing.B, unwritten func(context.Context) (int, error)) time.Duration {
	began := time.Now()
	const window = 2 * time.Second
	last := h.cpuTime(b)
	for time.Since(began) < 10*time.Minute {
		time.Sleep(window)
		now := h.cpuTime(b)
		idle := now-last < window/10
		last = now
		if !idle {
			continue
		}
		if unwritten == nil {
			return time.Since(began)
		}
		n, err := unwritten(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			return time.Since(began)
		}
		last = h.cpuTime(b) // the count's own load on the API server is not hostgate's
	}
	b.Logf("hostgate still busy after 10 minutes")
	return time.Since(began)
}

// cpuTime is the user and system time hostgate has used.
func (h *hostgate) cpuTime(b *testing.B) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", h.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: utime and stime are the 12th and 13th.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// reportChanges makes n changes one after another and reports the p50 and
// p99 of the time from the API call to the first correct answer, of the
// part of it that the API calls took (until the write returned), and of
// the rest: watch, translation, compilation and the first request.
func (h *hostgate) reportChanges(b *testing.B, name string, n int, change func(context.Context) (probe, error)) {
	ctx := context.Background()
	logStart := fileSize(h.log)
	latencies := make([]time.Duration, 0, n)
	writes := make([]time.Duration, 0, n)
	afterWrites := make([]time.Duration, 0, n)
	// Where hostgate's CPU goes during the changes, and what it allocates:
	// both profiles count only what happens, so the idle seconds after the
	// changes add nothing. The execution trace tells what a slow change
	// waited for (the CPU, the collector, a lock).
	for _, p := range []struct{ env, query string }{{"CPBENCH_CPU_PROFILE", "profile"}, {"CPBENCH_ALLOC_PROFILE", "allocs"}, {"CPBENCH_TRACE", "trace"}} {
		path := os.Getenv(p.env)
		if path == "" {
			continue
		}
		profiled := make(chan struct{})
		go func() {
			defer close(profiled)
			h.saveProfile(b, fmt.Sprintf("%s?seconds=%d", p.query, profileSeconds), path, name)
		}()
		defer func() {
			b.Logf("%s: waiting for the %s profile of %ds", name, p.query, profileSeconds)
			<-profiled
		}()
	}
	for range n {
		began := time.Now()
		p, err := change(ctx)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		writes = append(writes, time.Since(began))
		h.await(b, fmt.Sprintf("http://127.0.0.1:%d%s", p.port, p.path), p.host, p.want, began)
		latencies = append(latencies, time.Since(began))
		afterWrites = append(afterWrites, latencies[len(latencies)-1]-writes[len(writes)-1])
	}
	report := func(name string, d []time.Duration) {
		slices.Sort(d)
		p50, p99 := percentile(d, 0.50), percentile(d, 0.99)
		b.ReportMetric(float64(p50)/float64(time.Millisecond), name+"_p50_ms")
		b.ReportMetric(float64(p99)/float64(time.Millisecond), name+"_p99_ms")
		b.Logf("%s: %d changes, p50 %v, p99 %v, max %v", name, n, p50.Round(time.Millisecond/10), p99.Round(time.Millisecond/10), d[len(d)-1].Round(time.Millisecond/10))
	}
	report(name, latencies)
	report(name+"_api", writes)
	report(name+"_after_api", afterWrites)
	if work, slowest := translations(b, h.log, logStart); len(work) > 0 {
		report(name+"_hostgate", work)
		b.Logf("%s: slowest translation: %s", name, slowest)
	}
}

// await polls url with Host host until it answers 200 with want in its
// body, and fails the benchmark changeTimeout after since.
func (h *hostgate) await(b *testing.B, url, host, want string, since time.Time) {
	for {
		code, body := h.get(url, host)
		if code == http.StatusOK && strings.Contains(body, want) {
			return
		}
		if time.Since(since) > changeTimeout {
			b.Fatalf("GET %s (Host %s) still %d %q %v after %v; log:\n%s", url, host, code, body, changeTimeout, since.Format(time.TimeOnly), tail(h.log))
		}
		time.Sleep(time.Millisecond)
	}
}

// reportBurst creates n HTTPRoutes at once, as a GitOps sync of many
// changes does, and reports how long the writes took, how long after the
// last one returned every route served, how many translations hostgate
// made meanwhile (how the debounce batched them), and its peak memory.
func (h *hostgate) reportBurst(b *testing.B, c *cluster, n int) {
	ctx := context.Background()
	logStart := fileSize(h.log)
	began := time.Now()
	parallel(b, n, func(i int) error {
		_, err := c.gw.GatewayV1().HTTPRoutes(namespace(i)).Create(ctx, httpRoute("burst-"+strconv.Itoa(i), burstHost(i), "/", serviceName(i)), metav1.CreateOptions{})
		return err
	})
	written := time.Now()
	url := fmt.Sprintf("http://127.0.0.1:%d/", c.gatewayPort)
	// A route that serves keeps serving: each is polled until it does, in
	// the order of creation, and the last one found tells when all did.
	for i := range n {
		h.await(b, url, burstHost(i), backendPath(burstHost(i)), written)
	}
	served := time.Since(written)
	work, slowest := translations(b, h.log, logStart)
	m := h.memory(b)
	b.ReportMetric(written.Sub(began).Seconds(), "burst_write_s")
	b.ReportMetric(float64(served)/float64(time.Millisecond), "burst_served_ms")
	b.ReportMetric(float64(len(work)), "burst_translations")
	b.ReportMetric(m.peak, "burst_peak_rss_MiB")
	b.Logf("burst: %d HTTPRoutes written in %v, all served %v after the last write, in %d translations (slowest: %s); RSS %.0f MiB, peak %.0f MiB",
		n, written.Sub(began).Round(time.Millisecond), served.Round(time.Millisecond), len(work), slowest, m.rss, m.peak)
}

func burstHost(i int) string { return "burst-" + strconv.Itoa(i) + ".example.com" }

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// translations reads, from hostgate's log after offset, how long each
// translation took from listing the caches to the proxy serving the
// result, and each change of endpoints without one: the part of a change that is hostgate's own work, as opposed to
// the watch bringing the change and the wait for the CPU.
// slowest is the log line of the longest, which tells its parts apart.
func translations(b *testing.B, path string, offset int64) (durations []time.Duration, slowest string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		b.Fatal(err)
	}
	var longest time.Duration
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		var raw map[string]any
		if json.Unmarshal(s.Bytes(), &raw) != nil || (raw["msg"] != "translated" && raw["msg"] != "endpoints changed") {
			continue
		}
		total := 0.0
		for _, k := range []string{"list_seconds", "translate_seconds", "change_seconds", "publish_seconds"} {
			v, _ := raw[k].(float64)
			total += v
		}
		d := time.Duration(total * float64(time.Second))
		if d > longest {
			longest, slowest = d, s.Text()
		}
		durations = append(durations, d)
	}
	return durations, slowest
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

// checkTLS checks that the HTTPS listener presents the certificate of
// host, so that start-up included the certificates.
func (h *hostgate) checkTLS(b *testing.B, addr, host string) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: host, InsecureSkipVerify: true})
	if err != nil {
		b.Fatalf("TLS to %s for %s: %v", addr, host, err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0].DNSNames; !slices.Contains(got, host) {
		b.Fatalf("TLS to %s for %s: certificate for %v", addr, host, got)
	}
}

func (h *hostgate) stop(b *testing.B) {
	select {
	case <-h.exited:
		return
	default:
	}
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		b.Error(err)
	}
	select {
	case <-h.exited:
	case <-time.After(10 * time.Second):
		_ = h.cmd.Process.Kill()
		<-h.exited
	}
}

// tail returns the last lines of a log file, where the reason for a
// failure usually is.
func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > 40 {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// hostgateBinary is $HOSTGATE_BIN, or hostgate built from this module.
func hostgateBinary(b *testing.B) string {
	if bin := os.Getenv("HOSTGATE_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(b.TempDir(), "hostgate")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/hostgate/hostgate").CombinedOutput()
	if err != nil {
		b.Fatalf("go build hostgate: %v\n%s", err, out)
	}
	return bin
}

// hostAddress is an IPv4 address of this machine other than loopback:
// the API server rejects loopback addresses in EndpointSlices, and the
// backends must be real servers that hostgate reaches.
func hostAddress(b *testing.B) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		b.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	b.Skip("no IPv4 address other than loopback for the backends")
	return ""
}

// backend is an HTTP server that answers with its name, the Host and the
// path it saw.
type backend struct {
	port  int
	srv   *http.Server
	close func()
}

func startBackend(b *testing.B, ip, name string) *backend {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "backend %s %s path=%s\n", name, backendPath(r.Host), r.URL.Path)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	var once sync.Once
	be := &backend{port: ln.Addr().(*net.TCPAddr).Port, srv: srv, close: func() { once.Do(func() { srv.Close() }) }}
	b.Cleanup(be.close)
	return be
}

func freePort(b *testing.B) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// parallel runs f for 0..n-1 on workers goroutines and fails b with the
// first error.
func parallel(b *testing.B, n int, f func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					errs <- fmt.Errorf("object %d: %w", i, err)
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}
