package watch

// Translation of the store into a Snapshot and Reports.
//
// One pass recomputes the whole world: classes decide which Gateways and
// Ingresses are ours, Gateways get their addresses and validated listeners,
// Ingresses and routes are translated once and then attached to the sockets
// of the listeners that accept them, with hostnames narrowed to each
// listener. Sockets are keyed by address and port, so listeners that share
// one (the Ingress listener, several listeners of one Gateway, Gateways that
// share the node addresses) become one router table. Nothing here fails:
// whatever cannot be served becomes a condition or a problem in Reports.

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/router"
)

// Defaults for Options.
const (
	// DefaultIngressClass is the IngressClass name hostgate serves when no
	// IngressClass object says otherwise.
	DefaultIngressClass = "hostgate"
	// DefaultHSTS is ingress-nginx's HSTS header (its hsts, hsts-max-age
	// and hsts-include-subdomains defaults).
	DefaultHSTS = "max-age=31536000; includeSubDomains"
	// HSTSOff as Options.IngressHSTS sends no HSTS header.
	HSTSOff = "off"
	// IngressController is the spec.controller of hostgate's IngressClasses.
	IngressController = "hostgate.dev/ingress-controller"
	// DefaultGatewayController is the spec.controllerName of hostgate's
	// GatewayClasses.
	DefaultGatewayController = "hostgate.dev/gateway-controller"
)

// Ports are TCP and UDP port numbers.
type Ports struct{ TCP, UDP []int32 }

// reach reports whether a listener of protocol on port is among p.
func (p *Ports) reach(protocol gatewayv1.ProtocolType, port int32) bool {
	if transportOf(protocol) == "udp" {
		return slices.Contains(p.UDP, port)
	}
	return slices.Contains(p.TCP, port)
}

// String lists p as --host-ports takes them: "80,443,53/udp".
func (p *Ports) String() string {
	var parts []string
	for _, port := range p.TCP {
		parts = append(parts, strconv.Itoa(int(port)))
	}
	for _, port := range p.UDP {
		parts = append(parts, strconv.Itoa(int(port))+"/udp")
	}
	return strings.Join(parts, ",")
}

// transportOf is the transport a listener of protocol is reached over.
func transportOf(protocol gatewayv1.ProtocolType) string {
	if protocol == gatewayv1.UDPProtocolType {
		return "udp"
	}
	return "tcp"
}

