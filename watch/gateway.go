package watch

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/router"
)

// supportedFeatures is published on our GatewayClasses; the conformance
// suite reads it to choose its tests. It names what the router model and
// this translator carry; keep it in step with the data plane.
var supportedFeatures = []gatewayv1.FeatureName{
	"BackendTLSPolicy",
	"BackendTLSPolicySANValidation",
	// CA references to ClusterTrustBundles, for BackendTLSPolicy and
	// frontend validation alike (cabundle.go); a cluster that does not
	// serve their API has none, and references to them do not resolve.
	"ClusterTrustBundle",
	"GRPCRoute",
	"GRPCRouteNamedRouteRule",
	"GRPCRouteRequestHeaderModifier",
	"Gateway",
	"GatewayAddressEmpty",
	"GatewayBackendClientCertificate",
	"GatewayFrontendClientCertificateValidation",
	"GatewayFrontendClientCertificateValidationInsecureFallback",
	"GatewayHTTPListenerIsolation",
	"GatewayHTTPSListenerDetectMisdirectedRequests",
	"GatewayListenerFilters",
	"GatewayPort8080",
	"GatewayRouteHostnameIntersectionPrecedence",
	"GatewayStaticAddresses",
	"HTTPRoute",
	"HTTPRoute303RedirectStatusCode",
	"HTTPRoute307RedirectStatusCode",
	"HTTPRoute308RedirectStatusCode",
	"HTTPRouteBackendProtocolH2C",
	"HTTPRouteBackendProtocolWebSocket",
	"HTTPRouteBackendRequestHeaderModification",
	"HTTPRouteBackendTimeout",
	"HTTPRouteBackendURLRewrite",
	"HTTPRouteCORS",
	"HTTPRouteDestinationPortMatching",
	"HTTPRouteHostRewrite",
	"HTTPRouteMethodMatching",
	"HTTPRouteNamedRouteRule",
	"HTTPRouteParentRefPort",
	"HTTPRoutePathRedirect",
	"HTTPRoutePathRewrite",
	"HTTPRoutePortRedirect",
	"HTTPRouteQueryParamMatching",
	"HTTPRouteRequestMirror",
	"HTTPRouteRequestMultipleMirrors",
	"HTTPRouteRequestPercentageMirror",
	"HTTPRouteRequestTimeout",
	"HTTPRouteResponseHeaderModification",
	"HTTPRouteRetryCodes",
	"HTTPRouteRetryConnectionError",
	"HTTPRouteSchemeRedirect",
	"ListenerSet",
	"ReferenceGrant",
	"TCPRoute",
	"TLSRoute",
	"TLSRouteModeMixed",
	"TLSRouteModeTerminate",
	"UDPRoute",
}

// supportedBundle is the Gateway API release whose CRDs hostgate reads.
const supportedBundle = "v1.7"

// Features claimed only where they hold. GatewayInfrastructure needs
// Options.GatewayServices: without them no object carries
// spec.infrastructure's labels. GatewayAddressRoutability needs CRDs that
// carry the routability fields (the experimental channel's), and its
// Cluster variant the Services too, whose ClusterIPs are the Cluster
// addresses (addresses.go), and a pool whose addresses their
// EndpointSlices can hold.
const (
	gatewayInfrastructure            gatewayv1.FeatureName = "GatewayInfrastructure"
	gatewayAddressRoutability        gatewayv1.FeatureName = "GatewayAddressRoutability"
	gatewayAddressRoutabilityCluster gatewayv1.FeatureName = "GatewayAddressRoutabilityCluster"
)

