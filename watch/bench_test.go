package watch

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// benchObjects is one Gateway with n HTTPRoutes, each with its own
// hostname, two rules and a Service with ten endpoints.
func benchObjects(n int) *objects {
	objs := &objects{crdBundleVersion: "v1.6.3"}
	objs.add(&gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: gatewayv1.GatewayClassSpec{ControllerName: DefaultGatewayController}})
	objs.add(&gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "default"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "c", Listeners: []gatewayv1.Listener{{
			Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType,
			AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: new(gatewayv1.NamespacesFromAll)}},
		}}},
	})
	for i := range n {
		ns, name := fmt.Sprintf("ns%d", i%50), fmt.Sprintf("r%d", i)
		objs.add(&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		})
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080))}},
		}
		for j := range 10 {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", i/250, i%250, j)}})
		}
		objs.add(slice)
		backend := []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Port: new(gatewayv1.PortNumber(80))}}}}
		objs.add(&gatewayv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "g", Namespace: new(gatewayv1.Namespace("default"))}}},
				Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(name + ".example.com")},
				Rules: []gatewayv1.HTTPRouteRule{
					{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchPathPrefix), Value: new("/api")}}}, BackendRefs: backend},
					{BackendRefs: backend},
				},
			},
		})
	}
	return objs
}

func BenchmarkTranslate(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			objs := benchObjects(n)
			b.ReportAllocs()
			for b.Loop() {
				snap, _ := translate(objs, Options{})
				if len(snap.Listeners) != 1 || len(snap.Listeners[0].Routes) != n {
					b.Fatalf("listeners=%d", len(snap.Listeners))
				}
			}
		})
	}
}
