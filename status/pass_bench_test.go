package status

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/watch"
)

// BenchmarkSettledPass is the pass that follows a route change at 10,000
// HTTPRoutes when the change itself needs no write: every route is
// settled with the status it wants, and the pass writes nothing. What it
// allocates is garbage of every change on the leader.
func BenchmarkSettledPass(b *testing.B) {
	w, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, Options{LeaseNamespace: "ns", Identity: "bench"}, quiet) // never dialled
	if err != nil {
		b.Fatal(err)
	}
	const n = 10000
	reports := &watch.Reports{}
	w.settled = map[any]wantedStatus{}
	for i := range n {
		route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("r%d", i)}}
		parents := []gatewayv1.RouteParentStatus{{ParentRef: gatewayv1.ParentReference{Name: "g"}, ControllerName: gatewayv1.GatewayController(w.opts.GatewayController)}}
		reports.HTTPRoutes = append(reports.HTTPRoutes, &watch.RouteReport[*gatewayv1.HTTPRoute]{Object: route, Parents: parents})
		w.settled[route] = wantedStatus{parents: parents}
	}
	b.ReportAllocs()
	for b.Loop() {
		w.write(b.Context(), reports)
		if len(w.settled) != n {
			b.Fatalf("%d routes settled after the pass, want %d", len(w.settled), n)
		}
	}
}
