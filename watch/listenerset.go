package watch

// ListenerSets: listeners that a ListenerSet, often in another namespace,
// adds to a Gateway of ours.
//
// A ListenerSet is ours when its parentRef names a Gateway of one of our
// classes; the Gateway's spec.allowedListeners decides whether it is
// attached (by default it is not: NotAllowed). The listeners of an
// attached ListenerSet are validated and bound as the Gateway's own, on
// its addresses, and join its listeners in the order that decides which
// of two conflicting listeners is served: the Gateway's own first, then
// the ListenerSets oldest first, then by namespace/name (the store's
// order). Their allowedRoutes "Same" and the ReferenceGrants of their
// certificateRefs are those of the ListenerSet's namespace. Routes reach
// them only through a parentRef of kind ListenerSet: a parentRef to the
// Gateway selects its own listeners, and no sectionName finds a
// ListenerSet's listener there.

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// listenerSetReasonParentNotProgrammed is the Programmed reason of a
// ListenerSet accepted with a Gateway that serves nothing; the API names
// it in the condition's documentation but declares no constant.
const listenerSetReasonParentNotProgrammed gatewayv1.ListenerSetConditionReason = "ParentNotProgrammed"

// listenerSet is a ListenerSet of one of our Gateways while it is
// translated.
type listenerSet struct {
	obj *gatewayv1.ListenerSet
	gw  *gateway
	// specs are its entries as the Listeners the validation reads, and
	// listeners theirs, for an attached ListenerSet only.
	specs     []gatewayv1.Listener
	listeners []*listener
	accepted  problem
	status    gatewayv1.ListenerSetStatus
}

// findListenerSets gives each Gateway of ours the ListenerSets whose
// parentRef names it, in precedence order.
func (t *translator) findListenerSets() {
	for _, obj := range t.objs.listenerSets {
		ref := obj.Spec.ParentRef
		if (ref.Group != nil && *ref.Group != gatewayv1.GroupName) || (ref.Kind != nil && *ref.Kind != "Gateway") {
			continue
		}
		key := namespacedName(obj)
		key.Name = string(ref.Name)
		if ref.Namespace != nil {
			key.Namespace = string(*ref.Namespace)
		}
		g := t.gateways[key]
		if g == nil {
			continue
		}
		s := &listenerSet{obj: obj, gw: g}
		g.listenerSets = append(g.listenerSets, s)
		t.listenerSets[namespacedName(obj)] = s
	}
}

// allowedListeners is g's spec.allowedListeners.namespaces, None when
// unset as the API's default says.
func allowedListeners(gw *gatewayv1.Gateway) (gatewayv1.FromNamespaces, *metav1.LabelSelector) {
	al := gw.Spec.AllowedListeners
	if al == nil || al.Namespaces == nil || al.Namespaces.From == nil {
		return gatewayv1.NamespacesFromNone, nil
	}
	return *al.Namespaces.From, al.Namespaces.Selector
}

// allowsListenerSets reports whether gw lets any ListenerSet attach, and
// so publishes how many did.
func allowsListenerSets(gw *gatewayv1.Gateway) bool {
	from, _ := allowedListeners(gw)
	return from != gatewayv1.NamespacesFromNone
}

// attachListenerSets validates the listeners of the ListenerSets that g
// allows and returns g's listeners followed by theirs, in precedence
// order.
func (t *translator) attachListenerSets(g *gateway) []*listener {
	all := g.listeners
	if len(g.listenerSets) == 0 {
		return all
	}
	from, selector := allowedListeners(g.obj)
	allowed, err := t.namespaceFilter(from, selector, g.obj.Namespace)
	// Appended to apart from g.listeners, which routes' Gateway parentRefs
	// select from.
	all = slices.Clip(all)
	for _, s := range g.listenerSets {
		if !allowed(s.obj.Namespace) {
			why := fmt.Sprintf("spec.parentRef: Gateway %s/%s does not allow ListenerSets of namespace %s (its spec.allowedListeners.namespaces.from is %s)",
				g.obj.Namespace, g.obj.Name, s.obj.Namespace, from)
			if err != nil {
				why = fmt.Sprintf("spec.parentRef: Gateway %s/%s allows no ListenerSets: its spec.allowedListeners.namespaces.selector is %v", g.obj.Namespace, g.obj.Name, err)
			}
			s.accepted.first(string(gatewayv1.ListenerSetReasonNotAllowed), why)
			continue
		}
		s.specs = make([]gatewayv1.Listener, len(s.obj.Spec.Listeners))
		for i, entry := range s.obj.Spec.Listeners {
			s.specs[i] = gatewayv1.Listener(entry)
			s.listeners = append(s.listeners, t.listener(g, s, &s.specs[i]))
		}
		all = append(all, s.listeners...)
	}
	return all
}

// finish makes the status of s once routes have attached, gwAccepted
// being what keeps its Gateway from being accepted and notServed what
// keeps the Gateway's valid listeners from being served.
func (s *listenerSet) finish(gwAccepted problem, notServed string) {
	gen := s.obj.Generation
	if !gwAccepted.ok() {
		s.accepted.first(string(gatewayv1.ListenerSetReasonParentNotAccepted),
			fmt.Sprintf("spec.parentRef: Gateway %s/%s is not accepted: %s", s.gw.obj.Namespace, s.gw.obj.Name, gwAccepted.message))
	}
	st := gatewayv1.ListenerSetStatus{}
	valid, serving := 0, 0
	for _, l := range s.listeners {
		st.Listeners = append(st.Listeners, gatewayv1.ListenerEntryStatus(listenerStatus(l, gen, notServed)))
		if l.valid() {
			valid++
		}
		if l.serving() {
			serving++
		}
	}
	if valid == 0 {
		s.accepted.first(string(gatewayv1.ListenerSetReasonListenersNotValid), "spec.listeners: no listener is valid")
	}
	switch {
	case !s.accepted.ok():
		setCondition(&st.Conditions, condition(gatewayv1.ListenerSetConditionAccepted, false, s.accepted.reason, gen, s.accepted.message))
	case valid < len(s.listeners):
		setCondition(&st.Conditions, condition(gatewayv1.ListenerSetConditionAccepted, true, gatewayv1.ListenerSetReasonListenersNotValid, gen,
			fmt.Sprintf("%d of %d listeners are not valid", len(s.listeners)-valid, len(s.listeners))))
	default:
		setCondition(&st.Conditions, condition(gatewayv1.ListenerSetConditionAccepted, true, gatewayv1.ListenerSetReasonAccepted, gen, "accepted by hostgate"))
	}
	switch {
	case !s.accepted.ok():
		setCondition(&st.Conditions, condition(gatewayv1.ListenerSetConditionProgrammed, false, s.accepted.reason, gen, s.accepted.message))
	case serving == 0:
		setCondition(&st.Conditions, condition(gatewayv1.ListenerSetConditionProgrammed, false, listenerSetReasonParentNotProgrammed, gen, notServed))
	default:
		setCondition(&st.Conditions, condition(gatewayv1.ListenerSetConditionProgrammed, true, gatewayv1.ListenerSetReasonProgrammed, gen,
			fmt.Sprintf("%d of %d listeners are programmed", serving, len(s.listeners))))
	}
	s.status = st
}
