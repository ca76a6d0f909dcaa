package status

import (
	"reflect"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The merge functions turn a wanted status into the status to write over
// the current one. They keep the transition time of every condition whose
// status did not change, so that an unchanged status compares equal and
// is not written, and return false when nothing would change.

// conditionTypes is a set of condition types: those the Gateway API
// defines for one kind of status, which hostgate answers for.
type conditionTypes map[string]bool

func typesOf[T ~string](types ...T) conditionTypes {
	set := make(conditionTypes, len(types))
	for _, t := range types {
		set[string(t)] = true
	}
	return set
}

// The condition types of each status hostgate writes: every type the spec
// defines there, also those hostgate does not set (yet), since a condition
// of such a type is the controller's to remove. A condition of any other
// type was written by someone else (a policy controller, an operator's
// tool) and is kept as it is.
var (
	gatewayClassConditions = typesOf(gatewayv1.GatewayClassConditionStatusAccepted, gatewayv1.GatewayClassConditionStatusSupportedVersion)
	gatewayConditions      = typesOf(gatewayv1.GatewayConditionAccepted, gatewayv1.GatewayConditionProgrammed,
		gatewayv1.GatewayConditionResolvedRefs, gatewayv1.GatewayConditionReady, gatewayv1.GatewayConditionScheduled,
		gatewayv1.GatewayConditionAddressesAssigned, gatewayv1.GatewayConditionInsecureFrontendValidationMode)
	listenerSetConditions = typesOf(gatewayv1.ListenerSetConditionAccepted, gatewayv1.ListenerSetConditionProgrammed)
	listenerConditions    = typesOf(gatewayv1.ListenerConditionAccepted, gatewayv1.ListenerConditionProgrammed,
		gatewayv1.ListenerConditionResolvedRefs, gatewayv1.ListenerConditionConflicted, gatewayv1.ListenerConditionDetached,
		gatewayv1.ListenerConditionOverlappingTLSConfig, gatewayv1.ListenerConditionReady)
	routeParentConditions = typesOf(gatewayv1.RouteConditionAccepted, gatewayv1.RouteConditionResolvedRefs,
		gatewayv1.RouteConditionPartiallyInvalid)
	policyAncestorConditions = typesOf(gatewayv1.PolicyConditionAccepted, gatewayv1.BackendTLSPolicyConditionResolvedRefs)
)

// conditions returns wanted with the transition times of current where
// the status is the same, and now elsewhere, followed by the conditions of
// current whose type is not among owned, unchanged and in their order.
func conditions(current, wanted []metav1.Condition, owned conditionTypes, now metav1.Time) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(wanted))
	for _, w := range wanted {
		w.LastTransitionTime = now
		if c := meta.FindStatusCondition(current, w.Type); c != nil && c.Status == w.Status {
			w.LastTransitionTime = c.LastTransitionTime
		}
		out = append(out, w)
	}
	for _, c := range current {
		if !owned[c.Type] && meta.FindStatusCondition(wanted, c.Type) == nil {
			out = append(out, c)
		}
	}
	return out
}

func gatewayClassStatus(current, wanted gatewayv1.GatewayClassStatus, now metav1.Time) (gatewayv1.GatewayClassStatus, bool) {
	wanted.Conditions = conditions(current.Conditions, wanted.Conditions, gatewayClassConditions, now)
	return wanted, !equality.Semantic.DeepEqual(current, wanted)
}

func gatewayStatus(current, wanted gatewayv1.GatewayStatus, now metav1.Time) (gatewayv1.GatewayStatus, bool) {
	wanted.Conditions = conditions(current.Conditions, wanted.Conditions, gatewayConditions, now)
	wanted.Listeners = listenerStatuses(current.Listeners, wanted.Listeners, now)
	return wanted, !equality.Semantic.DeepEqual(current, wanted)
}

func listenerSetStatus(current, wanted gatewayv1.ListenerSetStatus, now metav1.Time) (gatewayv1.ListenerSetStatus, bool) {
	wanted.Conditions = conditions(current.Conditions, wanted.Conditions, listenerSetConditions, now)
	wanted.Listeners = listenerStatuses(current.Listeners, wanted.Listeners, now)
	return wanted, !equality.Semantic.DeepEqual(current, wanted)
}

