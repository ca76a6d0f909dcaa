package watch

// Incremental translation of route changes.
//
// With the memo, a translation reuses the result of every route that did
// not change, but it still attaches every route to its listeners: at
// 10,000 HTTPRoutes that walk was most of what a route change cost. When
// nothing but HTTPRoutes and GRPCRoutes changed since the last
// translation, an unchanged route attaches exactly as it did then, so a
// translation splices: it runs every other step as usual and, for those
// two kinds, starts from the last translation's results and changes only
// what the routes that came and went change (a changed route is one that
// went and one that came):
//
//   - each listener's attached routes: the kind's last count, less those
//     of the routes gone, plus those of the routes come;
//   - each socket's routes of the kind, a block in precedence order: the
//     last block without the routes gone, with the new ones in their places;
//   - the kind's reports, in the same order, likewise;
//   - the endpoint entries the kind's routes registered, counted by how
//     many routes registered each, so that an entry stays while one does;
//   - the memo's entries, kept in place, those of the routes gone deleted;
//   - each socket's Listener says which routes came and went (Changes),
//     so that its routing table is rebuilt for those alone.
//
// A Service or the ReferenceGrants of a namespace that changed splice too:
// the routes that looked them up are taken out and translated again, as
// if they went and came (splice.stale), unless the Gateways, ListenerSets
// and classes looked them up as well (translator.early), or an Ingress or
// a Layer 4 route did, whose results a splice does not take apart.
//
// Ingresses that came and went splice as well, where they share no host
// with an Ingress that stayed (incremental_ingress.go); their block of
// routes comes first on each Ingress socket (splice.at).
//
// EndpointSlices that changed splice too: they decide endpoint sets and
// nothing else, and the sets of their Services are made again
// (dropUnregistered). In cluster mode they come between almost any two
// route changes (changeEndpoints publishes them at once, but the next
// listing has them), and made each route change a full translation.
//
// Anything else that changed (a Gateway, ListenerSet, class, L4
// route, Secret, ConfigMap, namespace or node; the status
// hostgate writes on Gateways, ListenerSets and GatewayClasses aside), a
// BackendTLSPolicy, or a Gateway with a client certificate for backends
// (attaching routes then gathers state across them, per Service and per
// Gateway, that a splice does not keep) makes a full translation, which
// records what the next splice reads. The result equals a full
// translation of the same store (TestSpliceMatchesTranslation).

import (
	"maps"
	"reflect"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/router"
)

// The kinds a translation splices, by their index in results.kindCounts.
const (
	spliceHTTP = iota
	spliceGRPC
	spliceKinds
)

// splice is the state of a translation that splices route changes.
type splice struct {
	// stale are the routes of each kind that did not change but looked up
	// a Service, or the ReferenceGrants of a namespace, that did: they
	// are spliced as routes that went and came again.
	stale [spliceKinds][]any
	// placed are the routes that the routes being attached placed on each
	// socket, in order; nil outside the attaching of a kind's new routes.
	placed map[*socket][]*router.Route
	// at is where in its last routes each socket's block of the kind
	// being spliced starts.
	at map[*socket]int
	// ingresses are the Ingress changes spliced; nil when every
	// Ingress is translated again (incremental_ingress.go).
	ingresses *ingressChanges
}

// canSplice returns, when this translation, with the Gateways and
// ListenerSets made, may splice the changes since the last one, the
// splice: the Ingress changes, and the routes of each kind it translates
// again though they did not change (splice.stale). Otherwise nil.
func (t *translator) canSplice() *splice {
	if t.next == nil || t.prev.reports == nil || t.prev.inputs == nil || len(t.objs.backendTLS) > 0 ||
		!sameInputs(t.prev.inputs, t.objs) || len(t.listeners) != len(t.prev.kindCounts[spliceHTTP]) {
		return nil
	}
	l := t.lookups
	if l.secrets.changedAny() || l.configMaps.changedAny() || l.trustBundles.changedAny() ||
		l.namespaces.changedAny() || l.policies.changedAny() || l.slices.all || !t.unchanged(&t.early) {
		return nil
	}
	ingresses, ok := t.spliceableIngresses()
	if !ok || !spliceable(t, &l.order.httpRoutes) || !spliceable(t, &l.order.grpcRoutes) {
		return nil
	}
	for _, g := range t.gateways {
		if g.hasBackendTLS {
			return nil
		}
	}
	s := &splice{ingresses: ingresses, at: make(map[*socket]int, len(t.sockets))}
	if !l.services.changedAny() && !l.grants.changedAny() {
		return s
	}
	if s.stale, ok = t.staleRoutes(); !ok {
		return nil
	}
	return s
}