func (t *translator) gatewayClasses() {
	claimed := slices.Clone(supportedFeatures)
	if t.opts.GatewayServices {
		claimed = append(claimed, gatewayInfrastructure)
	}
	if t.routabilityInStatus() {
		claimed = append(claimed, gatewayAddressRoutability)
		if t.opts.GatewayServices && t.poolCanBeEndpoints() {
			claimed = append(claimed, gatewayAddressRoutabilityCluster)
		}
	}
	slices.Sort(claimed)
	features := make([]gatewayv1.SupportedFeature, len(claimed))
	for i, f := range claimed {
		features[i] = gatewayv1.SupportedFeature{Name: f}
	}
	for _, gc := range t.objs.gatewayClasses {
		if string(gc.Spec.ControllerName) != t.opts.GatewayController {
			continue
		}
		gen := gc.Generation
		st := gatewayv1.GatewayClassStatus{SupportedFeatures: features}
		if gc.Spec.ParametersRef != nil {
			setCondition(&st.Conditions, condition(gatewayv1.GatewayClassConditionStatusAccepted, false,
				gatewayv1.GatewayClassReasonInvalidParameters, gen, "spec.parametersRef: hostgate takes no parameters"))
		} else {
			setCondition(&st.Conditions, condition(gatewayv1.GatewayClassConditionStatusAccepted, true,
				gatewayv1.GatewayClassReasonAccepted, gen, "served by hostgate"))
			for _, gw := range t.objs.gateways {
				if string(gw.Spec.GatewayClassName) == gc.Name {
					key := types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}
					t.gateways[key] = &gateway{obj: gw}
				}
			}
		}
		v := t.objs.crdBundleVersion
		if v == supportedBundle || strings.HasPrefix(v, supportedBundle+".") {
			setCondition(&st.Conditions, condition(gatewayv1.GatewayClassConditionStatusSupportedVersion, true,
				gatewayv1.GatewayClassReasonSupportedVersion, gen, "Gateway API "+v))
		} else {
			setCondition(&st.Conditions, condition(gatewayv1.GatewayClassConditionStatusSupportedVersion, false,
				gatewayv1.GatewayClassReasonUnsupportedVersion, gen,
				fmt.Sprintf("installed Gateway API CRDs have bundle version %q; hostgate supports %s.x (best effort)", v, supportedBundle)))
		}
		t.reports.GatewayClasses = append(t.reports.GatewayClasses, GatewayClassReport{Object: gc, Status: st})
	}
}

// gateway is a Gateway of one of our classes while it is translated.
type gateway struct {
	obj *gatewayv1.Gateway
	// addresses are the IPs its listeners bind; "" is every node address.
	// requests are its spec.addresses entries (addresses.go), which give
	// statusAddresses and addressesAssigned; unusable is the first entry
	// whose value cannot be bound.
	addresses         []string
	requests          []*addressRequest
	statusAddresses   []gatewayv1.GatewayStatusAddress
	addressesAssigned metav1.Condition
	unusable          problem
	// listeners are the Gateway's own; listenerSets are the ListenerSets
	// whose parentRef names it, in precedence order.
	listeners    []*listener
	listenerSets []*listenerSet
	accepted     problem
	programmed   problem
	// hasBackendTLS is whether spec.tls.backend names a client
	// certificate, clientCert that certificate when it resolves (keyed by
	// clientCertKey) and resolvedRefs the problem when it does not.
	// withCert are the TLS identities of its routes' backends with it.
	hasBackendTLS bool
	clientCert    *router.ClientCertificate
	clientCertKey string
	resolvedRefs  problem
	withCert      map[*router.BackendTLS]*router.BackendTLS
}

// listener is one listener of a Gateway, its own or one a ListenerSet
// adds.
type listener struct {
	gw *gateway
	// set is the ListenerSet that declares it, nil for the Gateway's own.
	set      *listenerSet
	spec     *gatewayv1.Listener
	hostname string
	// kinds are the route kinds the listener accepts.
	kinds      []router.Kind
	namespaces func(namespace string) bool
	certs      []Cert
	// validation is how an HTTPS listener checks client certificates,
	// nil for not at all.
	validation *ClientValidation
	// filters run before route matching (spec.filters.requests).
	filters []router.Filter
	// accepted, resolvedRefs and conflicted hold the first problem of each
	// condition; conflictReason is ProtocolConflict or HostnameConflict.
	accepted       problem
	resolvedRefs   problem
	conflictReason gatewayv1.ListenerConditionReason
	// conflictWith says what the listener conflicts with, when that is
	// more than the port; outranked says that a listener of an object of
	// higher precedence took the port.
	conflictWith   string
	outranked      bool
	sockets        []*socket
	attachedRoutes int32
	// index is the listener's place in translator.listeners.
	index int
}