// listenerStatuses returns wanted with the transition times of the
// conditions of the listener of the same name in current. The listeners
// of a Gateway and of a ListenerSet have the same fields.
func listenerStatuses[L gatewayv1.ListenerStatus | gatewayv1.ListenerEntryStatus](current, wanted []L, now metav1.Time) []L {
	out := make([]L, len(wanted))
	for i, w := range wanted {
		l := gatewayv1.ListenerStatus(w)
		var cur []metav1.Condition
		for _, c := range current {
			if c := gatewayv1.ListenerStatus(c); c.Name == l.Name {
				cur = c.Conditions
			}
		}
		l.Conditions = conditions(cur, l.Conditions, listenerConditions, now)
		out[i] = L(l)
	}
	return out
}

// routeStatus replaces the parents written by controller with wanted and
// keeps those of other controllers in place.
func routeStatus(current gatewayv1.RouteStatus, controller gatewayv1.GatewayController, wanted []gatewayv1.RouteParentStatus, now metav1.Time) (gatewayv1.RouteStatus, bool) {
	parents, changed := controllerEntries(current.Parents, wanted, controller, routeParentConditions, now,
		func(p *gatewayv1.RouteParentStatus) entry {
			return entry{&p.ParentRef, p.ControllerName, &p.Conditions}
		})
	return gatewayv1.RouteStatus{Parents: parents}, changed
}

// policyStatus replaces the ancestors written by controller with wanted
// and keeps those of other controllers in place.
func policyStatus(current gatewayv1.PolicyStatus, controller gatewayv1.GatewayController, wanted []gatewayv1.PolicyAncestorStatus, now metav1.Time) (gatewayv1.PolicyStatus, bool) {
	ancestors, changed := controllerEntries(current.Ancestors, wanted, controller, policyAncestorConditions, now,
		func(a *gatewayv1.PolicyAncestorStatus) entry {
			return entry{&a.AncestorRef, a.ControllerName, &a.Conditions}
		})
	return gatewayv1.PolicyStatus{Ancestors: ancestors}, changed
}

// entry is what controllerEntries reads and sets of a route's parent
// status or a policy's ancestor status.
type entry struct {
	ref        *gatewayv1.ParentReference
	controller gatewayv1.GatewayController
	conditions *[]metav1.Condition
}

// controllerEntries returns the entries of current that other
// controllers wrote, unchanged and in their order, followed by wanted
// with the transition times of controller's entries of the same
// reference, and whether that differs from current.
func controllerEntries[E any](current, wanted []E, controller gatewayv1.GatewayController, owned conditionTypes, now metav1.Time, parts func(*E) entry) ([]E, bool) {
	out := []E{}
	for i := range current {
		if parts(&current[i]).controller != controller {
			out = append(out, current[i])
		}
	}
	for _, w := range wanted {
		we := parts(&w)
		var cur []metav1.Condition
		for i := range current {
			if ce := parts(&current[i]); ce.controller == controller && reflect.DeepEqual(*ce.ref, *we.ref) {
				cur = *ce.conditions
			}
		}
		*we.conditions = conditions(cur, *we.conditions, owned, now)
		out = append(out, w)
	}
	if len(current) == 0 && len(out) == 0 {
		return current, false
	}
	return out, !equality.Semantic.DeepEqual(current, out)
}

func ingressStatus(current networkingv1.IngressStatus, wanted networkingv1.IngressLoadBalancerStatus) (networkingv1.IngressStatus, bool) {
	if equality.Semantic.DeepEqual(current.LoadBalancer, wanted) {
		return current, false
	}
	return networkingv1.IngressStatus{LoadBalancer: wanted}, true
}

// nowTime is the transition time of conditions that change; a second is
// the precision the API keeps.
func nowTime() metav1.Time { return metav1.NewTime(time.Now().Truncate(time.Second)) }
