package watch

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/router"
)

// TestMemoMatchesFreshTranslation translates every golden case with a
// memo while taking each object out and putting it back, one at a time,
// and checks every result against a translation without memo: a reused
// result whose Service, EndpointSlices, ReferenceGrants or Secret changed
// would show up as a difference.
func TestMemoMatchesFreshTranslation(t *testing.T) {
	kept := 0
	eachCase(t, func(t *testing.T, _ string, objs *objects, opts Options) {
		for _, l := range listers {
			t.Run(l.name, func(t *testing.T) {
				m := checkMemo(t, objs, opts, l.new(), t.Errorf)
				kept += len(m.objects) + len(m.endpoints.byName) + len(m.certs)
			})
		}
	})
	if kept == 0 {
		t.Error("the memo kept nothing: the test checked nothing")
	}
}

// checkMemo translates objs with a memo twice, then while each object goes
// and comes back, each time from the objects listed, and calls fail for
// every Snapshot or Reports that differ from a translation without memo.
// It returns the memo.
func checkMemo(t testing.TB, objs *objects, opts Options, listed lister, fail func(format string, args ...any)) *memo {
	t.Helper()
	all := objs.all()
	m := newMemo()
	check := func(what string, list []any) {
		t.Helper()
		got := listed(objs, list)
		gotSnap, gotReports := m.translate(got, opts)
		// What was listed: a source told of changes keeps one object of
		// a key where list may have two.
		wantSnap, wantReports := translate(store(objs, got.all()), opts)
		gotSnap, err := withoutChanges(gotSnap)
		if err != nil {
			fail("%s: %v", what, err)
		}
		if !reflect.DeepEqual(gotSnap, wantSnap) {
			fail("%s: snapshot with memo differs:\n--- with memo\n%s\n--- without\n%s", what, describeSnapshot(gotSnap), describeSnapshot(wantSnap))
		}
		if !reflect.DeepEqual(gotReports, wantReports) {
			fail("%s: reports with memo differ:\n--- with memo\n%s\n--- without\n%s", what, describeReports(t, gotReports), describeReports(t, wantReports))
		}
	}
	check("first translation", all)
	check("nothing changed", all)
	for i, obj := range all {
		check(describeObject(obj)+" removed", append(append([]any{}, all[:i]...), all[i+1:]...))
		check(describeObject(obj)+" back", all)
	}
	return m
}

// all lists every object of o.
func (o *objects) all() []any {
	var out []any
	for _, list := range []any{o.ingressClasses, o.ingresses, o.gatewayClasses, o.gateways, o.listenerSets, o.httpRoutes, o.grpcRoutes, o.tlsRoutes, o.tcpRoutes, o.udpRoutes,
		o.referenceGrants, o.backendTLS, o.services, o.endpointSlices, o.secrets, o.configMaps, o.trustBundles, o.namespaces, o.nodes} {
		v := reflect.ValueOf(list)
		for i := range v.Len() {
			out = append(out, v.Index(i).Interface())
		}
	}
	return out
}

// store is a store of like's kind holding list.
func store(like *objects, list []any) *objects {
	o := &objects{crdBundleVersion: like.crdBundleVersion, crdChannel: like.crdChannel}
	for _, obj := range list {
		o.add(obj, 0)
	}
	return o
}

func describeObject(obj any) string {
	m := obj.(metav1.Object)
	return fmt.Sprintf("%T %s/%s", obj, m.GetNamespace(), m.GetName())
}