// serving reports whether the listener takes traffic.
func (l *listener) serving() bool {
	return len(l.sockets) > 0
}

// valid reports whether nothing keeps the listener from being served but
// its Gateway.
func (l *listener) valid() bool {
	return l.accepted.ok() && l.conflictReason == "" && l.resolvedRefs.ok()
}

// declaredBy is the object that declares the listener: the namespace of
// its allowedRoutes "Same" and the "from" of its references' grants.
func (l *listener) declaredBy() refFrom {
	if l.set != nil {
		return refFrom{kind: "ListenerSet", namespace: l.set.obj.Namespace}
	}
	return refFrom{kind: "Gateway", namespace: l.gw.obj.Namespace}
}

// path is "namespace/name/listener" of the object that declares l.
func (l *listener) path() string {
	var meta *metav1.ObjectMeta
	if l.set != nil {
		meta = &l.set.obj.ObjectMeta
	} else {
		meta = &l.gw.obj.ObjectMeta
	}
	return meta.Namespace + "/" + meta.Name + "/" + string(l.spec.Name)
}

func (t *translator) gatewaysOfOurClasses() {
	gws := make([]*gateway, 0, len(t.gateways))
	for _, gw := range t.objs.gateways {
		if g := t.gateways[types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}]; g != nil {
			gws = append(gws, g)
		}
	}
	t.assignAddresses(gws)
	t.findListenerSets()
	for _, g := range gws {
		for i := range g.obj.Spec.Listeners {
			g.listeners = append(g.listeners, t.listener(g, nil, &g.obj.Spec.Listeners[i]))
		}
		all := t.attachListenerSets(g)
		markConflicts(all)
		t.backendClientCert(g)
		if infra := g.obj.Spec.Infrastructure; infra != nil && infra.ParametersRef != nil {
			ref := infra.ParametersRef
			g.accepted.first(string(gatewayv1.GatewayReasonInvalidParameters), fmt.Sprintf(
				"spec.infrastructure.parametersRef: %s %q: hostgate takes no parameters", groupKind(&ref.Group, ref.Kind), ref.Name))
		}
		if !g.accepted.ok() || !g.programmed.ok() {
			continue
		}
		t.bindListeners(g.listeners)
		if g.acceptance().ok() {
			t.bindListeners(all[len(g.listeners):])
		}
	}
}

// bindListeners binds those of ls that can be served.
func (t *translator) bindListeners(ls []*listener) {
	for _, l := range ls {
		if l.accepted.ok() && l.conflictReason == "" && len(l.kinds) > 0 && (!terminates(l.spec) || len(l.certs) > 0) {
			t.bindListener(l)
		}
	}
}

// routeKinds are the route kinds a listener of each protocol serves, and
// accepts when allowedRoutes.kinds is empty.
var routeKinds = map[gatewayv1.ProtocolType][]router.Kind{
	gatewayv1.HTTPProtocolType:  {router.KindHTTPRoute, router.KindGRPCRoute},
	gatewayv1.HTTPSProtocolType: {router.KindHTTPRoute, router.KindGRPCRoute},
	gatewayv1.TLSProtocolType:   {router.KindTLSRoute},
	gatewayv1.TCPProtocolType:   {router.KindTCPRoute},
	gatewayv1.UDPProtocolType:   {router.KindUDPRoute},
}

