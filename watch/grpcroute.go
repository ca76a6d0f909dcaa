package watch

import (
	"fmt"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/router"
)

func (t *translator) grpcRoute(obj *gatewayv1.GRPCRoute) *route {
	r := t.newRoute(router.KindGRPCRoute, &obj.ObjectMeta, &obj.Spec.CommonRouteSpec, obj.Spec.Hostnames, obj.Status.Parents)
	r.rules = sized[router.Rule](len(obj.Spec.Rules))
	for i, rule := range obj.Spec.Rules {
		field := fmt.Sprintf("spec.rules[%d]", i)
		rr := router.Rule{Name: string(derefOr(rule.Name, "")), Matches: sized[router.Match](len(rule.Matches))}
		for _, m := range rule.Matches {
			rr.Matches = append(rr.Matches, grpcMatch(m))
		}
		backends := make([]ruleBackend, len(rule.BackendRefs))
		for j, b := range rule.BackendRefs {
			backends[j] = ruleBackend{b.BackendRef, httpFilters(b.Filters)}
		}
		t.ruleActions(r, field, &rr, httpFilters(rule.Filters), backends, true)
		r.rules = append(r.rules, rr)
	}
	r.finish()
	return r
}

func grpcMatch(m gatewayv1.GRPCRouteMatch) router.Match {
	g := &router.GRPCMatch{Type: router.MatchExact}
	if mm := m.Method; mm != nil {
		if derefOr(mm.Type, gatewayv1.GRPCMethodMatchExact) == gatewayv1.GRPCMethodMatchRegularExpression {
			g.Type = router.MatchRegularExpression
		}
		g.Service, g.Method = derefOr(mm.Service, ""), derefOr(mm.Method, "")
	}
	out := router.Match{GRPC: g}
	for _, h := range m.Headers {
		out.Headers = append(out.Headers, valueMatch(derefOr(h.Type, gatewayv1.GRPCHeaderMatchExact) == gatewayv1.GRPCHeaderMatchRegularExpression, string(h.Name), h.Value))
	}
	return out
}

// httpFilters converts GRPCRoute filters, a subset of HTTPRoute's, to
// their HTTPRoute form.
func httpFilters(filters []gatewayv1.GRPCRouteFilter) []gatewayv1.HTTPRouteFilter {
	converted := make([]gatewayv1.HTTPRouteFilter, len(filters))
	for i, f := range filters {
		converted[i] = gatewayv1.HTTPRouteFilter{
			Type:                   gatewayv1.HTTPRouteFilterType(f.Type),
			RequestHeaderModifier:  f.RequestHeaderModifier,
			ResponseHeaderModifier: f.ResponseHeaderModifier,
			RequestMirror:          f.RequestMirror,
			ExtensionRef:           f.ExtensionRef,
		}
	}
	return converted
}