// TestUnchangedHandedOn changes a route, then an EndpointSlice, then
// removes a route: the Snapshot of the route change shares the endpoint
// map of the one before (nothing in it changed), that of the EndpointSlice
// change its list of routes, the others get their own, and no translation
// changes what an earlier Snapshot holds.
func TestUnchangedHandedOn(t *testing.T) {
	objs := benchObjects(10)
	// Placed twice on the socket through the same listener: the second
	// placement changes nothing, and must not end the sharing.
	twice := &objs.httpRoutes[0].Spec.ParentRefs
	*twice = append(*twice, (*twice)[0])
	(*twice)[1].SectionName = new(gatewayv1.SectionName("http"))
	m := newMemo()
	first, _ := m.translate(objs, Options{})
	if first.Endpoints.Len() != 10 {
		t.Fatalf("first translation: %d endpoint sets, want 10", first.Endpoints.Len())
	}
	firstCopy := maps.Collect(first.Endpoints.All())
	same := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }

	changed := objs.httpRoutes[3].DeepCopy()
	changed.Spec.Rules[0].Matches[0].Path.Value = new("/changed")
	objs.httpRoutes[3] = changed
	routeChange, _ := m.translate(objs, Options{})
	if !same(routeChange.Endpoints, first.Endpoints) {
		t.Error("a route change made a new endpoint map though no set changed")
	}
	if same(routeChange.Listeners[0].Routes, first.Listeners[0].Routes) {
		t.Error("a route change shares the list of routes of the Snapshot before")
	}
	routesBefore := slices.Clone(routeChange.Listeners[0].Routes)

	slice := objs.endpointSlices[5].DeepCopy()
	slice.Endpoints = slice.Endpoints[:1]
	objs.endpointSlices[5] = slice
	name := slice.Namespace + "/" + slice.Name + ":80"
	sliceChange, _ := m.translate(objs, Options{})
	if got := len(setNamed(sliceChange, name)); got != 1 {
		t.Errorf("after the EndpointSlice change %s has %d endpoints, want 1", name, got)
	}
	if !reflect.DeepEqual(maps.Collect(first.Endpoints.All()), firstCopy) {
		t.Error("the EndpointSlice change changed the endpoint map of an earlier Snapshot")
	}
	if !same(sliceChange.Listeners[0].Routes, routeChange.Listeners[0].Routes) {
		t.Error("an EndpointSlice change made a new list of routes though no route changed")
	}

	objs.httpRoutes = objs.httpRoutes[1:]
	removal, _ := m.translate(objs, Options{})
	if removal.Endpoints.Len() != 9 || sliceChange.Endpoints.Len() != 10 {
		t.Errorf("after a route's removal: %d endpoint sets, the Snapshot before %d; want 9 and 10", removal.Endpoints.Len(), sliceChange.Endpoints.Len())
	}
	if len(removal.Listeners[0].Routes) != 9 || !reflect.DeepEqual(sliceChange.Listeners[0].Routes, routesBefore) {
		t.Errorf("after a route's removal: %d routes, and the Snapshot before changed: %v", len(removal.Listeners[0].Routes), !reflect.DeepEqual(sliceChange.Listeners[0].Routes, routesBefore))
	}
}

// TestGoodRoutesShareConditions checks that, with a memo, routes accepted
// with every reference resolved at one generation share one slice of
// conditions, also with a route translated again in a later translation,
// and that a route with a problem keeps conditions of its own.
func TestGoodRoutesShareConditions(t *testing.T) {
	objs := benchObjects(3)
	objs.httpRoutes[2].Spec.Rules[0].BackendRefs[0].Name = "missing"
	m := newMemo()
	_, first := m.translate(objs, Options{})
	conditions := func(r *Reports, i int) []metav1.Condition {
		t.Helper()
		if len(r.HTTPRoutes) != 3 || len(r.HTTPRoutes[i].Parents) != 1 {
			t.Fatalf("reports %+v: want 3 HTTPRoutes with a parent each", r.HTTPRoutes)
		}
		return r.HTTPRoutes[i].Parents[0].Conditions
	}
	shared := func(a, b []metav1.Condition) bool { return &a[0] == &b[0] }
	if !shared(conditions(first, 0), conditions(first, 1)) {
		t.Error("two good routes have a copy of the same conditions each")
	}
	if shared(conditions(first, 0), conditions(first, 2)) || conditionTrue(conditions(first, 2), "ResolvedRefs") {
		t.Errorf("a route with a missing backend shares the good routes' conditions: %+v", conditions(first, 2))
	}

	objs.httpRoutes[1] = objs.httpRoutes[1].DeepCopy()
	_, again := m.translate(objs, Options{})
	if !shared(conditions(again, 1), conditions(first, 0)) {
		t.Error("a good route translated again does not share the conditions of the routes translated before")
	}
}

