package status

import (
	"reflect"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

var (
	before = metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	now    = metav1.NewTime(time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC))
)

func cond(typ string, status metav1.ConditionStatus, reason string, gen int64, at metav1.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, ObservedGeneration: gen, LastTransitionTime: at, Message: reason}
}

func TestConditions(t *testing.T) {
	tests := []struct {
		name            string
		current, wanted []metav1.Condition
		want            []metav1.Condition
	}{
		{
			name:   "new condition gets now",
			wanted: []metav1.Condition{cond("Accepted", "True", "Accepted", 1, metav1.Time{})},
			want:   []metav1.Condition{cond("Accepted", "True", "Accepted", 1, now)},
		},
		{
			name:    "same status keeps its time, takes the new generation",
			current: []metav1.Condition{cond("Accepted", "True", "Accepted", 1, before)},
			wanted:  []metav1.Condition{cond("Accepted", "True", "Accepted", 2, metav1.Time{})},
			want:    []metav1.Condition{cond("Accepted", "True", "Accepted", 2, before)},
		},
		{
			name:    "changed status gets now",
			current: []metav1.Condition{cond("Accepted", "True", "Accepted", 1, before)},
			wanted:  []metav1.Condition{cond("Accepted", "False", "NoMatchingParent", 1, metav1.Time{})},
			want:    []metav1.Condition{cond("Accepted", "False", "NoMatchingParent", 1, now)},
		},
		{
			name:    "our conditions no longer wanted go",
			current: []metav1.Condition{cond("Accepted", "True", "Accepted", 1, before), cond("Ready", "True", "Ready", 1, before)},
			wanted:  []metav1.Condition{cond("Accepted", "True", "Accepted", 1, metav1.Time{})},
			want:    []metav1.Condition{cond("Accepted", "True", "Accepted", 1, before)},
		},
		{
			// Another writer's condition survives our write whatever its
			// generation or position (GatewayPreserveForeignConditions).
			name: "foreign conditions stay as they are",
			current: []metav1.Condition{cond("example.com/Audited", "True", "Seeded", 1, before),
				cond("Accepted", "True", "Accepted", 1, before)},
			wanted: []metav1.Condition{cond("Accepted", "True", "Accepted", 2, metav1.Time{})},
			want: []metav1.Condition{cond("Accepted", "True", "Accepted", 2, before),
				cond("example.com/Audited", "True", "Seeded", 1, before)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := conditions(tt.current, tt.wanted, gatewayConditions, now)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d conditions, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("condition %d = %+v; want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestRouteStatusKeepsOtherControllers(t *testing.T) {
	ours := gatewayv1.GatewayController("hostgate.dev/gateway-controller")
	theirs := gatewayv1.RouteParentStatus{ParentRef: gatewayv1.ParentReference{Name: "other"}, ControllerName: "example.com/other",
		Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 1, before)}}
	oursOld := gatewayv1.RouteParentStatus{ParentRef: gatewayv1.ParentReference{Name: "gw"}, ControllerName: ours,
		Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 1, before)}}
	wantedSame := gatewayv1.RouteParentStatus{ParentRef: gatewayv1.ParentReference{Name: "gw"}, ControllerName: ours,
		Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 1, metav1.Time{})}}

	tests := []struct {
		name        string
		current     []gatewayv1.RouteParentStatus
		wanted      []gatewayv1.RouteParentStatus
		wantChanged bool
		wantParents int
	}{
		{"unchanged is not written", []gatewayv1.RouteParentStatus{theirs, oursOld}, []gatewayv1.RouteParentStatus{wantedSame}, false, 2},
		{"ours removed, theirs kept", []gatewayv1.RouteParentStatus{theirs, oursOld}, nil, true, 1},
		{"nothing to nothing", nil, nil, false, 0},
		{"added next to theirs", []gatewayv1.RouteParentStatus{theirs}, []gatewayv1.RouteParentStatus{wantedSame}, true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := routeStatus(gatewayv1.RouteStatus{Parents: tt.current}, ours, tt.wanted, now)
			if changed != tt.wantChanged || len(got.Parents) != tt.wantParents {
				t.Fatalf("changed=%t parents=%d; want %t, %d", changed, len(got.Parents), tt.wantChanged, tt.wantParents)
			}
			if len(tt.current) > 0 && tt.current[0].ControllerName != ours && got.Parents[0].ControllerName != tt.current[0].ControllerName {
				t.Errorf("the other controller's parent was not kept first: %+v", got.Parents)
			}
		})
	}
}

func TestGatewayStatusUnchangedIsNotWritten(t *testing.T) {
	current := gatewayv1.GatewayStatus{
		Addresses:  []gatewayv1.GatewayStatusAddress{{Value: "10.0.0.1"}},
		Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 3, before)},
		Listeners: []gatewayv1.ListenerStatus{{Name: "http", AttachedRoutes: 2,
			Conditions: []metav1.Condition{cond("Programmed", "True", "Programmed", 3, before)}}},
	}
	wanted := gatewayv1.GatewayStatus{
		Addresses:  []gatewayv1.GatewayStatusAddress{{Value: "10.0.0.1"}},
		Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 3, metav1.Time{})},
		Listeners: []gatewayv1.ListenerStatus{{Name: "http", AttachedRoutes: 2,
			Conditions: []metav1.Condition{cond("Programmed", "True", "Programmed", 3, metav1.Time{})}}},
	}
	if _, changed := gatewayStatus(current, wanted, now); changed {
		t.Error("an unchanged Gateway status would be written")
	}
	wanted.Listeners[0].AttachedRoutes = 3
	got, changed := gatewayStatus(current, wanted, now)
	if !changed || got.Listeners[0].Conditions[0].LastTransitionTime != before {
		t.Errorf("attachedRoutes changed: changed=%t, transition time %v; want true and the old time", changed, got.Listeners[0].Conditions[0].LastTransitionTime)
	}
}

