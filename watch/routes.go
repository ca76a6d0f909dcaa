package watch

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/router"
)

// route is an HTTPRoute or GRPCRoute translated once, before it is
// attached to the listeners of its parents.
//
// A route is kept for every route object (in the memo, and in the last
// Snapshot's routes): what the object holds (its name, its creation time)
// is read from it rather than copied, its problems, which most routes have
// none of, are kept apart, and how it was attached is shared with routes
// attached alike. It was 320 B; it is 144 B.
type route struct {
	kind      router.Kind
	meta      *metav1.ObjectMeta
	common    *gatewayv1.CommonRouteSpec
	hostnames []string
	// ourStatus is whether the object's status has a parent entry of our
	// controller, which must be kept up to date or removed.
	ourStatus bool
	// parents are the parentRefs that name Gateways and ListenerSets:
	// what attaching reads of them in every translation, found once.
	// Never changed: routes with the same share one list (keep).
	parents []parent
	rules   []router.Rule
	// issues is nil but for routes with one (see issue).
	issues *routeIssues
	// attached is how the last translation with a memo attached it (see
	// memoParents).
	attached *attachment
	// backendTLS is nil but for the few routes whose backends speak TLS
	// or that BackendTLSPolicies target.
	backendTLS *routeBackendTLS
}

// routeIssues are what is wrong with a route.
type routeIssues struct {
	// resolvedRefs is the route's ResolvedRefs problem; invalid makes it
	// Accepted=False with reason UnsupportedValue on every parent.
	resolvedRefs, invalid problem
}

// issue returns r.issues, made if r has none yet.
func (r *route) issue() *routeIssues {
	if r.issues == nil {
		r.issues = &routeIssues{}
	}
	return r.issues
}

// resolvedRefs is r's ResolvedRefs problem, if any.
func (r *route) resolvedRefs() problem {
	if r.issues == nil {
		return problem{}
	}
	return r.issues.resolvedRefs
}

// invalid is r's problem in itself, if any.
func (r *route) invalid() problem {
	if r.issues == nil {
		return problem{}
	}
	return r.issues.invalid
}

// routeBackendTLS is what a route's backends that speak TLS take.
type routeBackendTLS struct {
	// policyServices are the Services of its backends that
	// BackendTLSPolicies target.
	policyServices []types.NamespacedName
	// certRules are its rules as placed on Gateways with a client
	// certificate for backends (see rulesOn).
	certRules []certRules
}

// backendTLSState returns r.backendTLS, made if r has none yet.
func (r *route) backendTLSState() *routeBackendTLS {
	if r.backendTLS == nil {
		r.backendTLS = &routeBackendTLS{}
	}
	return r.backendTLS
}

// id is the route's identity in the router's model.
func (r *route) id() router.RouteID {
	return router.RouteID{Kind: r.kind, Namespace: r.meta.Namespace, Name: r.meta.Name}
}

// from is where the route's references come from, for ReferenceGrants.
func (r *route) from() refFrom {
	return refFrom{kind: string(r.kind), namespace: r.meta.Namespace}
}

func (t *translator) newRoute(kind router.Kind, meta *metav1.ObjectMeta, common *gatewayv1.CommonRouteSpec, hostnames []gatewayv1.Hostname, status []gatewayv1.RouteParentStatus) *route {
	controller := gatewayv1.GatewayController(t.opts.GatewayController)
	r := &route{
		kind:   kind,
		meta:   meta,
		common: common,
		// Found once per object: with 10,000 routes, comparing every
		// status entry in every translation took a twentieth of a change.
		ourStatus: slices.ContainsFunc(status, func(p gatewayv1.RouteParentStatus) bool { return p.ControllerName == controller }),
	}
	parents := t.parentRefs[:0]
	for i, ref := range common.ParentRefs {
		kind := derefOr(ref.Kind, "Gateway")
		if (ref.Group != nil && *ref.Group != gatewayv1.GroupName) || (kind != "Gateway" && kind != "ListenerSet") {
			continue
		}
		namespace := meta.Namespace
		if ref.Namespace != nil {
			namespace = string(*ref.Namespace)
		}
		parents = append(parents, parent{
			index:       i,
			name:        types.NamespacedName{Namespace: namespace, Name: string(ref.Name)},
			listenerSet: kind == "ListenerSet",
			section:     ref.SectionName,
			port:        ref.Port,
		})
	}
	t.parentRefs = parents
	if len(parents) > 0 {
		r.parents = keep(&t.lastParentRefs, parents)
	}
	r.hostnames = sized[string](len(hostnames))
	for _, h := range hostnames {
		r.hostnames = append(r.hostnames, strings.ToLower(string(h)))
	}
	return r
}

