package watch

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/router"
)

// refFrom names the object holding a reference, for ReferenceGrant checks.
type refFrom struct {
	kind      string
	namespace string
}

// permitted reports whether a ReferenceGrant in the target namespace lets
// from refer to the object (group, kind, name) there.
func (t *translator) permitted(from refFrom, group, kind, namespace, name string) bool {
	if from.namespace == namespace {
		return true
	}
	t.dependOnGrants(namespace)
	var one [1]*gatewayv1.ReferenceGrant
	for _, g := range t.grants.of(namespace, &one) {
		fromOK := slices.ContainsFunc(g.Spec.From, func(f gatewayv1.ReferenceGrantFrom) bool {
			return string(f.Group) == gatewayv1.GroupName && string(f.Kind) == from.kind && string(f.Namespace) == from.namespace
		})
		toOK := slices.ContainsFunc(g.Spec.To, func(to gatewayv1.ReferenceGrantTo) bool {
			return string(to.Group) == group && string(to.Kind) == kind && (to.Name == nil || string(*to.Name) == name)
		})
		if fromOK && toOK {
			return true
		}
	}
	return false
}

// backendError is a backendRef that cannot be resolved, with the route
// ResolvedRefs reason it stands for.
type backendError struct {
	reason gatewayv1.RouteConditionReason
	err    error
}

func (e *backendError) Error() string { return e.err.Error() }
func (e *backendError) Unwrap() error { return e.err }

func refErr(reason gatewayv1.RouteConditionReason, format string, args ...any) *backendError {
	return &backendError{reason: reason, err: fmt.Errorf(format, args...)}
}

// errServiceNotFound lets callers tell a missing Service from other faults.
var errServiceNotFound = errors.New("service not found")

// backendUse is what a backend serves, which decides how it is spoken to.
type backendUse uint8

const (
	forHTTP backendUse = iota
	// forGRPC makes HTTP/2 the default protocol.
	forGRPC
	// forStream is a Layer 4 route's: the connection's bytes as they
	// come, whatever the port's appProtocol says, and no
	// BackendTLSPolicy, which only a proxy that makes the connection's
	// TLS itself could apply.
	forStream
	// forTLSStream is a TLSRoute's: forStream, and the BackendTLSPolicy
	// of the port for the listeners in mode Terminate, where hostgate
	// makes the connection's TLS to the backend (passthrough ignores it).
	forTLSStream
	// forDatagram is a UDPRoute's: datagrams as they come, to the
	// Service's UDP port of the number referenced.
	forDatagram
)

// layer4 reports whether a backend of use gets bytes or datagrams as they
// come rather than HTTP.
func (u backendUse) layer4() bool { return u == forStream || u == forTLSStream || u == forDatagram }

func useFor(grpc bool) backendUse {
	if grpc {
		return forGRPC
	}
	return forHTTP
}

// backendRef resolves a Gateway API backendRef to the endpoint set it
// names, for use.
func (t *translator) backendRef(from refFrom, ref gatewayv1.BackendObjectReference, use backendUse) (router.BackendRef, *backendError) {
	group, kind := "", "Service"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	namespace := from.namespace
	if ref.Namespace != nil {
		namespace = string(*ref.Namespace)
	}
	if group != "" || kind != "Service" {
		return router.BackendRef{}, refErr(gatewayv1.RouteReasonInvalidKind, "%s: only core Services are supported", groupKind(ref.Group, gatewayv1.Kind(kind)))
	}
	if !t.permitted(from, "", "Service", namespace, string(ref.Name)) {
		return router.BackendRef{}, refErr(gatewayv1.RouteReasonRefNotPermitted, "Service %s/%s: no ReferenceGrant allows the reference", namespace, ref.Name)
	}
	if ref.Port == nil {
		return router.BackendRef{}, refErr(gatewayv1.RouteReasonUnsupportedValue, "port: required for a Service")
	}
	key := types.NamespacedName{Namespace: namespace, Name: string(ref.Name)}
	svc := t.services.last(key)
	t.dependOnService(key)
	if svc == nil {
		return router.BackendRef{}, refErr(gatewayv1.RouteReasonBackendNotFound, "Service %s/%s: %w", namespace, ref.Name, errServiceNotFound)
	}
	// A Service may have a TCP and a UDP port of one number (DNS): the
	// one of the transport the route carries is meant.
	transport := corev1.ProtocolTCP
	if use == forDatagram {
		transport = corev1.ProtocolUDP
	}
	i := slices.IndexFunc(svc.Ports, func(p corev1.ServicePort) bool { return p.Port == *ref.Port && portProtocol(&p) == transport })
	if i < 0 {
		if j := slices.IndexFunc(svc.Ports, func(p corev1.ServicePort) bool { return p.Port == *ref.Port }); j >= 0 {
			return router.BackendRef{}, refErr(gatewayv1.RouteReasonUnsupportedProtocol, "Service %s/%s port %d: protocol %s, where %s is carried", namespace, ref.Name, *ref.Port, portProtocol(&svc.Ports[j]), transport)
		}
		return router.BackendRef{}, refErr(gatewayv1.RouteReasonBackendNotFound, "Service %s/%s: has no port %d", namespace, ref.Name, *ref.Port)
	}
	return t.servicePort(svc, &svc.Ports[i], use)
}

