package status

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/hostgate/hostgate/internal/kubetest"
	"github.com/hostgate/hostgate/watch"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// run starts f in the background until the returned cancel is called or
// the test ends.
func run(t *testing.T, f func(context.Context) error) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 60s for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// inNamespace returns the shared test cluster and its clients, with the
// namespace ns created for the test.
func inNamespace(t *testing.T, ns string) (*kubetest.Env, kubernetes.Interface, gatewayclient.Interface) {
	t.Helper()
	env := kubetest.Shared(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	_, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	check(t, err)
	return env, kube, gatewayclient.NewForConfigOrDie(env.Config)
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func isTrue(conds []metav1.Condition, typ string) bool {
	i := slices.IndexFunc(conds, func(c metav1.Condition) bool { return c.Type == typ })
	return i >= 0 && conds[i].Status == metav1.ConditionTrue
}

// TestTwoWritersOneLeader runs two hostgate instances (translation and
// status writer each) and checks that status is written once, by the Lease
// holder, only on our objects, and that the other instance takes over.
func TestTwoWritersOneLeader(t *testing.T) {
	const ns = "status-writers"
	env, kube, gw := inNamespace(t, ns)
	ctx := context.Background()

	writers := map[string]context.CancelFunc{}
	for _, id := range []string{"hostgate-a", "hostgate-b"} {
		w, err := New(env.Config, Options{LeaseNamespace: ns, Identity: id}, quiet)
		check(t, err)
		src, err := watch.NewCluster(env.Config, watch.Options{IngressHTTPAddr: ":80", StatusAddresses: []string{"192.0.2.10"}},
			func(_ *watch.Snapshot, r *watch.Reports) { w.Update(r) }, quiet)
		check(t, err)
		run(t, src.Start)
		writers[id] = run(t, w.Start)
	}

	_, err := gw.GatewayV1().GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "status-writers"},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: watch.DefaultGatewayController},
	}, metav1.CreateOptions{})
	check(t, err)
	for _, g := range []struct{ name, class string }{{"ours", "status-writers"}, {"theirs", "someone-else"}} {
		_, err = gw.GatewayV1().Gateways(ns).Create(ctx, &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: g.name},
			Spec: gatewayv1.GatewaySpec{
				GatewayClassName: gatewayv1.ObjectName(g.class),
				Addresses:        []gatewayv1.GatewaySpecAddress{{Value: "127.0.0.60"}},
				Listeners:        []gatewayv1.Listener{{Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType}},
			},
		}, metav1.CreateOptions{})
		check(t, err)
	}
	route, err := gw.GatewayV1().HTTPRoutes(ns).Create(ctx, &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "ours"}, {Name: "theirs"}}}},
	}, metav1.CreateOptions{})
	check(t, err)
	// Another controller's parent status, which we must keep.
	route.Status.Parents = []gatewayv1.RouteParentStatus{{
		ParentRef: gatewayv1.ParentReference{Name: "theirs"}, ControllerName: "example.com/other",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.Now()}},
	}}
	_, err = gw.GatewayV1().HTTPRoutes(ns).UpdateStatus(ctx, route, metav1.UpdateOptions{})
	check(t, err)
	_, err = kube.NetworkingV1().Ingresses(ns).Create(ctx, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: networkingv1.IngressSpec{
			IngressClassName: new(watch.DefaultIngressClass),
			DefaultBackend:   &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
		},
	}, metav1.CreateOptions{})
	check(t, err)

	var ours *gatewayv1.Gateway
	eventually(t, "status on every object of ours", func() bool {
		class, err1 := gw.GatewayV1().GatewayClasses().Get(ctx, "status-writers", metav1.GetOptions{})
		g, err2 := gw.GatewayV1().Gateways(ns).Get(ctx, "ours", metav1.GetOptions{})
		r, err3 := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "web", metav1.GetOptions{})
		ing, err4 := kube.NetworkingV1().Ingresses(ns).Get(ctx, "web", metav1.GetOptions{})
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			return false
		}
		ours = g
		return isTrue(class.Status.Conditions, "Accepted") &&
			isTrue(g.Status.Conditions, "Programmed") && len(g.Status.Addresses) == 1 && g.Status.Addresses[0].Value == "127.0.0.60" &&
			len(r.Status.Parents) == 2 && isTrue(r.Status.Parents[1].Conditions, "Accepted") &&
			len(ing.Status.LoadBalancer.Ingress) == 1 && ing.Status.LoadBalancer.Ingress[0].IP == "192.0.2.10"
	})
	if ours.Status.Conditions[0].ObservedGeneration != ours.Generation {
		t.Errorf("observedGeneration = %d; want %d", ours.Status.Conditions[0].ObservedGeneration, ours.Generation)
	}
	theirs, err := gw.GatewayV1().Gateways(ns).Get(ctx, "theirs", metav1.GetOptions{})
	check(t, err)
	if len(theirs.Status.Conditions) > 0 && theirs.Status.Conditions[0].Reason != "Pending" {
		t.Errorf("a Gateway of another class got status from us: %+v", theirs.Status)
	}

	// Nothing changes, so nothing is written: the resourceVersion stays.
	time.Sleep(3 * time.Second)
	again, err := gw.GatewayV1().Gateways(ns).Get(ctx, "ours", metav1.GetOptions{})
	check(t, err)
	if again.ResourceVersion != ours.ResourceVersion {
		t.Errorf("the Gateway was written again without a change (resourceVersion %s -> %s)", ours.ResourceVersion, again.ResourceVersion)
	}

	lease, err := kube.CoordinationV1().Leases(ns).Get(ctx, "hostgate", metav1.GetOptions{})
	check(t, err)
	leader := leaseHolder(lease)
	if _, ok := writers[leader]; !ok {
		t.Fatalf("Lease holder = %q; want one of the writers", leader)
	}
	writers[leader]()
	eventually(t, "the other writer to take the Lease", func() bool {
		l, err := kube.CoordinationV1().Leases(ns).Get(ctx, "hostgate", metav1.GetOptions{})
		return err == nil && leaseHolder(l) != leader && leaseHolder(l) != ""
	})
	r, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "web", metav1.GetOptions{})
	check(t, err)
	r.Spec.ParentRefs[0].SectionName = new(gatewayv1.SectionName("nope"))
	_, err = gw.GatewayV1().HTTPRoutes(ns).Update(ctx, r, metav1.UpdateOptions{})
	check(t, err)
	eventually(t, "the new leader to write NoMatchingParent", func() bool {
		r, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(r.Status.Parents) != 2 {
			return false
		}
		c := r.Status.Parents[1].Conditions
		return len(c) > 0 && c[0].Reason == string(gatewayv1.RouteReasonNoMatchingParent) && c[0].ObservedGeneration == r.Generation
	})
}