// Options are the flags that shape translation.
type Options struct {
	// IngressClasses name the classes of Ingresses to serve
	// (DefaultIngressClass when empty), whatever controller an
	// IngressClass of that name names: a migration serves "nginx" too.
	// Ingresses of an IngressClass that names IngressController are served
	// as well, and those without class when such a class is the default.
	IngressClasses []string
	// IngressSSLPassthrough honours ingress-nginx's ssl-passthrough
	// annotation, as its --enable-ssl-passthrough does: the TLS
	// connections to such an Ingress's hosts on the Ingress HTTPS
	// address go, by server name, unchanged to the backend of the host's
	// "/" path. Without it the annotation is ignored, as ingress-nginx
	// ignores it without the flag.
	IngressSSLPassthrough bool
	// NoIngressSSLRedirect turns off what ingress-nginx does by default:
	// redirecting plain HTTP requests for hosts with TLS to HTTPS (308).
	NoIngressSSLRedirect bool
	// IngressDefaultCert, when set, is what the Ingress HTTPS listener
	// presents for a server name no Ingress has a certificate for (and
	// without one), unless an Ingress's TLS entry without hosts is the
	// default already. IngressDefaultSecret, when set, names a TLS Secret
	// that takes its place (ingress-nginx's --default-ssl-certificate).
	IngressDefaultCert   *Cert
	IngressDefaultSecret types.NamespacedName
	// IngressHSTS is the Strict-Transport-Security header sent on HTTPS
	// answers for Ingresses (DefaultHSTS when empty, none when HSTSOff).
	IngressHSTS string
	// IngressLimitStatus is the status of answers to requests over an
	// Ingress's rate limits (ingress-nginx's limit-req-status-code; 503
	// when 0).
	IngressLimitStatus int
	// IngressMaxRequestBody is the request body limit, in bytes, of the
	// Ingresses without proxy-body-size (ingress-nginx's is 1 MiB); 0:
	// none.
	IngressMaxRequestBody int64
	// IngressTimeouts are the connect, backend read and backend send
	// timeouts of the Ingresses without proxy-*-timeout annotations
	// (ingress-nginx's are 5s, 60s and 60s); zero fields: none.
	IngressTimeouts router.Timeouts
	// IngressAllowedResponseHeaders are the header names custom-headers
	// may set (ingress-nginx's global-allowed-response-headers): none
	// when empty. The cluster's cache keeps those keys of ConfigMaps.
	IngressAllowedResponseHeaders []string
	// GatewayController is the controllerName of the GatewayClasses to serve
	// (DefaultGatewayController when empty).
	GatewayController string
	// IngressHTTPAddr and IngressHTTPSAddr are the "host:port" addresses
	// Ingresses are served on; empty leaves that listener out.
	IngressHTTPAddr  string
	IngressHTTPSAddr string
	// AddressPool holds the IP addresses given to Gateways without
	// spec.addresses, one each. When it is empty such Gateways bind every
	// address of the node, and so share their ports with each other.
	AddressPool []string
	// StatusAddresses replace the node addresses published in the status of
	// Ingresses and of Gateways bound to the node addresses.
	StatusAddresses []string
	// PublishService, when set, names the Service whose addresses
	// Ingress status lists in place of the node addresses
	// (ingress-nginx's --publish-service): the load balancer in front of
	// hostgate, which is where clients and external-dns must go. The
	// cluster's cache keeps what of its spec and status that reads.
	PublishService types.NamespacedName
	// ReachablePorts, when not nil, are the only listener ports clients
	// can reach (the hostPorts of a pod that is not on the host network):
	// TCP ports, and UDP ports for UDP listeners (a hostPort maps one
	// protocol). A Gateway listener on another port is not accepted
	// (PortUnavailable).
	ReachablePorts *Ports
	// AddressUsable, when set, says why a Gateway's spec.addresses value
	// cannot be bound on this node (nil error: it can). Such a Gateway is
	// not Programmed (AddressNotUsable) and not served, as with a value
	// that is no IP address: serving it on its other addresses only would
	// hide the mistake.
	AddressUsable func(netip.Addr) error
	// GatewayServices makes every Gateway of our classes stand for a
	// Service of type LoadBalancer with EndpointSlices (infrastructure.go)
	// in GatewayReport.Infrastructure, and claims GatewayInfrastructure.
	GatewayServices bool
	// TranslationTime, when set, observes how long each translation of the
	// whole store took, in seconds. It takes no part in translation itself.
	TranslationTime prometheus.Observer
}

func (o Options) withDefaults() Options {
	if len(o.IngressClasses) == 0 {
		o.IngressClasses = []string{DefaultIngressClass}
	}
	if o.IngressHSTS == "" {
		o.IngressHSTS = DefaultHSTS
	}
	if o.IngressLimitStatus == 0 {
		o.IngressLimitStatus = http.StatusServiceUnavailable
	}
	if o.GatewayController == "" {
		o.GatewayController = DefaultGatewayController
	}
	return o
}

type translator struct {
	opts Options
	objs *objects
	*lookups
	// gateways are the Gateways of our accepted classes.
	gateways map[types.NamespacedName]*gateway
	// listenerSets are the ListenerSets of those Gateways.
	listenerSets map[types.NamespacedName]*listenerSet
	// listeners are those of both in the order they were made, the same
	// in two translations of the same Gateways and ListenerSets: a
	// translation that splices route changes finds the listeners of the
	// last one by their index here.
	listeners []*listener
	sockets   map[string]*socket
	// endpoints are the endpoint sets registered without a memo, eps
	// those registered with one.
	endpoints map[string][]Endpoint
	eps       *endpointRegistry
	// nodeAddresses are what status publishes for the node addresses.
	nodeAddresses []string
	// ingressStatus is the status every Ingress of ours gets.
	ingressStatus networkingv1.IngressLoadBalancerStatus
	reports       Reports
	// prev holds the results of the previous translation that this one
	// may reuse, next collects this one's; both are nil without a memo.
	prev, next *results
	// lookedUp are the keys of the Services looked up while deps records
	// (see endDeps).
	lookedUp []types.NamespacedName
	// deps records the lookups of the object being memoized, if any, and
	// early those of the Gateways, ListenerSets and classes, which every
	// route attaches to.
	deps  *deps
	early deps
	// splice is set when this translation splices the route changes
	// since the last one into its results (incremental.go), and
	// routePorts are the endpoint entries HTTPRoutes and GRPCRoutes
	// registered.
	splice     *splice
	routePorts []*endpointEntry
	// attachedTo and placed are where the route being attached went so
	// far. Only a route's own parentRefs can select a listener twice, so
	// these short lists, emptied for every route, tell a repeat apart
	// where maps of every route on every listener and socket were a fifth
	// of a translation with 10,000 routes.
	attachedTo []*listener
	placed     []placement
	// outcomes and counting are attachRoute's scratch space; lastOutcomes,
	// lastCounted, lastParents and lastAttachment are the outcomes,
	// listener indices, status entries and attachment routes kept last,
	// which the next route shares when it has the same.
	outcomes, lastOutcomes []parentOutcome
	counting, lastCounted  []int
	lastParents            []gatewayv1.RouteParentStatus
	lastAttachment         *attachment
	// parentRefs is newRoute's scratch space, and lastParentRefs the
	// parents a route kept last.
	parentRefs, lastParentRefs []parent
	// policyDeps are the lists of one namespace that results depending on
	// its BackendTLSPolicies share (dependOnPolicies), and pathMatches the
	// lists of one match that rules share (httpMatches).
	policyDeps  map[string][]string
	pathMatches map[pathMatch][]router.Match
	// tlsPolicies are the BackendTLSPolicies of the namespaces resolved so
	// far, and policyAncestors the Gateways whose routes use each Service
	// some policy targets.
	tlsPolicies     map[string]*namespacePolicies
	policyAncestors map[types.NamespacedName][]*gateway
}

