package proxy

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostgate/hostgate/proxy/h1loop"
	"github.com/hostgate/hostgate/proxy/l4"
	"github.com/hostgate/hostgate/proxy/pipeline"
)

// Balancer names a load-balancing policy over an endpoint set.
type Balancer string

const (
	// RoundRobin takes endpoints in turn, in proportion to their weights.
	RoundRobin Balancer = "round-robin"
	// LeastRequest takes the less loaded of two endpoints drawn at random.
	LeastRequest Balancer = "least-request"
)

// Engine names the server of HTTP/1.1 connections.
type Engine string

const (
	// EngineNative is hostgate's own HTTP/1.1 engine, which hands what it
	// does not serve to net/http.
	EngineNative Engine = "native"
	// EngineStdlib serves every connection with net/http.
	EngineStdlib Engine = "stdlib"
	// EngineLoop serves the connections of plain HTTP listeners on
	// readiness loops of hostgate's own (package h1loop, Linux only),
	// which hand what they do not serve to EngineNative; HTTPS
	// listeners keep EngineNative, as crypto/tls needs blocking I/O.
	// HTTP/1.1 only. It also carries the connections of TCP listeners,
	// and of TLS listeners where TLS is passed through, on loops
	// (package l4/relay) rather than goroutines, unless they start with
	// a PROXY header; a TLS socket with a listener in mode Terminate
	// keeps goroutines.
	EngineLoop Engine = "loop"
)

