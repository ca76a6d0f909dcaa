package watch

// The Gateway API's ExternalAuth filter (HTTPRoute rules and Gateway
// listener filters) as a router.ExternalAuth. Only the HTTP protocol is
// served: the GRPC one is Envoy's ext_authz service, which hostgate does
// not speak. A filter that cannot be served fails closed (its requests
// answer 500): skipping it would let requests through unauthenticated.

import (
	"errors"
	"fmt"
	"reflect"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/router"
)

// gatewayExternalAuth translates f but for its backendRef, which its
// callers resolve and report as a route's or a listener's. The error
// names the field, relative to the filter's externalAuth.
func gatewayExternalAuth(f *gatewayv1.HTTPExternalAuthFilter) (*router.ExternalAuth, error) {
	if f == nil {
		return nil, errors.New(": an ExternalAuth filter needs externalAuth")
	}
	if f.ExternalAuthProtocol != gatewayv1.HTTPRouteExternalAuthHTTPProtocol {
		return nil, fmt.Errorf(".protocol: %q is not supported (only HTTP: hostgate does not speak Envoy's ext_authz gRPC service)", f.ExternalAuthProtocol)
	}
	a := &router.ExternalAuth{Style: router.AuthGateway, PrefixPath: true, AllResponseHeaders: true}
	if h := f.HTTPAuthConfig; h != nil {
		a.Path = h.Path
		a.AllowedHeaders = h.AllowedRequestHeaders
		a.ResponseHeaders = h.AllowedResponseHeaders
		a.AllResponseHeaders = len(h.AllowedResponseHeaders) == 0
	}
	if b := f.ForwardBody; b != nil {
		a.MaxBody = int64(b.MaxSize)
	}
	// The backend is resolved apart: it may be unresolved here.
	check := *a
	check.Backend = router.BackendRef{Invalid: true, Weight: 1}
	if err := router.ValidateExternalAuth(&check); err != nil {
		return nil, fmt.Errorf(".http: %w", err)
	}
	return a, nil
}

// routeExternalAuth translates a route rule's ExternalAuth filter. broken
// says the rule must answer 500.
func (t *translator) routeExternalAuth(r *route, field string, f *gatewayv1.HTTPExternalAuthFilter) (router.Filter, bool) {
	a, err := gatewayExternalAuth(f)
	if err != nil {
		r.unsupported("%s.externalAuth%v", field, err)
		return router.Filter{}, true
	}
	a.Backend = t.backend(r, field+".externalAuth.backendRef", gatewayv1.BackendRef{BackendObjectReference: f.BackendRef}, false)
	return router.Filter{Type: router.FilterExternalAuth, ExternalAuth: a}, false
}

// listenerFilters translates l's spec.filters.requests. A filter that
// cannot run keeps the listener from being accepted, so that requests it
// would guard are not served without it.
func (t *translator) listenerFilters(l *listener) {
	if l.spec.Filters == nil {
		return
	}
	for i, f := range l.spec.Filters.Requests {
		field := fmt.Sprintf("filters.requests[%d]", i)
		switch f.Type {
		case gatewayv1.ListenerFilterExternalAuth:
			a, err := gatewayExternalAuth(f.ExternalAuth)
			if err != nil {
				l.accepted.first(string(gatewayv1.ListenerReasonUnsupportedValue), field+".externalAuth"+err.Error())
				return
			}
			ref, berr := t.backendRef(l.declaredBy(), f.ExternalAuth.BackendRef, forHTTP)
			if berr != nil {
				// Served, answering 500, as a route's unresolved
				// reference is.
				reason := string(berr.reason)
				if berr.reason == gatewayv1.RouteReasonRefNotPermitted {
					reason = string(gatewayv1.ListenerReasonRefNotPermitted)
				}
				l.resolvedRefs.first(reason, fmt.Sprintf("%s.externalAuth.backendRef: %v", field, berr))
				ref = router.BackendRef{Invalid: true, Weight: 1}
			}
			a.Backend = ref
			l.filters = append(l.filters, router.Filter{Type: router.FilterExternalAuth, ExternalAuth: a})
		default:
			l.accepted.first(string(gatewayv1.ListenerReasonUnsupportedValue), fmt.Sprintf("%s.type: %s filters are not supported (hostgate has no filter extensions)", field, f.Type))
			return
		}
	}
}

// bindFilters records the listener filters of hostname on s, or says why
// a listener with them cannot share s: another listener serves hostname
// there with other filters, and one client request cannot run both.
func (s *socket) bindFilters(hostname string, filters []router.Filter) string {
	if s.filters == nil {
		s.filters = map[string][]router.Filter{}
	}
	bound, ok := s.filters[hostname]
	if ok && !reflect.DeepEqual(bound, filters) {
		return fmt.Sprintf("%s already serves %s with other listener filters", socketName(s.address, s.port), describeHostname(hostname))
	}
	s.filters[hostname] = filters
	return ""
}
