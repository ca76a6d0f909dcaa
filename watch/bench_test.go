package watch

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/internal/heaptest"
)

// benchObjects is one Gateway with n HTTPRoutes, each with its own
// hostname, two rules and a Service with ten endpoints.
func benchObjects(n int) *objects {
	objs := &objects{crdBundleVersion: "v1.7.0"}
	objs.add(&gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: gatewayv1.GatewayClassSpec{ControllerName: DefaultGatewayController}}, 0)
	objs.add(&gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "default"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "c", Listeners: []gatewayv1.Listener{{
			Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType,
			AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: new(gatewayv1.NamespacesFromAll)}},
		}}},
	}, 0)
	for i := range n {
		ns, name := fmt.Sprintf("ns%d", i%50), fmt.Sprintf("r%d", i)
		addBenchService(objs, ns, name, i)
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
		}, 0)
	}
	return objs
}

// BenchmarkTranslate translates the whole store: cold is a first
// translation (or one without memo, as in file mode), one-change a
// translation after one HTTPRoute was replaced with its spec unchanged,
// as in cluster mode, spec-change one after one changed a path (the
// listener's routes change), endpoints-change one after an EndpointSlice
// changed, and service-change one after a Service changed the protocol
// of its port (of one route's backends).
func BenchmarkTranslate(b *testing.B) {
	for _, n := range []int{100, 1000, 10000, 50000} {
		b.Run(fmt.Sprintf("routes=%d/cold", n), func(b *testing.B) {
			objs := benchObjects(n)
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				shuffle(objs)
				checkBenchSnapshot(b, n)(translate(objs, Options{}))
			}
		})
		// An informer replaces a changed object with a new one.
		b.Run(fmt.Sprintf("routes=%d/one-change", n), benchChanges(n, func(objs *objects, i int) []any {
			objs.httpRoutes[i%n] = objs.httpRoutes[i%n].DeepCopy()
			return []any{objs.httpRoutes[i%n]}
		}))
		b.Run(fmt.Sprintf("routes=%d/spec-change", n), benchChanges(n, func(objs *objects, i int) []any {
			r := objs.httpRoutes[i%n].DeepCopy()
			if path := r.Spec.Rules[0].Matches[0].Path; *path.Value == "/api" {
				path.Value = new("/api2")
			} else {
				path.Value = new("/api")
			}
			r.Generation++
			objs.httpRoutes[i%n] = r
			return []any{r}
		}))
		// The status writer writes 100 routes a second, and a translation
		// follows each second of them.
		b.Run(fmt.Sprintf("routes=%d/status-changes", n), benchChanges(n, func(objs *objects, i int) (replaced []any) {
			for j := range min(100, n) {
				objs.httpRoutes[(i*100+j)%n] = objs.httpRoutes[(i*100+j)%n].DeepCopy()
				replaced = append(replaced, objs.httpRoutes[(i*100+j)%n])
			}
			return replaced
		}))
		b.Run(fmt.Sprintf("routes=%d/endpoints-change", n), benchChanges(n, func(objs *objects, i int) []any {
			slice := objs.endpointSlices[i%n].DeepCopy()
			slice.Endpoints[0].Addresses = []string{fmt.Sprintf("10.255.%d.%d", i/250%250, i%250)}
			objs.endpointSlices[i%n] = slice
			return []any{slice}
		}))
		b.Run(fmt.Sprintf("routes=%d/service-change", n), benchChanges(n, func(objs *objects, i int) []any {
			return []any{toggleServiceProtocol(objs, i%n)}
		}))
	}
}

// toggleServiceProtocol replaces Service i with a copy whose first port
// has or loses the appProtocol kubernetes.io/h2c, as an informer would,
// and returns the copy.
func toggleServiceProtocol(objs *objects, i int) *service {
	svc := objs.services[i].DeepCopy()
	if svc.Ports[0].AppProtocol == nil {
		svc.Ports[0].AppProtocol = new("kubernetes.io/h2c")
	} else {
		svc.Ports[0].AppProtocol = nil
	}
	objs.services[i] = svc
	return svc
}

