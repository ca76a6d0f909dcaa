package watch

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	Namespace, Name, ResourceVersion string
	CreationTimestamp                metav1.Time
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
		Namespace: s.Namespace, Name: s.Name, ResourceVersion: s.ResourceVersion, CreationTimestamp: s.CreationTimestamp,
		Service: s.Labels[discoveryv1.LabelServiceName], AddressType: s.AddressType, Ports: s.Ports,
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
	if s.Ports != nil {
		out.Ports = make([]discoveryv1.EndpointPort, len(s.Ports))
		for i := range s.Ports {
			s.Ports[i].DeepCopyInto(&out.Ports[i])
		}
	}
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

func (s *endpointSlice) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// The methods of metav1.Object, which client-go's key function and the
// store read objects through. Of the metadata an endpointSlice keeps its
// namespace, name, resource version and creation time; it has no labels
// (Service is the one that is read) and the setters of what it does not
// keep do nothing.

func (s *endpointSlice) GetNamespace() string                  { return s.Namespace }
func (s *endpointSlice) SetNamespace(namespace string)         { s.Namespace = namespace }
func (s *endpointSlice) GetName() string                       { return s.Name }
func (s *endpointSlice) SetName(name string)                   { s.Name = name }
func (s *endpointSlice) GetResourceVersion() string            { return s.ResourceVersion }
func (s *endpointSlice) SetResourceVersion(version string)     { s.ResourceVersion = version }
func (s *endpointSlice) GetCreationTimestamp() metav1.Time     { return s.CreationTimestamp }
func (s *endpointSlice) SetCreationTimestamp(time metav1.Time) { s.CreationTimestamp = time }

func (*endpointSlice) GetGenerateName() string                       { return "" }
func (*endpointSlice) SetGenerateName(string)                        {}
func (*endpointSlice) GetUID() types.UID                             { return "" }
func (*endpointSlice) SetUID(types.UID)                              {}
func (*endpointSlice) GetGeneration() int64                          { return 0 }
func (*endpointSlice) SetGeneration(int64)                           {}
func (*endpointSlice) GetSelfLink() string                           { return "" }
func (*endpointSlice) SetSelfLink(string)                            {}
func (*endpointSlice) GetDeletionTimestamp() *metav1.Time            { return nil }
func (*endpointSlice) SetDeletionTimestamp(*metav1.Time)             {}
func (*endpointSlice) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (*endpointSlice) SetDeletionGracePeriodSeconds(*int64)          {}
func (*endpointSlice) GetLabels() map[string]string                  { return nil }
func (*endpointSlice) SetLabels(map[string]string)                   {}
func (*endpointSlice) GetAnnotations() map[string]string             { return nil }
func (*endpointSlice) SetAnnotations(map[string]string)              {}
func (*endpointSlice) GetFinalizers() []string                       { return nil }
func (*endpointSlice) SetFinalizers([]string)                        {}
func (*endpointSlice) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (*endpointSlice) SetOwnerReferences([]metav1.OwnerReference)    {}
func (*endpointSlice) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (*endpointSlice) SetManagedFields([]metav1.ManagedFieldsEntry)  {}
