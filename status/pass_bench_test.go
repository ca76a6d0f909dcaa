package status

import (
	"fmt"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/watch"
)

// BenchmarkSettledPass is the pass that follows a change at 10,000
// HTTPRoutes or Ingresses when the change itself needs no write: every
// object is settled with the status it wants, and the pass writes
// nothing. What it allocates is garbage of every change on the leader.
func BenchmarkSettledPass(b *testing.B) {
	const n = 10000
	for _, kind := range []string{"HTTPRoute", "Ingress"} {
		b.Run("kind="+kind, func(b *testing.B) {
			w, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, Options{LeaseNamespace: "ns", Identity: "bench"}, quiet) // never dialled
			if err != nil {
				b.Fatal(err)
			}
			reports := &watch.Reports{}
			w.settled = map[any]wantedStatus{}
			// Translation gives every Ingress the same load balancer.
			loadBalancer := networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.1"}}}
			for i := range n {
				meta := metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("r%d", i)}
				switch kind {
				case "HTTPRoute":
					route := &gatewayv1.HTTPRoute{ObjectMeta: meta}
					parents := []gatewayv1.RouteParentStatus{{ParentRef: gatewayv1.ParentReference{Name: "g"}, ControllerName: gatewayv1.GatewayController(w.opts.GatewayController)}}
					reports.HTTPRoutes = append(reports.HTTPRoutes, &watch.RouteReport[*gatewayv1.HTTPRoute]{Object: route, Parents: parents})
					w.settled[route] = wantedStatus{parents: parents}
				case "Ingress":
					ing := &networkingv1.Ingress{ObjectMeta: meta}
					reports.Ingresses = append(reports.Ingresses, watch.IngressReport{Object: ing, LoadBalancer: loadBalancer})
					w.settled[ing] = wantedStatus{loadBalancer: loadBalancer.Ingress}
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				w.write(b.Context(), reports)
				if len(w.settled) != n {
					b.Fatalf("%d objects settled after the pass, want %d", len(w.settled), n)
				}
			}
		})
	}
}
