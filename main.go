// Command hostgate is a Kubernetes ingress controller and proxy in one
// process: it watches Ingress and Gateway API objects (or reads them from
// files), compiles them into an immutable routing table and serves HTTP/1.1,
// HTTP/2, gRPC and HTTP/3 itself.
//
// main.go owns flags, wiring and signals; compile.go turns translated
// snapshots into the proxy's configuration; admin.go is the node's health,
// metrics and /debug/routes server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hostgate/hostgate/proxy"
	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore"
	"github.com/hostgate/hostgate/watch"
)

// version is stamped by the build: -ldflags "-X main.version=...".
var version = "dev"

func main() {
	limitMemory()
	paceGC()
	go trimWhenIdle()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	run := func(ctx context.Context, args []string) error { return run(ctx, args, os.Stderr, nil) }
	if len(os.Args) > 1 && os.Args[1] == "check" {
		run = func(ctx context.Context, args []string) error { return runCheck(ctx, args[1:], os.Stdout) }
	}
	if err := run(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "hostgate:", err)
		os.Exit(1)
	}
}

type config struct {
	configPath   string
	configSettle time.Duration
	// metrics is where components register theirs.
	metrics          prometheus.Registerer
	kubeconfig       string
	leaseNamespace   string
	leaseName        string
	gatewayClassName string
	identity         string
	adminAddr        string
	logFormat        string
	logLevel         slog.Level
	accessLog        bool
	profiling        bool
	// ingressStatus is whether the status writer writes Ingress status.
	ingressStatus bool
	printVersion  bool
	// trustAllForwarded is the deprecated -trust-forwarded-headers.
	trustAllForwarded bool
	stateFile         string
	// state is the --state-file (cluster mode).
	state *watch.StateFile
	// statusWriteErrors counts failed status writes (cluster mode).
	statusWriteErrors prometheus.Counter
	watch             watch.Options
	proxy             proxy.Options
}

