package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/internal/kubetest"
)

// TestGatewayServicesFollowTheGateway: with --gateway-services the Gateway
// stands for a LoadBalancer Service that carries its spec.infrastructure
// labels and annotations, owned by the Gateway, with an EndpointSlice of
// the address it is served on. A changed spec.infrastructure changes the
// Service, down to a removed label, while an annotation someone else set
// stays; a Service of that name made by a user is never taken over; once
// the Gateway is gone (the shared control plane runs no garbage
// collector) hostgate deletes both.
func TestGatewayServicesFollowTheGateway(t *testing.T) {
	env := kubetest.Shared(t)
	c := newCluster(t, env, "gateway-services")
	address := podAddress(t)
	port := freePort(t)
	c.must(c.gw.GatewayV1().Gateways(c.ns).Create(t.Context(), &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "gw"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(c.ns),
			Addresses:        []gatewayv1.GatewaySpecAddress{{Type: new(gatewayv1.IPAddressType), Value: address}},
			Listeners:        []gatewayv1.Listener{{Name: "http", Port: gatewayv1.PortNumber(port), Protocol: gatewayv1.HTTPProtocolType}},
			Infrastructure: &gatewayv1.GatewayInfrastructure{
				Labels:      map[gatewayv1.LabelKey]gatewayv1.LabelValue{"team": "a", "tier": "edge"},
				Annotations: map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{"example.com/pool": "public"},
			},
		},
	}, metav1.CreateOptions{}))
	// The name another Gateway's Service would get, taken by a user.
	c.must(c.kube.CoreV1().Services(c.ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "users-" + c.ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{}))
	c.must(c.gw.GatewayV1().Gateways(c.ns).Create(t.Context(), &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "users"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(c.ns),
			Addresses:        []gatewayv1.GatewaySpecAddress{{Type: new(gatewayv1.IPAddressType), Value: address}},
			Listeners:        []gatewayv1.Listener{{Name: "http", Port: gatewayv1.PortNumber(port), Protocol: gatewayv1.HTTPProtocolType, Hostname: new(gatewayv1.Hostname("users.example.com"))}},
		},
	}, metav1.CreateOptions{}))
	t.Cleanup(func() {
		_ = c.gw.GatewayV1().Gateways(c.ns).Delete(context.Background(), "users", metav1.DeleteOptions{})
	})
	c.hostgate(env, "--http-addr=", "--https-addr=", "--gateway-services")

	name := "gw-" + c.ns
	selector := metav1.ListOptions{LabelSelector: gatewayv1.GatewayNameLabelKey + "=gw"}
	service := func(wantLabels, wantAnnotations map[string]string) func() string {
		return func() string {
			list, err := c.kube.CoreV1().Services(c.ns).List(t.Context(), selector)
			if err != nil {
				return err.Error()
			}
			if len(list.Items) != 1 {
				return fmt.Sprintf("%d Services labelled with the Gateway's name, want 1", len(list.Items))
			}
			svc := list.Items[0]
			if svc.Name != name || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != int32(port) {
				return fmt.Sprintf("Service %s of type %s with ports %v, want %s of type LoadBalancer on port %d", svc.Name, svc.Spec.Type, svc.Spec.Ports, name, port)
			}
			if len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].Kind != "Gateway" || svc.OwnerReferences[0].Name != "gw" {
				return fmt.Sprintf("owners %v, want the Gateway", svc.OwnerReferences)
			}
			for k, v := range wantLabels {
				if got, ok := svc.Labels[k]; ok != (v != "") || got != v {
					return fmt.Sprintf("labels %v, want %s=%q", svc.Labels, k, v)
				}
			}
			for k, v := range wantAnnotations {
				if svc.Annotations[k] != v {
					return fmt.Sprintf("annotations %v, want %s=%q", svc.Annotations, k, v)
				}
			}
			return ""
		}
	}
	eventuallyWithin(t, time.Minute, "the Gateway's Service", service(
		map[string]string{"team": "a", "tier": "edge", gatewayv1.GatewayClassNameLabelKey: c.ns},
		map[string]string{"example.com/pool": "public"}))
	eventuallyWithin(t, time.Minute, "the Gateway's EndpointSlice", func() string {
		s, err := c.kube.DiscoveryV1().EndpointSlices(c.ns).Get(t.Context(), name+"-ipv4", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if s.Labels[discoveryv1.LabelServiceName] != name || len(s.Endpoints) != 1 || s.Endpoints[0].Addresses[0] != address {
			return fmt.Sprintf("EndpointSlice with labels %v and endpoints %v, want %s for Service %s", s.Labels, s.Endpoints, address, name)
		}
		return ""
	})

	// Someone else's annotation (a load balancer's) stays; tier goes.
	svc, err := c.kube.CoreV1().Services(c.ns).Get(t.Context(), name, metav1.GetOptions{})
	c.must(svc, err)
	svc.Annotations = maps.Clone(svc.Annotations)
	svc.Annotations["lb.example.com/allocated"] = "yes"
	c.must(c.kube.CoreV1().Services(c.ns).Update(t.Context(), svc, metav1.UpdateOptions{}))
	c.must(c.gw.GatewayV1().Gateways(c.ns).Patch(t.Context(), "gw", types.MergePatchType, c.mergePatch(map[string]any{
		"spec": map[string]any{"infrastructure": map[string]any{
			"labels":      map[string]any{"team": "b", "tier": nil},
			"annotations": map[string]any{"example.com/pool": "private"},
		}},
	}), metav1.PatchOptions{}))
	eventuallyWithin(t, time.Minute, "the changed Service", service(
		map[string]string{"team": "b", "tier": ""},
		map[string]string{"example.com/pool": "private", "lb.example.com/allocated": "yes"}))

	users, err := c.kube.CoreV1().Services(c.ns).Get(t.Context(), "users-"+c.ns, metav1.GetOptions{})
	c.must(users, err)
	if len(users.OwnerReferences) > 0 || users.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("the user's Service was taken over: owners %v, type %s", users.OwnerReferences, users.Spec.Type)
	}

	c.must(nil, c.gw.GatewayV1().Gateways(c.ns).Delete(t.Context(), "gw", metav1.DeleteOptions{}))
	eventuallyWithin(t, time.Minute, "the Service and EndpointSlice deleted", func() string {
		services, err := c.kube.CoreV1().Services(c.ns).List(t.Context(), selector)
		if err != nil {
			return err.Error()
		}
		slices, err := c.kube.DiscoveryV1().EndpointSlices(c.ns).List(t.Context(), selector)
		if err != nil {
			return err.Error()
		}
		if n := len(services.Items) + len(slices.Items); n > 0 {
			return fmt.Sprintf("%d objects of the deleted Gateway left", n)
		}
		return ""
	})
}