// sized is an empty list with room for n elements, nil for none. The
// lists of a translated route are kept for as long as it is: grown by
// appends, they kept up to twice the room they use (a third rule took a
// route's rules from 352 B to 704 B).
func sized[E any](n int) []E {
	if n == 0 {
		return nil
	}
	return make([]E, 0, n)
}

func (r *route) unsupported(format string, args ...any) {
	r.issue().invalid.first(string(gatewayv1.RouteReasonUnsupportedValue), fmt.Sprintf(format, args...))
}

// backend resolves one backendRef; a reference that cannot be resolved
// stays in the rule as an invalid backend, which answers 500 for its share
// of the traffic as the spec asks.
func (t *translator) backend(r *route, field string, ref gatewayv1.BackendRef, grpc bool) router.BackendRef {
	return t.backendFor(r, field, ref, useFor(grpc))
}

// backendFor is backend for a use.
func (t *translator) backendFor(r *route, field string, ref gatewayv1.BackendRef, use backendUse) router.BackendRef {
	weight := int32(1)
	if ref.Weight != nil {
		weight = *ref.Weight
	}
	if use != forStream && use != forDatagram {
		t.notePolicyService(r, &ref.BackendObjectReference)
	}
	b, err := t.backendRef(r.from(), ref.BackendObjectReference, use)
	if err != nil {
		r.issue().resolvedRefs.first(string(err.reason), fmt.Sprintf("%s: %v", field, err))
		return router.BackendRef{Invalid: true, Weight: weight}
	}
	b.Weight = weight
	return b
}

func (t *translator) routes() {
	t.reports.HTTPRoutes = kindRoutes(t, spliceHTTP, &t.order.httpRoutes, len(t.objs.httpRoutes), t.httpRoute,
		func(r *Reports) []*RouteReport[*gatewayv1.HTTPRoute] { return r.HTTPRoutes })
	t.reports.GRPCRoutes = kindRoutes(t, spliceGRPC, &t.order.grpcRoutes, len(t.objs.grpcRoutes), t.grpcRoute,
		func(r *Reports) []*RouteReport[*gatewayv1.GRPCRoute] { return r.GRPCRoutes })
	t.finishRoutePorts()
	t.splice = nil
	t.reports.TLSRoutes = translateRoutes(t, t.objs.tlsRoutes, t.tlsRoute)
	t.reports.TCPRoutes = translateRoutes(t, t.objs.tcpRoutes, t.tcpRoute)
	t.reports.UDPRoutes = translateRoutes(t, t.objs.udpRoutes, t.udpRoute)
}

// translateRoutes translates and attaches the routes of one kind and
// returns the reports of those that are ours.
func translateRoutes[T RouteObject](t *translator, objs []T, build func(T) *route) []*RouteReport[T] {
	return attachRoutes(t, objs, build, false)
}

// attachRoutes is translateRoutes, counting the endpoint entries each
// route registered when countPorts is set.
func attachRoutes[T RouteObject](t *translator, objs []T, build func(T) *route, countPorts bool) []*RouteReport[T] {
	if len(objs) == 0 {
		return nil
	}
	// Most routes are usually ours: room for all at once rather than a
	// dozen copies of a growing list of 10,000. The reports lie in one
	// array, in their order, so that the walks over all of them (the
	// status writer's, Problems) read memory in sequence; it never grows,
	// so the pointers into it stay.
	reports := make([]*RouteReport[T], 0, len(objs))
	inOrder := make([]RouteReport[T], 0, len(objs))
	for _, obj := range objs {
		r, e := memoizedEntry(t, obj, func() *route { return build(obj) })
		if countPorts {
			t.countPorts(e, 1)
		}
		if parents, ours := t.attachRoute(r); ours {
			inOrder = append(inOrder, RouteReport[T]{Object: obj, Parents: parents})
			reports = append(reports, &inOrder[len(inOrder)-1])
		}
	}
	return reports
}

// finish runs the router's checks on the translated route.
func (r *route) finish() {
	if !r.invalid().ok() {
		return
	}
	validate := router.Validate
	if r.kind.IsL4() {
		validate = router.ValidateL4
	}
	if err := validate(&router.Route{ID: r.id(), Hostnames: r.hostnames, Rules: r.rules}); err != nil {
		msg := err.Error()
		// The router names fields of its own model; these two are the
		// object's spec fields of the same name.
		if strings.HasPrefix(msg, "rules") || strings.HasPrefix(msg, "hostnames") {
			msg = "spec." + msg
		}
		r.unsupported("%s", msg)
	}
}