// listener validates spec, a listener of g or of set, one of g's
// ListenerSets.
func (t *translator) listener(g *gateway, set *listenerSet, spec *gatewayv1.Listener) *listener {
	l := &listener{gw: g, set: set, spec: spec, index: len(t.listeners)}
	t.listeners = append(t.listeners, l)
	if spec.Hostname != nil {
		l.hostname = strings.ToLower(string(*spec.Hostname))
		// The router's hostname rules apply, since every route attached
		// here may take this hostname.
		probe := router.Route{ID: router.RouteID{Kind: router.KindHTTPRoute, Name: string(spec.Name)}, Hostnames: []string{l.hostname}}
		if err := router.Validate(&probe); err != nil {
			l.accepted.first(string(gatewayv1.ListenerReasonUnsupportedValue), fmt.Sprintf("hostname: %v", err))
			return l
		}
	}
	if routeKinds[spec.Protocol] == nil {
		l.accepted.first(string(gatewayv1.ListenerReasonUnsupportedProtocol),
			fmt.Sprintf("protocol %q: hostgate serves HTTP, HTTPS, TLS, TCP and UDP", spec.Protocol))
		return l
	}
	if spec.Protocol == gatewayv1.TLSProtocolType {
		if mode := tlsMode(spec); mode != gatewayv1.TLSModePassthrough && mode != gatewayv1.TLSModeTerminate {
			l.accepted.first(string(gatewayv1.ListenerReasonUnsupportedValue),
				fmt.Sprintf("tls.mode %q: a TLS listener is served in mode Passthrough or Terminate", mode))
			return l
		}
	}
	switch {
	case spec.Port < 1 || spec.Port > 65535:
		l.accepted.first(string(gatewayv1.ListenerReasonUnsupportedValue), fmt.Sprintf("port %d: out of range", spec.Port))
	case t.opts.ReachablePorts != nil && !t.opts.ReachablePorts.reach(spec.Protocol, int32(spec.Port)):
		// Bound inside a pod whose hostPorts do not include it, the
		// listener would answer no one outside the pod.
		l.accepted.first(string(gatewayv1.ListenerReasonPortUnavailable), fmt.Sprintf(
			"port %d/%s: not reachable on this node: hostgate's pod maps only the hostPorts %s (run the hostNetwork variant, or add a hostPort and list it in --host-ports)",
			spec.Port, transportOf(spec.Protocol), t.opts.ReachablePorts))
	}
	t.listenerKinds(l)
	t.listenerNamespaces(l)
	t.listenerFilters(l)
	if terminates(spec) {
		t.listenerCerts(l)
	}
	if spec.Protocol == gatewayv1.HTTPSProtocolType {
		t.listenerClientValidation(l)
	}
	return l
}

// tlsMode is the TLS mode of a listener, Terminate (the API's default)
// unless it says otherwise.
func tlsMode(spec *gatewayv1.Listener) gatewayv1.TLSModeType {
	return derefOr(derefOr(spec.TLS, gatewayv1.ListenerTLSConfig{}).Mode, gatewayv1.TLSModeTerminate)
}

// terminates reports whether a listener ends TLS at hostgate, with its
// certificates: HTTPS, and TLS in mode Terminate.
func terminates(spec *gatewayv1.Listener) bool {
	return spec.Protocol == gatewayv1.HTTPSProtocolType || (spec.Protocol == gatewayv1.TLSProtocolType && tlsMode(spec) == gatewayv1.TLSModeTerminate)
}

func (t *translator) listenerKinds(l *listener) {
	ar := l.spec.AllowedRoutes
	served := routeKinds[l.spec.Protocol]
	if ar == nil || len(ar.Kinds) == 0 {
		l.kinds = served
		return
	}
	for i, k := range ar.Kinds {
		kind := router.Kind(k.Kind)
		if (k.Group == nil || *k.Group == gatewayv1.GroupName) && slices.Contains(served, kind) {
			if !slices.Contains(l.kinds, kind) {
				l.kinds = append(l.kinds, kind)
			}
			continue
		}
		l.resolvedRefs.first(string(gatewayv1.ListenerReasonInvalidRouteKinds),
			fmt.Sprintf("allowedRoutes.kinds[%d]: %s is not a route kind hostgate serves on %s listeners", i, groupKind(k.Group, k.Kind), l.spec.Protocol))
	}
}

