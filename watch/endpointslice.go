package watch

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// endpointSlice is an EndpointSlice as the store holds it: what
// translation reads of it (sliceService, endpointSet), and what informers
// and the store key and order objects by. The informers' transform
// (trimObject) turns each EndpointSlice into one before it enters their
// cache, file mode as it is added to the store (objects.add). Of 10,000
// EndpointSlices of one endpoint each, one trimmed took 886 bytes of the
// heap, two fifths of them its ObjectMeta and a third a map of its one
// label; an endpointSlice takes 291 (BenchmarkCachedObjects, which counts
// the interner's tables too, went from 1,508 to 916).
//
// Its fields are exported for the interner to share their values
// (intern); the type is not, as nothing outside the package reads it.
type endpointSlice struct {
	cachedMeta
	// Service is the Service the slice belongs to, its label
	// kubernetes.io/service-name; "" for a slice without one.
	Service     string
	AddressType discoveryv1.AddressType
	Ports       []discoveryv1.EndpointPort
	Endpoints   []sliceEndpoint
}

// sliceEndpoint is an endpoint of an EndpointSlice: its addresses and
// its conditions ready (true when unset, as the API says) and serving.
type sliceEndpoint struct {
	Addresses      []string
	Ready, Serving bool
}

// newEndpointSlice returns what the store keeps of s. It shares s's
// strings and slices of strings, and the values its ports point to.
func newEndpointSlice(s *discoveryv1.EndpointSlice) *endpointSlice {
	out := &endpointSlice{
		cachedMeta:  newCachedMeta(&s.ObjectMeta),
		Service:     s.Labels[discoveryv1.LabelServiceName],
		AddressType: s.AddressType,
		Ports:       s.Ports,
	}
	if len(s.Endpoints) > 0 {
		out.Endpoints = make([]sliceEndpoint, len(s.Endpoints))
		for i, e := range s.Endpoints {
			out.Endpoints[i] = sliceEndpoint{
				Addresses: e.Addresses,
				Ready:     e.Conditions.Ready == nil || *e.Conditions.Ready,
				Serving:   e.Conditions.Serving != nil && *e.Conditions.Serving,
			}
		}
	}
	return out
}

// sliceService is the Service an EndpointSlice belongs to, by its label;
// ok is false for a slice without one.
func sliceService(s *endpointSlice) (key types.NamespacedName, ok bool) {
	return types.NamespacedName{Namespace: s.Namespace, Name: s.Service}, s.Service != ""
}

// DeepCopy returns a copy of s that shares nothing with it.
func (s *endpointSlice) DeepCopy() *endpointSlice {
	out := *s
	out.Ports = deepCopied(s.Ports)
	if s.Endpoints != nil {
		out.Endpoints = make([]sliceEndpoint, len(s.Endpoints))
		for i, e := range s.Endpoints {
			e.Addresses = append([]string(nil), e.Addresses...)
			out.Endpoints[i] = e
		}
	}
	return &out
}

// DeepCopyObject and GetObjectKind make an endpointSlice a runtime.Object,
// which client-go's cache mutation detector copies (when
// KUBE_CACHE_MUTATION_DETECTOR is set) and tests copy.
func (s *endpointSlice) DeepCopyObject() runtime.Object { return s.DeepCopy() }

func (*endpointSlice) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
