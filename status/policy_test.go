package status

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/tlsstore/tlstest"
	"github.com/hostgate/hostgate/watch"
)

// TestWritesBackendTLSPolicyStatus runs translation and the writer on a
// cluster: a BackendTLSPolicy on the Service of a route of our Gateway
// gets an ancestor entry for that Gateway, NoValidCACertificate while its
// ConfigMap is missing and Accepted once it is there, and the entry
// another controller wrote stays as it was.
func TestWritesBackendTLSPolicyStatus(t *testing.T) {
	const ns = "status-backendtls"
	kube, gw := servedGateway(t, ns, "127.0.0.62")
	ctx := context.Background()
	_, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "secure"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}},
	}, metav1.CreateOptions{})
	check(t, err)
	_, err = gw.GatewayV1().HTTPRoutes(ns).Create(ctx, &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "secure", Port: new(gatewayv1.PortNumber(443))},
			}}}}},
		},
	}, metav1.CreateOptions{})
	check(t, err)
	policy, err := gw.GatewayV1().BackendTLSPolicies(ns).Create(ctx, &gatewayv1.BackendTLSPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "secure"},
		Spec: gatewayv1.BackendTLSPolicySpec{
			TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: "secure"}}},
			Validation: gatewayv1.BackendTLSPolicyValidation{
				CACertificateRefs: []gatewayv1.LocalObjectReference{{Kind: "ConfigMap", Name: "ca"}},
				Hostname:          "secure.example.com",
			},
		},
	}, metav1.CreateOptions{})
	check(t, err)
	theirs := gatewayv1.PolicyAncestorStatus{
		AncestorRef:    gatewayv1.ParentReference{Name: "unmanaged"},
		ControllerName: "example.com/other",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: policy.Generation,
			LastTransitionTime: metav1.NewTime(before.Time)}},
	}
	policy.Status.Ancestors = []gatewayv1.PolicyAncestorStatus{theirs}
	_, err = gw.GatewayV1().BackendTLSPolicies(ns).UpdateStatus(ctx, policy, metav1.UpdateOptions{})
	check(t, err)

	ancestor := func(reason string) func() bool {
		return func() bool {
			p, err := gw.GatewayV1().BackendTLSPolicies(ns).Get(ctx, "secure", metav1.GetOptions{})
			if err != nil || !slices.ContainsFunc(p.Status.Ancestors, func(a gatewayv1.PolicyAncestorStatus) bool {
				return a.ControllerName == theirs.ControllerName && a.AncestorRef.Name == theirs.AncestorRef.Name &&
					len(a.Conditions) == 1 && a.Conditions[0].LastTransitionTime.Equal(&theirs.Conditions[0].LastTransitionTime)
			}) {
				return false
			}
			return slices.ContainsFunc(p.Status.Ancestors, func(a gatewayv1.PolicyAncestorStatus) bool {
				i := slices.IndexFunc(a.Conditions, func(c metav1.Condition) bool { return c.Type == "Accepted" })
				return a.ControllerName == watch.DefaultGatewayController && a.AncestorRef.Name == "gw" && i >= 0 && a.Conditions[i].Reason == reason
			})
		}
	}
	eventually(t, "NoValidCACertificate next to the other controller's entry", ancestor("NoValidCACertificate"))
	_, err = kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ca"},
		Data:       map[string]string{"ca.crt": string(tlstest.NewCA(t).PEM)},
	}, metav1.CreateOptions{})
	check(t, err)
	eventually(t, "Accepted next to the other controller's entry", ancestor("Accepted"))
}
