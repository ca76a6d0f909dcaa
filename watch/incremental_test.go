package watch

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/router"
)

// TestSpliceMatchesTranslation makes random sequences of HTTPRoute,
// GRPCRoute and Ingress changes in every golden case (an object removed,
// put back, copied under a new name, recreated at another time, its
// generation changed; a route's hostnames, rules or first parentRef's
// section; an Ingress's hosts, rules, TLS, class, deletion or annotations
// that act across Ingresses), each followed by a translation with the
// memo, which splices them where it can, and checks its Snapshot and
// Reports against a translation of the same store without memo. One step
// in eight also replaces another object with a copy of a new generation,
// which must make a full translation: whatever a splice does not follow
// would otherwise go unnoticed. Another one in eight writes a Gateway's
// status, as hostgate does when its attached routes change, which a
// splice may pass over. And one in four removes, puts back or changes a
// Service or ReferenceGrant, which a splice follows by translating again
// the routes that looked it up, or an EndpointSlice, which a splice
// follows by making the endpoint sets of its Service again.
func TestSpliceMatchesTranslation(t *testing.T) {
	spliced, afterStatus, afterLookedUp, afterSlices := 0, 0, 0, 0
	var ingressSteps [2]int // Ingress changes translated in full, spliced
	certsSpliced := 0       // splices that changed a listener's certificates
	eachCase(t, func(t *testing.T, _ string, objs *objects, opts Options) {
		for _, l := range listers {
			t.Run(l.name, func(t *testing.T) {
				listed := l.new()
				var original []any
				for _, r := range objs.httpRoutes {
					original = append(original, r)
				}
				for _, r := range objs.grpcRoutes {
					original = append(original, r)
				}
				for _, ing := range objs.ingresses {
					original = append(original, ing)
				}
				if len(original) == 0 {
					return
				}
				rng := rand.New(rand.NewPCG(29, uint64(len(original))))
				current := slices.Clone(original) // nil where removed
				var lookedUp []any                // Services, ReferenceGrants and EndpointSlices, nil where removed
				others := slices.DeleteFunc(objs.all(), func(o any) bool {
					switch o.(type) {
					case *gatewayv1.HTTPRoute, *gatewayv1.GRPCRoute, *networkingv1.Ingress:
						return true
					case *service, *gatewayv1.ReferenceGrant, *endpointSlice:
						lookedUp = append(lookedUp, o)
						return true
					}
					return false
				})
				lookedUpOriginal := slices.Clone(lookedUp)
				var gateways []int // in others
				for j, o := range others {
					if meta := o.(metav1.Object); meta.GetGeneration() == 0 {
						// A status write is told apart from a change of
						// spec by the generation, which the API server sets.
						meta.SetGeneration(1)
					}
					if _, ok := o.(*gatewayv1.Gateway); ok {
						gateways = append(gateways, j)
					}
				}
				list := func() []any { return present(present(others, lookedUp), current) }
				m := newMemo()
				last, _ := m.translate(listed(objs, list()), opts)
				for step := range 200 {
					i := rng.IntN(len(current))
					base := current[i]
					if base == nil {
						base = original[i]
					}
					_, ingress := base.(*networkingv1.Ingress)
					variants := routeVariants
					if ingress {
						variants = ingressVariants
						// One change at a time: those that keep Ingresses
						// from splicing (deletion, a canary) would pile up.
						base = original[i]
					}
					v := variants[rng.IntN(len(variants))]
					what := fmt.Sprintf("step %d: %s %s", step, describeObject(base), v.name)
					switch v.name {
					case "removed":
						current[i] = nil
					case "back":
						current[i] = original[i]
					case "copied":
						c := copyObject(base)
						meta := c.(metav1.Object)
						meta.SetName(fmt.Sprintf("%s-copy-%d", meta.GetName(), step))
						if ing, ok := c.(*networkingv1.Ingress); ok && rng.IntN(2) == 0 {
							what += " elsewhere"
							moveIngress(ing, fmt.Sprintf("c%d", step))
						}
						current, original = append(current, c), append(original, c)
					default:
						c := copyObject(base)
						v.change(rng, c)
						current[i] = c
					}
					full, status, changedLookedUp, changedSlice := false, false, false, false
					switch rng.IntN(8) {
					case 0:
						if len(others) == 0 {
							break
						}
						full = true
						j := rng.IntN(len(others))
						what += ", " + describeObject(others[j]) + " changed"
						c := copyObject(others[j])
						meta := c.(metav1.Object)
						meta.SetGeneration(meta.GetGeneration() + 1)
						others[j] = c
					case 1:
						if len(gateways) == 0 {
							break
						}
						j := gateways[rng.IntN(len(gateways))]
						what += ", " + describeObject(others[j]) + " status written"
						g := copyObject(others[j]).(*gatewayv1.Gateway)
						for l := range g.Status.Listeners {
							g.Status.Listeners[l].AttachedRoutes = int32(rng.IntN(5))
						}
						g.Status.Conditions = append(g.Status.Conditions, metav1.Condition{Type: "Spliced", Status: metav1.ConditionTrue, ObservedGeneration: int64(step)})
						others[j] = g
						status = true
					case 2, 3:
						if len(lookedUp) == 0 {
							break
						}
						j := rng.IntN(len(lookedUp))
						v := lookedUpVariants[rng.IntN(len(lookedUpVariants))]
						what += ", " + describeObject(lookedUpOriginal[j]) + " " + v.name
						lookedUp[j] = v.change(lookedUpOriginal[j])
						_, changedSlice = lookedUpOriginal[j].(*endpointSlice)
						changedLookedUp = !changedSlice
					}
					snap, reports := m.translate(listed(objs, list()), opts)
					if full && m.spliced {
						t.Fatalf("%s: spliced, where another object changed", what)
					}
					if ingress && !full {
						ingressSteps[btoi(m.spliced)]++
					}
					if m.spliced {
						spliced++
						if !reflect.DeepEqual(listenerCerts(snap), listenerCerts(last)) {
							certsSpliced++
						}
						if status {
							afterStatus++
						}
						if changedLookedUp {
							afterLookedUp++
						}
						if changedSlice {
							afterSlices++
						}
					}
					what = fmt.Sprintf("%s (spliced: %v)", what, m.spliced)
					checkServed(t, what, objs, list(), opts, snap, reports)
					// What a splice leaves for the next one is what a full
					// translation would: no more memo entries, the same
					// Ingresses, and the checks of every key pair in use.
					fresh := newMemo()
					fresh.translate(store(objs, list()), opts)
					if len(m.objects) != len(fresh.objects) || !sameIngressState(m.ingresses, fresh.ingresses) {
						t.Fatalf("%s: the memo keeps %d entries and Ingresses %+v, a full translation %d and %+v", what, len(m.objects), m.ingresses, len(fresh.objects), fresh.ingresses)
					}
					for secret := range fresh.certs {
						if _, ok := m.certs[secret]; !ok {
							t.Fatalf("%s: the memo lost the key pair check of Secret %s/%s", what, secret.Namespace, secret.Name)
						}
					}
					last = snap
				}
			})
		}
	})
	if spliced == 0 || afterStatus == 0 || afterLookedUp == 0 || afterSlices == 0 || certsSpliced == 0 || ingressSteps[0] == 0 || ingressSteps[1] == 0 {
		t.Errorf("%d translations spliced, %d of them after a Gateway's status was written, %d after a Service or ReferenceGrant changed, %d after an EndpointSlice did, %d changing certificates; of those after an Ingress changed, %d spliced, %d not: the test checked too little",
			spliced, afterStatus, afterLookedUp, afterSlices, certsSpliced, ingressSteps[1], ingressSteps[0])
	}
}