// servicePort registers the endpoint set of a Service port and returns a
// reference to it.
func (t *translator) servicePort(svc *service, port *corev1.ServicePort, use backendUse) (router.BackendRef, *backendError) {
	if svc.Type == corev1.ServiceTypeExternalName {
		return router.BackendRef{}, refErr(gatewayv1.RouteReasonBackendNotFound, "Service %s/%s: ExternalName Services are not supported", svc.Namespace, svc.Name)
	}
	name := svc.Namespace + "/" + svc.Name + ":" + strconv.Itoa(int(port.Port))
	if portProtocol(port) != corev1.ProtocolTCP {
		// Apart from the TCP port of the same number, whose endpoints
		// may differ.
		name += "/" + strings.ToLower(string(portProtocol(port)))
	}
	if use.layer4() {
		ref := router.BackendRef{Weight: 1}
		if use != forDatagram {
			version, err := proxyProtocolVersion(svc)
			if err != nil {
				return router.BackendRef{}, refErr(gatewayv1.RouteReasonUnsupportedValue, "Service %s/%s: %w", svc.Namespace, svc.Name, err)
			}
			ref.ProxyProtocol = version
		}
		if use == forTLSStream {
			if policy := t.servicePolicy(svc, port); policy != nil {
				// Not served in plain text when the policy is not
				// valid: its status says why.
				ref.TLS, ref.Invalid = policy.tls, policy.tls == nil
			}
		}
		ref.Name = t.registerEndpoints(name, svc, port)
		return ref, nil
	}
	protocol, ok := backendProtocol(port.AppProtocol, use == forGRPC)
	policy := t.servicePolicy(svc, port)
	if policy != nil {
		protocol, ok = withTLS(protocol), true
	}
	if !ok {
		return router.BackendRef{}, refErr(gatewayv1.RouteReasonUnsupportedProtocol, "Service %s/%s port %d: appProtocol %q is not supported", svc.Namespace, svc.Name, port.Port, *port.AppProtocol)
	}
	if policy != nil && policy.tls == nil {
		// Not served in plain text: the policy's status says why.
		return router.BackendRef{Name: name, Weight: 1, Protocol: protocol, Invalid: true}, nil
	}
	ref := router.BackendRef{Name: t.registerEndpoints(name, svc, port), Weight: 1, Protocol: protocol}
	if policy != nil {
		ref.TLS = policy.tls
	}
	return ref, nil
}

// AnnotationProxyProtocol, on a Service, says that its TCP endpoints
// expect a PROXY protocol header naming the client ("v1" or "v2") at the
// start of each connection that TCPRoutes and TLSRoutes carry to them:
// what the :PROXY suffix of ingress-nginx's tcp-services entries asked.
// On a Service, not a route, since it is the backend that must be spoken
// to that way, whichever route reaches it.
const AnnotationProxyProtocol = "hostgate.dev/proxy-protocol"

// proxyProtocolVersion reads svc's AnnotationProxyProtocol: 0 without it.
func proxyProtocolVersion(svc *service) (uint8, error) {
	switch v := svc.ProxyProtocol; {
	case v == nil:
		return 0, nil
	case *v == "v1":
		return 1, nil
	case *v == "v2":
		return 2, nil
	default:
		return 0, fmt.Errorf("annotation %s: %q is neither v1 nor v2", AnnotationProxyProtocol, *v)
	}
}

// backendProtocol maps a Service port's appProtocol to how the proxy
// speaks to it. gRPC needs HTTP/2, so it is the default for GRPCRoutes.
func backendProtocol(appProtocol *string, grpc bool) (string, bool) {
	p := ""
	if appProtocol != nil {
		p = *appProtocol
	}
	switch p {
	case "", "http", "kubernetes.io/ws":
		if grpc {
			return "h2c", true
		}
		return "", true
	case "kubernetes.io/h2c", "h2c", "grpc":
		return "h2c", true
	case "https", "kubernetes.io/wss":
		if grpc {
			return "h2", true
		}
		return "https", true
	}
	return "", false
}