// placement is a socket and listener hostname a route went to.
type placement struct {
	socket   *socket
	listener string
}

// translate is the pure function at the heart of hostgate: same store and
// options in, same Snapshot and Reports out.
func translate(objs *objects, opts Options) (*Snapshot, *Reports) {
	return translateWith(objs, opts, newLookups(), nil, nil, nil)
}

// translateWith is translate looking objects up in groups carried over
// from the previous translation, reusing results of prev and storing its
// own in next, and registering endpoint sets in eps (see memo).
func translateWith(objs *objects, opts Options, groups *lookups, prev, next *results, eps *endpointRegistry) (*Snapshot, *Reports) {
	groups.update(objs)
	t := &translator{
		prev:         prev,
		next:         next,
		opts:         opts.withDefaults(),
		objs:         objs,
		lookups:      groups,
		gateways:     map[types.NamespacedName]*gateway{},
		listenerSets: map[types.NamespacedName]*listenerSet{},
		sockets:      map[string]*socket{},
		eps:          eps,
	}
	if next == nil {
		t.endpoints = make(map[string][]Endpoint, len(objs.services))
	} else {
		eps.start()
	}
	t.nodeAddresses = t.opts.StatusAddresses
	if len(t.nodeAddresses) == 0 {
		t.nodeAddresses = nodeAddresses(objs.nodes)
	}

	if next != nil {
		t.deps = &t.early
	}
	t.ingressStatus = t.ingressLoadBalancer()
	t.ingressListeners()
	t.gatewayClasses()
	t.gatewaysOfOurClasses()
	t.endDeps()
	if s := t.canSplice(); s != nil {
		t.startSplice(s)
	}
	t.startRoutePorts()
	t.ingresses()
	t.routes()
	t.backendTLSPolicies()
	t.finishGateways()
	// Translation adds its own (ingressDefaultCert) to what the source
	// could not read.
	t.reports.Read = append(slices.Clip(objs.readProblems), t.reports.Read...)
	if next != nil {
		next.reports, next.inputs = &t.reports, inputsOf(objs)
		t.dependents.prune(next.objects)
	}
	return t.snapshot(), &t.reports
}

