package watch

// TLSRoutes, TCPRoutes and UDPRoutes: one rule of weighted backends each,
// attached like the HTTP routes (parentRefs, allowedRoutes, hostnames
// intersected for TLSRoutes) to TLS, TCP and UDP listeners.

import (
	"fmt"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/router"
)

func (t *translator) tlsRoute(obj *gatewayv1.TLSRoute) *route {
	r := t.newRoute(router.KindTLSRoute, &obj.ObjectMeta, &obj.Spec.CommonRouteSpec, obj.Spec.Hostnames, obj.Status.Parents)
	l4Rules(t, r, forTLSStream, obj.Spec.Rules, func(rule *gatewayv1.TLSRouteRule) (*gatewayv1.SectionName, []gatewayv1.BackendRef) {
		return rule.Name, rule.BackendRefs
	})
	return r
}

func (t *translator) tcpRoute(obj *gatewayv1.TCPRoute) *route {
	r := t.newRoute(router.KindTCPRoute, &obj.ObjectMeta, &obj.Spec.CommonRouteSpec, nil, obj.Status.Parents)
	l4Rules(t, r, forStream, obj.Spec.Rules, func(rule *gatewayv1.TCPRouteRule) (*gatewayv1.SectionName, []gatewayv1.BackendRef) {
		return rule.Name, rule.BackendRefs
	})
	return r
}

// udpRoute is tcpRoute for datagrams: the same attachment and conditions,
// with the Services' UDP ports as backends.
func (t *translator) udpRoute(obj *gatewayv1.UDPRoute) *route {
	r := t.newRoute(router.KindUDPRoute, &obj.ObjectMeta, &obj.Spec.CommonRouteSpec, nil, obj.Status.Parents)
	l4Rules(t, r, forDatagram, obj.Spec.Rules, func(rule *gatewayv1.UDPRouteRule) (*gatewayv1.SectionName, []gatewayv1.BackendRef) {
		return rule.Name, rule.BackendRefs
	})
	return r
}

// l4Rules translates the rules of a TLSRoute, TCPRoute or UDPRoute, whose fields
// parts reads, into r. Backends that do not resolve stay in the rule as
// invalid ones, so that their share of connections is refused as the spec
// asks; router.ValidateL4 (in finish) refuses what cannot be served at
// all, a rule without backends or more than one rule.
func l4Rules[R any](t *translator, r *route, use backendUse, rules []R, parts func(*R) (*gatewayv1.SectionName, []gatewayv1.BackendRef)) {
	r.rules = sized[router.Rule](len(rules))
	for i := range rules {
		name, refs := parts(&rules[i])
		rr := router.Rule{Name: string(derefOr(name, "")), Backends: sized[router.BackendRef](len(refs))}
		for j, ref := range refs {
			rr.Backends = append(rr.Backends, t.backendFor(r, fmt.Sprintf("spec.rules[%d].backendRefs[%d]", i, j), ref, use))
		}
		r.rules = append(r.rules, rr)
	}
	r.finish()
}