func groupKind(group *gatewayv1.Group, kind gatewayv1.Kind) string {
	if group == nil || *group == "" {
		return string(kind)
	}
	return string(kind) + "." + string(*group)
}

func (t *translator) listenerNamespaces(l *listener) {
	from := gatewayv1.NamespacesFromSame
	var selector *metav1.LabelSelector
	if ar := l.spec.AllowedRoutes; ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		selector = ar.Namespaces.Selector
	}
	var err error
	l.namespaces, err = t.namespaceFilter(from, selector, l.declaredBy().namespace)
	if err != nil {
		l.accepted.first(string(gatewayv1.ListenerReasonUnsupportedValue), "allowedRoutes.namespaces.selector: "+err.Error())
	}
}

// namespaceFilter tells the namespaces that from and selector admit, same
// being the one "Same" means. An invalid selector admits none.
func (t *translator) namespaceFilter(from gatewayv1.FromNamespaces, selector *metav1.LabelSelector, same string) (func(namespace string) bool, error) {
	switch from {
	case gatewayv1.NamespacesFromAll:
		return func(string) bool { return true }, nil
	case gatewayv1.NamespacesFromSame:
		return func(ns string) bool { return ns == same }, nil
	case gatewayv1.NamespacesFromSelector:
		sel, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil || selector == nil {
			return func(string) bool { return false }, fmt.Errorf("invalid (%v)", err)
		}
		return func(ns string) bool {
			n := t.namespaces.last(ns)
			return n != nil && sel.Matches(labels.Set(n.Labels))
		}, nil
	default:
		return func(string) bool { return false }, nil
	}
}

func (t *translator) listenerCerts(l *listener) {
	tls := l.spec.TLS
	if tls != nil && tls.Mode != nil && *tls.Mode != gatewayv1.TLSModeTerminate {
		l.accepted.first(string(gatewayv1.ListenerReasonUnsupportedValue),
			fmt.Sprintf("tls.mode %q: an HTTPS listener terminates TLS", *tls.Mode))
		return
	}
	if tls == nil || len(tls.CertificateRefs) == 0 {
		l.resolvedRefs.first(string(gatewayv1.ListenerReasonInvalidCertificateRef), fmt.Sprintf("tls.certificateRefs: a listener that terminates TLS (protocol %s) needs a certificate", l.spec.Protocol))
		return
	}
	for i, ref := range tls.CertificateRefs {
		cert, reason, err := t.certificateRef(l.declaredBy(), ref)
		if err != nil {
			l.resolvedRefs.first(string(reason), fmt.Sprintf("tls.certificateRefs[%d]: %v", i, err))
			continue
		}
		if l.hostname != "" {
			cert.Hostnames = []string{l.hostname}
		}
		l.certs = append(l.certs, cert)
	}
}