// Options are the server's limits and policies. A zero field takes the
// value DefaultOptions gives it, so callers set only what they change.
type Options struct {
	// ReadHeaderTimeout bounds reading a request's header, which is what
	// keeps slow-header clients from holding connections. Default 10s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes client connections (HTTP/1.1 keep-alive, h2, h3)
	// idle that long. Default 120s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header, on every protocol. It also
	// bounds the body of an h2c Upgrade request, which must be buffered.
	// Default 64 KiB.
	MaxHeaderBytes int
	// MaxConcurrentStreams bounds the streams of one h2 or h3 connection.
	// Default 100.
	MaxConcurrentStreams int
	// HTTP1Engine serves HTTP/1.1 connections: EngineNative, hostgate's
	// own engine, which hands what it does not serve to net/http,
	// EngineLoop, the readiness loop in front of it on plain HTTP
	// listeners (Linux), or EngineStdlib, net/http for all. Default
	// EngineLoop where it runs (Linux), EngineNative elsewhere.
	HTTP1Engine Engine
	// HTTP2Engine serves HTTP/2 connections, over TLS, with prior
	// knowledge and upgraded from HTTP/1.1: EngineNative, hostgate's own
	// (package h2), or EngineStdlib, net/http's. Default EngineNative.
	HTTP2Engine Engine
	// MaxConnections caps the client connections open at once on all
	// listeners, over TCP (QUIC connections are not counted). A connection
	// past it closes the connections idle the longest to make room, or is
	// refused if none is idle. Default 4096; NoCap for none.
	MaxConnections int
	// MaxConnectionsPerAddress caps them per client IP address, or IPv6
	// /64, the same way. Default 1024; NoCap for none.
	MaxConnectionsPerAddress int
	// MinRequestBodyRate is the least average rate, in bytes per second,
	// at which a request body of declared length must arrive once
	// RequestBodyGrace has passed; a slower one is answered 408 and its
	// connection (its stream, on h2 and h3) closed. Bodies without a
	// length (chunked, an HTTP/2 stream left open) and gRPC calls are
	// streams, which may pause as long as they like: a client stream
	// waits for its next message. Default 1024; negative disables the
	// check.
	// Kestrel's 240 bytes/s lets a client hold a connection for four
	// times less upload; 1 KiB/s is still five times below the slowest
	// mobile links in use (EDGE, about 5 KiB/s and up).
	MinRequestBodyRate int64
	// RequestBodyGrace is how long a body may start slowly (a client
	// waiting for 100 Continue, a radio waking up). Default 10s.
	RequestBodyGrace time.Duration
	// RequestBodyTimeout bounds the whole request body, answered 408 past
	// it. Default 0: none, since an upload of any size that keeps the
	// minimum rate is legitimate and the rate already bounds how long a
	// slow client holds a connection.
	RequestBodyTimeout time.Duration
	// DisableHTTP3 stops HTTPS listeners from serving HTTP/3 over UDP and
	// advertising it with Alt-Svc. Default false.
	DisableHTTP3 bool

	// TrustedProxies are the addresses of the proxies and load balancers
	// in front (pipeline/client.go): a request whose connection comes from one keeps
	// the X-Forwarded-For, -Proto, -Host and X-Request-ID it sends
	// (appending to -For), and its client is the first address of
	// X-Forwarded-For, from the right, that is not in them. From elsewhere
	// the connection's address is the client's and those fields are
	// replaced. Default none.
	TrustedProxies []netip.Prefix
	// ProxyProtocol has every TCP connection start with a PROXY protocol
	// header (version 1 or 2), whose address becomes the connection's
	// (proxy/guard). Default false.
	ProxyProtocol bool
	// ProxyProtocolFrom are the peers that may connect when ProxyProtocol
	// is set; the others are closed at once. Default TrustedProxies, one
	// of which must then be given.
	ProxyProtocolFrom []netip.Prefix
	// DisableRequestID stops generating X-Request-ID: the one a client
	// sent, if any, goes on as it came. Default false.
	DisableRequestID bool
	// DisableServerHeader leaves out the Server field hostgate adds to its
	// own answers and to proxied ones whose backend sent none. Default
	// false.
	DisableServerHeader bool
	// LoadBalancing is the policy within an endpoint set. Default
	// RoundRobin.
	LoadBalancing Balancer
	// DialTimeout bounds connecting to a backend. Default 5s.
	DialTimeout time.Duration
	// ConnectAttempts is how many endpoints a request tries when connecting
	// fails (1 disables retries; at most 8). Default 3.
	ConnectAttempts int
	// UpstreamIdleTimeout closes pooled backend connections idle that long.
	// Default 90s.
	UpstreamIdleTimeout time.Duration
	// MaxIdleConnsPerEndpoint bounds the pool of idle connections kept per
	// backend address. Default 1024, the number of connections Envoy's
	// default circuit breaker allows: a pool smaller than the concurrency a
	// backend sees has each request over it open a connection and close it
	// again (an HTTP/2 client multiplexes hundreds of requests onto a few
	// connections, and each needs a backend connection of its own). Idle
	// connections cost the backend a socket each until UpstreamIdleTimeout.
	MaxIdleConnsPerEndpoint int
	// UpstreamTLS configures connections to "https" and "h2" backends;
	// nil verifies them against the system roots.
	UpstreamTLS *tls.Config
	// FailureThreshold consecutive failures to reach an endpoint eject it
	// for EjectionTime, doubled at each ejection in a row up to
	// MaxEjectionTime. Defaults 5, 10s and 5m.
	FailureThreshold int
	EjectionTime     time.Duration
	MaxEjectionTime  time.Duration

	// ShutdownDelay is how long Shutdown keeps accepting after readiness
	// turns false, so that load balancers stop sending first; answers
	// meanwhile close their connections (Connection: close, GOAWAY).
	// Default 5s.
	ShutdownDelay time.Duration
	// ShutdownGrace is how long requests in flight, and listeners removed
	// by Apply, get to finish before their connections are closed.
	// Default 30s.
	ShutdownGrace time.Duration

	// L4DrainGrace is how long a Layer 4 connection or UDP flow goes on
	// once its route is removed or its endpoint leaves the backend's set,
	// before hostgate closes it. Default 30s; NoCap: never closed.
	L4DrainGrace time.Duration
	// L4IdleTimeout closes a TCP or TLS connection carried to its
	// backend (TCPRoute, TLSRoute) that carried no data either way for
	// that long, as nginx's proxy_timeout does (ingress-nginx's
	// proxy-stream-timeout for tcp-services): the connection caps never
	// close such a connection to make room. Default 10m, nginx's; NoCap:
	// never closed for being idle.
	L4IdleTimeout time.Duration
	// UDPFlowIdleTimeout ends a UDP flow (a client address and port)
	// after so long without a datagram either way. Default 30s.
	UDPFlowIdleTimeout time.Duration
	// MaxUDPFlows caps the flows of each UDP listener; a datagram that
	// would start another is dropped and counted. Each flow holds a
	// socket and a receive buffer. Default 4096; NoCap lifts it.
	MaxUDPFlows int

	// Logger receives events (never one per request). Default
	// slog.Default().
	Logger *slog.Logger
	// Registerer receives the hostgate_* metrics of the data plane
	// (requests, latencies, upstream errors and ejections, connections,
	// TLS handshakes); nil registers none.
	Registerer prometheus.Registerer
	// AccessLog, when set, is called once per request after the response
	// was written. It must not keep the record.
	AccessLog func(*AccessRecord)
	// L4AccessLog, when set, is called once per Layer 4 connection once
	// it ended. It must not keep the record.
	L4AccessLog func(*L4AccessRecord)
}