// moveIngress gives ing hosts of its own, label added to each of its
// hosts, and takes its defaultBackend away: a copy that shares nothing
// with its original.
func moveIngress(ing *networkingv1.Ingress, label string) {
	move := func(host string) string {
		if rest, ok := strings.CutPrefix(host, "*."); ok {
			return "*." + label + "." + rest
		}
		return label + "." + host
	}
	for i := range ing.Spec.Rules {
		ing.Spec.Rules[i].Host = move(ing.Spec.Rules[i].Host)
	}
	for i := range ing.Spec.TLS {
		for j := range ing.Spec.TLS[i].Hosts {
			ing.Spec.TLS[i].Hosts[j] = move(ing.Spec.TLS[i].Hosts[j])
		}
	}
	ing.Spec.DefaultBackend = nil
}

// sameIngressState reports whether a and b hold the same.
func sameIngressState(a, b *ingressState) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.DeepEqual(a.keys, b.keys) && slices.Equal(a.hosts, b.hosts) &&
		slices.EqualFunc(a.certs, b.certs, func(x, y ingressCert) bool { return reflect.DeepEqual(x, y) }) &&
		reflect.DeepEqual(a.clientAuth, b.clientAuth)
}

// listenerCerts are the certificates of each listener of snap.
func listenerCerts(snap *Snapshot) [][]Cert {
	var out [][]Cert
	for _, l := range snap.Listeners {
		out = append(out, l.Certs)
	}
	return out
}

