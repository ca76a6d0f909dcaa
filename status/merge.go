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
	listenerConditions = typesOf(gatewayv1.ListenerConditionAccepted, gatewayv1.ListenerConditionProgrammed,
		gatewayv1.ListenerConditionResolvedRefs, gatewayv1.ListenerConditionConflicted, gatewayv1.ListenerConditionDetached,
		gatewayv1.ListenerConditionOverlappingTLSConfig, gatewayv1.ListenerConditionReady)
	routeParentConditions = typesOf(gatewayv1.RouteConditionAccepted, gatewayv1.RouteConditionResolvedRefs,
		gatewayv1.RouteConditionPartiallyInvalid)
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
	listeners := make([]gatewayv1.ListenerStatus, len(wanted.Listeners))
	for i, l := range wanted.Listeners {
		var cur []metav1.Condition
		for _, c := range current.Listeners {
			if c.Name == l.Name {
				cur = c.Conditions
			}
		}
		l.Conditions = conditions(cur, l.Conditions, listenerConditions, now)
		listeners[i] = l
	}
	wanted.Listeners = listeners
	// Fields that other writers may own are kept.
	wanted.AttachedListenerSets = current.AttachedListenerSets
	return wanted, !equality.Semantic.DeepEqual(current, wanted)
}

// routeStatus replaces the parents written by controller with wanted and
// keeps those of other controllers in place.
func routeStatus(current gatewayv1.RouteStatus, controller gatewayv1.GatewayController, wanted []gatewayv1.RouteParentStatus, now metav1.Time) (gatewayv1.RouteStatus, bool) {
	out := gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{}}
	for _, p := range current.Parents {
		if p.ControllerName != controller {
			out.Parents = append(out.Parents, p)
		}
	}
	for _, w := range wanted {
		var cur []metav1.Condition
		for _, p := range current.Parents {
			if p.ControllerName == controller && reflect.DeepEqual(p.ParentRef, w.ParentRef) {
				cur = p.Conditions
			}
		}
		w.Conditions = conditions(cur, w.Conditions, routeParentConditions, now)
		out.Parents = append(out.Parents, w)
	}
	if len(current.Parents) == 0 && len(out.Parents) == 0 {
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
