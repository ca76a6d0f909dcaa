package watch

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// sort puts the kinds whose order translation follows in precedence
// order (oldest first, then namespace/name), so translation does not
// depend on the order a source listed objects in. The other kinds are
// only looked up: translation picks among duplicates (a file may list an
// object twice) and orders the groups it makes of them (the EndpointSlices
// of a Service) as a sorted list would, at a fraction of the cost of
// sorting every object of the store on every translation.
func (o *objects) sort() {
	sortObjects(o.ingressClasses)
	sortObjects(o.ingresses)
	sortObjects(o.gatewayClasses)
	sortObjects(o.gateways)
	sortObjects(o.httpRoutes)
	sortObjects(o.grpcRoutes)
	sortObjects(o.nodes)
}

// sortKey is what objects are sorted by.
type sortKey struct {
	created         time.Time
	namespace, name string
}

func keyOf(o metav1.Object) sortKey {
	return sortKey{o.GetCreationTimestamp().Time, o.GetNamespace(), o.GetName()}
}

func (a sortKey) compare(b sortKey) int {
	if c := a.created.Compare(b.created); c != 0 {
		return c
	}
	if c := cmp.Compare(a.namespace, b.namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.name, b.name)
}

// sortObjects sorts list by sortKey, stably.
func sortObjects[T metav1.Object](list []T) {
	if len(list) < 2 {
		return
	}
	// The keys are read once, not at every comparison through the
	// interface, and the position in list breaks ties as a stable sort
	// would, with the speed of an unstable one.
	type keyed struct {
		key      sortKey
		position int
		obj      T
	}
	keys := make([]keyed, len(list))
	for i, o := range list {
		keys[i] = keyed{keyOf(o), i, o}
	}
	slices.SortFunc(keys, func(a, b keyed) int {
		if c := a.key.compare(b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.position, b.position)
	})
	for i, k := range keys {
		list[i] = k.obj
	}
}

// index maps objects by key. Of objects with the same key it keeps the
// one that a stable sort puts last, as filling the map from a sorted list
// would.
func index[K comparable, T metav1.Object](list []T, key func(T) K) map[K]T {
	m := make(map[K]T, len(list))
	for _, o := range list {
		k := key(o)
		if have, ok := m[k]; ok && keyOf(have).compare(keyOf(o)) > 0 {
			continue
		}
		m[k] = o
	}
	return m
}

func namespacedName[T metav1.Object](o T) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}

// group collects objects under keys, each group in sorted order.
func group[K comparable, T metav1.Object](list []T, key func(T) (K, bool)) map[K][]T {
	m := map[K][]T{}
	for _, o := range list {
		if k, ok := key(o); ok {
			m[k] = append(m[k], o)
		}
	}
	for _, g := range m {
		sortObjects(g)
	}
	return m
}
