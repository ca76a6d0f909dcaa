package main

import (
	"fmt"
	"maps"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/internal/kubetest"
)

// TestStatusWritesKeepAnnotations: hostgate's caches leave out the
// annotations it never reads, kubectl's copy of the whole object among
// them, and hostgate writes status from those caches. Every annotation of
// an HTTPRoute, a Gateway and an Ingress is still there once their status
// is written. (The Ingress's would not be if its cached copy lost them:
// its status update keeps the metadata sent.)
func TestStatusWritesKeepAnnotations(t *testing.T) {
	env := kubetest.Shared(t)
	c := newCluster(t, env, "annotations")
	_, backend := serveHTTP(t, podAddress(t), answer("annotated"))
	c.backend("web", backend)
	gatewayPort, ingressPort := freePort(t), freePort(t)
	c.gateway(gatewayPort, 0, "")
	c.route("web", "web.example.com", "/", "web")
	annotations := map[string]string{
		"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Example","metadata":{"name":"web"}}`,
		"example.com/owner": "team-a",
	}
	annotate := func(meta *metav1.ObjectMeta) { meta.Annotations = maps.Clone(annotations) }
	route, err := c.gw.GatewayV1().HTTPRoutes(c.ns).Get(t.Context(), "web", metav1.GetOptions{})
	c.must(route, err)
	annotate(&route.ObjectMeta)
	c.must(c.gw.GatewayV1().HTTPRoutes(c.ns).Update(t.Context(), route, metav1.UpdateOptions{}))
	gw, err := c.gw.GatewayV1().Gateways(c.ns).Get(t.Context(), "gw", metav1.GetOptions{})
	c.must(gw, err)
	annotate(&gw.ObjectMeta)
	c.must(c.gw.GatewayV1().Gateways(c.ns).Update(t.Context(), gw, metav1.UpdateOptions{}))
	ingress := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: networkingv1.IngressSpec{
			IngressClassName: new("annotations"),
			DefaultBackend:   &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
		},
	}
	annotate(&ingress.ObjectMeta)
	c.must(c.kube.NetworkingV1().Ingresses(c.ns).Create(t.Context(), ingress, metav1.CreateOptions{}))

	c.hostgate(env, "--ingress-class", "annotations", "--http-addr", fmt.Sprintf("127.0.0.1:%d", ingressPort), "--https-addr=", "--status-addresses", "127.0.0.1")
	eventuallyWithin(t, time.Minute, "statuses written", func() string {
		route, err := c.gw.GatewayV1().HTTPRoutes(c.ns).Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if len(route.Status.Parents) == 0 {
			return "HTTPRoute without status"
		}
		gw, err := c.gw.GatewayV1().Gateways(c.ns).Get(t.Context(), "gw", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if !meta.IsStatusConditionTrue(gw.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed)) {
			return "Gateway not programmed"
		}
		ing, err := c.kube.NetworkingV1().Ingresses(c.ns).Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if len(ing.Status.LoadBalancer.Ingress) == 0 {
			return "Ingress without status"
		}
		return ""
	})
	eventuallyWithin(t, time.Minute, "the route", expect(fmt.Sprintf("http://127.0.0.1:%d/", gatewayPort), "web.example.com", 200, "annotated"))
	eventuallyWithin(t, time.Minute, "the Ingress", expect(fmt.Sprintf("http://127.0.0.1:%d/", ingressPort), "any.example.com", 200, "annotated"))

	route, err = c.gw.GatewayV1().HTTPRoutes(c.ns).Get(t.Context(), "web", metav1.GetOptions{})
	c.must(route, err)
	gw, err = c.gw.GatewayV1().Gateways(c.ns).Get(t.Context(), "gw", metav1.GetOptions{})
	c.must(gw, err)
	ing, err := c.kube.NetworkingV1().Ingresses(c.ns).Get(t.Context(), "web", metav1.GetOptions{})
	c.must(ing, err)
	for kind, got := range map[string]map[string]string{"HTTPRoute": route.Annotations, "Gateway": gw.Annotations, "Ingress": ing.Annotations} {
		if !maps.Equal(got, annotations) {
			t.Errorf("%s's annotations after hostgate wrote its status: %v, want %v", kind, got, annotations)
		}
	}
}
