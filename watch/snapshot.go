package watch

import (
	"bytes"
	"fmt"

	"github.com/hostgate/hostgate/internal/shardmap"
	"github.com/hostgate/hostgate/router"
)

// Snapshot is everything the data plane serves, as plain data. No part of
// it is changed once it is published, so the next Snapshot may share the
// parts that did not change (the endpoint map, a socket's list of routes)
// and receivers can tell those by their identity.
type Snapshot struct {
	// Listeners are the sockets to serve, one per address, port and
	// protocol, sorted by port, then address.
	Listeners []Listener
	// Endpoints are the endpoint sets that routes refer to, keyed as
	// router.BackendRef.Name ("namespace/service:port").
	Endpoints *EndpointSets
	// EndpointChanges, when not nil, say how Endpoints differ from those
	// of an earlier Snapshot, so that a receiver can pass on what changed
	// without comparing every set. Translation equals without them.
	EndpointChanges *EndpointChanges `json:"-"`
}

// EndpointChanges say how a Snapshot's Endpoints differ from Base, the
// Endpoints of an earlier Snapshot: the sets of the names listed came,
// went or changed, and the others are Base's.
type EndpointChanges struct {
	Base  *EndpointSets
	Names []string
}

// EndpointSets are endpoint sets by name; the nil *EndpointSets has none.
// An EndpointSlice change makes the next from the last, copying the shards
// of the names it changes (shardmap), where copying a map of 10,000 sets
// was most of what the change cost translation.
type EndpointSets = shardmap.Map[[]Endpoint]

// NewEndpointSets returns EndpointSets of the sets of m.
func NewEndpointSets(m map[string][]Endpoint) *EndpointSets { return shardmap.Of(m) }

// RouteCount is the number of routes of all listeners.
func (s *Snapshot) RouteCount() int {
	n := 0
	for _, l := range s.Listeners {
		n += len(l.Routes)
	}
	return n
}

// Protocol is what a listener speaks.
type Protocol string

const (
	ProtocolHTTP  Protocol = "HTTP"
	ProtocolHTTPS Protocol = "HTTPS"
	// ProtocolTLS is TLS chosen by the ClientHello's server name: a
	// TLSRoute's backend gets the connection's bytes unchanged, or, from
	// a listener in mode Terminate (Listener.Terminate), their plaintext.
	ProtocolTLS Protocol = "TLS"
	// ProtocolTCP is a TCPRoute's: bytes both ways to its backend.
	ProtocolTCP Protocol = "TCP"
	// ProtocolUDP is a UDPRoute's: datagrams both ways, by client flow.
	// Its socket is a UDP one, apart from the TCP socket of the same
	// address and port (Listener.Name).
	ProtocolUDP Protocol = "UDP"
)

// L4 reports whether a listener of protocol p serves Layer 4 routes
// (router.CompileL4) rather than an HTTP routing table.
func (p Protocol) L4() bool { return p == ProtocolTLS || p == ProtocolTCP || p == ProtocolUDP }

// Listener is one socket and what it serves. Several Gateway listeners (and
// the Ingress listener) that bind the same address and port share one.
type Listener struct {
	// Name is "address:port", the key the data plane can diff on;
	// "address:port/udp" for a UDP listener.
	Name string
	// Address is an IP address; empty means every address of the node.
	Address  string
	Port     int
	Protocol Protocol
	// Hostnames are the hostnames the listener accepts; empty means any.
	Hostnames []string
	// ListenerHostnames are the hostnames of every Gateway listener bound
	// here, "" for one without hostname; each route's Listener is one of
	// them. The router gives a request to the most specific one.
	ListenerHostnames []string
	// Routes have their hostnames already narrowed to the Gateway listener
	// they attached to, so one table per socket keeps listeners apart.
	// Nothing changes a route once listed: the next Snapshot lists the
	// same pointer for a route that did not change.
	Routes []*router.Route
	// Certs are the certificates of an HTTPS listener.
	Certs []Cert
	// ClientValidations are how an HTTPS listener checks client
	// certificates, one for each listener hostname that asks for it,
	// sorted by hostname. Left out of state files without any, so that
	// those stay as they were; a hostgate too old to know them refuses a
	// state file with them rather than serve without.
	ClientValidations []ClientValidation `json:",omitempty"`
	// ListenerFilters are the filters that Gateway listeners run before
	// route matching, by listener hostname.
	ListenerFilters map[string][]router.Filter `json:",omitempty"`
	// TLSHostnames are, on an HTTPS listener, the hostnames of the TLS
	// listeners that share the socket ("" for one without hostname;
	// ListenerHostnames has those of the HTTPS listeners only). Their
	// TLSRoutes are among Routes: SplitTLS separates them.
	TLSHostnames []string `json:",omitempty"`
	// Terminate are the hostnames of TLS listeners in mode Terminate,
	// among ListenerHostnames of a TLS listener or TLSHostnames of an
	// HTTPS one; Certs has their certificates.
	Terminate []string `json:",omitempty"`
	// Changes, when not nil, say how Routes differ from this listener's
	// Routes in an earlier Snapshot, so that the routing table built from
	// those can be brought up to date without comparing every route.
	// Translation equals without them, so they are not kept in state
	// files.
	Changes *RouteChanges `json:"-"`
}