// endpointSet collects the endpoints of a Service port from the Service's
// EndpointSlices: ready ones, and terminating ones that still serve
// (marked not ready). The target port comes from the slice port of the
// same name, or from a numeric targetPort for slices without ports.
//
// The set is kept for as long as the Service and its slices do not change,
// one per Service port: it is made with room for every address listed,
// its final size unless some are left out, where growing it by appends
// left a third of a set of ten endpoints unused, and
// an address listed twice is dropped after sorting, where a map of the
// addresses seen was garbage of every set made.
func endpointSet(list []*endpointSlice, port *corev1.ServicePort) []Endpoint {
	size := 0
	for _, slice := range list {
		for _, ep := range slice.Endpoints {
			size += len(ep.Addresses)
		}
	}
	set := make([]Endpoint, 0, size)
	for _, slice := range list {
		if slice.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		target := slicePort(slice, port)
		if target == 0 {
			continue
		}
		for _, ep := range slice.Endpoints {
			if !ep.Ready && !ep.Serving {
				continue
			}
			for _, a := range ep.Addresses {
				if net.ParseIP(a) == nil {
					continue
				}
				set = append(set, Endpoint{Address: net.JoinHostPort(a, strconv.Itoa(int(target))), Ready: ep.Ready, Weight: 1})
			}
		}
	}
	// Stable, so that of an address listed twice the first is kept.
	slices.SortStableFunc(set, func(a, b Endpoint) int { return cmp.Compare(a.Address, b.Address) })
	return slices.CompactFunc(set, func(a, b Endpoint) bool { return a.Address == b.Address })
}

// portProtocol is a Service port's protocol, TCP when it names none.
func portProtocol(p *corev1.ServicePort) corev1.Protocol {
	if p.Protocol == "" {
		return corev1.ProtocolTCP
	}
	return p.Protocol
}

func slicePort(slice *endpointSlice, port *corev1.ServicePort) int32 {
	if len(slice.Ports) == 0 {
		if port.TargetPort.IntVal > 0 && port.TargetPort.StrVal == "" {
			return port.TargetPort.IntVal
		}
		return port.Port
	}
	for _, p := range slice.Ports {
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if name == port.Name && proto == portProtocol(port) && p.Port != nil {
			return *p.Port
		}
	}
	return 0
}

// certificateRef resolves a Secret reference of from (a listener's
// certificateRef, a Gateway's client certificate) to a Cert.
func (t *translator) certificateRef(from refFrom, ref gatewayv1.SecretObjectReference) (Cert, gatewayv1.ListenerConditionReason, error) {
	if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Secret") {
		return Cert{}, gatewayv1.ListenerReasonInvalidCertificateRef, fmt.Errorf("%s: only Secrets are supported", groupKind(ref.Group, derefOr(ref.Kind, "Secret")))
	}
	namespace := from.namespace
	if ref.Namespace != nil {
		namespace = string(*ref.Namespace)
	}
	if !t.permitted(from, "", "Secret", namespace, string(ref.Name)) {
		return Cert{}, gatewayv1.ListenerReasonRefNotPermitted, fmt.Errorf("Secret %s/%s: no ReferenceGrant allows the reference", namespace, ref.Name)
	}
	cert, err := t.secretCert(namespace, string(ref.Name))
	if err != nil {
		return Cert{}, gatewayv1.ListenerReasonInvalidCertificateRef, err
	}
	return cert, "", nil
}

// secretCert reads a kubernetes.io/tls Secret and checks that its
// certificate and key form a pair.
func (t *translator) secretCert(namespace, name string) (Cert, error) {
	s := t.secrets.last(types.NamespacedName{Namespace: namespace, Name: name})
	switch {
	case s == nil:
		return Cert{}, fmt.Errorf("Secret %s/%s: not found", namespace, name)
	case s.Type != corev1.SecretTypeTLS:
		return Cert{}, fmt.Errorf("Secret %s/%s: type %q, want %s", namespace, name, s.Type, corev1.SecretTypeTLS)
	}
	return t.memoKeyPair(s)
}

// checkKeyPair parses the certificate and key of a TLS Secret, the
// costliest check of a translation.
func checkKeyPair(s *corev1.Secret) (Cert, error) {
	certPEM, keyPEM := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return Cert{}, fmt.Errorf("Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return Cert{Name: s.Namespace + "/" + s.Name, CertPEM: certPEM, KeyPEM: PrivateKey(keyPEM)}, nil
}

func derefOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