func leaseHolder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestCreatesMissingGatewayClass: the leader creates the configured
// GatewayClass when it is missing, and never touches one that exists.
func TestCreatesMissingGatewayClass(t *testing.T) {
	const ns = "class-maker"
	env, _, gw := inNamespace(t, ns)
	ctx := context.Background()
	_, err := gw.GatewayV1().GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "taken"},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: "example.com/other"},
	}, metav1.CreateOptions{})
	check(t, err)

	for _, name := range []string{"made-by-hostgate", "taken"} {
		w, err := New(env.Config, Options{LeaseNamespace: ns, LeaseName: name, Identity: "hostgate-a", GatewayClassName: name}, quiet)
		check(t, err)
		src, err := watch.NewCluster(env.Config, watch.Options{}, func(_ *watch.Snapshot, r *watch.Reports) { w.Update(r) }, quiet)
		check(t, err)
		run(t, src.Start)
		run(t, w.Start)
	}
	eventually(t, "the missing class created and accepted", func() bool {
		class, err := gw.GatewayV1().GatewayClasses().Get(ctx, "made-by-hostgate", metav1.GetOptions{})
		return err == nil && class.Spec.ControllerName == watch.DefaultGatewayController && isTrue(class.Status.Conditions, "Accepted")
	})
	class, err := gw.GatewayV1().GatewayClasses().Get(ctx, "taken", metav1.GetOptions{})
	check(t, err)
	if class.Spec.ControllerName != "example.com/other" || isTrue(class.Status.Conditions, "Accepted") {
		t.Errorf("another controller's class was changed: %+v", class)
	}
}

// TestRestoresStatusChangedBySomeoneElse: the writer skips objects whose
// status it already brought to what it wants, but not once someone else
// changed that status.
func TestRestoresStatusChangedBySomeoneElse(t *testing.T) {
	const ns = "status-restored"
	_, gw := servedGateway(t, ns, "127.0.0.61")
	ctx := context.Background()
	_, err := gw.GatewayV1().HTTPRoutes(ns).Create(ctx, &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}}},
	}, metav1.CreateOptions{})
	check(t, err)
	accepted := func() bool {
		r, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && len(r.Status.Parents) == 1 && isTrue(r.Status.Parents[0].Conditions, "Accepted")
	}
	eventually(t, "the route's status", accepted)

	r, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "web", metav1.GetOptions{})
	check(t, err)
	r.Status.Parents = []gatewayv1.RouteParentStatus{}
	_, err = gw.GatewayV1().HTTPRoutes(ns).UpdateStatus(ctx, r, metav1.UpdateOptions{})
	check(t, err)
	eventually(t, "the cleared status written again", accepted)
}