// markConflicts applies the spec's rules for listeners of one Gateway that
// share a port: different protocols conflict, and so do equal hostnames
// of one protocol. Among the listeners one object declares (the Gateway,
// or one ListenerSet) there is no winner: the spec wants every indistinct
// listener refused (TLSRouteListenerMixedTerminationNotSupported checks
// both). Between objects, listener precedence decides: the listener of the
// Gateway, or of the ListenerSet that comes first, keeps serving
// (ListenerSetProtocolConflict, ListenerSetHostnameConflict).
func markConflicts(ls []*listener) {
	for i, l := range ls {
		for _, earlier := range ls[:i] {
			if earlier.spec.Port != l.spec.Port || !earlier.accepted.ok() {
				continue
			}
			sameObject := earlier.set == l.set
			if earlier.outranked || (!sameObject && earlier.conflictReason != "") {
				// Refused itself, it does not take the port from a
				// listener of lower precedence, nor, having lost it to
				// one of higher precedence, from the listeners of its
				// own object (ListenerSetProtocolConflict: a TCP
				// listener refused for the Gateway's HTTP one leaves
				// its ListenerSet's HTTP listeners served).
				continue
			}
			reason := conflictBetween(earlier, l)
			if reason == "" {
				continue
			}
			l.conflict(reason, earlier)
			if !sameObject {
				l.outranked = true
				break
			}
			earlier.conflict(reason, l)
		}
	}
}

// conflictBetween is why listeners a and b, on one port, cannot both be
// served, or "" when they can. HTTPS and TLS listeners (either mode) share
// a port, chosen by server name, as listeners of one protocol do.
func conflictBetween(a, b *listener) gatewayv1.ListenerConditionReason {
	udpA, udpB := a.spec.Protocol == gatewayv1.UDPProtocolType, b.spec.Protocol == gatewayv1.UDPProtocolType
	switch {
	case udpA != udpB:
		// One port number, two transports: apart, save for HTTPS,
		// whose HTTP/3 listens on the UDP port (conflict's message).
		if a.spec.Protocol == gatewayv1.HTTPSProtocolType || b.spec.Protocol == gatewayv1.HTTPSProtocolType {
			return gatewayv1.ListenerReasonProtocolConflict
		}
		return ""
	case a.spec.Protocol != b.spec.Protocol && !sharesTLSSocket(Protocol(a.spec.Protocol), Protocol(b.spec.Protocol)):
		return gatewayv1.ListenerReasonProtocolConflict
	case a.hostname == b.hostname:
		return gatewayv1.ListenerReasonHostnameConflict
	}
	return ""
}

// conflict marks l refused for reason, because of other; the first
// conflict found is the one reported.
func (l *listener) conflict(reason gatewayv1.ListenerConditionReason, other *listener) {
	if l.conflictReason != "" {
		return
	}
	l.conflictReason = reason
	if reason != gatewayv1.ListenerReasonProtocolConflict {
		return
	}
	l.conflictWith = fmt.Sprintf("protocol %s conflicts with listener %q of protocol %s on port %d", l.spec.Protocol, other.spec.Name, other.spec.Protocol, l.spec.Port)
	if (l.spec.Protocol == gatewayv1.UDPProtocolType) != (other.spec.Protocol == gatewayv1.UDPProtocolType) {
		l.conflictWith += " (HTTPS serves HTTP/3 on the UDP port of its number)"
	}
}

// bindListener binds l at every address of its Gateway.
func (t *translator) bindListener(l *listener) {
	protocol := Protocol(l.spec.Protocol)
	for _, addr := range l.gw.addresses {
		s, refused := t.bind(addr, int(l.spec.Port), protocol, l.hostname, l.validation)
		if s != nil {
			refused = s.bindFilters(l.hostname, l.filters)
		}
		if refused != "" {
			l.accepted.first(string(gatewayv1.ListenerReasonPortUnavailable), refused)
			l.sockets = nil
			return
		}
		l.sockets = append(l.sockets, s)
	}
	for _, s := range l.sockets {
		s.certs = append(s.certs, l.certs...)
		if l.spec.Protocol == gatewayv1.TLSProtocolType && terminates(l.spec) && !slices.Contains(s.terminate, l.hostname) {
			s.terminate = append(s.terminate, l.hostname)
		}
	}
}