// lookedUpVariants are the changes TestSpliceMatchesTranslation makes to
// a Service, ReferenceGrant or EndpointSlice: each returns what the store
// holds instead of the original, nil for nothing.
var lookedUpVariants = []struct {
	name   string
	change func(original any) any
}{
	{"removed", func(any) any { return nil }},
	{"back", func(original any) any { return original }},
	{"changed", func(original any) any {
		switch o := copyObject(original).(type) {
		case *service:
			// Routes that name the port find none; those that name
			// the next one find it, with another protocol.
			for i := range o.Ports {
				o.Ports[i].Port++
				o.Ports[i].AppProtocol = new("kubernetes.io/h2c")
			}
			return o
		case *gatewayv1.ReferenceGrant:
			// Grants to Gateways what it granted to routes, and the
			// other way round.
			for i := range o.Spec.From {
				if o.Spec.From[i].Kind == "Gateway" {
					o.Spec.From[i].Kind = "HTTPRoute"
				} else {
					o.Spec.From[i].Kind = "Gateway"
				}
			}
			return o
		case *endpointSlice:
			// An endpoint more, and the first one no longer ready.
			o.Endpoints = append(o.Endpoints, sliceEndpoint{Addresses: []string{"10.29.0.1"}, Ready: true})
			o.Endpoints[0].Ready = false
			return o
		}
		panic(fmt.Sprintf("not a Service, ReferenceGrant or EndpointSlice: %T", original))
	}},
}

// spliceVariant is a change TestSpliceMatchesTranslation makes to an
// object; removed, back and copied are made by the test itself.
type spliceVariant struct {
	name   string
	change func(*rand.Rand, any)
}

// objectVariants are the changes made to an object of any kind.
var objectVariants = []spliceVariant{
	{"removed", nil},
	{"back", nil},
	{"copied", nil},
	{"recreated", func(rng *rand.Rand, obj any) {
		meta := obj.(metav1.Object)
		at := meta.GetCreationTimestamp().Add(time.Duration(rng.IntN(7200)-3600) * time.Second)
		meta.SetCreationTimestamp(metav1.NewTime(at))
	}},
	{"generation", func(_ *rand.Rand, obj any) {
		meta := obj.(metav1.Object)
		meta.SetGeneration(meta.GetGeneration() + 1)
	}},
}