// servedGateway runs translation and a status writer on the shared
// cluster, with the namespace ns, a GatewayClass of our controller named
// ns, and a Gateway "gw" of it on address.
func servedGateway(t *testing.T, ns, address string) (kubernetes.Interface, gatewayclient.Interface) {
	t.Helper()
	env, kube, gw := inNamespace(t, ns)
	ctx := context.Background()
	w, err := New(env.Config, Options{LeaseNamespace: ns, Identity: "hostgate"}, quiet)
	check(t, err)
	src, err := watch.NewCluster(env.Config, watch.Options{}, func(_ *watch.Snapshot, r *watch.Reports) { w.Update(r) }, quiet)
	check(t, err)
	run(t, src.Start)
	run(t, w.Start)
	_, err = gw.GatewayV1().GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: watch.DefaultGatewayController},
	}, metav1.CreateOptions{})
	check(t, err)
	_, err = gw.GatewayV1().Gateways(ns).Create(ctx, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "gw"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(ns),
			Addresses:        []gatewayv1.GatewaySpecAddress{{Value: address}},
			Listeners:        []gatewayv1.Listener{{Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType}},
		},
	}, metav1.CreateOptions{})
	check(t, err)
	return kube, gw
}

// TestPassForgetsWrittenObjects checks that a pass of status writes lets
// go of each object once it has written its status. The informers replace
// a written object with the one the write made, and a pass over 10,000
// routes takes over a minute: a pass that held its objects to the end held
// two copies of every route meanwhile.
func TestPassForgetsWrittenObjects(t *testing.T) {
	const ns = "status-forgets"
	env, _, gw := inNamespace(t, ns)
	ctx := context.Background()

	// The second status write waits while the test looks for the first
	// route.
	secondWrite, resume := make(chan struct{}), make(chan struct{})
	cfg := onStatusWrite(env.Config, func(n int32) {
		if n == 2 {
			close(secondWrite)
			<-resume
		}
	})
	w, err := New(cfg, Options{LeaseNamespace: ns, Identity: "hostgate"}, quiet)
	check(t, err)

	names := []string{"first", "second"}
	reports := &watch.Reports{}
	var first weak.Pointer[gatewayv1.HTTPRoute]
	for _, name := range names {
		route, err := gw.GatewayV1().HTTPRoutes(ns).Create(ctx, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		check(t, err)
		if name == "first" {
			first = weak.Make(route)
		}
		reports.HTTPRoutes = append(reports.HTTPRoutes, &watch.RouteReport[*gatewayv1.HTTPRoute]{Object: route, Parents: acceptedBy("gw")})
	}
	passDone := make(chan struct{})
	go func(r *watch.Reports) {
		defer close(passDone)
		w.write(ctx, r)
	}(reports)
	reports = nil

	select {
	case <-secondWrite:
	case <-time.After(60 * time.Second):
		t.Fatal("waited 60s for the second status write")
	}
	runtime.GC()
	firstAlive := first.Value() != nil
	close(resume)
	<-passDone
	if firstAlive {
		t.Error("while it wrote the second route's status, the pass still held the first route, whose status it had written")
	}
	for _, name := range names {
		route, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
		check(t, err)
		if len(route.Status.Parents) != 1 || !isTrue(route.Status.Parents[0].Conditions, "Accepted") {
			t.Errorf("HTTPRoute %s/%s: status %+v, want one parent Accepted", ns, name, route.Status)
		}
	}
}

// TestPassDoesNotRewriteWhatItWrote runs a pass again on the object it
// wrote, as a pass started before the informers replace it does: the
// status is not written again.
func TestPassDoesNotRewriteWhatItWrote(t *testing.T) {
	const ns = "status-rewrites"
	env, _, gw := inNamespace(t, ns)
	var writes atomic.Int32
	cfg := onStatusWrite(env.Config, writes.Store)
	w, err := New(cfg, Options{LeaseNamespace: ns, Identity: "hostgate"}, quiet)
	check(t, err)
	route, err := gw.GatewayV1().HTTPRoutes(ns).Create(context.Background(), &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{})
	check(t, err)
	reports := &watch.Reports{HTTPRoutes: []*watch.RouteReport[*gatewayv1.HTTPRoute]{{Object: route, Parents: acceptedBy("gw")}}}
	for pass := range 3 {
		w.write(context.Background(), reports)
		if got := writes.Load(); got != 1 {
			t.Fatalf("after pass %d: %d status writes, want 1", pass+1, got)
		}
	}
}

// acceptedBy is the wanted status of a route accepted by the Gateway
// called gateway.
func acceptedBy(gateway gatewayv1.ObjectName) []gatewayv1.RouteParentStatus {
	return []gatewayv1.RouteParentStatus{{
		ParentRef:      gatewayv1.ParentReference{Name: gateway},
		ControllerName: watch.DefaultGatewayController,
		Conditions:     []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "accepted"}},
	}}
}

// onStatusWrite returns a copy of cfg whose clients, before they send a
// status write, call f with the number of status writes sent so far and
// this one.
func onStatusWrite(cfg *rest.Config, f func(n int32)) *rest.Config {
	var writes atomic.Int32
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/status") {
				f(writes.Add(1))
			}
			return next.RoundTrip(req)
		})
	}
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