// staleRoutes are the HTTPRoutes and GRPCRoutes of the last translation,
// by kind, that looked up a Service or the ReferenceGrants of a namespace
// that changed since (nothing else they look up did), save those gone;
// not ok when something else of the last translation did (an Ingress, a
// Layer 4 route), which the splice would not make again.
func (t *translator) staleRoutes() (stale [spliceKinds][]any, ok bool) {
	services, grants := t.services, t.grants
	if services.all || grants.all {
		return stale, false
	}
	// Only the results that looked up a key that changed are looked at,
	// and only their lookups of Services and ReferenceGrants: nothing
	// else they look up changed. Walking every result was half of a
	// Service change at 50,000 routes.
	seen := map[any]bool{}
	take := func(obj any) bool {
		e := t.prev.objects[obj]
		if seen[obj] || e == nil || !e.deps.servicesChanged(services) && (e.deps.other == nil || !anyChanged(grants, e.deps.other.grants)) {
			return true // seen, or no result of the last translation looked it up
		}
		seen[obj] = true
		kind := spliceHTTP
		switch o := obj.(type) {
		case *gatewayv1.HTTPRoute:
			if slices.Contains(t.order.httpRoutes.removed, o) {
				return true
			}
		case *gatewayv1.GRPCRoute:
			if slices.Contains(t.order.grpcRoutes.removed, o) {
				return true
			}
			kind = spliceGRPC
		default:
			return false
		}
		stale[kind] = append(stale[kind], obj)
		return true
	}
	for key := range services.changed {
		if u := t.dependents.services[key]; u != nil && !all(u.dependents, take) {
			return stale, false
		}
	}
	for namespace := range grants.changed {
		if !all(t.dependents.grants[namespace], take) {
			return stale, false
		}
	}
	return stale, true
}

// all reports whether f is true of every element of list, which it calls
// f with in order until one is false.
func all[E any](list []E, f func(E) bool) bool {
	for _, e := range list {
		if !f(e) {
			return false
		}
	}
	return true
}

// dependents index the memo's results by the Services they looked up,
// and by the namespaces whose ReferenceGrants they did, so that a splice
// finds those a change makes stale. A result is indexed when it is made;
// an entry of one the memo no longer holds, or holds made again, stays
// until the index is made again from the results held, once it has had
// as many made since as the memo holds. added counts the results indexed
// since the index was made from nothing. services are the memo's (see
// serviceUses).
type dependents struct {
	services serviceUses
	grants   map[string][]any
	added    int
}

// add indexes the result made for the memo key obj, which looked up d.
func (x *dependents) add(obj any, d *deps) {
	x.added++
	for i, p := range d.ports {
		if i == 0 || p.entry.key != d.ports[i-1].entry.key {
			x.addService(p.entry.key, obj)
		}
	}
	if d.other != nil {
		for _, key := range d.other.services {
			x.addService(key, obj)
		}
		for _, namespace := range d.other.grants {
			x.grants[namespace] = append(x.grants[namespace], obj)
		}
	}
}

func (x *dependents) addService(key types.NamespacedName, obj any) {
	u := x.services.use(key)
	u.dependents = append(u.dependents, obj)
}

// prune makes the index again from results, the memo's, when it has had
// more results made since it was last made than results holds.
func (x *dependents) prune(results map[any]*memoEntry) {
	if x.added <= 2*len(results) {
		return
	}
	for key, u := range x.services {
		u.dependents = nil
		x.services.tidy(key, u)
	}
	clear(x.grants)
	x.added = 0
	for obj, e := range results {
		x.add(obj, &e.deps)
	}
}

