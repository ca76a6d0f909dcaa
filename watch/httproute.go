package watch

import (
	"fmt"
	"reflect"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/router"
)

func (t *translator) httpRoute(obj *gatewayv1.HTTPRoute) *route {
	r := t.newRoute(router.KindHTTPRoute, &obj.ObjectMeta, &obj.Spec.CommonRouteSpec, obj.Spec.Hostnames, obj.Status.Parents)
	r.rules = sized[router.Rule](len(obj.Spec.Rules))
	for i, rule := range obj.Spec.Rules {
		field := fmt.Sprintf("spec.rules[%d]", i)
		rr := router.Rule{Name: string(derefOr(rule.Name, "")), Matches: t.httpMatches(rule.Matches)}
		backends := make([]ruleBackend, len(rule.BackendRefs))
		for j, b := range rule.BackendRefs {
			backends[j] = ruleBackend{b.BackendRef, b.Filters}
		}
		t.ruleActions(r, field, &rr, rule.Filters, backends, false)
		if to := rule.Timeouts; to != nil {
			var err error
			if rr.Timeouts.Request, err = parseDuration(to.Request); err != nil {
				r.unsupported("%s.timeouts.request: %v", field, err)
			}
			if rr.Timeouts.BackendRequest, err = parseDuration(to.BackendRequest); err != nil {
				r.unsupported("%s.timeouts.backendRequest: %v", field, err)
			}
		}
		if rt := rule.Retry; rt != nil {
			rr.Retry = retry(r, field+".retry", rt)
		}
		r.rules = append(r.rules, rr)
	}
	r.finish()
	return r
}

// ruleBackend is a backendRef of an HTTPRoute or GRPCRoute rule, with
// GRPCRoute filters in their HTTPRoute form.
type ruleBackend struct {
	ref     gatewayv1.BackendRef
	filters []gatewayv1.HTTPRouteFilter
}

// ruleActions fills the filters and backends of rr, the part of a rule that
// HTTPRoute and GRPCRoute share.
func (t *translator) ruleActions(r *route, field string, rr *router.Rule, filters []gatewayv1.HTTPRouteFilter, backends []ruleBackend, grpc bool) {
	var broken bool
	rr.Filters, broken = t.httpFilters(r, field+".filters", filters, grpc)
	rr.Backends = sized[router.BackendRef](len(backends))
	for j, b := range backends {
		bfield := fmt.Sprintf("%s.backendRefs[%d]", field, j)
		ref := t.backend(r, bfield, b.ref, grpc)
		var refBroken bool
		ref.Filters, refBroken = t.httpFilters(r, bfield+".filters", b.filters, grpc)
		ref.Invalid = ref.Invalid || refBroken
		rr.Backends = append(rr.Backends, ref)
	}
	if broken {
		breakRule(rr)
		return
	}
	// Rules that send to the same backends share one list, which nothing
	// changes: routes commonly send every path to one Service, and a list
	// for each rule was 112 B of each kept.
	for i := range r.rules {
		if sameBackends(r.rules[i].Backends, rr.Backends) {
			rr.Backends = r.rules[i].Backends
			return
		}
	}
}