// RouteChanges say how a listener's Routes differ from Base, the
// listener's Routes in an earlier Snapshot: the routes of the IDs listed
// came, went or changed, and the others are Base's, in the same order.
type RouteChanges struct {
	Base []*router.Route
	IDs  []router.RouteID
}

// SplitTLS returns the routes of l's HTTP routing table and those of the
// TLS listeners that share its socket.
func (l *Listener) SplitTLS() (routes, tls []*router.Route) {
	if len(l.TLSHostnames) == 0 {
		return l.Routes, nil
	}
	for _, r := range l.Routes {
		if r.ID.Kind.IsL4() {
			tls = append(tls, r)
		} else {
			routes = append(routes, r)
		}
	}
	return routes, tls
}

// L4Listeners are the listeners whose routes an L4Table of l holds: its
// own for a TLS or TCP listener, those of the TLS listeners sharing an
// HTTPS one's socket.
func (l *Listener) L4Listeners() router.L4Listeners {
	if l.Protocol.L4() {
		return router.L4Listeners{Hostnames: l.ListenerHostnames, Terminate: l.Terminate}
	}
	return router.L4Listeners{Hostnames: l.TLSHostnames, Terminate: l.Terminate, HTTPS: l.ListenerHostnames}
}

// Cert is a certificate chain and key from a kubernetes.io/tls Secret.
type Cert struct {
	// Name is the Secret's "namespace/name".
	Name string
	// Hostnames the certificate is configured for (listener hostname or
	// Ingress tls.hosts); empty means it is a default for the listener.
	Hostnames []string
	CertPEM   []byte
	KeyPEM    PrivateKey
	// CipherSuites, when set, are the TLS 1.2 suites the handshakes it
	// serves offer instead of hostgate's (ingress-nginx's ssl-ciphers).
	CipherSuites []uint16 `json:",omitempty"`
}

// ClientValidation is the client certificate validation of the Gateway
// listeners of one hostname on a socket (Gateway spec.tls.frontend).
type ClientValidation struct {
	// Name is the first such listener's "namespace/gateway/listener".
	Name string
	// Hostname is the listeners' hostname, "" for listeners without one:
	// handshakes whose server name selects them are validated.
	Hostname string
	// CAPEM holds the certificates of the authorities whose client
	// certificates are valid, from the listeners' caCertificateRefs.
	CAPEM []byte
	// Optional also lets clients through without a valid certificate
	// (AllowInsecureFallback).
	Optional bool
}

// sameAs reports whether v and o validate alike; nil validates nothing.
func (v *ClientValidation) sameAs(o *ClientValidation) bool {
	if v == nil || o == nil {
		return v == o
	}
	return v.Optional == o.Optional && bytes.Equal(v.CAPEM, o.CAPEM)
}

// Endpoint is one address of a backend.
type Endpoint struct {
	// Address is "ip:port" (IPv6 in brackets).
	Address string
	// Ready is false for endpoints that are terminating but still
	// serving: usable when no ready endpoint is left.
	Ready  bool
	Weight int32
}

// PrivateKey is PEM key material. It prints as "[REDACTED]" so that a
// logged or dumped Snapshot does not leak keys.
type PrivateKey []byte

// Format implements fmt.Formatter for every verb.
func (PrivateKey) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte("[REDACTED]")) }

// MarshalText keeps keys out of JSON and YAML encodings too.
func (PrivateKey) MarshalText() ([]byte, error) { return []byte("[REDACTED]"), nil }