// attachRoute attaches r to the listeners its parentRefs select and
// returns the parent statuses; ours is false when r has nothing to do with
// our Gateways.
func (t *translator) attachRoute(r *route) (parents []gatewayv1.RouteParentStatus, ours bool) {
	controller := gatewayv1.GatewayController(t.opts.GatewayController)
	ours = r.ourStatus
	// Scratch space, as for most routes the outcomes are those of the
	// last translation: one allocation for each of 10,000 routes was most
	// of a translation's allocations.
	outcomes := t.outcomes[:0]
	t.attachedTo, t.placed = t.attachedTo[:0], t.placed[:0]
	for i := range r.parents {
		ref := &r.parents[i]
		var accepted problem
		if ref.listenerSet {
			s := t.listenerSets[ref.name]
			if s == nil {
				continue
			}
			t.addPolicyAncestors(r, s.gw)
			if !s.accepted.ok() {
				// Not attached to its Gateway (NotAllowed).
				accepted.first(string(gatewayv1.RouteReasonNoMatchingParent), fmt.Sprintf("ListenerSet %s/%s: %s", s.obj.Namespace, s.obj.Name, s.accepted.message))
			} else {
				accepted = t.attachToListeners(r, s.gw, s.listeners, parentName{"ListenerSet", s.obj.Namespace, s.obj.Name}, ref)
			}
		} else {
			g := t.gateways[ref.name]
			if g == nil {
				continue
			}
			t.addPolicyAncestors(r, g)
			accepted = t.attachToListeners(r, g, g.listeners, parentName{"Gateway", g.obj.Namespace, g.obj.Name}, ref)
		}
		ours = true
		if accepted.ok() {
			// What is wrong in the route itself names its own field.
			accepted = r.invalid()
		} else {
			accepted.message = fmt.Sprintf("spec.parentRefs[%d]: %s", ref.index, accepted.message)
		}
		outcomes = append(outcomes, parentOutcome{ref.index, accepted})
	}
	t.outcomes = outcomes
	if t.next == nil {
		return t.parentStatuses(r, controller, outcomes), ours
	}
	// Only a translation with a memo has a next one to splice into it:
	// without, the listeners counted would be a list for each route for
	// nothing.
	counted := t.counting[:0]
	for _, l := range t.attachedTo {
		counted = append(counted, l.index)
	}
	t.counting = counted
	return t.memoParents(r, controller, outcomes, counted), ours
}

// parentOutcome is whether a route was accepted by the Gateway of one of
// its parentRefs.
type parentOutcome struct {
	ref      int
	accepted problem
}

// parentStatuses are the status entries of r for the parentRefs that name
// our Gateways and their ListenerSets.
func (t *translator) parentStatuses(r *route, controller gatewayv1.GatewayController, outcomes []parentOutcome) []gatewayv1.RouteParentStatus {
	var parents []gatewayv1.RouteParentStatus
	gen := r.meta.Generation
	for _, o := range outcomes {
		ref, accepted := r.common.ParentRefs[o.ref], o.accepted
		st := gatewayv1.RouteParentStatus{ParentRef: ref, ControllerName: controller}
		if accepted.ok() && r.resolvedRefs().ok() {
			st.Conditions = t.goodConditions(gen)
			parents = append(parents, st)
			continue
		}
		st.Conditions = make([]metav1.Condition, 0, 2)
		if accepted.ok() {
			setCondition(&st.Conditions, acceptedCondition(gen))
		} else {
			setCondition(&st.Conditions, condition(gatewayv1.RouteConditionAccepted, false, accepted.reason, gen, accepted.message))
		}
		if r.resolvedRefs().ok() {
			setCondition(&st.Conditions, resolvedCondition(gen))
		} else {
			setCondition(&st.Conditions, condition(gatewayv1.RouteConditionResolvedRefs, false, r.resolvedRefs().reason, gen, r.resolvedRefs().message))
		}
		parents = append(parents, st)
	}
	return parents
}

// goodConditions are the conditions of a route that a parent accepted and
// whose references all resolve, at generation. Most routes have these, at
// the same generation: with a memo one slice, never changed, serves them
// all, where a copy for each was 2 MB of 10,000 routes' status entries.
func (t *translator) goodConditions(generation int64) []metav1.Condition {
	if t.next == nil {
		return []metav1.Condition{acceptedCondition(generation), resolvedCondition(generation)}
	}
	shared, ok := t.next.conditions[generation]
	if !ok {
		if shared, ok = t.prev.conditions[generation]; !ok {
			shared = []metav1.Condition{acceptedCondition(generation), resolvedCondition(generation)}
		}
		t.next.conditions[generation] = shared
	}
	return shared
}

func acceptedCondition(generation int64) metav1.Condition {
	return condition(gatewayv1.RouteConditionAccepted, true, gatewayv1.RouteReasonAccepted, generation, "accepted")
}

func resolvedCondition(generation int64) metav1.Condition {
	return condition(gatewayv1.RouteConditionResolvedRefs, true, gatewayv1.RouteReasonResolvedRefs, generation, "all references resolved")
}

