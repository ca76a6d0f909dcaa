package watch

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestTrimmedServices: the cache holds a Service as a service with what
// translation reads (its type, ports and AnnotationProxyProtocol, and the
// addresses of hostgate's own Services and of the published one only),
// shares equal values among Services, and hands one back as it is when
// client-go transforms it again.
func TestTrimmedServices(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC))
	applied := func(name string, labels map[string]string) *corev1.Service {
		fresh := func(s string) string { return string([]byte(s)) }
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: fresh("shop"), Name: name, UID: "0b6e2c1d", ResourceVersion: "40001", CreationTimestamp: created,
				Labels: labels,
				Annotations: map[string]string{
					AnnotationProxyProtocol:                            "v2",
					"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Service"}`,
				},
				Finalizers: []string{"service.kubernetes.io/load-balancer-cleanup"},
			},
			Spec: corev1.ServiceSpec{
				Type:      corev1.ServiceTypeLoadBalancer,
				Ports:     []corev1.ServicePort{{Name: fresh("http"), Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080}},
				ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}, ExternalIPs: []string{"198.51.100.1"},
				Selector: map[string]string{"app": name}, SessionAffinity: corev1.ServiceAffinityNone,
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}}},
		}
	}
	ports := []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30080}}
	addresses := &serviceAddresses{
		ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}, ExternalIPs: []string{"198.51.100.1"},
		LoadBalancer: []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}},
	}
	gateway := *addresses
	gateway.Gateway = true
	kept := func(name string, addresses *serviceAddresses) *service {
		return &service{
			Namespace: "shop", Name: name, ResourceVersion: "40001", CreationTimestamp: created,
			Type: corev1.ServiceTypeLoadBalancer, Ports: ports, ProxyProtocol: new("v2"), Addresses: addresses,
		}
	}
	in := newInterner()
	in.published = types.NamespacedName{Namespace: "shop", Name: "front"}
	for _, tc := range []struct {
		what string
		svc  *corev1.Service
		want *service
	}{
		{"a user's", applied("web", map[string]string{"app": "web"}), kept("web", nil)},
		{"hostgate's own", applied("gw", map[string]string{ManagedByLabel: ManagedBy}), kept("gw", &gateway)},
		{"the published", applied("front", nil), kept("front", addresses)},
	} {
		got, err := in.trimObject(tc.svc)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: trimmed to\n%#v\nwant\n%#v", tc.what, got, tc.want)
		}
		if again, _ := in.trimObject(got); again != got {
			t.Errorf("%s: transformed again, a service became another", tc.what)
		}
	}

	a, _ := in.trimObject(applied("a", nil))
	b, _ := in.trimObject(applied("b", nil))
	if x, y := a.(*service), b.(*service); !sameString(x.Namespace, y.Namespace) || !sameString(x.Ports[0].Name, y.Ports[0].Name) || x.ProxyProtocol != y.ProxyProtocol {
		t.Error("two Services hold two copies of their namespace, port name or annotation")
	}
	plain := applied("plain", nil)
	plain.Annotations = nil
	if got, _ := in.trimObject(plain); got.(*service).ProxyProtocol != nil {
		t.Error("a Service without the annotation has a proxy protocol")
	}
}
