package main

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/internal/kubetest"
)

// TestListenerSetStatus: a ListenerSet that its Gateway allows is served
// on a port of its own and gets its status, listeners and all, and the
// Gateway counts it in status.attachedListenerSets; once the Gateway no
// longer allows it, the ListenerSet is NotAllowed, no longer served, and
// the count goes.
func TestListenerSetStatus(t *testing.T) {
	env := kubetest.Shared(t)
	c := newCluster(t, env, "listenerset")
	_, backend := serveHTTP(t, podAddress(t), answer("from the listenerset"))
	c.backend("web", backend)
	gatewayPort, setPort := freePort(t), freePort(t)
	c.gateway(gatewayPort, 0, "")
	allow := func(from gatewayv1.FromNamespaces) {
		t.Helper()
		patch := c.mergePatch(map[string]any{"spec": map[string]any{"allowedListeners": map[string]any{"namespaces": map[string]any{"from": from}}}})
		c.must(c.gw.GatewayV1().Gateways(c.ns).Patch(t.Context(), "gw", types.MergePatchType, patch, metav1.PatchOptions{}))
	}
	allow(gatewayv1.NamespacesFromSame)
	c.must(c.gw.GatewayV1().ListenerSets(c.ns).Create(t.Context(), &gatewayv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Name: "extra"},
		Spec: gatewayv1.ListenerSetSpec{
			ParentRef: gatewayv1.ParentGatewayReference{Name: "gw"},
			Listeners: []gatewayv1.ListenerEntry{{Name: "extra", Port: gatewayv1.PortNumber(setPort), Protocol: gatewayv1.HTTPProtocolType}},
		},
	}, metav1.CreateOptions{}))
	c.must(c.gw.GatewayV1().HTTPRoutes(c.ns).Create(t.Context(), &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Kind: new(gatewayv1.Kind("ListenerSet")), Name: "extra"}}},
			Rules: []gatewayv1.HTTPRouteRule{{
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web", Port: new(gatewayv1.PortNumber(80))}}}},
			}},
		},
	}, metav1.CreateOptions{}))

	c.hostgate(env, "--ingress-class", "listenerset", "--http-addr=", "--https-addr=")
	status := func(wantAccepted metav1.ConditionStatus, wantReason string, wantAttached int32) func() string {
		return func() string {
			ls, err := c.gw.GatewayV1().ListenerSets(c.ns).Get(t.Context(), "extra", metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			accepted := meta.FindStatusCondition(ls.Status.Conditions, string(gatewayv1.ListenerSetConditionAccepted))
			if accepted == nil || accepted.Status != wantAccepted || accepted.Reason != wantReason || accepted.ObservedGeneration != ls.Generation {
				return fmt.Sprintf("ListenerSet Accepted condition %+v, want %s %s", accepted, wantAccepted, wantReason)
			}
			if wantAccepted == metav1.ConditionTrue && (len(ls.Status.Listeners) != 1 || ls.Status.Listeners[0].AttachedRoutes != 1 ||
				!meta.IsStatusConditionTrue(ls.Status.Listeners[0].Conditions, string(gatewayv1.ListenerConditionProgrammed))) {
				return fmt.Sprintf("ListenerSet listeners %+v, want one programmed with a route", ls.Status.Listeners)
			}
			gw, err := c.gw.GatewayV1().Gateways(c.ns).Get(t.Context(), "gw", metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			if got := gw.Status.AttachedListenerSets; got == nil && wantAttached > 0 || got != nil && *got != wantAttached {
				return fmt.Sprintf("Gateway attachedListenerSets %v, want %d", got, wantAttached)
			}
			return ""
		}
	}
	eventuallyWithin(t, time.Minute, "the ListenerSet accepted", status(metav1.ConditionTrue, string(gatewayv1.ListenerSetReasonAccepted), 1))
	eventuallyWithin(t, time.Minute, "the ListenerSet's listener", expect(fmt.Sprintf("http://127.0.0.1:%d/", setPort), "any.example.com", 200, "from the listenerset"))

	allow(gatewayv1.NamespacesFromNone)
	eventuallyWithin(t, time.Minute, "the ListenerSet not allowed", status(metav1.ConditionFalse, string(gatewayv1.ListenerSetReasonNotAllowed), 0))
	eventuallyWithin(t, time.Minute, "the ListenerSet's listener gone", func() string {
		if code, body := get(fmt.Sprintf("http://127.0.0.1:%d/", setPort), "any.example.com"); code != 0 {
			return fmt.Sprintf("GET on the ListenerSet's port = %d %q, want no answer", code, body)
		}
		return ""
	})
}
