package watch

import (
	"sync"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Reports is the status hostgate wants on the objects it is responsible
// for. Condition times are left zero: the status writer keeps the times the
// objects already carry when a condition did not change.
type Reports struct {
	GatewayClasses []GatewayClassReport
	Gateways       []GatewayReport
	ListenerSets   []ListenerSetReport
	// HTTPRoutes, GRPCRoutes, TLSRoutes, TCPRoutes and UDPRoutes hold every route that references one of
	// our Gateways or still carries a parent status of ours (then with no
	// Parents, so the writer removes it).
	HTTPRoutes []*RouteReport[*gatewayv1.HTTPRoute]
	GRPCRoutes []*RouteReport[*gatewayv1.GRPCRoute]
	TLSRoutes  []*RouteReport[*gatewayv1.TLSRoute]
	TCPRoutes  []*RouteReport[*gatewayv1.TCPRoute]
	UDPRoutes  []*RouteReport[*gatewayv1.UDPRoute]
	// BackendTLSPolicies hold every policy that targets a Service our
	// Gateways' routes use, or that still carries an ancestor status of
	// ours (then with no Ancestors).
	BackendTLSPolicies []PolicyReport
	Ingresses          []IngressReport
	// IngressAddressesUnknown says that the Ingresses' LoadBalancer is
	// not to be written: the Service of Options.PublishService, whose
	// addresses it would be, is missing. A typo in the flag, or the
	// Service deleted and made again, must not take the addresses that
	// DNS records follow (external-dns) from every Ingress; ingress-nginx
	// leaves them too.
	IngressAddressesUnknown bool
	// Read lists what kept the source from reading objects as written (a
	// config file with a document that does not decode), one line each.
	Read []string

	// problems is what Problems returns, found once: the source logs them
	// and /debug/routes shows them, and with 10,000 routes each walk over
	// the reports takes milliseconds.
	problemsOnce sync.Once
	problems     []string
}

// GatewayClassReport is the wanted status of a GatewayClass of ours.
type GatewayClassReport struct {
	Object *gatewayv1.GatewayClass
	Status gatewayv1.GatewayClassStatus
}

// GatewayReport is the wanted status of a Gateway of one of our classes.
type GatewayReport struct {
	Object *gatewayv1.Gateway
	Status gatewayv1.GatewayStatus
	// Infrastructure is what stands for the Gateway, with
	// Options.GatewayServices; nil otherwise, or when it has no port.
	Infrastructure *Infrastructure
}

// ListenerSetReport is the wanted status of a ListenerSet whose parentRef
// names a Gateway of one of our classes.
type ListenerSetReport struct {
	Object *gatewayv1.ListenerSet
	Status gatewayv1.ListenerSetStatus
}

// RouteReport is the wanted set of parent statuses written by our
// controller on an HTTPRoute or GRPCRoute.
type RouteReport[T RouteObject] struct {
	Object  T
	Parents []gatewayv1.RouteParentStatus
}

// PolicyReport is the wanted set of ancestor statuses written by our
// controller on a BackendTLSPolicy.
type PolicyReport struct {
	Object    *gatewayv1.BackendTLSPolicy
	Ancestors []gatewayv1.PolicyAncestorStatus
}

// RouteObject is a route object (HTTPRoute, GRPCRoute, TLSRoute,
// TCPRoute). It says what the reports' users need of one rather than
// list the kinds, so that they can handle every kind with one generic
// function.
type RouteObject interface {
	metav1.Object
}

// IngressReport is the wanted load-balancer status of an Ingress of our
// class. Problems name the fields that could not be served: Ingress has no
// conditions to carry them.
type IngressReport struct {
	Object       *networkingv1.Ingress
	LoadBalancer networkingv1.IngressLoadBalancerStatus
	Problems     []string
	// Annotations are the outcomes of its ingress-nginx annotations.
	Annotations []AnnotationOutcome
}

// IngressAnnotations are the outcomes of the ingress-nginx annotations of
// one Ingress.
type IngressAnnotations struct {
	// Ingress is "namespace/name".
	Ingress     string              `json:"ingress"`
	Annotations []AnnotationOutcome `json:"annotations"`
}

// IngressAnnotations lists the Ingresses of ours that carry ingress-nginx
// annotations, with the outcome of each.
func (r *Reports) IngressAnnotations() []IngressAnnotations {
	var out []IngressAnnotations
	for _, i := range r.Ingresses {
		if len(i.Annotations) > 0 {
			out = append(out, IngressAnnotations{i.Object.Namespace + "/" + i.Object.Name, i.Annotations})
		}
	}
	return out
}
