package watch

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestPoolAddressStaysPut: a Gateway whose status has not caught up yet
// (the informer's copy lags the status just written) is given the same
// pool address again, whatever Gateways were created or deleted
// meanwhile. In the conformance suite a Gateway created in the same
// second with a name sorting first took the lowest free address from one
// such Gateway, whose clients then found nothing listening there.
func TestPoolAddressStaysPut(t *testing.T) {
	pool := make([]string, 64)
	for i := range pool {
		pool[i] = fmt.Sprintf("127.0.0.%d", 10+i)
	}
	opts := Options{AddressPool: pool}
	gatewayYAML := func(name string) string {
		return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: %s, namespace: tests, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  gatewayClassName: hostgate
  listeners: [{name: http, port: 80, protocol: HTTP}]
`, name)
	}
	addressOf := func(gateways ...string) string {
		t.Helper()
		docs := []string{"apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: hostgate}\nspec: {controllerName: hostgate.dev/gateway-controller}\n"}
		for _, name := range gateways {
			docs = append(docs, gatewayYAML(name))
		}
		var objs objects
		if errs := decodeYAML("in.yaml", strings.NewReader(strings.Join(docs, "---\n")), &objs); len(errs) > 0 {
			t.Fatal(errs)
		}
		objs.sort(&orders{})
		_, reports := translate(&objs, opts)
		for _, r := range reports.Gateways {
			if r.Object.Name == "listener-isolation" {
				if len(r.Status.Addresses) != 1 {
					t.Fatalf("with Gateways %v: listener-isolation has addresses %v; want one of the pool", gateways, r.Status.Addresses)
				}
				return r.Status.Addresses[0].Value
			}
		}
		t.Fatalf("with Gateways %v: no report for listener-isolation", gateways)
		return ""
	}

	alone := addressOf("listener-isolation")
	for _, others := range [][]string{
		{"hostname-matching"},
		{"a-created-meanwhile", "hostname-matching"},
		{"a-created-meanwhile", "b-created-meanwhile", "z-created-meanwhile"},
		{"z-created-meanwhile"},
	} {
		if got := addressOf(append(others, "listener-isolation")...); got != alone {
			t.Errorf("with Gateways %v beside it, listener-isolation got %s; alone it got %s", others, got, alone)
		}
	}
}

// TestProblemsNameTheObject: the log and /debug/routes name the object
// (and listener) of every problem, and list nothing that is fine.
func TestProblemsNameTheObject(t *testing.T) {
	objs, opts := loadCase(t, "testdata/gateway-addresses")
	_, reports := translate(objs, opts)
	problems := reports.Problems()
	for _, want := range []string{
		"Gateway infra/c-exhausted: Programmed=False AddressNotAssigned: the address pool is exhausted",
		"Gateway infra/c-exhausted listener http: Programmed=False Pending: the Gateway is not programmed: the address pool is exhausted",
		"GatewayClass with-params: Accepted=False InvalidParameters: ",
	} {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("no problem starts with %q; problems:\n%s", want, strings.Join(problems, "\n"))
		}
	}
	for _, p := range problems {
		if strings.HasPrefix(p, "Gateway infra/a-static:") || strings.HasPrefix(p, "Gateway infra/b-pool") {
			t.Errorf("problem of a Gateway that is fine: %s", p)
		}
	}
}

// TestUnusableAddress: a spec.addresses value the node cannot bind leaves
// the Gateway accepted but not Programmed (AddressNotUsable, naming the
// field and why) and not served; without it, the Gateway serves on its
// other address.
func TestUnusableAddress(t *testing.T) {
	input := ourClass + `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: hostgate
  addresses: [{value: 192.0.2.1}, {value: 127.0.0.5}]
  listeners: [{name: http, port: 8080, protocol: HTTP}]
`
	objs := decodeStore(t, input)
	usable := func(ip netip.Addr) error {
		if ip.IsLoopback() {
			return nil
		}
		return errors.New("not an address of this node")
	}
	snap, reports := translate(objs, Options{AddressUsable: usable})
	if len(reports.Gateways) != 1 {
		t.Fatalf("reports: %+v", reports.Gateways)
	}
	st := reports.Gateways[0].Status
	accepted := meta.FindStatusCondition(st.Conditions, "Accepted")
	programmed := meta.FindStatusCondition(st.Conditions, "Programmed")
	if accepted == nil || accepted.Status != metav1.ConditionTrue {
		t.Errorf("Accepted = %+v; want True", accepted)
	}
	if programmed == nil || programmed.Status != metav1.ConditionFalse || programmed.Reason != "AddressNotUsable" ||
		!strings.Contains(programmed.Message, `spec.addresses[0].value "192.0.2.1": not an address of this node`) {
		t.Errorf("Programmed = %+v; want False AddressNotUsable naming spec.addresses[0]", programmed)
	}
	if len(snap.Listeners) != 0 {
		t.Errorf("listeners = %+v; want none while an address is not usable", snap.Listeners)
	}

	objs.gateways[0].Spec.Addresses = objs.gateways[0].Spec.Addresses[1:]
	snap, reports = translate(objs, Options{AddressUsable: usable})
	if c := meta.FindStatusCondition(reports.Gateways[0].Status.Conditions, "Programmed"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("with the unusable address removed, Programmed = %+v; want True", c)
	}
	var names []string
	for _, l := range snap.Listeners {
		names = append(names, l.Name)
	}
	if !slices.Equal(names, []string{"127.0.0.5:8080"}) {
		t.Errorf("with the unusable address removed, listeners = %v; want 127.0.0.5:8080", names)
	}
}

// TestUnreachablePort: with the hostPorts of hostgate's pod known, a
// listener on another port is not accepted (PortUnavailable) and not
// bound, while the listeners on mapped ports serve.
func TestUnreachablePort(t *testing.T) {
	input := ourClass + `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: hostgate
  addresses: [{value: 127.0.0.5}]
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: other, port: 8080, protocol: HTTP}
  - {name: dns, port: 53, protocol: UDP}
  - {name: game, port: 443, protocol: UDP}
`
	objs := decodeStore(t, input)
	// 53 is a TCP hostPort only: a UDP listener on it is unreachable.
	snap, reports := translate(objs, Options{ReachablePorts: &Ports{TCP: []int32{80, 443, 53}, UDP: []int32{443}}})
	for _, l := range reports.Gateways[0].Status.Listeners {
		accepted := meta.FindStatusCondition(l.Conditions, "Accepted")
		programmed := meta.FindStatusCondition(l.Conditions, "Programmed")
		switch l.Name {
		case "http", "game":
			if accepted.Status != metav1.ConditionTrue || programmed.Status != metav1.ConditionTrue {
				t.Errorf("listener %s: Accepted %+v, Programmed %+v; want both True", l.Name, accepted, programmed)
			}
		case "other", "dns":
			port := map[string]string{"other": "port 8080/tcp", "dns": "port 53/udp"}[string(l.Name)]
			if accepted.Status != metav1.ConditionFalse || accepted.Reason != "PortUnavailable" || !strings.Contains(accepted.Message, port) ||
				programmed.Status != metav1.ConditionFalse {
				t.Errorf("listener %s: Accepted %+v, Programmed %+v; want Accepted=False PortUnavailable naming %s, not Programmed", l.Name, accepted, programmed, port)
			}
		}
	}
	var names []string
	for _, l := range snap.Listeners {
		names = append(names, l.Name)
	}
	if !slices.Equal(names, []string{"127.0.0.5:80", "127.0.0.5:443/udp"}) {
		t.Errorf("listeners = %v; want only 127.0.0.5:80 and 127.0.0.5:443/udp", names)
	}
}

// ourClass is our GatewayClass, as a test's input starts.
const ourClass = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: hostgate}
spec: {controllerName: hostgate.dev/gateway-controller}
---
`

// decodeStore reads a test's YAML into a sorted store.
func decodeStore(t *testing.T, input string) *objects {
	t.Helper()
	var objs objects
	if errs := decodeYAML("in.yaml", strings.NewReader(input), &objs); len(errs) > 0 {
		t.Fatal(errs)
	}
	objs.sort(&orders{})
	return &objs
}

// TestClaimsFollowTheMode: GatewayAddressRoutability is claimed only where
// the CRDs carry the routability fields (the experimental channel), its
// Cluster variant only with --gateway-services too and a pool (if any)
// whose addresses can be endpoints, and GatewayInfrastructure with
// --gateway-services whatever the channel.
func TestClaimsFollowTheMode(t *testing.T) {
	for _, c := range []struct {
		channel  string
		services bool
		pool     []string
		want     []gatewayv1.FeatureName
	}{
		{"standard", false, nil, nil},
		{"standard", true, nil, []gatewayv1.FeatureName{gatewayInfrastructure}},
		{"", true, nil, []gatewayv1.FeatureName{gatewayInfrastructure}},
		{"experimental", false, nil, []gatewayv1.FeatureName{gatewayAddressRoutability}},
		{"experimental", true, nil, []gatewayv1.FeatureName{gatewayAddressRoutability, gatewayAddressRoutabilityCluster, gatewayInfrastructure}},
		{"experimental", true, []string{"192.0.2.10", "2001:db8::10"}, []gatewayv1.FeatureName{gatewayAddressRoutability, gatewayAddressRoutabilityCluster, gatewayInfrastructure}},
		// A ClusterIP cannot lead to a Gateway served on loopback.
		{"experimental", true, []string{"192.0.2.10", "127.0.0.10"}, []gatewayv1.FeatureName{gatewayAddressRoutability, gatewayInfrastructure}},
	} {
		objs := decodeStore(t, ourClass)
		objs.crdChannel = c.channel
		_, reports := translate(objs, Options{GatewayServices: c.services, AddressPool: c.pool})
		var got []gatewayv1.FeatureName
		for _, f := range reports.GatewayClasses[0].Status.SupportedFeatures {
			if !slices.Contains(supportedFeatures, f.Name) {
				got = append(got, f.Name)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("channel %q, --gateway-services=%t, pool %v: claimed beside the base list %v, want %v", c.channel, c.services, c.pool, got, c.want)
		}
	}
}