// AccessRecord describes one request for Options.AccessLog.
type AccessRecord = pipeline.AccessRecord

// L4AccessRecord is what the access log gets of a Layer 4 connection.
type L4AccessRecord = l4.Record

// NoCap in a cap of Options lifts it; so does any negative value.
const NoCap = -1

// DefaultOptions returns the documented defaults, for flags to start from.
func DefaultOptions() Options {
	return Options{
		ReadHeaderTimeout:        10 * time.Second,
		IdleTimeout:              120 * time.Second,
		MinRequestBodyRate:       1024,
		RequestBodyGrace:         10 * time.Second,
		MaxHeaderBytes:           64 << 10,
		MaxConcurrentStreams:     100,
		MaxConnections:           4096,
		MaxConnectionsPerAddress: 1024,
		HTTP1Engine:              defaultHTTP1Engine(),
		HTTP2Engine:              EngineNative,
		LoadBalancing:            RoundRobin,
		DialTimeout:              5 * time.Second,
		ConnectAttempts:          3,
		UpstreamIdleTimeout:      90 * time.Second,
		MaxIdleConnsPerEndpoint:  1024,
		FailureThreshold:         5,
		EjectionTime:             10 * time.Second,
		MaxEjectionTime:          5 * time.Minute,
		ShutdownDelay:            5 * time.Second,
		ShutdownGrace:            30 * time.Second,
		UDPFlowIdleTimeout:       30 * time.Second,
		L4DrainGrace:             30 * time.Second,
		L4IdleTimeout:            10 * time.Minute,
		MaxUDPFlows:              4096,
		Logger:                   slog.Default(),
	}
}

// defaultHTTP1Engine is the readiness loop where it runs, for its lower
// CPU per request and shorter tail on plain HTTP, and the netpoll engine
// elsewhere, which the loop falls back to anyway.
func defaultHTTP1Engine() Engine {
	if h1loop.Supported {
		return EngineLoop
	}
	return EngineNative
}