// TestChangeEndpointsMatchesTranslation makes random sequences of
// EndpointSlice changes in every golden case (a slice removed, put back,
// its first endpoint terminating, an address added, its Service label
// dropped), each followed by changeEndpoints or, one time in four, by a
// translation with the memo, and checks the Snapshot and Reports served
// after each step against a translation of the same store without memo.
func TestChangeEndpointsMatchesTranslation(t *testing.T) {
	changed := 0
	eachCase(t, func(t *testing.T, _ string, objs *objects, opts Options) {
		if len(objs.endpointSlices) == 0 {
			return
		}
		rng := rand.New(rand.NewPCG(29, uint64(len(objs.endpointSlices))))
		original := slices.Clone(objs.endpointSlices)
		current := slices.Clone(original) // nil where removed
		others := slices.DeleteFunc(objs.all(), func(o any) bool { _, ok := o.(*endpointSlice); return ok })
		list := func() []any { return present(others, current) }
		slicesOf := func(key types.NamespacedName) []*endpointSlice {
			var out []*endpointSlice
			for _, s := range current {
				if s == nil {
					continue
				}
				if k, ok := sliceService(s); ok && k == key {
					out = append(out, s)
				}
			}
			return out
		}
		variants := []struct {
			name   string
			change func(*endpointSlice) *endpointSlice
		}{
			{"removed", func(*endpointSlice) *endpointSlice { return nil }},
			{"back", func(*endpointSlice) *endpointSlice { return nil }},
			{"terminating", func(s *endpointSlice) *endpointSlice {
				if len(s.Endpoints) > 0 {
					s.Endpoints[0].Ready, s.Endpoints[0].Serving = false, true
				}
				return s
			}},
			{"address added", func(s *endpointSlice) *endpointSlice {
				s.Endpoints = append(s.Endpoints, sliceEndpoint{Addresses: []string{fmt.Sprintf("10.29.0.%d", rng.IntN(250))}, Ready: true})
				return s
			}},
			{"label dropped", func(s *endpointSlice) *endpointSlice {
				s.Service = ""
				return s
			}},
		}
		m := newMemo()
		snap, reports := m.translate(store(objs, list()), opts)
		for step := range 200 {
			i := rng.IntN(len(current))
			v := variants[rng.IntN(len(variants))]
			before := current[i]
			switch v.name {
			case "back":
				current[i] = original[i]
			default:
				base := before
				if base == nil {
					base = original[i]
				}
				current[i] = v.change(base.DeepCopy())
			}
			what := fmt.Sprintf("step %d: %s %s", step, describeObject(original[i]), v.name)
			if rng.IntN(4) == 0 {
				snap, reports = m.translate(store(objs, list()), opts)
				what += ", translated"
			} else {
				var keys []types.NamespacedName
				for _, s := range []*endpointSlice{before, current[i]} {
					if s == nil {
						continue
					}
					if k, ok := sliceService(s); ok {
						keys = append(keys, k)
					}
				}
				if next := m.changeEndpoints(snap, keys, slicesOf); next != nil {
					snap = next
					changed++
				}
			}
			checkServed(t, what, objs, list(), opts, snap, reports)
		}
	})
	if changed == 0 {
		t.Error("changeEndpoints changed nothing: the test checked nothing")
	}
}

// present is others and the objects of current that are not nil (those
// removed).
func present[T comparable](others []any, current []T) []any {
	var none T
	l := slices.Clone(others)
	for _, obj := range current {
		if obj != none {
			l = append(l, obj)
		}
	}
	return l
}