// spliceable reports whether the routes of o can be spliced: o lists
// those that came, neither the last list nor this one has two routes of
// one key (a route's key finds its places), and the last translation
// memoized every route gone.
func spliceable[T object](t *translator, o *order[T]) bool {
	if o.allNew || !o.strict || !o.wasStrict {
		return false
	}
	for _, obj := range o.removed {
		e := t.prev.objects[obj]
		if e == nil {
			return false
		}
		if _, ok := e.value.(*route); !ok {
			return false
		}
	}
	return true
}

// sameInputs reports whether b holds the objects of a, the inputs of the
// last translation, outside the kinds that translation's lookups tell
// apart (Services, EndpointSlices, Secrets, ConfigMaps, ClusterTrustBundles,
// namespaces, ReferenceGrants, BackendTLSPolicies), Ingresses, whose
// order does, and the routes spliced. The kinds compared are sorted
// before this.
//
// GatewayClasses, Gateways and ListenerSets may also be new objects whose
// status alone changed, save a Gateway's addresses: the status writer
// updates a Gateway's attached routes after every route that comes or
// goes, and translation reads nothing else of their status.
func sameInputs(a, b *objects) bool {
	return slices.EqualFunc(a.gatewayClasses, b.gatewayClasses, sameButStatus) &&
		slices.EqualFunc(a.gateways, b.gateways, func(x, y *gatewayv1.Gateway) bool {
			return sameButStatus(x, y) && reflect.DeepEqual(x.Status.Addresses, y.Status.Addresses)
		}) &&
		slices.EqualFunc(a.listenerSets, b.listenerSets, sameButStatus) &&
		slices.Equal(a.ingressClasses, b.ingressClasses) && slices.Equal(a.tlsRoutes, b.tlsRoutes) && slices.Equal(a.tcpRoutes, b.tcpRoutes) && slices.Equal(a.udpRoutes, b.udpRoutes) &&
		slices.Equal(a.nodes, b.nodes) && slices.Equal(a.readProblems, b.readProblems) &&
		a.crdBundleVersion == b.crdBundleVersion && a.crdChannel == b.crdChannel
}

// sameButStatus reports whether b is a, or a copy of it whose status alone
// changed.
func sameButStatus[T object](a, b T) bool {
	return a == b || onlyStatusChanged(b, a, b)
}

// inputsOf is what sameInputs compares of objs, copied: a source may
// reuse its lists.
func inputsOf(objs *objects) *objects {
	return &objects{
		ingressClasses: slices.Clone(objs.ingressClasses), gatewayClasses: slices.Clone(objs.gatewayClasses),
		gateways: slices.Clone(objs.gateways), listenerSets: slices.Clone(objs.listenerSets),
		tlsRoutes: slices.Clone(objs.tlsRoutes), tcpRoutes: slices.Clone(objs.tcpRoutes), udpRoutes: slices.Clone(objs.udpRoutes),
		nodes: slices.Clone(objs.nodes), readProblems: slices.Clone(objs.readProblems),
		crdBundleVersion: objs.crdBundleVersion, crdChannel: objs.crdChannel,
	}
}

// anyChanged reports whether the group of one of keys changed.
func anyChanged[K comparable, T object](g *groups[K, T], keys []K) bool {
	if len(g.changed) == 0 {
		return false
	}
	return slices.ContainsFunc(keys, func(k K) bool {
		_, ok := g.changed[k]
		return ok
	})
}

// startSplice makes this translation splice s: its memo entries are the
// last one's, brought up to date in place, and the conditions shared by
// good routes the last one's too. So are its key pair checks, with those
// the Gateways made so far: the Ingresses that stay do not read their
// Secrets again, which did not change, and the next full translation
// would check every key pair anew.
func (t *translator) startSplice(s *splice) {
	t.splice = s
	t.next.objects = t.prev.objects
	maps.Copy(t.prev.certs, t.next.certs)
	t.next.certs = t.prev.certs
	t.next.spliced = true
	for generation, conds := range t.prev.conditions {
		t.next.conditions[generation] = conds
	}
}