func TestIngressStatus(t *testing.T) {
	lb := networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.1"}}}
	if _, changed := ingressStatus(networkingv1.IngressStatus{LoadBalancer: lb}, lb); changed {
		t.Error("an unchanged Ingress status would be written")
	}
	if got, changed := ingressStatus(networkingv1.IngressStatus{}, lb); !changed || got.LoadBalancer.Ingress[0].IP != "192.0.2.1" {
		t.Errorf("got %+v, %t", got, changed)
	}
}

// TestPolicyStatusKeepsOtherControllers: a BackendTLSPolicy's ancestors
// written by another controller stay exactly as they were, ours are
// replaced, and a wanted status equal to the current one is not written.
func TestPolicyStatusKeepsOtherControllers(t *testing.T) {
	ours := gatewayv1.GatewayController("hostgate.dev/gateway-controller")
	theirs := gatewayv1.PolicyAncestorStatus{AncestorRef: gatewayv1.ParentReference{Name: "unmanaged"}, ControllerName: "example.com/other",
		Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 1, before)}}
	oursOld := gatewayv1.PolicyAncestorStatus{AncestorRef: gatewayv1.ParentReference{Name: "gw"}, ControllerName: ours,
		Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 1, before)}}
	wanted := []gatewayv1.PolicyAncestorStatus{{AncestorRef: gatewayv1.ParentReference{Name: "gw"}, ControllerName: ours,
		Conditions: []metav1.Condition{cond("Accepted", "False", "Conflicted", 2, metav1.Time{})}}}

	current := gatewayv1.PolicyStatus{Ancestors: []gatewayv1.PolicyAncestorStatus{oursOld, theirs}}
	got, changed := policyStatus(current, ours, wanted, now)
	if !changed || len(got.Ancestors) != 2 || !reflect.DeepEqual(got.Ancestors[0], theirs) {
		t.Fatalf("changed=%t ancestors=%+v; want theirs kept as it was, then ours", changed, got.Ancestors)
	}
	if c := got.Ancestors[1].Conditions[0]; c.Reason != "Conflicted" || c.LastTransitionTime != now {
		t.Errorf("our ancestor: %+v, want Conflicted at %v", c, now)
	}
	if _, changed := policyStatus(got, ours, wanted, now); changed {
		t.Error("an unchanged policy status would be written")
	}
	if got, _ := policyStatus(got, ours, nil, now); len(got.Ancestors) != 1 || got.Ancestors[0].ControllerName != theirs.ControllerName {
		t.Errorf("ours removed: %+v, want theirs alone", got.Ancestors)
	}
}

// A ListenerSet's listeners keep the transition times of their
// conditions, as a Gateway's do, and the count of attached ListenerSets
// is the one wanted, not the one found (it used to be kept as found).
func TestListenerStatusesKeepTimes(t *testing.T) {
	current := gatewayv1.ListenerSetStatus{
		Conditions: []metav1.Condition{cond("Accepted", "Unknown", "Pending", 0, before)},
		Listeners: []gatewayv1.ListenerEntryStatus{{Name: "a", AttachedRoutes: 1,
			Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 1, before)}}},
	}
	wanted := gatewayv1.ListenerSetStatus{
		Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 2, metav1.Time{})},
		Listeners: []gatewayv1.ListenerEntryStatus{
			{Name: "a", AttachedRoutes: 2, Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 2, metav1.Time{})}},
			{Name: "b", Conditions: []metav1.Condition{cond("Accepted", "False", "PortUnavailable", 2, metav1.Time{})}},
		},
	}
	got, changed := listenerSetStatus(current, wanted, now)
	want := gatewayv1.ListenerSetStatus{
		Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 2, now)},
		Listeners: []gatewayv1.ListenerEntryStatus{
			{Name: "a", AttachedRoutes: 2, Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 2, before)}},
			{Name: "b", Conditions: []metav1.Condition{cond("Accepted", "False", "PortUnavailable", 2, now)}},
		},
	}
	if !changed || !reflect.DeepEqual(got, want) {
		t.Errorf("listenerSetStatus = %+v, %t; want %+v, true", got, changed, want)
	}
	if _, changed := listenerSetStatus(got, wanted, now); changed {
		t.Error("writing the same wanted status again changes it")
	}

	three, none := int32(3), int32(0)
	gw, changed := gatewayStatus(gatewayv1.GatewayStatus{AttachedListenerSets: &three}, gatewayv1.GatewayStatus{AttachedListenerSets: &none}, now)
	if !changed || gw.AttachedListenerSets == nil || *gw.AttachedListenerSets != 0 {
		t.Errorf("gatewayStatus attachedListenerSets = %v, changed %t; want 0, true", gw.AttachedListenerSets, changed)
	}
}