// finishGateways writes the Gateway reports once routes have attached.
func (t *translator) finishGateways() {
	for _, gw := range t.objs.gateways {
		g := t.gateways[types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}]
		if g == nil {
			continue
		}
		report := GatewayReport{Object: gw, Status: t.gatewayStatus(g)}
		if t.opts.GatewayServices {
			report.Infrastructure = infrastructure(gw, t.servedOn(g))
		}
		t.reports.Gateways = append(t.reports.Gateways, report)
		for _, s := range g.listenerSets {
			t.reports.ListenerSets = append(t.reports.ListenerSets, ListenerSetReport{Object: s.obj, Status: s.status})
		}
	}
}

// gatewayStatus is the status of g.
func (t *translator) gatewayStatus(g *gateway) gatewayv1.GatewayStatus {
	gen := g.obj.Generation
	st := gatewayv1.GatewayStatus{Addresses: g.statusAddresses}
	serving := 0
	notServed := "the Gateway is not programmed"
	if !g.programmed.ok() {
		notServed += ": " + g.programmed.message
	} else if accepted := g.acceptance(); !accepted.ok() {
		notServed += ": " + accepted.message
	}
	for _, l := range g.listeners {
		if l.serving() {
			serving++
		}
		st.Listeners = append(st.Listeners, listenerStatus(l, gen, notServed))
	}
	accepted := g.acceptance()
	if accepted.ok() {
		reason, msg := gatewayv1.GatewayReasonAccepted, "accepted by hostgate"
		if invalid := g.invalidListeners(); invalid > 0 {
			reason, msg = gatewayv1.GatewayReasonListenersNotValid, fmt.Sprintf("%d of %d listeners are not valid", invalid, len(g.listeners))
		}
		setCondition(&st.Conditions, condition(gatewayv1.GatewayConditionAccepted, true, reason, gen, msg))
	} else {
		setCondition(&st.Conditions, condition(gatewayv1.GatewayConditionAccepted, false, accepted.reason, gen, accepted.message))
	}
	listeners := len(g.listeners)
	var attached int32
	for _, s := range g.listenerSets {
		s.finish(accepted, notServed)
		listeners += len(s.listeners)
		for _, l := range s.listeners {
			if l.serving() {
				serving++
			}
		}
		if s.accepted.ok() {
			attached++
		}
	}
	if allowsListenerSets(g.obj) {
		st.AttachedListenerSets = &attached
	}
	programmed := g.programmed
	if programmed.ok() && !accepted.ok() {
		programmed.first(string(gatewayv1.GatewayReasonInvalid), "the Gateway is not accepted")
	}
	if programmed.ok() && serving == 0 {
		programmed.first(string(gatewayv1.GatewayReasonInvalid), "no listener is programmed")
	}
	if programmed.ok() {
		setCondition(&st.Conditions, condition(gatewayv1.GatewayConditionProgrammed, true, gatewayv1.GatewayReasonProgrammed, gen,
			fmt.Sprintf("%d of %d listeners are programmed", serving, listeners)))
	} else {
		setCondition(&st.Conditions, condition(gatewayv1.GatewayConditionProgrammed, false, programmed.reason, gen, programmed.message))
	}
	setCondition(&st.Conditions, g.addressesAssigned)
	switch {
	case !g.hasBackendTLS:
		// Set only for the client certificate, its one reference.
	case g.resolvedRefs.ok():
		setCondition(&st.Conditions, condition(gatewayv1.GatewayConditionResolvedRefs, true, gatewayv1.GatewayReasonResolvedRefs, gen, "all references resolved"))
	default:
		setCondition(&st.Conditions, condition(gatewayv1.GatewayConditionResolvedRefs, false, gatewayv1.GatewayConditionReason(g.resolvedRefs.reason), gen, g.resolvedRefs.message))
	}
	if msg := insecureFrontendValidation(g.obj); msg != "" {
		setCondition(&st.Conditions, condition(gatewayv1.GatewayConditionInsecureFrontendValidationMode, true,
			gatewayv1.GatewayReasonConfigurationChanged, gen, msg))
	}
	return st
}