func parseFlags(args []string, output io.Writer) (*config, error) {
	c := &config{proxy: proxy.DefaultOptions()}
	var requestID, serverHeader bool
	fs := flag.NewFlagSet("hostgate", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&c.configPath, "config", "", "serve the Kubernetes objects in this YAML file or folder instead of a cluster's (reloaded on change)")
	fs.DurationVar(&c.configSettle, "config-settle", watch.DefaultFileSettle, "with -config, how long the files must stay unchanged before a change is read, so that a file caught while written is never served")
	fs.StringVar(&c.stateFile, "state-file", "", "file that keeps the last configuration from the API server, private keys included, to serve at a start while the API server is unreachable until it syncs; empty: none")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to watch; empty uses the in-cluster config")
	fs.StringVar(&c.leaseNamespace, "lease-namespace", envOr("POD_NAMESPACE", "hostgate"), "namespace of the Lease that elects the one status writer (default $POD_NAMESPACE)")
	fs.StringVar(&c.leaseName, "lease-name", "hostgate-status", "name of that Lease")
	fs.StringVar(&c.identity, "identity", envOr("POD_NAME", hostname()), "this instance's name in the Lease (default $POD_NAME, else the host name)")
	fs.StringVar(&c.adminAddr, "admin-addr", ":10254", "address of /healthz, /readyz, /metrics and /debug/routes")
	fs.StringVar(&c.watch.IngressHTTPAddr, "http-addr", ":80", "address Ingresses are served on over HTTP; empty to disable")
	fs.StringVar(&c.watch.IngressHTTPSAddr, "https-addr", ":443", "address Ingresses are served on over HTTPS (TCP and UDP); empty to disable")
	fs.Func("ingress-class", "comma-separated IngressClass names to serve, whatever controller their IngressClass names (default "+watch.DefaultIngressClass+"; \""+watch.DefaultIngressClass+",nginx\" takes over ingress-nginx's Ingresses)", func(s string) error {
		c.watch.IngressClasses = splitList(s)
		if len(c.watch.IngressClasses) == 0 {
			return errors.New("names no class")
		}
		return nil
	})
	fs.BoolVar(&c.watch.IngressSSLPassthrough, "enable-ssl-passthrough", false, "honour ingress-nginx's ssl-passthrough annotation: TLS connections to those Ingresses' hosts pass through, by server name, to the backend of their \"/\" path")
	sslRedirect := fs.Bool("ingress-ssl-redirect", true, "redirect plain HTTP requests for Ingress hosts with TLS to HTTPS with 308, as ingress-nginx does (its ssl-redirect annotation turns it off per Ingress)")
	defaultCert := fs.String("ingress-default-certificate", "self-signed", "certificate of the Ingress HTTPS listener for server names no Ingress has one for: self-signed (made at start, as ingress-nginx's fake certificate), none (such handshakes fail), or NAMESPACE/NAME of a kubernetes.io/tls Secret (ingress-nginx's --default-ssl-certificate)")
	fs.StringVar(&c.watch.IngressHSTS, "ingress-hsts", watch.DefaultHSTS, "Strict-Transport-Security header on HTTPS answers for Ingresses; \""+watch.HSTSOff+"\" sends none")
	fs.IntVar(&c.watch.IngressLimitStatus, "ingress-limit-status", http.StatusServiceUnavailable, "status of answers to requests over an Ingress's limit-rps, limit-rpm or limit-connections (ingress-nginx's limit-req-status-code)")
	fs.Func("ingress-allowed-response-headers", "comma-separated header names custom-headers' ConfigMaps may set (ingress-nginx's global-allowed-response-headers; default none: custom-headers is refused); hostgate keeps these keys of every ConfigMap it watches", func(s string) error {
		c.watch.IngressAllowedResponseHeaders = splitList(s)
		for _, name := range c.watch.IngressAllowedResponseHeaders {
			if err := watch.CheckAllowedResponseHeader(name); err != nil {
				return err
			}
		}
		return nil
	})
	c.watch.IngressMaxRequestBody = 1 << 20
	fs.Func("ingress-body-size", "largest request body of an Ingress without proxy-body-size, as nginx writes sizes (1000, 8k, 8m, 1g); larger gets 413, as ingress-nginx's default (default 1m; 0: no limit)", func(s string) (err error) {
		c.watch.IngressMaxRequestBody, err = watch.ParseNginxSize(s)
		return err
	})
	c.watch.IngressTimeouts = router.Timeouts{Connect: 5 * time.Second, BackendRead: 60 * time.Second, BackendSend: 60 * time.Second}
	fs.DurationVar(&c.watch.IngressTimeouts.Connect, "ingress-connect-timeout", c.watch.IngressTimeouts.Connect, "connect timeout to the backends of an Ingress without proxy-connect-timeout, as ingress-nginx's default (0: hostgate's own 5s)")
	fs.DurationVar(&c.watch.IngressTimeouts.BackendRead, "ingress-read-timeout", c.watch.IngressTimeouts.BackendRead, "longest wait between two reads of a backend's response for an Ingress without proxy-read-timeout, 504 before the response begins, as ingress-nginx's default (0: none)")
	fs.DurationVar(&c.watch.IngressTimeouts.BackendSend, "ingress-send-timeout", c.watch.IngressTimeouts.BackendSend, "longest wait of a write of the request to a backend for an Ingress without proxy-send-timeout, as ingress-nginx's default (0: none)")
	fs.BoolVar(&c.ingressStatus, "ingress-status", true, "write the addresses of Ingresses of our classes to their status; false while another controller (ingress-nginx during a migration) still writes it")
	fs.StringVar(&c.watch.GatewayController, "gateway-controller", watch.DefaultGatewayController, "GatewayClass controllerName to serve")
	fs.StringVar(&c.gatewayClassName, "gateway-class", "hostgate", "GatewayClass (of --gateway-controller) to create when missing; empty creates none")
	fs.Func("address-pool", "comma-separated IP addresses given one per Gateway without spec.addresses, and one per spec.addresses entry without a value (default: Gateways share the node's addresses)", func(s string) error {
		var err error
		c.watch.AddressPool, err = ipList(s)
		return err
	})
	fs.BoolVar(&c.watch.GatewayServices, "gateway-services", false, "keep for each Gateway a Service of type LoadBalancer in its namespace, with spec.infrastructure's labels and annotations and EndpointSlices of the addresses the Gateway is served on, so that a load balancer can give it an address; the leader creates, updates and deletes them (needs the RBAC for Services and EndpointSlices)")
	fs.Func("publish-service", "NAMESPACE/NAME of a Service whose addresses Ingress status lists instead of the node addresses: its load balancer's IPs and hostnames and its external IPs for type LoadBalancer, as ingress-nginx's --publish-service (for a MetalLB, kube-vip or cloud load balancer in front of hostgate)", func(s string) error {
		var err error
		c.watch.PublishService, err = objectKey(s, "Service", validation.IsDNS1035Label)
		return err
	})
	fs.Func("status-addresses", "comma-separated addresses to publish in Ingress and Gateway status instead of the node addresses", func(s string) error {
		var err error
		c.watch.StatusAddresses, err = ipList(s)
		return err
	})
	fs.Func("host-ports", "comma-separated ports the pod's hostPorts map (the manifest's), TCP unless written PORT/udp; Gateway listeners on other ports cannot be reached and are not accepted (PortUnavailable). Ignored on the host network ($POD_IP equal to $HOST_IP), where every port is reachable (default: every port)", func(s string) error {
		var err error
		c.watch.ReachablePorts, err = portList(s)
		return err
	})
	fs.Func("trusted-proxies", "comma-separated CIDRs or addresses of the proxies and load balancers in front: a connection from one keeps its X-Forwarded-For, -Proto, -Host and X-Request-ID, and its client is the rightmost X-Forwarded-For address outside them (ingress-nginx's use-forwarded-headers with proxy-real-ip-cidr); X-Forwarded-Client-Cert is always hostgate's own (default: none)", func(s string) error {
		var err error
		c.proxy.TrustedProxies, err = prefixList(s)
		return err
	})
	fs.BoolVar(&c.trustAllForwarded, "trust-forwarded-headers", false, "deprecated: --trusted-proxies 0.0.0.0/0,::/0 (every peer)")
	fs.BoolVar(&c.proxy.ProxyProtocol, "proxy-protocol", false, "every TCP connection to the HTTP and HTTPS listeners starts with a PROXY protocol header (v1 or v2), whose address is the client's; connections from outside --proxy-protocol-from, and bad or late headers, are closed")
	fs.Func("proxy-protocol-from", "comma-separated CIDRs or addresses that may send a PROXY protocol header (default: --trusted-proxies)", func(s string) error {
		var err error
		c.proxy.ProxyProtocolFrom, err = prefixList(s)
		return err
	})
	fs.BoolVar(&requestID, "request-id", true, "send backends an X-Request-ID, generated unless a trusted proxy sent one (false: the client's goes on as it came)")
	fs.BoolVar(&serverHeader, "server-header", true, "answers carry \"Server: hostgate\" unless the backend sent its own (false: hostgate adds none)")
	fs.Func("load-balancing", "round-robin or least-request (default round-robin)", oneOf(&c.proxy.LoadBalancing, proxy.RoundRobin, proxy.LeastRequest))
	fs.Func("http1-engine", "native (hostgate's own HTTP/1.1 engine, on Go's netpoller), loop (plain HTTP listeners and TCP and TLS passthrough listeners' connections on hostgate's own epoll loops, Linux only; HTTPS and TLS ended here stay native) or stdlib (net/http for every connection) (default loop on Linux, native elsewhere)", oneOf(&c.proxy.HTTP1Engine, proxy.EngineNative, proxy.EngineLoop, proxy.EngineStdlib))
	fs.Func("http2-engine", "native (hostgate's own HTTP/2 engine) or stdlib (net/http's HTTP/2 server, an escape hatch) (default native)", oneOf(&c.proxy.HTTP2Engine, proxy.EngineNative, proxy.EngineStdlib))
	fs.DurationVar(&c.proxy.ReadHeaderTimeout, "read-header-timeout", c.proxy.ReadHeaderTimeout, "time a client has to send request headers")
	fs.DurationVar(&c.proxy.IdleTimeout, "idle-timeout", c.proxy.IdleTimeout, "how long an idle client connection is kept")
	fs.Int64Var(&c.proxy.MinRequestBodyRate, "request-body-min-rate", c.proxy.MinRequestBodyRate, "least average rate in bytes/s at which a request body must arrive after --request-body-grace; slower gets 408 (0 disables)")
	fs.DurationVar(&c.proxy.RequestBodyGrace, "request-body-grace", c.proxy.RequestBodyGrace, "how long a request body may start slowly before --request-body-min-rate applies")
	fs.DurationVar(&c.proxy.RequestBodyTimeout, "request-body-timeout", 0, "longest a whole request body may take, 408 past it (0: no limit)")
	fs.IntVar(&c.proxy.MaxHeaderBytes, "max-header-bytes", c.proxy.MaxHeaderBytes, "largest request header block; larger gets 431")
	fs.IntVar(&c.proxy.MaxConcurrentStreams, "max-concurrent-streams", c.proxy.MaxConcurrentStreams, "HTTP/2 and HTTP/3 streams per connection")
	fs.IntVar(&c.proxy.MaxConnections, "max-connections", c.proxy.MaxConnections, "client connections open at once over TCP, all listeners together; past it a new connection closes those idle the longest, or is refused when none is idle (0: no cap)")
	fs.IntVar(&c.proxy.MaxConnectionsPerAddress, "max-connections-per-address", c.proxy.MaxConnectionsPerAddress, "the same per client IP address, or IPv6 /64 (0: no cap)")
	fs.IntVar(&c.proxy.MaxIdleConnsPerEndpoint, "max-idle-per-endpoint", c.proxy.MaxIdleConnsPerEndpoint, "idle keep-alive connections kept to each backend endpoint (for backends that limit connections; fewer than the requests in flight to an endpoint makes the extra ones reconnect)")
	fs.DurationVar(&c.proxy.ShutdownDelay, "shutdown-delay", c.proxy.ShutdownDelay, "on SIGTERM, how long listeners keep accepting after /readyz fails, with answers that close their connections")
	fs.DurationVar(&c.proxy.ShutdownGrace, "shutdown-grace", c.proxy.ShutdownGrace, "on SIGTERM, how long requests in flight get to finish")
	fs.DurationVar(&c.proxy.L4DrainGrace, "l4-drain-grace", c.proxy.L4DrainGrace, "how long a TCP, TLS or UDP connection goes on once its route is removed or its endpoint leaves the Service, before it is closed (-1ns: never)")
	fs.DurationVar(&c.proxy.L4IdleTimeout, "l4-idle-timeout", c.proxy.L4IdleTimeout, "how long a TCP or TLS connection carried to its backend may go without a byte either way before it is closed, as nginx's proxy_timeout (-1ns: never)")
	fs.DurationVar(&c.proxy.UDPFlowIdleTimeout, "udp-flow-idle-timeout", c.proxy.UDPFlowIdleTimeout, "how long a UDP flow (client address and port) lives without a datagram either way")
	fs.IntVar(&c.proxy.MaxUDPFlows, "max-udp-flows", c.proxy.MaxUDPFlows, "flows per UDP listener; datagrams that would start more are dropped (-1: no cap)")
	fs.StringVar(&c.logFormat, "log-format", "json", "json or text")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "debug, info, warn or error")
	fs.BoolVar(&c.accessLog, "access-log", true, "log every request")
	fs.BoolVar(&c.profiling, "profiling", false, "serve Go's CPU, heap and goroutine profiles on the admin address under /debug/pprof/ (unauthenticated, like the rest of it)")
	fs.BoolVar(&c.printVersion, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	c.proxy.DisableRequestID, c.proxy.DisableServerHeader = !requestID, !serverHeader
	if c.trustAllForwarded {
		if c.proxy.TrustedProxies != nil {
			return nil, errors.New("-trust-forwarded-headers and -trusted-proxies exclude each other: the first is the second with every address")
		}
		c.proxy.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	}
	if c.proxy.ProxyProtocol && len(c.proxy.ProxyProtocolFrom) == 0 && len(c.proxy.TrustedProxies) == 0 {
		return nil, errors.New("-proxy-protocol needs -proxy-protocol-from or -trusted-proxies: the addresses of the load balancers that send it")
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q: hostgate takes only flags", fs.Args())
	}
	c.watch.NoIngressSSLRedirect = !*sslRedirect
	if err := c.setIngressDefaultCert(*defaultCert); err != nil {
		return nil, fmt.Errorf("-ingress-default-certificate %q: %w", *defaultCert, err)
	}
	if c.watch.IngressLimitStatus < 400 || c.watch.IngressLimitStatus > 599 {
		return nil, fmt.Errorf("-ingress-limit-status %d: must be from 400 to 599", c.watch.IngressLimitStatus)
	}
	if strings.ContainsFunc(c.watch.IngressHSTS, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, fmt.Errorf("-ingress-hsts %q: must not hold control characters", c.watch.IngressHSTS)
	}
	switch c.logFormat {
	case "json", "text":
	default:
		return nil, fmt.Errorf("-log-format %q: must be json or text", c.logFormat)
	}
	for _, limit := range []struct {
		flag  string
		value *int
	}{{"max-connections", &c.proxy.MaxConnections}, {"max-connections-per-address", &c.proxy.MaxConnectionsPerAddress}} {
		switch {
		case *limit.value < 0:
			return nil, fmt.Errorf("-%s %d: must not be negative (0 lifts the cap)", limit.flag, *limit.value)
		case *limit.value == 0:
			*limit.value = proxy.NoCap
		}
	}
	if c.proxy.MaxIdleConnsPerEndpoint < 1 {
		return nil, fmt.Errorf("-max-idle-per-endpoint %d: must be at least 1", c.proxy.MaxIdleConnsPerEndpoint)
	}
	if c.configPath != "" && c.kubeconfig != "" {
		return nil, errors.New("-config and -kubeconfig exclude each other: serve files or a cluster")
	}
	if podIP := os.Getenv("POD_IP"); c.watch.ReachablePorts != nil && podIP != "" && podIP == os.Getenv("HOST_IP") {
		// A pod on the host network has the node's address and binds
		// the node's ports: the hostPort list no longer bounds them.
		c.watch.ReachablePorts = nil
	}
	switch {
	case c.proxy.MinRequestBodyRate < 0:
		return nil, fmt.Errorf("-request-body-min-rate %d: must not be negative (0 disables it)", c.proxy.MinRequestBodyRate)
	case c.proxy.MinRequestBodyRate == 0:
		c.proxy.MinRequestBodyRate = -1 // proxy.Options' way to say off
	case c.proxy.RequestBodyGrace < 0:
		return nil, fmt.Errorf("-request-body-grace %v: must not be negative", c.proxy.RequestBodyGrace)
	case c.proxy.RequestBodyTimeout < 0:
		return nil, fmt.Errorf("-request-body-timeout %v: must not be negative", c.proxy.RequestBodyTimeout)
	}
	if c.configSettle < 0 {
		return nil, fmt.Errorf("-config-settle %v: must not be negative", c.configSettle)
	}
	if c.watch.PublishService.Name != "" && (c.configPath != "" || len(c.watch.StatusAddresses) > 0) {
		return nil, errors.New("-publish-service is for cluster mode, and -status-addresses would take its place: set one of them")
	}
	if c.configPath != "" && c.watch.GatewayServices {
		return nil, errors.New("-gateway-services is for cluster mode: with -config nothing writes to a cluster")
	}
	if c.configPath != "" && c.stateFile != "" {
		return nil, errors.New("-state-file is for cluster mode: with -config the files are the configuration")
	}
	return c, nil
}