// TestGatewayAddressRoutability (GEP-5093) against kube-apiserver with the
// experimental CRDs, which carry the routability fields: with
// --gateway-services and a pool address an EndpointSlice can hold, the
// GatewayClass claims GatewayAddressRoutability and its Cluster variant; a
// Gateway asking for an address of the pool, a Cluster address, a static
// address with the conformance sentinel and another implementation's
// scope gets the first three in status.addresses, each with its
// routability, the Cluster one being the ClusterIP the API server gave
// the Gateway's Service, and AddressesAssigned=False PartiallyAssigned
// naming the fourth entry while the Gateway is programmed on the rest.
// Without that entry every entry is assigned.
func TestGatewayAddressRoutability(t *testing.T) {
	env := kubetest.Shared(t)
	c := newCluster(t, env, "gateway-routability")
	pooled := podAddress(t)
	const static = "127.0.0.71"
	port := freePort(t)
	c.must(c.gw.GatewayV1().Gateways(c.ns).Create(t.Context(), &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "gw"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(c.ns),
			Addresses: []gatewayv1.GatewaySpecAddress{
				{Type: new(gatewayv1.IPAddressType)},
				{Type: new(gatewayv1.IPAddressType), Routability: gatewayv1.GatewayAddressRoutabilityCluster},
				{Type: new(gatewayv1.IPAddressType), Value: static, Routability: "testing.x-k8s.io/sentinel"},
				{Type: new(gatewayv1.IPAddressType), Routability: "example.com/CorpWan"},
			},
			Listeners: []gatewayv1.Listener{{Name: "http", Port: gatewayv1.PortNumber(port), Protocol: gatewayv1.HTTPProtocolType}},
		},
	}, metav1.CreateOptions{}))
	c.hostgate(env, "--http-addr=", "--https-addr=", "--gateway-services", "--address-pool="+pooled)

	eventuallyWithin(t, time.Minute, "the GatewayClass's claims", func() string {
		gc, err := c.gw.GatewayV1().GatewayClasses().Get(t.Context(), c.ns, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		claimed := map[gatewayv1.FeatureName]bool{}
		for _, f := range gc.Status.SupportedFeatures {
			claimed[f.Name] = true
		}
		if !claimed["GatewayAddressRoutability"] || !claimed["GatewayAddressRoutabilityCluster"] {
			return fmt.Sprintf("supported features %v, want GatewayAddressRoutability and GatewayAddressRoutabilityCluster", gc.Status.SupportedFeatures)
		}
		return ""
	})
	// status is the Gateway's status once it shows the ClusterIP of its
	// Service, as "value routability" strings and the condition asked.
	status := func(condition gatewayv1.GatewayConditionType, wantStatus metav1.ConditionStatus, wantReason gatewayv1.GatewayConditionReason, wantMessage string) func() string {
		return func() string {
			svc, err := c.kube.CoreV1().Services(c.ns).Get(t.Context(), "gw-"+c.ns, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			gw, err := c.gw.GatewayV1().Gateways(c.ns).Get(t.Context(), "gw", metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			var got []string
			for _, a := range gw.Status.Addresses {
				if a.Routability == nil {
					return fmt.Sprintf("status address %s without routability", a.Value)
				}
				got = append(got, a.Value+" "+string(*a.Routability))
			}
			want := []string{pooled + " ", svc.Spec.ClusterIP + " Cluster", static + " testing.x-k8s.io/sentinel"}
			if svc.Spec.ClusterIP == "" || !slices.Equal(got, want) {
				return fmt.Sprintf("status addresses %q, want %q", got, want)
			}
			programmed := meta.FindStatusCondition(gw.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed))
			if programmed == nil || programmed.Status != metav1.ConditionTrue || programmed.ObservedGeneration != gw.Generation {
				return fmt.Sprintf("Programmed %+v, want True", programmed)
			}
			cond := meta.FindStatusCondition(gw.Status.Conditions, string(condition))
			if cond == nil || cond.Status != wantStatus || cond.Reason != string(wantReason) || !strings.Contains(cond.Message, wantMessage) || cond.ObservedGeneration != gw.Generation {
				return fmt.Sprintf("%s %+v, want %s %s with %q", condition, cond, wantStatus, wantReason, wantMessage)
			}
			return ""
		}
	}
	eventuallyWithin(t, time.Minute, "the Gateway's addresses, one entry left out", status(gatewayv1.GatewayConditionAddressesAssigned,
		metav1.ConditionFalse, gatewayv1.GatewayReasonAddressesPartiallyAssigned, `spec.addresses[3].routability "example.com/CorpWan": not a scope hostgate provides`))

	gw, err := c.gw.GatewayV1().Gateways(c.ns).Get(t.Context(), "gw", metav1.GetOptions{})
	c.must(gw, err)
	gw.Spec.Addresses = gw.Spec.Addresses[:3]
	c.must(c.gw.GatewayV1().Gateways(c.ns).Update(t.Context(), gw, metav1.UpdateOptions{}))
	eventuallyWithin(t, time.Minute, "the Gateway's addresses, all assigned", status(gatewayv1.GatewayConditionAddressesAssigned,
		metav1.ConditionTrue, gatewayv1.GatewayReasonAddressesAssigned, "every entry of spec.addresses is assigned"))
}