// startRoutePorts begins the counting of the endpoint entries that
// Ingresses, HTTPRoutes and GRPCRoutes register. A full translation
// counts them all again; one that splices takes the last counts and list
// over and takes back those of the Ingresses and routes gone.
func (t *translator) startRoutePorts() {
	if t.next == nil {
		return
	}
	if t.splice == nil {
		for _, e := range t.prev.routePorts {
			e.routeRefs, e.listed = 0, false
		}
		t.eps.routed = 0
		t.routePorts = t.next.routePorts[:0]
		return
	}
	// Handed over, not copied: the last results are cleared after this
	// translation.
	t.routePorts, t.prev.routePorts = t.prev.routePorts, nil
	t.uncountGoneIngresses()
	uncountRemoved(t, spliceHTTP, &t.order.httpRoutes)
	uncountRemoved(t, spliceGRPC, &t.order.grpcRoutes)
}

// finishRoutePorts leaves the list of counted entries for the next
// translation, without those no route counts once they are as many as
// the rest: a splice leaves them in, so that it costs what changed.
func (t *translator) finishRoutePorts() {
	if t.next == nil {
		return
	}
	if len(t.routePorts) > 2*t.eps.routed {
		t.routePorts = slices.DeleteFunc(t.routePorts, func(e *endpointEntry) bool {
			e.listed = e.routeRefs > 0
			return !e.listed
		})
	}
	t.next.routePorts = t.routePorts
}

// uncountRemoved takes back the endpoint entries the routes of kind gone
// from o, and the stale ones, registered.
func uncountRemoved[T object](t *translator, kind int, o *order[T]) {
	for _, obj := range gone(t.splice, kind, o) {
		t.countPorts(t.prev.objects[obj], -1)
	}
}

// gone are the routes of kind that the splice takes out: those gone from
// o, and the stale ones.
func gone[T object](s *splice, kind int, o *order[T]) []T {
	if len(s.stale[kind]) == 0 {
		return o.removed
	}
	out := slices.Clip(o.removed)
	for _, obj := range s.stale[kind] {
		out = append(out, obj.(T))
	}
	return out
}

// sharingRules is build for a translation whose routes of one kind
// removed are those of the last translation that went or are translated
// again: a route of the same namespace and name as one of them, whose
// rules came out equal, gets that one's rules. A route whose status alone
// changed is translated again, as its report must name the new object;
// with new rules of equal content the router took it for changed and laid
// its host tables out again, and at 10,000 HTTPRoutes the status hostgate
// writes on each made the first route change after it recompile every
// table (128 ms).
func sharingRules[T object](t *translator, removed []T, build func(T) *route) func(T) *route {
	last := make(map[types.NamespacedName]*route, len(removed))
	for _, obj := range removed {
		if e := t.prev.objects[obj]; e != nil {
			if r, ok := e.value.(*route); ok && len(r.rules) > 0 {
				last[types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}] = r
			}
		}
	}
	if len(last) == 0 {
		return build
	}
	return func(obj T) *route {
		r := build(obj)
		if l := last[types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}]; l != nil && reflect.DeepEqual(l.rules, r.rules) {
			r.rules = l.rules
		}
		return r
	}
}

// countPorts adds delta to the count of routes that registered each
// endpoint entry e's route registered, and lists the entries counted.
func (t *translator) countPorts(e *memoEntry, delta int32) {
	if e == nil {
		return
	}
	for _, p := range e.deps.ports {
		was := p.entry.routeRefs
		p.entry.routeRefs += delta
		switch {
		case was == 0 && delta > 0:
			t.eps.routed++
			if !p.entry.listed {
				p.entry.listed = true
				t.routePorts = append(t.routePorts, p.entry)
			}
		case was > 0 && p.entry.routeRefs == 0:
			t.eps.routed--
			t.eps.released = append(t.eps.released, p.entry)
		}
	}
}