// complete fills zero fields with defaults and rejects invalid values.
func (o Options) complete() (Options, error) {
	d := DefaultOptions()
	setDefault(&o.ReadHeaderTimeout, d.ReadHeaderTimeout)
	setDefault(&o.IdleTimeout, d.IdleTimeout)
	setDefault(&o.MinRequestBodyRate, d.MinRequestBodyRate)
	setDefault(&o.RequestBodyGrace, d.RequestBodyGrace)
	setDefault(&o.MaxHeaderBytes, d.MaxHeaderBytes)
	setDefault(&o.MaxConcurrentStreams, d.MaxConcurrentStreams)
	setDefault(&o.MaxConnections, d.MaxConnections)
	setDefault(&o.MaxConnectionsPerAddress, d.MaxConnectionsPerAddress)
	setDefault(&o.HTTP1Engine, d.HTTP1Engine)
	setDefault(&o.HTTP2Engine, d.HTTP2Engine)
	setDefault(&o.LoadBalancing, d.LoadBalancing)
	setDefault(&o.DialTimeout, d.DialTimeout)
	setDefault(&o.ConnectAttempts, d.ConnectAttempts)
	setDefault(&o.UpstreamIdleTimeout, d.UpstreamIdleTimeout)
	setDefault(&o.MaxIdleConnsPerEndpoint, d.MaxIdleConnsPerEndpoint)
	setDefault(&o.FailureThreshold, d.FailureThreshold)
	setDefault(&o.EjectionTime, d.EjectionTime)
	setDefault(&o.MaxEjectionTime, d.MaxEjectionTime)
	setDefault(&o.ShutdownDelay, d.ShutdownDelay)
	setDefault(&o.ShutdownGrace, d.ShutdownGrace)
	setDefault(&o.UDPFlowIdleTimeout, d.UDPFlowIdleTimeout)
	setDefault(&o.L4DrainGrace, d.L4DrainGrace)
	setDefault(&o.L4IdleTimeout, d.L4IdleTimeout)
	setDefault(&o.MaxUDPFlows, d.MaxUDPFlows)
	if o.Logger == nil {
		o.Logger = d.Logger
	}
	if o.ProxyProtocolFrom == nil {
		o.ProxyProtocolFrom = o.TrustedProxies
	}
	for _, p := range slices.Concat(o.TrustedProxies, o.ProxyProtocolFrom) {
		if !p.IsValid() {
			return o, fmt.Errorf("address range %v: invalid", p)
		}
	}
	switch {
	case o.LoadBalancing != RoundRobin && o.LoadBalancing != LeastRequest:
		return o, fmt.Errorf("load balancing %q: want %q or %q", o.LoadBalancing, RoundRobin, LeastRequest)
	case o.HTTP1Engine != EngineNative && o.HTTP1Engine != EngineLoop && o.HTTP1Engine != EngineStdlib:
		return o, fmt.Errorf("HTTP/1.1 engine %q: want %q, %q or %q", o.HTTP1Engine, EngineNative, EngineLoop, EngineStdlib)
	case o.HTTP1Engine == EngineLoop && !h1loop.Supported:
		// Refused rather than quietly served by another engine: whoever
		// asked for the loop is measuring or relying on it.
		return o, fmt.Errorf("HTTP/1.1 engine %q: needs Linux (epoll); use %q here", EngineLoop, EngineNative)
	case o.HTTP2Engine != EngineNative && o.HTTP2Engine != EngineStdlib:
		return o, fmt.Errorf("HTTP/2 engine %q: want %q or %q", o.HTTP2Engine, EngineNative, EngineStdlib)
	case o.ConnectAttempts < 1 || o.ConnectAttempts > pipeline.MaxConnectAttempts:
		return o, fmt.Errorf("connect attempts %d: want 1 to %d", o.ConnectAttempts, pipeline.MaxConnectAttempts)
	case o.MaxIdleConnsPerEndpoint < 0:
		return o, fmt.Errorf("max idle connections per endpoint %d: want at least 1 (0 for the default)", o.MaxIdleConnsPerEndpoint)
	case o.RequestBodyGrace < 0 || o.RequestBodyTimeout < 0:
		return o, fmt.Errorf("request body grace %v, timeout %v: must not be negative", o.RequestBodyGrace, o.RequestBodyTimeout)
	case o.ProxyProtocol && len(o.ProxyProtocolFrom) == 0:
		return o, fmt.Errorf("PROXY protocol: no peer may send it: give the load balancers' addresses (trusted proxies)")
	case o.MaxHeaderBytes < 4<<10:
		return o, fmt.Errorf("max header bytes %d: want at least 4096", o.MaxHeaderBytes)
	}
	return o, nil
}

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}
