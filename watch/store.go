package watch

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// objects is the store translation reads: every object of every kind that
// hostgate watches. Sources fill it; translate only reads it.
type objects struct {
	ingressClasses  []*networkingv1.IngressClass
	ingresses       []*networkingv1.Ingress
	gatewayClasses  []*gatewayv1.GatewayClass
	gateways        []*gatewayv1.Gateway
	httpRoutes      []*gatewayv1.HTTPRoute
	grpcRoutes      []*gatewayv1.GRPCRoute
	referenceGrants []*gatewayv1.ReferenceGrant
	services        []*corev1.Service
	endpointSlices  []*discoveryv1.EndpointSlice
	secrets         []*corev1.Secret
	namespaces      []*corev1.Namespace
	nodes           []*corev1.Node
	// crdBundleVersion is the gateway.networking.k8s.io/bundle-version of
	// the installed Gateway API CRDs; empty when unknown (file mode).
	crdBundleVersion string
}

// add stores obj under its kind and reports whether the kind is one the
// store keeps.
func (o *objects) add(obj any) bool {
	switch v := obj.(type) {
	case *networkingv1.IngressClass:
		o.ingressClasses = append(o.ingressClasses, v)
	case *networkingv1.Ingress:
		o.ingresses = append(o.ingresses, v)
	case *gatewayv1.GatewayClass:
		o.gatewayClasses = append(o.gatewayClasses, v)
	case *gatewayv1.Gateway:
		o.gateways = append(o.gateways, v)
	case *gatewayv1.HTTPRoute:
		o.httpRoutes = append(o.httpRoutes, v)
	case *gatewayv1.GRPCRoute:
		o.grpcRoutes = append(o.grpcRoutes, v)
	case *gatewayv1.ReferenceGrant:
		o.referenceGrants = append(o.referenceGrants, v)
	case *corev1.Service:
		o.services = append(o.services, v)
	case *discoveryv1.EndpointSlice:
		o.endpointSlices = append(o.endpointSlices, v)
	case *corev1.Secret:
		o.secrets = append(o.secrets, v)
	case *corev1.Namespace:
		o.namespaces = append(o.namespaces, v)
	case *corev1.Node:
		o.nodes = append(o.nodes, v)
	default:
		return false
	}
	return true
}

// sort puts every kind in precedence order (oldest first, then
// namespace/name), so translation does not depend on the order a source
// listed objects in.
func (o *objects) sort() {
	sortObjects(o.ingressClasses)
	sortObjects(o.ingresses)
	sortObjects(o.gatewayClasses)
	sortObjects(o.gateways)
	sortObjects(o.httpRoutes)
	sortObjects(o.grpcRoutes)
	sortObjects(o.referenceGrants)
	sortObjects(o.services)
	sortObjects(o.endpointSlices)
	sortObjects(o.secrets)
	sortObjects(o.namespaces)
	sortObjects(o.nodes)
}

func sortObjects[T metav1.Object](list []T) {
	slices.SortStableFunc(list, func(a, b T) int {
		ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
		if c := ta.Time.Compare(tb.Time); c != 0 {
			return c
		}
		if c := cmp.Compare(a.GetNamespace(), b.GetNamespace()); c != 0 {
			return c
		}
		return cmp.Compare(a.GetName(), b.GetName())
	})
}
