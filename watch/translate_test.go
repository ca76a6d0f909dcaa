package watch

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

func TestHostnamesOn(t *testing.T) {
	tests := []struct {
		listener string
		route    []string
		want     []string
		ok       bool
	}{
		{"", nil, nil, true},
		{"", []string{"a.example.com"}, []string{"a.example.com"}, true},
		{"a.example.com", nil, nil, true},
		{"a.example.com", []string{"a.example.com", "b.example.com"}, []string{"a.example.com"}, true},
		{"a.example.com", []string{"b.example.com", "a.example.com"}, []string{"a.example.com"}, true},
		{"*.example.com", []string{"a.b.example.com"}, []string{"a.b.example.com"}, true},
		{"*.example.com", []string{"example.com"}, nil, false},
		// Not narrowed: within listener a.example.com's scope, a route
		// for a.example.com still wins over this one.
		{"a.example.com", []string{"*.example.com"}, []string{"*.example.com"}, true},
		{"*.example.com", []string{"*.a.example.com"}, []string{"*.a.example.com"}, true},
		{"*.a.example.com", []string{"*.example.com"}, []string{"*.example.com"}, true},
		{"*.example.com", []string{"*.com", "x.example.org"}, []string{"*.com"}, true},
		{"*.example.com", []string{"*.example.org", "x.example.org"}, nil, false},
		{"a.example.com", []string{"*.a.example.com"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%v", tt.listener, tt.route), func(t *testing.T) {
			got, ok := hostnamesOn(tt.listener, tt.route)
			if ok != tt.ok || !slices.Equal(got, tt.want) {
				t.Errorf("hostnamesOn(%q, %q) = %q, %t; want %q, %t", tt.listener, tt.route, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestBackendProtocol(t *testing.T) {
	tests := []struct {
		appProtocol string
		grpc        bool
		want        string
		ok          bool
	}{
		{"", false, "", true},
		{"", true, "h2c", true},
		{"kubernetes.io/h2c", false, "h2c", true},
		{"https", false, "https", true},
		{"https", true, "h2", true},
		{"kubernetes.io/ws", false, "", true},
		{"kubernetes.io/wss", false, "https", true},
		{"example.com/custom", false, "", false},
	}
	for _, tt := range tests {
		p := &tt.appProtocol
		if tt.appProtocol == "" {
			p = nil
		}
		got, ok := backendProtocol(p, tt.grpc)
		if got != tt.want || ok != tt.ok {
			t.Errorf("backendProtocol(%q, grpc=%t) = %q, %t; want %q, %t", tt.appProtocol, tt.grpc, got, ok, tt.want, tt.ok)
		}
	}
}

func TestPrivateKeyRedacts(t *testing.T) {
	c := Cert{Name: "default/tls", KeyPEM: PrivateKey("-----BEGIN PRIVATE KEY-----secret")}
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
		if out := fmt.Sprintf(format, c); strings.Contains(out, "secret") || strings.Contains(out, "BEGIN") {
			t.Errorf("Sprintf(%q) leaks the key: %s", format, out)
		}
	}
	text, err := c.KeyPEM.MarshalText()
	if err != nil || string(text) != "[REDACTED]" {
		t.Errorf("MarshalText = %q, %v", text, err)
	}
}

func TestDecodeYAMLErrors(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{"unknown field", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {portz: []}\n", `unknown field "portz"`},
		{"no name", "apiVersion: v1\nkind: Service\nmetadata: {}\n", "metadata.name: must not be empty"},
		{"no kind", "metadata: {name: a}\n", "apiVersion and kind: missing"},
		{"bad version", "apiVersion: gateway.networking.k8s.io/v9\nkind: Gateway\nmetadata: {name: a}\n", `apiVersion "gateway.networking.k8s.io/v9": not supported`},
		{"namespaced cluster kind", "apiVersion: v1\nkind: Node\nmetadata: {name: a, namespace: x}\n", "is cluster-scoped"},
		{"bad list item", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {}}\n", "items[0]: Service: metadata.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs objects
			errs := decodeYAML("in.yaml", strings.NewReader(tt.input), &objs)
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.want) || !strings.HasPrefix(errs[0].Error(), "in.yaml: document 0: ") {
				t.Fatalf("errors = %v; want one naming the document and containing %q", errs, tt.want)
			}
		})
	}
}

func TestDecodeYAMLKeepsGoodDocuments(t *testing.T) {
	input := `apiVersion: v1
kind: Service
metadata: {name: good}
---
apiVersion: v1
kind: Service
metadata: {name: bad}
spec: {nope: 1}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ignored}
`
	var objs objects
	errs := decodeYAML("in.yaml", strings.NewReader(input), &objs)
	if len(errs) != 1 || len(objs.services) != 1 || objs.services[0].Name != "good" || objs.services[0].Namespace != "default" {
		t.Fatalf("errs=%v services=%d; want the good Service in namespace default and one error", errs, len(objs.services))
	}
}

// TestPublishedAddresses: the addresses --publish-service takes from each
// type of Service are those ingress-nginx writes to Ingress status.
func TestPublishedAddresses(t *testing.T) {
	ip := func(a string) networkingv1.IngressLoadBalancerIngress {
		return networkingv1.IngressLoadBalancerIngress{IP: a}
	}
	name := func(h string) networkingv1.IngressLoadBalancerIngress {
		return networkingv1.IngressLoadBalancerIngress{Hostname: h}
	}
	for _, tc := range []struct {
		what    string
		svc     *corev1.Service
		want    []networkingv1.IngressLoadBalancerIngress
		problem string
	}{
		{"missing", nil, nil, "no such Service"},
		{"load balancer, IPs and hostnames, then external IPs", &corev1.Service{
			Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.0.0.1", ExternalIPs: []string{"198.51.100.1"}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1", Hostname: "ignored.example"}, {Hostname: "lb.example.net"}}}},
		}, []networkingv1.IngressLoadBalancerIngress{ip("192.0.2.1"), name("lb.example.net"), ip("198.51.100.1")}, ""},
		{"load balancer without address", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.0.0.1"}},
			nil, "its load balancer has no address yet"},
		{"node port with external IPs", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.0.0.1", ExternalIPs: []string{"198.51.100.1"}}},
			[]networkingv1.IngressLoadBalancerIngress{ip("198.51.100.1")}, ""},
		{"node port", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.0.0.1"}},
			[]networkingv1.IngressLoadBalancerIngress{ip("10.0.0.1")}, ""},
		{"cluster IP", &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1"}},
			[]networkingv1.IngressLoadBalancerIngress{ip("10.0.0.1")}, ""},
		{"headless", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone}},
			nil, "the Service has no address"},
		{"external name", &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "front.example.net"}},
			[]networkingv1.IngressLoadBalancerIngress{name("front.example.net")}, ""},
	} {
		var svc *service
		if tc.svc != nil {
			svc = newService(tc.svc, true)
		}
		got, problem := publishedAddresses(svc)
		if !reflect.DeepEqual(got, tc.want) || problem != tc.problem {
			t.Errorf("%s: %v, %q; want %v, %q", tc.what, got, problem, tc.want, tc.problem)
		}
	}
}
