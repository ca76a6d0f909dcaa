package watch

// The objects that stand for a Gateway (Options.GatewayServices).
//
// hostgate runs as a DaemonSet: no Deployment or Pod is made for a
// Gateway, so nothing would carry spec.infrastructure's labels and
// annotations. With GatewayServices each Gateway of our classes stands for
// a Service of type LoadBalancer in its namespace, without a selector,
// whose EndpointSlices name the addresses hostgate serves the Gateway on:
// a bare-metal load balancer (MetalLB) can give each Gateway an address of
// its own, and kube-proxy takes that address's traffic to hostgate. The
// status writer creates, updates and deletes them; here they are only
// described, from the store like everything else.

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Labels that mark the objects hostgate keeps for Gateways. ManagedByLabel
// is what the status writer watches and deletes by; it is set last, so no
// spec.infrastructure label can take an object away from hostgate.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "hostgate"
	// endpointSliceManager keeps the endpointslice controllers off our
	// EndpointSlices.
	endpointSliceManager = "gateway-services.hostgate.dev"
)

// Infrastructure is what stands for one Gateway.
type Infrastructure struct {
	Service *corev1.Service
	// EndpointSlices hold one slice per address family that has an
	// address the API server takes in an EndpointSlice.
	EndpointSlices []*discoveryv1.EndpointSlice
}

// infrastructure describes the Service and EndpointSlices of g, served on
// addresses; nil when the Gateway has no port to give a Service. Invalid
// Gateways get theirs too: the address a load balancer gave the Service
// must outlive a mistake in the Gateway.
func infrastructure(gw *gatewayv1.Gateway, addresses []string) *Infrastructure {
	ports := servicePorts(gw.Spec.Listeners)
	if len(ports) == 0 {
		return nil
	}
	meta := infrastructureMeta(gw)
	meta.Name = serviceName(gw.Name, string(gw.Spec.GatewayClassName))
	infra := &Infrastructure{Service: &corev1.Service{
		ObjectMeta: meta,
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports},
	}}
	families := endpointAddresses(addresses)
	for _, family := range slices.Sorted(maps.Keys(families)) {
		slice := &discoveryv1.EndpointSlice{ObjectMeta: infrastructureMeta(gw), AddressType: family}
		slice.Name = meta.Name + "-" + strings.ToLower(string(family))
		slice.Labels[discoveryv1.LabelServiceName] = meta.Name
		slice.Labels[discoveryv1.LabelManagedBy] = endpointSliceManager
		for _, p := range ports {
			slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: new(p.Name), Protocol: new(p.Protocol), Port: new(p.Port)})
		}
		for _, a := range families[family] {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{a},
				Conditions: discoveryv1.EndpointConditions{Ready: new(true)},
			})
		}
		infra.EndpointSlices = append(infra.EndpointSlices, slice)
	}
	return infra
}

// infrastructureMeta is the namespace, labels, annotations and owner of
// an object that stands for gw.
func infrastructureMeta(gw *gatewayv1.Gateway) metav1.ObjectMeta {
	meta := metav1.ObjectMeta{
		Namespace:   gw.Namespace,
		Labels:      map[string]string{},
		Annotations: map[string]string{},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: gatewayv1.GroupVersion.String(), Kind: "Gateway", Name: gw.Name, UID: gw.UID, Controller: new(true),
		}},
	}
	if infra := gw.Spec.Infrastructure; infra != nil {
		for k, v := range infra.Labels {
			meta.Labels[string(k)] = string(v)
		}
		for k, v := range infra.Annotations {
			meta.Annotations[string(k)] = string(v)
		}
	}
	// Names longer than a label value (Gateway names go up to 253
	// characters) are left out rather than cut: a cut name would select
	// another Gateway's objects. The owner reference still names it.
	for key, value := range map[string]string{
		gatewayv1.GatewayNameLabelKey:      gw.Name,
		gatewayv1.GatewayClassNameLabelKey: string(gw.Spec.GatewayClassName),
	} {
		if len(validation.IsValidLabelValue(value)) == 0 {
			meta.Labels[key] = value
		}
	}
	meta.Labels[ManagedByLabel] = ManagedBy
	return meta
}

// servicePorts are the ports of gw's listeners, one per port and
// protocol: TCP for every listener but UDP ones, UDP for those and for
// HTTPS (HTTP/3).
func servicePorts(listeners []gatewayv1.Listener) []corev1.ServicePort {
	var ports []corev1.ServicePort
	add := func(port int32, protocol corev1.Protocol) {
		name := fmt.Sprintf("%s-%d", strings.ToLower(string(protocol)), port)
		if !slices.ContainsFunc(ports, func(p corev1.ServicePort) bool { return p.Name == name }) {
			ports = append(ports, corev1.ServicePort{Name: name, Protocol: protocol, Port: port, TargetPort: intstr.FromInt32(port)})
		}
	}
	for _, l := range listeners {
		if l.Port < 1 || l.Port > 65535 {
			continue
		}
		if l.Protocol == gatewayv1.UDPProtocolType {
			add(int32(l.Port), corev1.ProtocolUDP)
			continue
		}
		add(int32(l.Port), corev1.ProtocolTCP)
		if l.Protocol == gatewayv1.HTTPSProtocolType {
			add(int32(l.Port), corev1.ProtocolUDP)
		}
	}
	return ports
}

// serviceName is the name of the Service of Gateway gateway of class
// class: "<gateway>-<class>", as GEP-1762 recommends, which keeps it off
// the names users give their own Services. A Service name is a DNS label
// of at most 63 characters, and a Gateway's name is not: a name that does
// not fit is cut and ends in a hash of the whole, so that it stays unique.
func serviceName(gateway, class string) string {
	name := gateway + "-" + class
	if len(validation.IsDNS1035Label(name)) == 0 {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(gateway))
	h.Write([]byte{'/'})
	h.Write([]byte(class))
	suffix := fmt.Sprintf("-%08x", h.Sum32())
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	base := b.String()
	if base == "" || base[0] < 'a' || base[0] > 'z' {
		base = "gw-" + base
	}
	base = base[:min(len(base), validation.DNS1035LabelMaxLength-len(suffix))]
	return strings.TrimRight(base, "-") + suffix
}
