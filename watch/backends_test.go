package watch

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestEndpointSet: a Service port's endpoints, sorted, each address once
// (a pod can be in two slices while the endpointslice controller moves
// it, and the first listing wins), without FQDN slices, addresses that
// are not IPs, or endpoints that neither are ready nor serve.
func TestEndpointSet(t *testing.T) {
	port := &corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}
	slicePorts := []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080))}}
	endpoint := func(ready, serving bool, addresses ...string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: addresses, Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving}}
	}
	list := []*discoveryv1.EndpointSlice{
		{AddressType: discoveryv1.AddressTypeIPv4, Ports: slicePorts, Endpoints: []discoveryv1.Endpoint{
			endpoint(true, true, "10.0.0.9"),
			endpoint(false, true, "10.0.0.2"), // terminating, still serving
			endpoint(false, false, "10.0.0.3"),
			endpoint(true, true, "not-an-ip"),
		}},
		{AddressType: discoveryv1.AddressTypeFQDN, Ports: slicePorts, Endpoints: []discoveryv1.Endpoint{endpoint(true, true, "db.example.com")}},
		{AddressType: discoveryv1.AddressTypeIPv4, Ports: slicePorts, Endpoints: []discoveryv1.Endpoint{
			endpoint(true, true, "10.0.0.2"), // listed above first, not ready
			endpoint(true, true, "10.0.0.1", "10.0.0.1"),
		}},
		{AddressType: discoveryv1.AddressTypeIPv6, Ports: slicePorts, Endpoints: []discoveryv1.Endpoint{endpoint(true, true, "fd00::1")}},
	}
	want := []Endpoint{
		{Address: "10.0.0.1:8080", Ready: true, Weight: 1},
		{Address: "10.0.0.2:8080", Ready: false, Weight: 1},
		{Address: "10.0.0.9:8080", Ready: true, Weight: 1},
		{Address: "[fd00::1]:8080", Ready: true, Weight: 1},
	}
	if got := endpointSet(cachedSlices(list...), port); !slices.Equal(got, want) {
		t.Errorf("endpointSet =\n%v\nwant\n%v", got, want)
	}
	if got := endpointSet(nil, port); got == nil || len(got) != 0 {
		t.Errorf("endpointSet of no slices = %#v, want an empty set", got)
	}
}