// TestEndpointChangesAmongTranslations mixes, in every golden case and
// through both listers, translations of random removals and restorations
// of any object with EndpointSlice changes told to changeEndpoints, and
// checks each Snapshot served against a fresh translation: the endpoint
// sets that translations make from the last ones must hold what
// changeEndpoints changed in between.
func TestEndpointChangesAmongTranslations(t *testing.T) {
	eachCase(t, func(t *testing.T, _ string, objs *objects, opts Options) {
		for _, l := range listers {
			t.Run(l.name, func(t *testing.T) {
				listed := l.new()
				all := objs.all()
				if len(all) == 0 {
					return
				}
				present := make([]bool, len(all))
				for i := range present {
					present[i] = true
				}
				rng := rand.New(rand.NewPCG(7, uint64(len(all))))
				list := func() []any {
					var out []any
					for i, o := range all {
						if present[i] {
							out = append(out, o)
						}
					}
					return out
				}
				slicesOf := func(key types.NamespacedName) []*endpointSlice {
					var out []*endpointSlice
					for i, o := range all {
						if s, ok := o.(*endpointSlice); ok && present[i] {
							if k, ok := sliceService(s); ok && k == key {
								out = append(out, s)
							}
						}
					}
					return out
				}
				m := newMemo()
				snap, reports := m.translate(listed(objs, list()), opts)
				for step := range 150 {
					i := rng.IntN(len(all))
					what := fmt.Sprintf("step %d: %s", step, describeObject(all[i]))
					if s, ok := all[i].(*endpointSlice); ok && rng.IntN(3) != 0 {
						// An EndpointSlice change: a changed copy, or
						// removal/restoration, told to changeEndpoints.
						if present[i] && rng.IntN(2) == 0 {
							c := s.DeepCopy()
							c.Endpoints = append(c.Endpoints, sliceEndpoint{Addresses: []string{fmt.Sprintf("10.77.0.%d", rng.IntN(250))}, Ready: true})
							all[i] = c
							what += " changed"
						} else {
							present[i] = !present[i]
							what += fmt.Sprintf(" present=%v", present[i])
						}
						var keys []types.NamespacedName
						if k, ok := sliceService(s); ok {
							keys = append(keys, k)
						}
						if next := m.changeEndpoints(snap, keys, slicesOf); next != nil {
							snap = next
							what += ", changeEndpoints"
						}
					} else {
						present[i] = !present[i]
						snap, reports = m.translate(listed(objs, list()), opts)
						what += fmt.Sprintf(" present=%v, translated", present[i])
					}
					checkServed(t, what, objs, list(), opts, snap, reports)
				}
			})
		}
	})
}

// checkServed stops t when snap and reports, served after what, differ
// from a translation without memo of the store of like's kind holding
// list, or when a listener's Changes are wrong.
func checkServed(t *testing.T, what string, like *objects, list []any, opts Options, snap *Snapshot, reports *Reports) {
	t.Helper()
	wantSnap, wantReports := translate(store(like, list), opts)
	served, err := withoutChanges(snap)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !reflect.DeepEqual(served, wantSnap) {
		t.Fatalf("%s: snapshot differs:\n--- served\n%s\n--- translated\n%s", what, describeSnapshot(served), describeSnapshot(wantSnap))
	}
	if !reflect.DeepEqual(reports, wantReports) {
		t.Fatalf("%s: reports differ:\n--- served\n%s\n--- translated\n%s", what, describeReports(t, reports), describeReports(t, wantReports))
	}
}

// withoutChanges returns snap without its listeners' Changes and its
// EndpointChanges, which a translation without memo does not have, or an
// error naming a listener whose Changes leave out a route that is not its
// Base's, or an endpoint set that changed and is not among the changes.
func withoutChanges(snap *Snapshot) (*Snapshot, error) {
	out := *snap
	out.Listeners = slices.Clone(snap.Listeners)
	for i := range out.Listeners {
		l := &out.Listeners[i]
		c := l.Changes
		if c == nil {
			continue
		}
		unchanged := func(routes []*router.Route) []*router.Route {
			return slices.DeleteFunc(slices.Clone(routes), func(r *router.Route) bool { return slices.Contains(c.IDs, r.ID) })
		}
		if was, is := unchanged(c.Base), unchanged(l.Routes); !slices.EqualFunc(was, is, router.SameRoute) {
			return nil, fmt.Errorf("listener %s: routes not among its changes %v changed:\n--- before\n%+v\n--- now\n%+v", l.Name, c.IDs, was, is)
		}
		l.Changes = nil
	}
	if c := snap.EndpointChanges; c != nil {
		for name, set := range snap.Endpoints.All() {
			if was, had := c.Base.Get(name); !slices.Contains(c.Names, name) && (!had || !sameSlice(was, set)) {
				return nil, fmt.Errorf("endpoint set %s changed, and is not among the changes %v", name, c.Names)
			}
		}
		for name := range c.Base.All() {
			if _, has := snap.Endpoints.Get(name); !has && !slices.Contains(c.Names, name) {
				return nil, fmt.Errorf("endpoint set %s went, and is not among the changes %v", name, c.Names)
			}
		}
		out.EndpointChanges = nil
	}
	return &out, nil
}

// setNamed is s's endpoint set called name, nil for none.
func setNamed(s *Snapshot, name string) []Endpoint {
	set, _ := s.Endpoints.Get(name)
	return set
}

// sameSlice reports whether a and b are one slice.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