// BenchmarkChangeEndpoints changes one EndpointSlice of the Services of n
// routes as cluster mode does, without a translation: the counterpart of
// BenchmarkTranslate's endpoints-change.
func BenchmarkChangeEndpoints(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			objs := benchObjects(n)
			m := newMemo()
			snap, _ := m.translate(objs, Options{})
			var changed *endpointSlice
			slicesOf := func(types.NamespacedName) []*endpointSlice {
				return []*endpointSlice{changed}
			}
			b.ReportAllocs()
			defer reportCPU(b)()
			for i := 0; b.Loop(); i++ {
				changed = objs.endpointSlices[i%n].DeepCopy()
				changed.Endpoints[0].Addresses = []string{fmt.Sprintf("10.255.%d.%d", i/250%250, i%250)}
				key, _ := sliceService(changed)
				next := m.changeEndpoints(snap, []types.NamespacedName{key}, slicesOf)
				if next == nil {
					b.Fatal("no change")
				}
				snap = next
			}
		})
	}
}

// benchChanges translates n routes with a memo after each change(objs, i),
// from a store told of the objects it replaced, as in cluster mode.
func benchChanges(n int, change func(objs *objects, i int) (replaced []any)) func(*testing.B) {
	return func(b *testing.B) {
		objs := benchObjects(n)
		store := trackedStoreOf(objs)
		m := newMemo()
		m.translate(store.objects(objs), Options{})
		b.ReportAllocs()
		defer reportCPU(b)()
		for i := 0; b.Loop(); i++ {
			for _, o := range change(objs, i) {
				store.put(o)
			}
			checkBenchSnapshot(b, n)(m.translate(store.objects(objs), Options{}))
		}
	}
}

// BenchmarkListOneChange lists a tracked store of n HTTPRoutes, Services
// and EndpointSlices after one HTTPRoute was replaced, as cluster mode
// lists before every translation: the part of BenchmarkTranslate's
// one-change that is the source's.
func BenchmarkListOneChange(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			objs := benchObjects(n)
			store := trackedStoreOf(objs)
			store.objects(objs)
			b.ReportAllocs()
			defer reportCPU(b)()
			for i := 0; b.Loop(); i++ {
				objs.httpRoutes[i%n] = objs.httpRoutes[i%n].DeepCopy()
				store.put(objs.httpRoutes[i%n])
				if listed := store.objects(objs); len(listed.httpRoutes) != n {
					b.Fatalf("%d routes listed", len(listed.httpRoutes))
				}
			}
		})
	}
}

// reportCPU reports the CPU time (of every thread, the garbage collector's
// too) per operation from now until the returned function runs: on a
// shared machine it varies less than the wall-clock time.
func reportCPU(b *testing.B) func() {
	start := cpuTime(b)
	return func() { b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op") }
}

func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// shuffle puts the objects in a new order, as an informer's List does.
func shuffle(objs *objects) {
	rand.Shuffle(len(objs.httpRoutes), func(i, j int) { objs.httpRoutes[i], objs.httpRoutes[j] = objs.httpRoutes[j], objs.httpRoutes[i] })
	rand.Shuffle(len(objs.services), func(i, j int) { objs.services[i], objs.services[j] = objs.services[j], objs.services[i] })
	rand.Shuffle(len(objs.endpointSlices), func(i, j int) {
		objs.endpointSlices[i], objs.endpointSlices[j] = objs.endpointSlices[j], objs.endpointSlices[i]
	})
}

func checkBenchSnapshot(b *testing.B, n int) func(*Snapshot, *Reports) {
	return func(snap *Snapshot, _ *Reports) {
		if len(snap.Listeners) != 1 || len(snap.Listeners[0].Routes) != n {
			b.Fatalf("listeners=%d", len(snap.Listeners))
		}
	}
}

// BenchmarkOrderOneChange sorts 10,000 HTTPRoutes after one of them
// changed, as every route change's translation does: compared finds the
// change by comparing the lists (file mode), told is told it (cluster
// mode, whose event handlers keep the lists).
func BenchmarkOrderOneChange(b *testing.B) {
	for _, told := range []bool{false, true} {
		b.Run(map[bool]string{false: "compared", true: "told"}[told], func(b *testing.B) {
			objs := benchObjects(10000)
			for i, r := range objs.httpRoutes {
				r.CreationTimestamp = metav1.NewTime(time.Unix(int64(i), 0))
			}
			var o order[*gatewayv1.HTTPRoute]
			listing := uint64(1)
			o.sort(objs.httpRoutes, &storeChanges{listing: listing})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				j := (i * 7919) % len(objs.httpRoutes)
				old, fresh := objs.httpRoutes[j], objs.httpRoutes[j].DeepCopy()
				objs.httpRoutes[j] = fresh
				i++
				var changes *storeChanges
				if !told {
					// In the order of an informer's List, which is no order.
					rand.Shuffle(len(objs.httpRoutes), func(i, j int) {
						objs.httpRoutes[i], objs.httpRoutes[j] = objs.httpRoutes[j], objs.httpRoutes[i]
					})
				} else {
					// Where the event handlers keep it.
					changes = &storeChanges{since: listing, listing: listing + 1, added: []any{fresh}, removed: []any{old}}
					listing++
				}
				o.sort(objs.httpRoutes, changes)
			}
		})
	}
}