// routeVariants are the changes made to an HTTPRoute or GRPCRoute.
var routeVariants = slices.Concat(objectVariants, []spliceVariant{
	{"hostname added", func(rng *rand.Rand, obj any) {
		h := gatewayv1.Hostname(fmt.Sprintf("spliced-%d.example.com", rng.IntN(3)))
		switch r := obj.(type) {
		case *gatewayv1.HTTPRoute:
			r.Spec.Hostnames = append(r.Spec.Hostnames, h)
		case *gatewayv1.GRPCRoute:
			r.Spec.Hostnames = append(r.Spec.Hostnames, h)
		}
	}},
	{"hostnames dropped", func(_ *rand.Rand, obj any) {
		switch r := obj.(type) {
		case *gatewayv1.HTTPRoute:
			r.Spec.Hostnames = nil
		case *gatewayv1.GRPCRoute:
			r.Spec.Hostnames = nil
		}
	}},
	{"last rule dropped", func(_ *rand.Rand, obj any) {
		switch r := obj.(type) {
		case *gatewayv1.HTTPRoute:
			if len(r.Spec.Rules) > 0 {
				r.Spec.Rules = r.Spec.Rules[:len(r.Spec.Rules)-1]
			}
		case *gatewayv1.GRPCRoute:
			if len(r.Spec.Rules) > 0 {
				r.Spec.Rules = r.Spec.Rules[:len(r.Spec.Rules)-1]
			}
		}
	}},
	{"section changed", func(_ *rand.Rand, obj any) {
		var refs []gatewayv1.ParentReference
		switch r := obj.(type) {
		case *gatewayv1.HTTPRoute:
			refs = r.Spec.ParentRefs
		case *gatewayv1.GRPCRoute:
			refs = r.Spec.ParentRefs
		}
		if len(refs) == 0 {
			return
		}
		if refs[0].SectionName != nil {
			refs[0].SectionName = nil
		} else {
			refs[0].SectionName = new(gatewayv1.SectionName("spliced"))
		}
	}},
})

// splicedHosts are the hosts Ingresses move to: a few, so that some
// share them, with a www. alternative of another and the rules without
// host.
var splicedHosts = []string{"spliced-0.example.com", "www.spliced-0.example.com", "spliced-1.example.com", ""}

// crossAnnotations are ingress-nginx annotations whose effect reaches
// past their Ingress (its host's paths, certificates, client checks, a
// main Ingress, the HTTPS socket), with a value each.
var crossAnnotations = map[string]string{
	"use-regex": "true", "rewrite-target": "/$1", "from-to-www-redirect": "true", "server-alias": "spliced-0.example.com",
	"canary": "true", "canary-weight": "50", "auth-tls-secret": "default/spliced", "ssl-passthrough": "true", "ssl-redirect": "false",
}

// ingressVariants are the changes made to an Ingress.
var ingressVariants = slices.Concat(objectVariants, []spliceVariant{
	{"host moved", func(rng *rand.Rand, obj any) {
		ing := obj.(*networkingv1.Ingress)
		if len(ing.Spec.Rules) > 0 {
			ing.Spec.Rules[rng.IntN(len(ing.Spec.Rules))].Host = splicedHosts[rng.IntN(len(splicedHosts))]
		}
	}},
	{"last rule dropped", func(_ *rand.Rand, obj any) {
		ing := obj.(*networkingv1.Ingress)
		if len(ing.Spec.Rules) > 0 {
			ing.Spec.Rules = ing.Spec.Rules[:len(ing.Spec.Rules)-1]
		}
	}},
	{"defaultBackend dropped", func(_ *rand.Rand, obj any) {
		obj.(*networkingv1.Ingress).Spec.DefaultBackend = nil
	}},
	{"TLS host added", func(rng *rand.Rand, obj any) {
		ing := obj.(*networkingv1.Ingress)
		tls := networkingv1.IngressTLS{Hosts: []string{splicedHosts[rng.IntN(len(splicedHosts))]}}
		if len(ing.Spec.TLS) > 0 {
			tls.SecretName = ing.Spec.TLS[0].SecretName
		}
		ing.Spec.TLS = append(ing.Spec.TLS, tls)
	}},
	{"TLS dropped", func(_ *rand.Rand, obj any) {
		obj.(*networkingv1.Ingress).Spec.TLS = nil
	}},
	{"class changed", func(_ *rand.Rand, obj any) {
		ing := obj.(*networkingv1.Ingress)
		delete(ing.Annotations, annotationIngressClass)
		if ing.Spec.IngressClassName == nil {
			ing.Spec.IngressClassName = new("elsewhere")
		} else {
			ing.Spec.IngressClassName = nil
		}
	}},
	{"deleting", func(_ *rand.Rand, obj any) {
		ing := obj.(*networkingv1.Ingress)
		if ing.DeletionTimestamp == nil {
			ing.DeletionTimestamp = new(metav1.NewTime(time.Unix(1e9, 0)))
		} else {
			ing.DeletionTimestamp = nil
		}
	}},
	{"annotation toggled", func(rng *rand.Rand, obj any) {
		ing := obj.(*networkingv1.Ingress)
		names := slices.Sorted(maps.Keys(crossAnnotations))
		name := names[rng.IntN(len(names))]
		if _, ok := ing.Annotations[NginxAnnotationPrefix+name]; ok {
			delete(ing.Annotations, NginxAnnotationPrefix+name)
			return
		}
		if ing.Annotations == nil {
			ing.Annotations = map[string]string{}
		}
		ing.Annotations[NginxAnnotationPrefix+name] = crossAnnotations[name]
	}},
})