// parent is a parentRef of a route that names a Gateway or a ListenerSet.
type parent struct {
	index       int // in spec.parentRefs
	name        types.NamespacedName
	listenerSet bool
	section     *gatewayv1.SectionName
	port        *gatewayv1.PortNumber
}

// parentName names a route's parent in a problem: "Gateway infra/web".
// Its parts are kept apart until a problem needs them: joined for every
// route of every translation, they were half of its allocations.
type parentName struct{ kind, namespace, name string }

func (p parentName) String() string { return p.kind + " " + p.namespace + "/" + p.name }

// attachToListeners attaches r to the listeners of g that ref selects
// among listeners (those of the parent it names, described by
// parentName), that allow it and whose hostnames intersect its own, and
// counts it on every listener that allows it.
func (t *translator) attachToListeners(r *route, g *gateway, listeners []*listener, parentName parentName, ref *parent) problem {
	var selected, allowed int
	var matched bool
	for _, l := range listeners {
		if (ref.section != nil && *ref.section != l.spec.Name) || (ref.port != nil && *ref.port != l.spec.Port) {
			continue
		}
		selected++
		if !slices.Contains(l.kinds, r.kind) || !l.namespaces(r.meta.Namespace) {
			continue
		}
		allowed++
		hostnames, ok := hostnamesOn(l.hostname, r.hostnames)
		if !ok {
			continue
		}
		// attachedRoutes counts accepted routes only, once however many
		// parentRefs select the listener: one whose hostnames miss the
		// listener's is not attached to it, and one that is invalid in
		// itself is refused (Accepted=False) by every parent.
		if r.invalid().ok() && !slices.Contains(t.attachedTo, l) {
			t.attachedTo = append(t.attachedTo, l)
			l.attachedRoutes++
		}
		matched = true
		if !r.invalid().ok() {
			continue
		}
		rules := t.rulesOn(r, g)
		for _, s := range l.sockets {
			t.place(s, router.Route{ID: r.id(), Created: r.meta.CreationTimestamp.Time, Hostnames: hostnames, Listener: l.hostname, Rules: rules})
		}
	}
	var p problem
	switch {
	case selected == 0:
		p.first(string(gatewayv1.RouteReasonNoMatchingParent), fmt.Sprintf("%s has no listener %s", parentName, describeParentRef(r.common.ParentRefs[ref.index])))
	case allowed == 0:
		p.first(string(gatewayv1.RouteReasonNotAllowedByListeners), fmt.Sprintf("no listener of %s allows %s routes from namespace %s", parentName, r.kind, r.meta.Namespace))
	case !matched:
		p.first(string(gatewayv1.RouteReasonNoMatchingListenerHostname), fmt.Sprintf("no listener hostname of %s matches spec.hostnames", parentName))
	}
	return p
}

func describeParentRef(ref gatewayv1.ParentReference) string {
	var parts []string
	if ref.SectionName != nil {
		parts = append(parts, fmt.Sprintf("named %q", *ref.SectionName))
	}
	if ref.Port != nil {
		parts = append(parts, fmt.Sprintf("on port %d", *ref.Port))
	}
	return strings.Join(parts, " ")
}

// hostnamesOn returns the hostnames of a route that intersect a listener's
// hostname, as the route wrote them: nil means any host, and ok is false
// when none intersects. They are not narrowed to the listener's: the
// listener's own scope in the table already admits only its hosts, and
// within it a route's own hostname decides precedence (an exact hostname
// over a wildcard, a longer wildcard over a shorter, any host last), also
// when a narrowing would make them equal
// (GatewayRouteHostnameIntersectionPrecedence).
func hostnamesOn(listenerHost string, routeHosts []string) (hostnames []string, ok bool) {
	if listenerHost == "" || len(routeHosts) == 0 {
		return routeHosts, true
	}
	for i, h := range routeHosts {
		if intersectHostname(listenerHost, h) == "" {
			// Only a route with a hostname outside the listener's
			// pays for a list of its own.
			hostnames = slices.Clone(routeHosts[:i])
			for _, h := range routeHosts[i+1:] {
				if intersectHostname(listenerHost, h) != "" {
					hostnames = append(hostnames, h)
				}
			}
			return hostnames, len(hostnames) > 0
		}
	}
	return routeHosts, true
}

// intersectHostname returns the more specific of two hostnames when one
// covers the other (a Gateway API wildcard covers one or more labels), or
// "" when they are disjoint.
func intersectHostname(a, b string) string {
	switch {
	case a == b:
		return a
	case covers(a, b):
		return b
	case covers(b, a):
		return a
	}
	return ""
}

func covers(wildcard, host string) bool {
	suffix, ok := strings.CutPrefix(wildcard, "*")
	return ok && len(host) > len(suffix) && strings.HasSuffix(host, suffix)
}
