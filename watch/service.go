package watch

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// service is a Service as the store holds it: what translation reads of
// it (backends.go: its type, ports and AnnotationProxyProtocol;
// addresses.go and ingress.go: the addresses of hostgate's own and of
// the published one), and what informers and the store key and order
// objects by. The informers' transform (trimObject) turns each Service
// into one before it enters their cache, file mode as it is added to the
// store (objects.add). A trimmed corev1.Service kept its whole
// ObjectMeta, ServiceSpec and ServiceStatus, mostly empty, for a type and
// ports: of 10,000 Services of one port each, one took 771 bytes of the
// heap, a service takes 259 (BenchmarkCachedObjects, which counts the
// interner's tables too, went from 932 to 420).
//
// Its fields are exported for the interner to share their values
// (intern); the type is not, as nothing outside the package reads it.
type service struct {
	cachedMeta
	Type  corev1.ServiceType
	Ports []corev1.ServicePort
	// ProxyProtocol is the annotation AnnotationProxyProtocol, nil where
	// the Service has none.
	ProxyProtocol *string
	// Addresses are kept of few Services (see newService), nil for the
	// others.
	Addresses *serviceAddresses
}

// serviceAddresses are the addresses of a Service that hostgate reads:
// the ClusterIPs of those it keeps for Gateways (gatewayServiceIPs), and
// those --publish-service writes to Ingress status (publishedAddresses).
type serviceAddresses struct {
	// Gateway is set on a Service labelled as hostgate's (ManagedByLabel),
	// which a user's Service of the same name is not.
	Gateway                 bool
	ClusterIP, ExternalName string
	ClusterIPs, ExternalIPs []string
	LoadBalancer            []corev1.LoadBalancerIngress
}

// newService returns what the store keeps of s, sharing its strings and
// slices. The addresses are kept of hostgate's own Services, and of the
// others when addresses is set: the cache keeps them of the published
// Service only, file mode, which reads few Services and is not told which
// one is published, of every one.
func newService(s *corev1.Service, addresses bool) *service {
	out := &service{cachedMeta: newCachedMeta(&s.ObjectMeta), Type: s.Spec.Type, Ports: s.Spec.Ports}
	if v, ok := s.Annotations[AnnotationProxyProtocol]; ok {
		out.ProxyProtocol = &v
	}
	gateway := s.Labels[ManagedByLabel] == ManagedBy
	if gateway || addresses {
		out.Addresses = &serviceAddresses{
			Gateway: gateway, ClusterIP: s.Spec.ClusterIP, ExternalName: s.Spec.ExternalName,
			ClusterIPs: s.Spec.ClusterIPs, ExternalIPs: s.Spec.ExternalIPs, LoadBalancer: s.Status.LoadBalancer.Ingress,
		}
	}
	return out
}

// DeepCopy returns a copy of s that shares nothing with it.
func (s *service) DeepCopy() *service {
	out := *s
	out.Ports = deepCopied(s.Ports)
	if s.ProxyProtocol != nil {
		out.ProxyProtocol = new(*s.ProxyProtocol)
	}
	if s.Addresses != nil {
		a := *s.Addresses
		a.ClusterIPs, a.ExternalIPs = slices.Clone(a.ClusterIPs), slices.Clone(a.ExternalIPs)
		a.LoadBalancer = deepCopied(a.LoadBalancer)
		out.Addresses = &a
	}
	return &out
}

// DeepCopyObject and GetObjectKind make a service a runtime.Object, as
// they do an endpointSlice.
func (s *service) DeepCopyObject() runtime.Object { return s.DeepCopy() }

func (*service) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