// copyObject is a deep copy of obj, a new object as an informer hands out
// for a changed one.
func copyObject(obj any) any {
	return obj.(runtime.Object).DeepCopyObject()
}

// TestSpliceIngressesFallBack checks Ingress changes that reach past the
// hosts two Ingresses name in common, which a splice must not take: the
// first Ingress of ours binds the Ingress HTTPS address, here the port of
// a Gateway's HTTP listener, which it then turns away with its routes (and
// the last Ingress lets it back in); a defaultBackend reads the client
// certificate check of the rules without host of another Ingress.
func TestSpliceIngressesFallBack(t *testing.T) {
	backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "r0", Port: networkingv1.ServiceBackendPort{Number: 80}}}
	ingress := func(name string, annotations map[string]string, spec networkingv1.IngressSpec) *networkingv1.Ingress {
		spec.IngressClassName = new(DefaultIngressClass)
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns0", Annotations: annotations}, Spec: spec}
	}
	withHost := ingress("first", nil, networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "first.example.com", IngressRuleValue: networkingv1.IngressRuleValue{
		HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: new(networkingv1.PathTypePrefix), Backend: backend}}},
	}}}})
	clientChecked := ingress("checked", map[string]string{NginxAnnotationPrefix + "auth-tls-secret": "ns0/ca"}, networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{
		HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/checked", PathType: new(networkingv1.PathTypePrefix), Backend: backend}}},
	}}}})
	byDefault := ingress("default", nil, networkingv1.IngressSpec{DefaultBackend: &backend})
	changed := func(ing *networkingv1.Ingress) *networkingv1.Ingress {
		c := ing.DeepCopy()
		c.Generation++
		return c
	}
	for _, c := range []struct {
		name  string
		opts  Options
		steps [][]*networkingv1.Ingress // the Ingresses of each translation
	}{
		{"first and last Ingress", Options{IngressHTTPAddr: ":8080", IngressHTTPSAddr: ":80"}, [][]*networkingv1.Ingress{nil, {withHost}, nil}},
		{"defaultBackend", goldenOptions, [][]*networkingv1.Ingress{{clientChecked, byDefault}, {clientChecked, changed(byDefault)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs := benchObjects(3)
			m := newMemo()
			for i, ingresses := range c.steps {
				list := slices.DeleteFunc(objs.all(), func(o any) bool { _, ok := o.(*networkingv1.Ingress); return ok })
				for _, ing := range ingresses {
					list = append(list, ing)
				}
				snap, reports := m.translate(store(objs, list), c.opts)
				checkServed(t, fmt.Sprintf("translation %d (spliced: %v)", i, m.spliced), objs, list, c.opts, snap, reports)
			}
		})
	}
}