// addBenchService adds Service namespace/name, port 80, and its
// EndpointSlice of ten endpoints numbered after i.
func addBenchService(objs *objects, namespace, name string, i int) {
	objs.add(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, 0)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080))}},
	}
	for j := range 10 {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", i/250, i%250, j)}})
	}
	objs.add(slice, 0)
}

// benchIngresses is n Ingresses of class nginx as a migrated cluster has
// them, each with its own host and TLS, a rewrite with captures, CORS and
// a snippet that is refused, and a Service with ten endpoints.
func benchIngresses(n int) *objects {
	objs := &objects{}
	for i := range n {
		ns, name := fmt.Sprintf("ns%d", i%50), fmt.Sprintf("i%d", i)
		addBenchService(objs, ns, name, i)
		host := name + ".example.com"
		backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Number: 80}}}
		objs.add(&networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{
				NginxAnnotationPrefix + "rewrite-target":        "/$2",
				NginxAnnotationPrefix + "enable-cors":           "true",
				NginxAnnotationPrefix + "configuration-snippet": "more_set_headers \"X-Frame-Options: DENY\";",
			}},
			Spec: networkingv1.IngressSpec{
				IngressClassName: new("nginx"),
				TLS:              []networkingv1.IngressTLS{{Hosts: []string{host}}},
				Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{
						{Path: "/app(/|$)(.*)", PathType: new(networkingv1.PathTypeImplementationSpecific), Backend: backend},
						{Path: "/", PathType: new(networkingv1.PathTypePrefix), Backend: backend},
					},
				}}}},
			},
		}, 0)
	}
	return objs
}

// BenchmarkTranslateIngresses is BenchmarkTranslate for 10,000 annotated
// Ingresses: a first translation, one after an Ingress changed (which
// splices), and one after the Service of an Ingress changed the protocol
// of its port (a full translation with the memo: a splice does not take
// an Ingress's lookups apart).
func BenchmarkTranslateIngresses(b *testing.B) {
	const n = 10000
	opts := Options{IngressHTTPAddr: ":80", IngressHTTPSAddr: ":443", IngressClasses: []string{"nginx"}}
	check := func(snap *Snapshot, _ *Reports) {
		if len(snap.Listeners) != 2 || len(snap.Listeners[0].Routes) != n {
			b.Fatalf("listeners=%d", len(snap.Listeners))
		}
	}
	b.Run("cold", func(b *testing.B) {
		objs := benchIngresses(n)
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			check(translate(objs, opts))
		}
	})
	for _, c := range []struct {
		name   string
		change func(objs *objects, i int)
	}{
		{"one-change", func(objs *objects, i int) {
			objs.ingresses[i%n] = objs.ingresses[i%n].DeepCopy()
		}},
		{"service-change", func(objs *objects, i int) {
			toggleServiceProtocol(objs, i%n)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			objs := benchIngresses(n)
			m := newMemo()
			m.translate(objs, opts)
			b.ReportAllocs()
			defer reportCPU(b)()
			for i := 0; b.Loop(); i++ {
				c.change(objs, i)
				check(m.translate(objs, opts))
			}
		})
	}
}

// BenchmarkTranslationHeap reports the live heap that translation keeps
// for n HTTPRoutes beside the objects it translated: the Snapshot, the
// Reports and the memo the next translation starts from. The heap profile
// of a cluster of 10,000 HTTPRoutes put a third of hostgate's heap there.
func BenchmarkTranslationHeap(b *testing.B) {
	const n = 10000
	objs := benchObjects(n)
	store := trackedStoreOf(objs)
	listed := store.objects(objs)
	var perRoute float64
	for b.Loop() {
		before := heaptest.Live()
		m := newMemo()
		snap, reports := m.translate(listed, Options{})
		perRoute = float64(heaptest.Live()-before) / n
		checkBenchSnapshot(b, n)(snap, reports)
		runtime.KeepAlive(m)
	}
	b.ReportMetric(perRoute, "live-B/route")
}
