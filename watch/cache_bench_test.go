package watch

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayscheme "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/scheme"

	"github.com/hostgate/hostgate/internal/heaptest"
)

// BenchmarkCachedObjects decodes objects as the API server sends them
// (HTTPRoutes as JSON, with the defaults and the status it holds once
// hostgate has written it; Services and EndpointSlices as protobuf), trims
// them as the informers do, and reports the live heap each one takes in
// the cache, and the time decoding and trimming took: with 10,000 routes,
// the caches were a third of hostgate's heap.
func BenchmarkCachedObjects(b *testing.B) {
	const n = 2000
	created := metav1.NewTime(time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC))
	meta := func(i int, namespace string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: fmt.Sprintf("object-%d", i), Namespace: namespace,
			UID: types.UID(fmt.Sprintf("5f0c6a3e-2d1b-4c8e-9a7f-%012d", i)), ResourceVersion: fmt.Sprint(40000 + i), Generation: 1,
			CreationTimestamp: created,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:ports":{}}}`)}}},
		}
	}
	// The codecs of client-go's clients: CRDs speak JSON, built-in kinds
	// protobuf.
	jsonCodec := json.NewSerializerWithOptions(json.DefaultMetaFactory, gatewayscheme.Scheme, gatewayscheme.Scheme, json.SerializerOptions{})
	protoCodec := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme)
	kinds := []struct {
		name  string
		codec k8sruntime.Serializer
		make  func(i int, namespace string) k8sruntime.Object
	}{
		{"HTTPRoute", jsonCodec, func(i int, namespace string) k8sruntime.Object {
			return benchCachedRoute(meta(i, namespace), created)
		}},
		{"Service", protoCodec, func(i int, namespace string) k8sruntime.Object {
			return &corev1.Service{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
				ObjectMeta: meta(i, namespace),
				Spec: corev1.ServiceSpec{
					Ports:     []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
					ClusterIP: fmt.Sprintf("10.96.%d.%d", i/250, i%250), ClusterIPs: []string{fmt.Sprintf("10.96.%d.%d", i/250, i%250)},
					Type: corev1.ServiceTypeClusterIP, SessionAffinity: corev1.ServiceAffinityNone,
					IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: new(corev1.IPFamilyPolicySingleStack),
					InternalTrafficPolicy: new(corev1.ServiceInternalTrafficPolicyCluster),
				},
			}
		}},
		{"EndpointSlice", protoCodec, func(i int, namespace string) k8sruntime.Object {
			// As the endpointslice controller makes them.
			m := meta(i, namespace)
			service := m.Name
			m.Name, m.GenerateName = service+"-x7k2p", service+"-"
			m.Labels = map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: service,
				UID: types.UID(fmt.Sprintf("0b6e2c1d-8f3a-4e5b-9c7d-%012d", i)), Controller: new(true), BlockOwnerDeletion: new(true)}}
			return &discoveryv1.EndpointSlice{
				TypeMeta:    metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
				ObjectMeta:  m,
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Protocol: new(corev1.ProtocolTCP), Port: new(int32(8080))}},
				Endpoints: []discoveryv1.Endpoint{{
					Addresses:  []string{fmt.Sprintf("10.244.%d.%d", i/250, i%250)},
					Conditions: discoveryv1.EndpointConditions{Ready: new(true), Serving: new(true), Terminating: new(false)},
					NodeName:   new("node-1"),
					TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: fmt.Sprintf("pod-%d", i), UID: types.UID(fmt.Sprintf("9a7f-%d", i))},
				}},
			}
		}},
	}
	for _, kind := range kinds {
		b.Run("kind="+kind.name, func(b *testing.B) {
			b.ReportAllocs()
			encoded := make([][]byte, n)
			for i := range encoded {
				var buf bytes.Buffer
				if err := kind.codec.Encode(kind.make(i, fmt.Sprintf("ns%d", i%50)), &buf); err != nil {
					b.Fatal(err)
				}
				encoded[i] = buf.Bytes()
			}
			cache := make([]any, n)
			trim := newInterner().trimObject
			var perObject float64
			var decoding time.Duration
			for b.Loop() {
				clear(cache)
				before := heaptest.Live()
				began := time.Now()
				for i, data := range encoded {
					obj, _, err := kind.codec.Decode(data, nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					if cache[i], err = trim(obj); err != nil {
						b.Fatal(err)
					}
				}
				decoding += time.Since(began)
				perObject = float64(heaptest.Live()-before) / n
			}
			runtime.KeepAlive(cache)
			b.ReportMetric(perObject, "live-B/object")
			// ns/op is mostly the collections that measure the heap.
			b.ReportMetric(float64(decoding.Nanoseconds())/float64(b.N*n), "ns/object")
		})
	}
}

// benchCachedRoute is cpbench's HTTPRoute as the API server returns it
// once hostgate has written its status.
func benchCachedRoute(meta metav1.ObjectMeta, created metav1.Time) *gatewayv1.HTTPRoute {
	backend := []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{Weight: new(int32(1)), BackendObjectReference: gatewayv1.BackendObjectReference{
		Group: new(gatewayv1.Group("")), Kind: new(gatewayv1.Kind("Service")), Name: gatewayv1.ObjectName(meta.Name), Port: new(gatewayv1.PortNumber(80)),
	}}}}
	parent := gatewayv1.ParentReference{Group: new(gatewayv1.Group(gatewayv1.GroupName)), Kind: new(gatewayv1.Kind("Gateway")), Namespace: new(gatewayv1.Namespace("default")), Name: "bench"}
	condition := func(typ string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: created, Reason: typ, Message: "Route is " + typ}
	}
	return &gatewayv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: gatewayv1.GroupVersion.String(), Kind: "HTTPRoute"},
		ObjectMeta: meta,
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent}},
			Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(meta.Name + ".example.com")},
			Rules: []gatewayv1.HTTPRouteRule{
				{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchPathPrefix), Value: new("/api")}}}, BackendRefs: backend},
				{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchPathPrefix), Value: new("/")}}}, BackendRefs: backend},
			},
		},
		Status: gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{{
			ParentRef: parent, ControllerName: DefaultGatewayController,
			Conditions: []metav1.Condition{condition("Accepted"), condition("ResolvedRefs")},
		}}}},
	}
}

// BenchmarkTrackedSliceIndex reports the live heap that tracked's index of
// EndpointSlices by Service (trackedInformer.byService) takes per Service,
// each with one EndpointSlice, as nearly every Service of a cluster has.
func BenchmarkTrackedSliceIndex(b *testing.B) {
	b.ReportAllocs()
	const n = 10000
	list := make([]any, n)
	for i := range list {
		service := fmt.Sprintf("service-%d", i)
		list[i] = &endpointSlice{Namespace: fmt.Sprintf("ns%d", i%50), Name: service + "-x7k2p", Service: service}
	}
	var perService float64
	for b.Loop() {
		t := newTracked()
		inf := t.informer(true)
		for _, s := range list {
			t.put(inf, s)
		}
		if len(inf.byService) != n {
			b.Fatalf("%d Services indexed, want %d", len(inf.byService), n)
		}
		with := heaptest.Live()
		inf.byService = nil
		perService = float64(with-heaptest.Live()) / n
		runtime.KeepAlive(inf)
	}
	b.ReportMetric(perService, "index-B/service")
}