// oneOf parses a flag that takes one of values.
func oneOf[T ~string](dst *T, values ...T) func(string) error {
	return func(s string) error {
		for _, v := range values {
			if T(s) == v {
				*dst = v
				return nil
			}
		}
		return fmt.Errorf("must be one of %q", values)
	}
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func hostname() string {
	name, err := os.Hostname()
	if err != nil {
		return "hostgate"
	}
	return name
}

func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// ipList parses a comma-separated list of IP addresses, each written as
// status and Gateways' spec.addresses will show it (2001:db8::1, not
// 2001:DB8::1): the pool is compared with those as text.
func ipList(s string) ([]string, error) {
	var out []string
	for _, item := range splitList(s) {
		addr, err := netip.ParseAddr(item)
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP address", item)
		}
		if slices.Contains(out, addr.String()) {
			return nil, fmt.Errorf("%s is listed twice", addr)
		}
		out = append(out, addr.String())
	}
	return out, nil
}

// prefixList parses comma-separated CIDRs or addresses, an address
// standing for itself alone.
func prefixList(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range splitList(s) {
		p, err := netip.ParsePrefix(item)
		if err != nil {
			addr, addrErr := netip.ParseAddr(item)
			if addrErr != nil || addr.Zone() != "" {
				return nil, fmt.Errorf("%q is neither a CIDR nor an IP address", item)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			// Clients' addresses are compared unmapped.
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	if out == nil {
		return nil, errors.New("no address given")
	}
	return out, nil
}

// portList parses comma-separated port numbers, each TCP or, written
// PORT/udp, UDP (PORT/tcp is TCP too).
func portList(s string) (*watch.Ports, error) {
	ports := &watch.Ports{}
	for _, item := range splitList(s) {
		number, transport, _ := strings.Cut(item, "/")
		list := &ports.TCP
		switch strings.ToLower(transport) {
		case "", "tcp":
		case "udp":
			list = &ports.UDP
		default:
			return nil, fmt.Errorf("%q: the protocol after / is tcp or udp", item)
		}
		port, err := strconv.ParseUint(number, 10, 16)
		if err != nil || port == 0 {
			return nil, fmt.Errorf("%q is not a port number (1-65535)", item)
		}
		if slices.Contains(*list, int32(port)) {
			return nil, fmt.Errorf("%q is listed twice", item)
		}
		*list = append(*list, int32(port))
	}
	return ports, nil
}

func newLogger(c *config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.logLevel}
	if c.logFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// hooks let tests see inside a running hostgate; nil in production.
type hooks struct {
	adminListening chan<- net.Addr
}

// run is main without the process: it returns when ctx is done and
// everything has stopped, or when a component fails.
func run(ctx context.Context, args []string, logOutput io.Writer, h *hooks) error {
	c, err := parseFlags(args, logOutput)
	if err != nil {
		return err
	}
	if c.printVersion {
		fmt.Fprintln(logOutput, "hostgate", version)
		return nil
	}
	log := newLogger(c, logOutput)
	if c.trustAllForwarded {
		log.Warn("-trust-forwarded-headers is deprecated: it is -trusted-proxies 0.0.0.0/0,::/0, which lets any client choose its address; name the load balancers instead")
	}
	logClientGoTo(log)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	c.proxy.Logger = log
	c.proxy.Registerer = reg
	translationTime := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "hostgate_config_translate_duration_seconds", Help: "Time to translate the whole object store into a configuration.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	})
	c.statusWriteErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hostgate_status_write_errors_total", Help: "Status writes to the API server that failed.",
	})
	reg.MustRegister(translationTime, c.statusWriteErrors)
	c.watch.TranslationTime = translationTime
	c.watch.AddressUsable = proxy.Bindable
	c.metrics = reg
	if c.stateFile != "" {
		c.state = watch.NewStateFile(c.stateFile, log.With("component", "state-file"), reg)
	}
	if c.accessLog {
		c.proxy.AccessLog = accessLogger(log)
		c.proxy.L4AccessLog = l4AccessLogger(log)
	}
	srv, err := proxy.New(c.proxy)
	if err != nil {
		return err
	}
	var current atomic.Pointer[generation]
	ctrl := newController(srv, &current, log, reg)
	src, err := newSource(c, log, ctrl.publish)
	if err != nil {
		return err
	}
	adm := &admin{addr: c.adminAddr, ready: srv.Ready, current: &current, endpoints: srv.Endpoints, gatherer: reg, profiling: c.profiling}
	if h != nil {
		adm.listening = make(chan net.Addr, 1)
		go func() { h.adminListening <- <-adm.listening }()
	}
	log.Info("hostgate starting", "version", version, "mode", src.mode, "memory_limit_bytes", memoryLimit())

	// The proxy drains first on SIGTERM while the source and the admin
	// server keep running, so /readyz reports the drain and a late route
	// change is still applied; they stop once the proxy has.
	proxyDone := make(chan struct{})
	restCtx, stopRest := context.WithCancel(context.Background())
	defer stopRest()
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	runComponent := func(name string, ctx context.Context, start func(context.Context) error) {
		wg.Go(func() {
			if err := start(ctx); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		})
	}
	if src.state != nil {
		// Before the source starts: the first live translation must
		// replace what the file holds, never the other way round.
		src.restore(ctrl.publish, log)
		runComponent("state file", restCtx, src.state.Start)
	}
	runComponent("source", restCtx, src.Start)
	if src.status != nil {
		runComponent("status writer", restCtx, src.status.Start)
	}
	runComponent("admin", restCtx, adm.Start)
	wg.Go(func() {
		defer close(proxyDone)
		srv.Start(ctx)
	})
	var failure error
	select {
	case <-proxyDone:
	case failure = <-errs:
		log.Error("component failed, stopping", "error", failure)
		srvCtx, cancel := context.WithTimeout(context.Background(), c.proxy.ShutdownGrace)
		srv.Shutdown(srvCtx)
		cancel()
		<-proxyDone
	}
	stopRest()
	wg.Wait()
	log.Info("hostgate stopped")
	return failure
}

func accessLogger(log *slog.Logger) func(*proxy.AccessRecord) {
	access := log.With("log", "access")
	return func(r *proxy.AccessRecord) {
		access.Info("request",
			"listener", r.Listener, "remote_addr", r.RemoteAddr, "proto", r.Proto,
			"method", r.Method, "host", r.Host, "path", r.Path, "status", r.Status,
			"bytes_sent", r.BytesSent, "duration_seconds", r.Duration.Seconds(),
			"route", r.Route.String(), "backend", r.Backend, "endpoint", r.Endpoint,
			"client", r.Client.String(), "request_id", r.RequestID)
	}
}

// l4AccessLogger writes one access log line per Layer 4 connection.
func l4AccessLogger(log *slog.Logger) func(*proxy.L4AccessRecord) {
	access := log.With("log", "access")
	return func(r *proxy.L4AccessRecord) {
		msg := "connection"
		if r.Mode.String() == "UDP" {
			msg = "flow"
		}
		access.Info(msg,
			"listener", r.Listener, "remote_addr", r.Client.String(), "proto", r.Mode.String(),
			"server_name", r.ServerName, "route", r.Route.String(), "refused", r.Refused,
			"backend", r.Backend, "endpoint", r.Endpoint, "bytes_received", r.BytesIn, "bytes_sent", r.BytesOut,
			"packets_received", r.PacketsIn, "packets_sent", r.PacketsOut, "drained", r.Drained,
			"idle_timeout", r.IdleTimedOut,
			"duration_seconds", r.Duration.Seconds())
	}
}

// objectKey reads a flag's NAMESPACE/NAME of an object of kind, whose
// names validName checks as the API server does for that kind.
func objectKey(value, kind string, validName func(string) []string) (types.NamespacedName, error) {
	namespace, name, _ := strings.Cut(value, "/")
	if len(validation.IsDNS1123Label(namespace)) > 0 || len(validName(name)) > 0 {
		return types.NamespacedName{}, fmt.Errorf("NAMESPACE/NAME of a %s, with a namespace and a name as Kubernetes allows them", kind)
	}
	return types.NamespacedName{Namespace: namespace, Name: name}, nil
}

// setIngressDefaultCert reads --ingress-default-certificate. A Secret
// named there has the self-signed certificate to stand in while it cannot
// be used.
func (c *config) setIngressDefaultCert(value string) error {
	if value == "none" {
		return nil
	}
	if value != "self-signed" {
		key, err := objectKey(value, "Secret", validation.IsDNS1123Subdomain)
		if err != nil {
			return fmt.Errorf("must be self-signed, none or %w", err)
		}
		c.watch.IngressDefaultSecret = key
	}
	certPEM, keyPEM, err := tlsstore.SelfSigned("hostgate default certificate", 10*365*24*time.Hour)
	if err != nil {
		return err
	}
	c.watch.IngressDefaultCert = &watch.Cert{Name: "hostgate self-signed default", CertPEM: certPEM, KeyPEM: watch.PrivateKey(keyPEM)}
	return nil
}
