package watch

import (
	"fmt"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/router"
)

func (t *translator) grpcRoute(obj *gatewayv1.GRPCRoute) *route {
	r := newRoute(router.KindGRPCRoute, &obj.ObjectMeta, &obj.Spec.CommonRouteSpec, obj.Spec.Hostnames, obj.Status.Parents)
	for i, rule := range obj.Spec.Rules {
		field := fmt.Sprintf("spec.rules[%d]", i)
		rr := router.Rule{Name: string(derefOr(rule.Name, ""))}
		for _, m := range rule.Matches {
			rr.Matches = append(rr.Matches, grpcMatch(m))
		}
		var broken bool
		rr.Filters, broken = t.grpcFilters(r, field+".filters", rule.Filters)
		for j, b := range rule.BackendRefs {
			bfield := fmt.Sprintf("%s.backendRefs[%d]", field, j)
			ref := t.backend(r, bfield, b.BackendRef, true)
			var refBroken bool
			ref.Filters, refBroken = t.grpcFilters(r, bfield+".filters", b.Filters)
			ref.Invalid = ref.Invalid || refBroken
			rr.Backends = append(rr.Backends, ref)
		}
		if broken {
			breakRule(&rr)
		}
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

// grpcFilters translates GRPCRoute filters, a subset of HTTPRoute's.
func (t *translator) grpcFilters(r *route, field string, filters []gatewayv1.GRPCRouteFilter) ([]router.Filter, bool) {
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
	return t.httpFilters(r, field, converted, true)
}