// sameBackends reports whether a and b, not empty, are equal and without
// filters: proxy/ keeps the state of some filters (rate limits) by the
// filter's pointer, which rules must not share.
func sameBackends(a, b []router.BackendRef) bool {
	if len(a) == 0 || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || len(a[i].Filters) > 0 || len(b[i].Filters) > 0 || !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

// breakRule makes a rule answer 500, as the spec asks of a rule whose
// filter cannot be resolved: the filter must not be skipped.
func breakRule(rr *router.Rule) {
	rr.Filters = nil
	rr.Backends = []router.BackendRef{{Invalid: true, Weight: 1}}
}

// defaultRetryBackoff is the wait before a first retry where the route
// names none, which the Gateway API leaves to the implementation: Envoy's
// default, short enough for a request timeout of a second to hold a few
// retries.
const defaultRetryBackoff = 25 * time.Millisecond

// retry translates a rule's retry policy. attempts defaults to 1, as the
// CRD's default does where no API server applies it (file mode); the
// router checks the ranges.
func retry(r *route, field string, rt *gatewayv1.HTTPRouteRetry) *router.Retry {
	out := &router.Retry{Attempts: derefOr(rt.Attempts, 1), Backoff: defaultRetryBackoff}
	for _, code := range rt.Codes {
		out.Codes = append(out.Codes, int(code))
	}
	if rt.Backoff != nil {
		var err error
		if out.Backoff, err = parseDuration(rt.Backoff); err != nil {
			r.unsupported("%s.backoff: %v", field, err)
		}
	}
	return out
}

func parseDuration(d *gatewayv1.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	v, err := time.ParseDuration(string(*d))
	if err == nil && v < 0 {
		err = fmt.Errorf("%q: negative", *d)
	}
	return v, err
}

// httpMatches translates the matches of a rule. A rule of one match of a
// path (and method) alone gets the list of the same match made before in
// the translation, which nothing changes: many routes match the same
// paths ("/", "/api"), and a list of its own was 96 B of each route kept.
func (t *translator) httpMatches(matches []gatewayv1.HTTPRouteMatch) []router.Match {
	if len(matches) == 1 {
		m := httpMatch(matches[0])
		if m.Headers != nil || m.Query != nil {
			return []router.Match{m}
		}
		key := pathMatch{m.Path, m.Method}
		shared, ok := t.pathMatches[key]
		if !ok {
			if t.pathMatches == nil {
				t.pathMatches = map[pathMatch][]router.Match{}
			}
			shared = []router.Match{m}
			t.pathMatches[key] = shared
		}
		return shared
	}
	out := sized[router.Match](len(matches))
	for _, m := range matches {
		out = append(out, httpMatch(m))
	}
	return out
}

// pathMatch is a match of a path and method alone.
type pathMatch struct {
	path   router.PathMatch
	method string
}

func httpMatch(m gatewayv1.HTTPRouteMatch) router.Match {
	out := router.Match{Path: router.PathMatch{Type: router.PathPrefix, Value: "/"}}
	if p := m.Path; p != nil {
		switch derefOr(p.Type, gatewayv1.PathMatchPathPrefix) {
		case gatewayv1.PathMatchExact:
			out.Path.Type = router.PathExact
		case gatewayv1.PathMatchRegularExpression:
			out.Path.Type = router.PathRegularExpression
		}
		out.Path.Value = derefOr(p.Value, "/")
	}
	if m.Method != nil {
		out.Method = string(*m.Method)
	}
	for _, h := range m.Headers {
		out.Headers = append(out.Headers, valueMatch(derefOr(h.Type, gatewayv1.HeaderMatchExact) == gatewayv1.HeaderMatchRegularExpression, string(h.Name), h.Value))
	}
	for _, q := range m.QueryParams {
		out.Query = append(out.Query, valueMatch(derefOr(q.Type, gatewayv1.QueryParamMatchExact) == gatewayv1.QueryParamMatchRegularExpression, string(q.Name), q.Value))
	}
	return out
}

func valueMatch(regex bool, name, value string) router.ValueMatch {
	vm := router.ValueMatch{Type: router.MatchExact, Name: name, Value: value}
	if regex {
		vm.Type = router.MatchRegularExpression
	}
	return vm
}

// httpFilters translates HTTPRoute filters (and GRPCRoute's, a subset).
// broken is true when a filter references something that does not exist,
// so the rule must answer 500.
func (t *translator) httpFilters(r *route, field string, filters []gatewayv1.HTTPRouteFilter, grpc bool) (out []router.Filter, broken bool) {
	for i, f := range filters {
		ffield := fmt.Sprintf("%s[%d]", field, i)
		switch f.Type {
		case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
			out = append(out, router.Filter{Type: router.FilterRequestHeaderModifier, RequestHeaders: headerModifier(f.RequestHeaderModifier)})
		case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
			out = append(out, router.Filter{Type: router.FilterResponseHeaderModifier, ResponseHeaders: headerModifier(f.ResponseHeaderModifier)})
		case gatewayv1.HTTPRouteFilterRequestRedirect:
			out = append(out, router.Filter{Type: router.FilterRequestRedirect, Redirect: redirect(f.RequestRedirect)})
		case gatewayv1.HTTPRouteFilterURLRewrite:
			out = append(out, router.Filter{Type: router.FilterURLRewrite, Rewrite: rewrite(f.URLRewrite)})
		case gatewayv1.HTTPRouteFilterRequestMirror:
			out = append(out, t.mirror(r, ffield+".requestMirror", f.RequestMirror, grpc))
		case gatewayv1.HTTPRouteFilterCORS:
			// GRPCRoute has no CORS filter; its filters come here
			// converted, type and all.
			if grpc {
				r.unsupported("%s.type: %s filters are not supported in a GRPCRoute", ffield, f.Type)
				continue
			}
			c, err := cors(f.CORS)
			if err != nil {
				r.unsupported("%s.cors.%v", ffield, err)
				continue
			}
			out = append(out, router.Filter{Type: router.FilterCORS, CORS: c})
		case gatewayv1.HTTPRouteFilterExternalAuth:
			if grpc {
				r.unsupported("%s.type: %s filters are not supported in a GRPCRoute", ffield, f.Type)
				broken = true
				continue
			}
			auth, fails := t.routeExternalAuth(r, ffield, f.ExternalAuth)
			if fails {
				broken = true
				continue
			}
			out = append(out, auth)
		case gatewayv1.HTTPRouteFilterExtensionRef:
			broken = true
			r.issue().resolvedRefs.first(string(gatewayv1.RouteReasonInvalidKind), fmt.Sprintf("%s.extensionRef: hostgate has no filter extensions", ffield))
		default:
			r.unsupported("%s.type: %s filters are not supported", ffield, f.Type)
		}
	}
	return out, broken
}

func headerModifier(h *gatewayv1.HTTPHeaderFilter) *router.HeaderModifier {
	if h == nil {
		return &router.HeaderModifier{}
	}
	m := &router.HeaderModifier{Remove: h.Remove}
	for _, s := range h.Set {
		m.Set = append(m.Set, router.Header{Name: string(s.Name), Value: s.Value})
	}
	for _, a := range h.Add {
		m.Add = append(m.Add, router.Header{Name: string(a.Name), Value: a.Value})
	}
	return m
}

func pathModifier(p *gatewayv1.HTTPPathModifier) *router.PathModifier {
	switch {
	case p == nil:
		return nil
	case p.Type == gatewayv1.PrefixMatchHTTPPathModifier:
		return &router.PathModifier{Type: router.ReplacePrefixMatch, Value: derefOr(p.ReplacePrefixMatch, "")}
	}
	return &router.PathModifier{Type: router.ReplaceFullPath, Value: derefOr(p.ReplaceFullPath, "")}
}

func redirect(f *gatewayv1.HTTPRequestRedirectFilter) *router.Redirect {
	if f == nil {
		return &router.Redirect{StatusCode: 302}
	}
	return &router.Redirect{
		Scheme:     derefOr(f.Scheme, ""),
		Hostname:   string(derefOr(f.Hostname, "")),
		Port:       int(derefOr(f.Port, 0)),
		Path:       pathModifier(f.Path),
		StatusCode: derefOr(f.StatusCode, 302),
	}
}

func rewrite(f *gatewayv1.HTTPURLRewriteFilter) *router.Rewrite {
	if f == nil {
		return &router.Rewrite{}
	}
	return &router.Rewrite{Hostname: string(derefOr(f.Hostname, "")), Path: pathModifier(f.Path)}
}

// defaultCORSMaxAge is what the Gateway API sends when maxAge is not
// set; the CRD defaults the field, files have no such default.
const defaultCORSMaxAge = 5 * time.Second

// cors translates a CORS filter; the error names the field it found
// wrong, relative to the filter's cors.
func cors(f *gatewayv1.HTTPCORSFilter) (*router.CORS, error) {
	c := &router.CORS{MaxAge: defaultCORSMaxAge}
	if f == nil {
		return c, nil
	}
	for i, o := range f.AllowOrigins {
		origin, err := router.ParseOrigin(string(o))
		if err != nil {
			return nil, fmt.Errorf("allowOrigins[%d] %w", i, err)
		}
		c.AllowOrigins = append(c.AllowOrigins, origin)
	}
	c.AllowMethods = plainStrings(f.AllowMethods)
	c.AllowHeaders = plainStrings(f.AllowHeaders)
	c.ExposeHeaders = plainStrings(f.ExposeHeaders)
	c.AllowCredentials = derefOr(f.AllowCredentials, false)
	if f.MaxAge != 0 {
		c.MaxAge = time.Duration(f.MaxAge) * time.Second
	}
	return c, nil
}

// plainStrings converts a list of one of the API's string types.
func plainStrings[S ~string](in []S) []string {
	var out []string
	for _, s := range in {
		out = append(out, string(s))
	}
	return out
}

// mirror translates a RequestMirror filter; percent and fraction become
// a fraction of 100 or of the given denominator.
func (t *translator) mirror(r *route, field string, f *gatewayv1.HTTPRequestMirrorFilter, grpc bool) router.Filter {
	m := &router.Mirror{}
	if f != nil {
		m.Backend = t.backend(r, field+".backendRef", gatewayv1.BackendRef{BackendObjectReference: f.BackendRef}, grpc)
		switch {
		case f.Percent != nil:
			m.Numerator, m.Denominator = *f.Percent, 100
		case f.Fraction != nil:
			m.Numerator, m.Denominator = f.Fraction.Numerator, derefOr(f.Fraction.Denominator, 100)
		}
	}
	return router.Filter{Type: router.FilterRequestMirror, Mirror: m}
}