// nodeAddresses lists the addresses of the Ready nodes: hostgate runs on
// every node, so these are where it serves. External addresses are
// preferred over internal ones.
func nodeAddresses(nodes []*corev1.Node) []string {
	var out []string
	for _, n := range nodes {
		if !nodeReady(n) {
			continue
		}
		var internal, external []string
		for _, a := range n.Status.Addresses {
			switch a.Type {
			case corev1.NodeExternalIP:
				external = append(external, a.Address)
			case corev1.NodeInternalIP:
				internal = append(internal, a.Address)
			}
		}
		if len(external) > 0 {
			out = append(out, external...)
		} else {
			out = append(out, internal...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// socket is one listening address and port, and everything attached to it.
type socket struct {
	address  string
	port     int
	protocol Protocol
	// anyHost is set once a listener without hostname binds the socket.
	anyHost   bool
	hostnames []string
	// routes point to routes that stay as they are once placed: those of
	// a route that did not change are the last translation's, so that a
	// change of one route copies 10,000 pointers, not 10,000 routes (1.3
	// MB, whose copy under a running collection shaded every pointer in
	// them and took a route change's milliseconds).
	routes []*router.Route
	// last are the socket's routes in the last translation. While every
	// route placed is the one at its index there, routes stays empty and
	// sharing counts them: when they are all of last, the Snapshot gets
	// last again. Translations that change no route (an EndpointSlice's, a
	// Gateway's status) then make no new list of 10,000 routes. sharing is
	// -1 once routes holds them all.
	last    []*router.Route
	sharing int
	// spliced are the IDs of the routes a splice took out of last or put
	// in (the Listener's Changes); nil when none was.
	spliced []router.RouteID
	certs   []Cert
	// validations hold the client validation of each listener hostname
	// bound, nil for a hostname bound without one.
	validations map[string]*ClientValidation
	// filters hold the listener filters of each listener hostname bound,
	// nil for a hostname bound without (bindFilters).
	filters map[string][]router.Filter
	// protocols hold the protocol of the listeners of each hostname
	// bound: on an HTTPS socket, TLS listeners may take hostnames of
	// their own. terminate are the hostnames of TLS listeners in mode
	// Terminate.
	protocols map[string]Protocol
	terminate []string
}

func socketName(address string, port int) string {
	return net.JoinHostPort(address, strconv.Itoa(port))
}

// bind returns the socket for address:port, or nil and why a listener of
// protocol and hostname, validating clients as validation says, cannot
// share it: it serves another protocol, or that hostname with another
// validation. Listeners of one hostname on a socket are one listener to a
// client, and one that asks for client certificates must never be served
// by one that does not.
func (t *translator) bind(address string, port int, protocol Protocol, hostname string, validation *ClientValidation) (*socket, string) {
	name := socketName(address, port)
	switch tcp := t.sockets[name]; {
	case protocol == ProtocolUDP && tcp != nil && tcp.protocol == ProtocolHTTPS:
		return nil, http3Conflict(name)
	case protocol == ProtocolHTTPS && t.sockets[udpSocketName(name)] != nil:
		return nil, http3Conflict(name)
	}
	if protocol == ProtocolUDP {
		name = udpSocketName(name)
	}
	s := t.sockets[name]
	if s == nil {
		s = &socket{address: address, port: port, protocol: protocol, last: t.lastRoutes(name), validations: map[string]*ClientValidation{}, protocols: map[string]Protocol{}}
		if s.last == nil {
			s.sharing = -1
		}
		t.sockets[name] = s
	}
	if s.protocol != protocol {
		if !sharesTLSSocket(s.protocol, protocol) {
			return nil, name + " is already served with another protocol"
		}
		// HTTPS and TLS listeners share the socket, the ClientHello's
		// server name choosing between them (proxy's serveConn): it is
		// an HTTPS socket with TLS listeners' hostnames.
		s.protocol = ProtocolHTTPS
	}
	if other, ok := s.protocols[hostname]; ok && other != protocol {
		return nil, fmt.Sprintf("%s already serves %s with protocol %s", name, describeHostname(hostname), other)
	}
	s.protocols[hostname] = protocol
	bound, ok := s.validations[hostname]
	switch {
	case !ok:
		s.validations[hostname] = validation
	case !bound.sameAs(validation):
		return nil, fmt.Sprintf("%s already serves %s with another client certificate validation", name, describeHostname(hostname))
	}
	if hostname == "" {
		s.anyHost = true
	} else if !slices.Contains(s.hostnames, hostname) {
		s.hostnames = append(s.hostnames, hostname)
	}
	return s, ""
}

// udpSocketName is the name of the UDP socket of the address and port of
// the TCP socket name. UDP listeners have sockets of their own: TCP (or
// HTTP) and UDP listeners of one port number do not meet, save for HTTPS,
// whose HTTP/3 takes the UDP port of its number.
func udpSocketName(name string) string { return name + "/udp" }

// http3Conflict says why a UDP and an HTTPS listener cannot share a port.
func http3Conflict(name string) string {
	return fmt.Sprintf("%s: UDP and HTTPS listeners conflict, HTTPS serving HTTP/3 on the UDP port of its number", name)
}

// sharesTLSSocket reports whether listeners of protocols a and b can
// share a socket: HTTPS and TLS (either mode) can, chosen by server name.
func sharesTLSSocket(a, b Protocol) bool {
	return (a == ProtocolHTTPS && b == ProtocolTLS) || (a == ProtocolTLS && b == ProtocolHTTPS)
}

func describeHostname(hostname string) string {
	if hostname == "" {
		return "listeners without hostname"
	}
	return "hostname " + hostname
}

// place adds route, the one being attached, to s. Listeners of different
// hostnames keep separate copies, which the router isolates. Another
// listener of the same hostname on s (of another Gateway on the same
// address, or selected by another parentRef) narrows the route's hostnames
// the same way, so the copy already placed is the same route.
func (t *translator) place(s *socket, route router.Route) {
	if slices.Contains(t.placed, placement{s, route.Listener}) {
		return
	}
	t.placed = append(t.placed, placement{s, route.Listener})
	if t.splice != nil && t.splice.placed != nil {
		// A copy of its own, so that route stays on the stack on the
		// other path, where most routes are found placed already.
		placed := route
		t.splice.placed[s] = append(t.splice.placed[s], &placed)
		return
	}
	s.add(route)
}

func (s *socket) len() int {
	if s.sharing >= 0 {
		return s.sharing
	}
	return len(s.routes)
}

func (s *socket) add(route router.Route) {
	if s.sharing >= 0 && s.sharing < len(s.last) && router.SameRoute(s.last[s.sharing], &route) {
		s.sharing++
		return
	}
	s.own()
	// Taken apart from route, which would otherwise be put on the heap
	// for every route added, the shared ones too.
	listed := route
	s.routes = append(s.routes, &listed)
}

// own makes routes hold every route of s, to be added to or changed.
func (s *socket) own() {
	if s.sharing < 0 {
		return
	}
	// Room for a few more routes than last time: a created route would
	// otherwise double the list, on every creation.
	s.routes = make([]*router.Route, s.sharing, len(s.last)+len(s.last)/64+8)
	copy(s.routes, s.last)
	s.sharing = -1
}

func (t *translator) snapshot() *Snapshot {
	snap := &Snapshot{Endpoints: t.endpointMap()}
	for name, s := range t.sockets {
		switch {
		case s.sharing == len(s.last):
			s.routes = s.last
		case s.len() == 0:
			s.routes = nil
		default:
			s.own()
		}
		if t.next != nil {
			t.next.routes[name] = s.routes
		}
		l := Listener{
			Name:     name,
			Address:  s.address,
			Port:     s.port,
			Protocol: s.protocol,
			Routes:   s.routes,
			Certs:    s.certs,
			Changes:  s.routeChanges(),
		}
		for hostname, filters := range s.filters {
			if len(filters) > 0 {
				if l.ListenerFilters == nil {
					l.ListenerFilters = map[string][]router.Filter{}
				}
				l.ListenerFilters[hostname] = filters
			}
		}
		for _, hostname := range slices.Sorted(maps.Keys(s.validations)) {
			if v := s.validations[hostname]; v != nil {
				l.ClientValidations = append(l.ClientValidations, *v)
			}
		}
		hostnames, anyHost := s.hostnames, s.anyHost
		if s.protocol == ProtocolHTTPS {
			hostnames, anyHost = s.tlsListeners(&l)
		}
		l.Terminate = slices.Sorted(slices.Values(s.terminate))
		l.ListenerHostnames = slices.Sorted(slices.Values(hostnames))
		if !anyHost {
			l.Hostnames = l.ListenerHostnames
		} else {
			l.ListenerHostnames = append(l.ListenerHostnames, "")
		}
		snap.Listeners = append(snap.Listeners, l)
	}
	slices.SortFunc(snap.Listeners, func(a, b Listener) int {
		if c := cmp.Compare(a.Port, b.Port); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Address, b.Address); c != 0 {
			return c
		}
		// A TCP and a UDP socket of one address and port.
		return cmp.Compare(a.Name, b.Name)
	})
	return snap
}

// tlsListeners sets l.TLSHostnames to the hostnames of the TLS listeners
// of s, an HTTPS socket, and returns those of its HTTPS listeners and
// whether one of them has no hostname.
func (s *socket) tlsListeners(l *Listener) (hostnames []string, anyHost bool) {
	for h, p := range s.protocols {
		if p == ProtocolTLS {
			l.TLSHostnames = append(l.TLSHostnames, h)
		}
	}
	if len(l.TLSHostnames) == 0 {
		return s.hostnames, s.anyHost
	}
	slices.Sort(l.TLSHostnames)
	for _, h := range s.hostnames {
		if s.protocols[h] == ProtocolHTTPS {
			hostnames = append(hostnames, h)
		}
	}
	return hostnames, s.protocols[""] == ProtocolHTTPS
}

// splitHostPort parses a listen address such as ":80" or "10.0.0.1:443".
func splitHostPort(addr string) (string, int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, &net.AddrError{Err: "invalid port", Addr: addr}
	}
	return host, port, nil
}