// kindRoutes translates and attaches the routes of kind, the n HTTPRoutes
// or GRPCRoutes of the order o, or splices those that came and went
// into the last translation's (last picks its reports of the kind), and
// records what the kind added to each listener's attached routes.
func kindRoutes[T object](t *translator, kind int, o *order[T], n int, build func(T) *route, last func(*Reports) []*RouteReport[T]) []*RouteReport[T] {
	if t.next == nil {
		return translateRoutes(t, o.list(), build)
	}
	before := make([]int32, len(t.listeners))
	for i, l := range t.listeners {
		before[i] = l.attachedRoutes
	}
	removed := o.removed
	if t.splice != nil {
		removed = gone(t.splice, kind, o)
	}
	build = sharingRules(t, removed, build)
	var reports []*RouteReport[T]
	if t.splice == nil {
		reports = attachRoutes(t, o.list(), build, true)
	} else {
		reports = spliceRoutes(t, kind, removed, o, n, last(t.prev.reports), build)
	}
	counts := t.next.kindCounts[kind][:0]
	for i, l := range t.listeners {
		counts = append(counts, l.attachedRoutes-before[i])
	}
	t.next.kindCounts[kind] = counts
	return reports
}

// spliceRoutes is kindRoutes splicing: the routes of o (n of them now)
// that came are translated and attached as a full translation would, and
// those removed (gone, or translated again) are taken out of what last
// and the sockets' last routes hold.
func spliceRoutes[T object](t *translator, kind int, removed []T, o *order[T], n int, last []*RouteReport[T], build func(T) *route) []*RouteReport[T] {
	for i, l := range t.listeners {
		l.attachedRoutes += t.prev.kindCounts[kind][i]
	}
	goneKeys := make([]sortKey, 0, len(removed))
	for _, obj := range removed {
		if a := t.prev.objects[obj].value.(*route).attached; a != nil {
			for _, i := range a.counted {
				t.listeners[i].attachedRoutes--
			}
		}
		delete(t.next.objects, obj)
		goneKeys = append(goneKeys, keyOf(obj))
	}
	slices.SortFunc(goneKeys, sortKey.compare)
	added := slices.Clone(o.added)
	for _, obj := range t.splice.stale[kind] {
		added = append(added, obj.(T))
	}
	sortObjects(added)
	var come []*RouteReport[T]
	t.splice.placed = map[*socket][]*router.Route{}
	for _, obj := range added {
		r, e := memoizedEntry(t, obj, func() *route { return build(obj) })
		t.countPorts(e, 1)
		if parents, ours := t.attachRoute(r); ours {
			come = append(come, &RouteReport[T]{Object: obj, Parents: parents})
		}
	}
	t.spliceSockets(kind, goneKeys)
	t.splice.placed = nil
	switch {
	case n == 0:
		return nil // as a full translation leaves it
	case len(goneKeys) == 0 && len(come) == 0:
		return last
	}
	return spliceSorted(make([]*RouteReport[T], 0, len(last)+len(come)), last, goneKeys, come,
		func(r **RouteReport[T]) sortKey { return keyOf((*r).Object) })
}

// spliceSockets splices the routes of the kind that went (by key) and
// came (splice.placed) into each socket's block of that kind.
func (t *translator) spliceSockets(kind int, gone []sortKey) {
	routeKind := router.KindHTTPRoute
	if kind == spliceGRPC {
		routeKind = router.KindGRPCRoute
	}
	for _, s := range t.sockets {
		lo, ok := t.splice.at[s]
		if !ok {
			// The first kind: everything placed so far is the last
			// translation's, so the block starts where they end.
			lo = s.len()
		}
		// The block holds every route of the kind on the socket, in
		// one piece, as the kinds are attached one after another.
		hi := lo + sort.Search(len(s.last)-lo, func(i int) bool { return s.last[lo+i].ID.Kind != routeKind })
		t.splice.at[s] = hi
		t.spliceBlock(s, s.last[lo:hi], routeKind, gone, t.splice.placed[s])
	}
}