// invalidListeners counts the Gateway's own listeners that are not
// accepted.
func (g *gateway) invalidListeners() int {
	n := 0
	for _, l := range g.listeners {
		if !l.acceptance().ok() {
			n++
		}
	}
	return n
}

// acceptance is what keeps g from being accepted, once its own listeners
// are bound: a Gateway none of whose listeners is valid is not, whatever
// its ListenerSets add.
func (g *gateway) acceptance() problem {
	accepted := g.accepted
	if invalid := g.invalidListeners(); invalid > 0 && invalid == len(g.listeners) {
		accepted.first(string(gatewayv1.GatewayReasonListenersNotValid), "no listener is valid")
	}
	return accepted
}

// acceptance is what keeps l from being accepted. A conflict is why it
// is not served, whatever else it has.
func (l *listener) acceptance() problem {
	if l.conflictWith != "" {
		return problem{string(l.conflictReason), l.conflictWith}
	}
	if l.conflictReason != "" {
		return problem{string(l.conflictReason), "conflicts with another listener on port " + fmt.Sprint(l.spec.Port)}
	}
	return l.accepted
}

// listenerStatus is the status of l; notServed explains a valid listener
// that is not served because of its Gateway.
func listenerStatus(l *listener, gen int64, notServed string) gatewayv1.ListenerStatus {
	ls := gatewayv1.ListenerStatus{Name: l.spec.Name, AttachedRoutes: l.attachedRoutes, SupportedKinds: []gatewayv1.RouteGroupKind{}}
	for _, k := range l.kinds {
		ls.SupportedKinds = append(ls.SupportedKinds, gatewayv1.RouteGroupKind{Group: new(gatewayv1.Group(gatewayv1.GroupName)), Kind: gatewayv1.Kind(k)})
	}
	accepted := l.acceptance()
	if l.conflictReason != "" {
		setCondition(&ls.Conditions, condition(gatewayv1.ListenerConditionConflicted, true, l.conflictReason, gen, accepted.message))
	} else {
		setCondition(&ls.Conditions, condition(gatewayv1.ListenerConditionConflicted, false, gatewayv1.ListenerReasonNoConflicts, gen, "no conflicts"))
	}
	if accepted.ok() {
		setCondition(&ls.Conditions, condition(gatewayv1.ListenerConditionAccepted, true, gatewayv1.ListenerReasonAccepted, gen, "accepted"))
	} else {
		setCondition(&ls.Conditions, condition(gatewayv1.ListenerConditionAccepted, false, accepted.reason, gen, accepted.message))
	}
	if l.resolvedRefs.ok() {
		setCondition(&ls.Conditions, condition(gatewayv1.ListenerConditionResolvedRefs, true, gatewayv1.ListenerReasonResolvedRefs, gen, "all references resolved"))
	} else {
		setCondition(&ls.Conditions, condition(gatewayv1.ListenerConditionResolvedRefs, false, l.resolvedRefs.reason, gen, l.resolvedRefs.message))
	}
	switch {
	case l.serving():
		setCondition(&ls.Conditions, condition(gatewayv1.ListenerConditionProgrammed, true, gatewayv1.ListenerReasonProgrammed, gen, "programmed"))
	case l.conflictReason != "":
		setCondition(&ls.Conditions, condition(gatewayv1.ListenerConditionProgrammed, false, l.conflictReason, gen, accepted.message))
	case !accepted.ok():
		setCondition(&ls.Conditions, condition(gatewayv1.ListenerConditionProgrammed, false, gatewayv1.ListenerReasonInvalid, gen, accepted.message))
	case !l.resolvedRefs.ok():
		setCondition(&ls.Conditions, condition(gatewayv1.ListenerConditionProgrammed, false, gatewayv1.ListenerReasonInvalid, gen, l.resolvedRefs.message))
	default:
		setCondition(&ls.Conditions, condition(gatewayv1.ListenerConditionProgrammed, false, gatewayv1.ListenerReasonPending, gen, notServed))
	}
	return ls
}