// TestStatusChangeSharesRules checks that an HTTPRoute whose status alone
// changed, as after each status write of hostgate's, comes out with the
// rules of its last translation, spliced or not: the router takes a route
// with other rules for changed and lays its host tables out again, which
// at 10,000 routes made the first route change after the status writes
// recompile every table. A route whose rules did change gets new ones.
func TestStatusChangeSharesRules(t *testing.T) {
	for _, full := range []bool{false, true} {
		objs := benchObjects(20)
		m := newMemo()
		before, _ := m.translate(objs, Options{})
		// Translation sorts the list in place.
		for i, r := range objs.httpRoutes {
			switch r.Name {
			case "r3":
				statusChanged := r.DeepCopy()
				statusChanged.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: gatewayv1.ParentReference{Name: "g"}, ControllerName: DefaultGatewayController}}
				objs.httpRoutes[i] = statusChanged
			case "r5":
				specChanged := r.DeepCopy()
				specChanged.Spec.Rules[0].Matches[0].Path.Value = new("/v2")
				objs.httpRoutes[i] = specChanged
			}
		}
		if full {
			// A Gateway's spec change makes a full translation.
			gw := objs.gateways[0].DeepCopy()
			gw.Spec.Listeners[0].Hostname = new(gatewayv1.Hostname("*.example.com"))
			objs.gateways[0] = gw
		}
		after, _ := m.translate(objs, Options{})
		rulesOf := func(snap *Snapshot, name string) []router.Rule {
			for _, r := range snap.Listeners[0].Routes {
				if r.ID.Name == name {
					return r.Rules
				}
			}
			t.Fatalf("full=%v: no route %s in %+v", full, name, snap.Listeners[0].Routes)
			return nil
		}
		if a, b := rulesOf(before, "r3"), rulesOf(after, "r3"); &a[0] != &b[0] {
			t.Errorf("full=%v: route r3, whose status alone changed, has rules of its own after the change", full)
		}
		if a, b := rulesOf(before, "r5"), rulesOf(after, "r5"); &a[0] == &b[0] || reflect.DeepEqual(a, b) {
			t.Errorf("full=%v: route r5, whose path changed, kept its rules %+v", full, b)
		}
	}
}

// TestStatusChangeKeepsListeners: a route whose object was replaced with
// its spec unchanged (hostgate's own status write) leaves its listener's
// routes as they were, the very list, with no changes for the router to
// recompile, and the next translation as a full one makes them.
func TestStatusChangeKeepsListeners(t *testing.T) {
	objs := benchObjects(20)
	store := trackedStoreOf(objs)
	m := newMemo()
	before, _ := m.translate(store.objects(objs), Options{})
	for i, r := range objs.httpRoutes {
		if r.Name == "r3" {
			written := r.DeepCopy()
			written.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: gatewayv1.ParentReference{Name: "g"}, ControllerName: DefaultGatewayController}}
			objs.httpRoutes[i] = written
			store.put(written)
		}
	}
	after, reports := m.translate(store.objects(objs), Options{})
	if !m.spliced {
		t.Fatal("the status change was not spliced: the test no longer tells what it should")
	}
	l, was := after.Listeners[0], before.Listeners[0]
	if l.Changes != nil || len(l.Routes) != len(was.Routes) || &l.Routes[0] != &was.Routes[0] {
		t.Errorf("a status change made the listener routes of their own (changes %+v)", l.Changes)
	}
	if !slices.ContainsFunc(reports.HTTPRoutes, func(rr *RouteReport[*gatewayv1.HTTPRoute]) bool { return rr.Object.Status.Parents != nil }) {
		t.Error("the reports do not hold the replaced route object, which the status writer must write from")
	}
	full, _ := translate(store.objects(objs), Options{})
	if !reflect.DeepEqual(full.Listeners[0].Routes, l.Routes) {
		t.Error("the routes differ from a full translation's")
	}
}