// spliceBlock appends to s's routes block, the next routes of its last
// ones, without the routes of kind of a key in gone and with placed in
// their places. A socket whose block did not change goes on sharing its
// last routes.
func (t *translator) spliceBlock(s *socket, block []*router.Route, kind router.Kind, gone []sortKey, placed []*router.Route) {
	gone, placed = replacedAlike(block, gone, placed)
	if len(placed) == 0 && !slices.ContainsFunc(gone, func(k sortKey) bool { return containsKey(block, k, routeKey) }) {
		if s.sharing >= 0 {
			s.sharing += len(block)
		} else {
			s.routes = append(s.routes, block...)
		}
		return
	}
	s.own()
	s.routes = spliceSorted(s.routes, block, gone, placed, routeKey)
	for _, k := range gone {
		s.spliced = append(s.spliced, router.RouteID{Kind: kind, Namespace: k.namespace, Name: k.name})
	}
	for _, r := range placed {
		s.spliced = append(s.spliced, r.ID)
	}
}

// replacedAlike drops from gone and placed the objects replaced by ones
// that place the very routes block has of them. A status write replaces
// every object it writes, and sharingRules hands an HTTPRoute or
// GRPCRoute whose spec is the same its last rules, so its routes are
// router.SameRoute as before: splicing them in again made the socket a
// list of its own and the router a new table for no change, on every
// route change (the status write that follows it). An object whose
// routes are not the very same (rules made anew, as an Ingress's may be)
// is spliced as ever.
func replacedAlike(block []*router.Route, gone []sortKey, placed []*router.Route) ([]sortKey, []*router.Route) {
	var alike []sortKey
	for _, k := range gone {
		was, now := keyRange(block, k, routeKey), keyRange(placed, k, routeKey)
		if len(now) > 0 && slices.EqualFunc(was, now, router.SameRoute) {
			alike = append(alike, k)
		}
	}
	if len(alike) == 0 {
		return gone, placed
	}
	isAlike := func(k sortKey) bool {
		return slices.ContainsFunc(alike, func(a sortKey) bool { return a.compare(k) == 0 })
	}
	return slices.DeleteFunc(slices.Clone(gone), isAlike),
		slices.DeleteFunc(slices.Clone(placed), func(r *router.Route) bool { return isAlike(routeKey(&r)) })
}

// routeChanges are the Changes of s's Listener: nil unless routes were
// spliced into s's last.
func (s *socket) routeChanges() *RouteChanges {
	if s.spliced == nil {
		return nil
	}
	return &RouteChanges{Base: s.last, IDs: s.spliced}
}

// routeKey is the key of the object a route of a socket's list was
// translated from.
func routeKey(listed **router.Route) sortKey {
	r := *listed
	return sortKey{r.Created, r.ID.Namespace, r.ID.Name}
}

// spliceSorted appends to dst list, whose elements are in the order of
// their keys, without those of a key in gone and with those of come (in
// the same order, several may have one key) in their places. A key both
// gone and come is that of an object replaced: its old elements make way
// for the new.
func spliceSorted[E any](dst, list []E, gone []sortKey, come []E, key func(*E) sortKey) []E {
	i, j, k := 0, 0, 0
	for j < len(gone) || k < len(come) {
		remove := k == len(come) || (j < len(gone) && gone[j].compare(key(&come[k])) <= 0)
		var at sortKey
		if remove {
			at = gone[j]
			j++
		} else {
			at = key(&come[k])
		}
		p := i + sort.Search(len(list)-i, func(n int) bool { return key(&list[i+n]).compare(at) >= 0 })
		dst = append(dst, list[i:p]...)
		i = p
		if remove {
			for i < len(list) && key(&list[i]).compare(at) == 0 {
				i++
			}
			continue
		}
		for k < len(come) && key(&come[k]).compare(at) == 0 {
			dst = append(dst, come[k])
			k++
		}
	}
	return append(dst, list[i:]...)
}

// containsKey reports whether list, in the order of key, has an element of k.
func containsKey[E any](list []E, k sortKey, key func(*E) sortKey) bool {
	return len(keyRange(list, k, key)) > 0
}

// keyRange is the part of list, in the order of key, of key k.
func keyRange[E any](list []E, k sortKey, key func(*E) sortKey) []E {
	lo := sort.Search(len(list), func(n int) bool { return key(&list[n]).compare(k) >= 0 })
	hi := lo
	for hi < len(list) && key(&list[hi]).compare(k) == 0 {
		hi++
	}
	return list[lo:hi]
}
