package watch

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// cachedSlices is list as the store holds it.
func cachedSlices(list ...*discoveryv1.EndpointSlice) []*endpointSlice {
	out := make([]*endpointSlice, len(list))
	for i, s := range list {
		out[i] = newEndpointSlice(s)
	}
	return out
}

// TestTrimmedEndpointSlices: the cache holds an EndpointSlice as an
// endpointSlice with what translation reads (its Service by label, its
// address type, ports, and endpoints' addresses, ready as the API reads an
// unset condition, and serving), shares equal values among slices, and
// hands one back as it is when client-go transforms it again.
func TestTrimmedEndpointSlices(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC))
	controllerMade := func(name, service string) *discoveryv1.EndpointSlice {
		fresh := func(s string) string { return string([]byte(s)) }
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: fresh("shop"), Name: name, GenerateName: service + "-", UID: "5f0c6a3e", ResourceVersion: "40001",
				CreationTimestamp: created, Generation: 1,
				Labels:          map[string]string{discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
				Annotations:     map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-11-24T03:00:00Z"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: service, UID: "0b6e2c1d"}},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: new(fresh("http")), Protocol: new(corev1.ProtocolTCP), Port: new(int32(8080))}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.244.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: new(true), Serving: new(true), Terminating: new(false)},
					NodeName: new("node-1"), TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web-1"}},
				{Addresses: []string{"10.244.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: new(false), Serving: new(true), Terminating: new(true)}},
				{Addresses: []string{"10.244.0.3"}},
			},
		}
	}
	want := &endpointSlice{
		Namespace: "shop", Name: "web-x7k2p", ResourceVersion: "40001", CreationTimestamp: created, Service: "web",
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Protocol: new(corev1.ProtocolTCP), Port: new(int32(8080))}},
		Endpoints: []sliceEndpoint{
			{Addresses: []string{"10.244.0.1"}, Ready: true, Serving: true},
			{Addresses: []string{"10.244.0.2"}, Serving: true},
			{Addresses: []string{"10.244.0.3"}, Ready: true},
		},
	}
	in := newInterner()
	got, err := in.trimObject(controllerMade("web-x7k2p", "web"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("trimmed to\n%#v\nwant\n%#v", got, want)
	}
	if key, ok := sliceService(got.(*endpointSlice)); !ok || key != (types.NamespacedName{Namespace: "shop", Name: "web"}) {
		t.Errorf("sliceService = %v, %v", key, ok)
	}
	if again, _ := in.trimObject(got); again != got {
		t.Error("transformed again, an endpointSlice became another")
	}
	other, _ := in.trimObject(controllerMade("api-b2m9q", "api"))
	a, b := got.(*endpointSlice), other.(*endpointSlice)
	if !sameString(a.Namespace, b.Namespace) || a.Ports[0].Name != b.Ports[0].Name {
		t.Error("two slices hold two copies of their namespace or port name")
	}

	unlabelled := controllerMade("mirror", "web")
	unlabelled.Labels = nil
	got, _ = in.trimObject(unlabelled)
	if _, ok := sliceService(got.(*endpointSlice)); ok {
		t.Error("a slice without the label kubernetes.io/service-name belongs to a Service")
	}
}
