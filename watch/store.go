package watch

import (
	"cmp"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// objects is the store translation reads: every object of every kind that
// hostgate watches. Sources fill it; translate only reads it.
type objects struct {
	ingressClasses  []*networkingv1.IngressClass
	ingresses       []*networkingv1.Ingress
	gatewayClasses  []*gatewayv1.GatewayClass
	gateways        []*gatewayv1.Gateway
	listenerSets    []*gatewayv1.ListenerSet
	httpRoutes      []*gatewayv1.HTTPRoute
	grpcRoutes      []*gatewayv1.GRPCRoute
	tlsRoutes       []*gatewayv1.TLSRoute
	tcpRoutes       []*gatewayv1.TCPRoute
	udpRoutes       []*gatewayv1.UDPRoute
	referenceGrants []*gatewayv1.ReferenceGrant
	backendTLS      []*gatewayv1.BackendTLSPolicy
	services        []*service
	endpointSlices  []*endpointSlice
	secrets         []*corev1.Secret
	configMaps      []*corev1.ConfigMap
	// trustBundles are ClusterTrustBundles, of whichever version the API
	// server serves, as certificates.k8s.io/v1.
	trustBundles []*certificatesv1.ClusterTrustBundle
	namespaces   []*corev1.Namespace
	nodes        []*corev1.Node
	// readProblems are what kept the source from reading its objects as
	// written (file mode: files with documents that could not be decoded),
	// one line each; Reports.Problems starts with them.
	readProblems []string
	// crdBundleVersion and crdChannel are the
	// gateway.networking.k8s.io/bundle-version and channel of the
	// installed Gateway API CRDs; empty when unknown.
	crdBundleVersion string
	crdChannel       string
	// changes, when the source knows them, are the objects added and
	// removed since its listing before this one.
	changes *storeChanges
}

// storeChanges are the objects that came and went between two listings of
// a source, numbered since and listing. Memberships that last saw listing
// since take them instead of comparing every object.
type storeChanges struct {
	since, listing uint64
	added, removed []any
}

// add stores obj under its kind and reports whether the kind is one the
// store keeps. When obj is the first of its kind, room is made for hint
// objects: a cache lists thousands of one kind, and growing the list one
// object at a time made as much garbage as the rest of the listing. An
// EndpointSlice is stored as an endpointSlice and a Service as a service,
// which the informers' cache holds already: this is for file mode and
// tests.
func (o *objects) add(obj any, hint int) bool {
	switch s := obj.(type) {
	case *discoveryv1.EndpointSlice:
		obj = newEndpointSlice(s)
	case *corev1.Service:
		obj = newService(s, true)
	}
	list := o.listOf(obj)
	if list == nil {
		return false
	}
	list.add(obj, hint)
	return true
}

// kindList is one of the lists of objects, of one kind, whatever kind.
type kindList interface {
	add(obj any, hint int)
	// set puts obj at i, after resize made room for it.
	set(i int, obj any)
	// resize makes the list n objects long; those it adds are nil.
	resize(n int)
}

type listOf[T any] struct{ list *[]T }

func (l listOf[T]) add(obj any, hint int) { *l.list = appendTo(*l.list, obj.(T), hint) }
func (l listOf[T]) set(i int, obj any)    { (*l.list)[i] = obj.(T) }

func (l listOf[T]) resize(n int) {
	if n <= len(*l.list) {
		clear((*l.list)[n:])
		*l.list = (*l.list)[:n]
		return
	}
	*l.list = slices.Grow(*l.list, n-len(*l.list))[:n]
}

// listOf is o's list of obj's kind; nil for a kind the store does not
// keep.
func (o *objects) listOf(obj any) kindList {
	switch obj.(type) {
	case *networkingv1.IngressClass:
		return listOf[*networkingv1.IngressClass]{&o.ingressClasses}
	case *networkingv1.Ingress:
		return listOf[*networkingv1.Ingress]{&o.ingresses}
	case *gatewayv1.GatewayClass:
		return listOf[*gatewayv1.GatewayClass]{&o.gatewayClasses}
	case *gatewayv1.Gateway:
		return listOf[*gatewayv1.Gateway]{&o.gateways}
	case *gatewayv1.ListenerSet:
		return listOf[*gatewayv1.ListenerSet]{&o.listenerSets}
	case *gatewayv1.HTTPRoute:
		return listOf[*gatewayv1.HTTPRoute]{&o.httpRoutes}
	case *gatewayv1.GRPCRoute:
		return listOf[*gatewayv1.GRPCRoute]{&o.grpcRoutes}
	case *gatewayv1.TLSRoute:
		return listOf[*gatewayv1.TLSRoute]{&o.tlsRoutes}
	case *gatewayv1.TCPRoute:
		return listOf[*gatewayv1.TCPRoute]{&o.tcpRoutes}
	case *gatewayv1.UDPRoute:
		return listOf[*gatewayv1.UDPRoute]{&o.udpRoutes}
	case *gatewayv1.ReferenceGrant:
		return listOf[*gatewayv1.ReferenceGrant]{&o.referenceGrants}
	case *gatewayv1.BackendTLSPolicy:
		return listOf[*gatewayv1.BackendTLSPolicy]{&o.backendTLS}
	case *service:
		return listOf[*service]{&o.services}
	case *endpointSlice:
		return listOf[*endpointSlice]{&o.endpointSlices}
	case *corev1.Secret:
		return listOf[*corev1.Secret]{&o.secrets}
	case *corev1.ConfigMap:
		return listOf[*corev1.ConfigMap]{&o.configMaps}
	case *certificatesv1.ClusterTrustBundle:
		return listOf[*certificatesv1.ClusterTrustBundle]{&o.trustBundles}
	case *corev1.Namespace:
		return listOf[*corev1.Namespace]{&o.namespaces}
	case *corev1.Node:
		return listOf[*corev1.Node]{&o.nodes}
	}
	return nil
}

// addListing adds the objects of from, which it may share: neither
// changes them afterwards.
func (o *objects) addListing(from *objects) {
	o.ingressClasses = appendList(o.ingressClasses, from.ingressClasses)
	o.ingresses = appendList(o.ingresses, from.ingresses)
	o.gatewayClasses = appendList(o.gatewayClasses, from.gatewayClasses)
	o.gateways = appendList(o.gateways, from.gateways)
	o.listenerSets = appendList(o.listenerSets, from.listenerSets)
	o.httpRoutes = appendList(o.httpRoutes, from.httpRoutes)
	o.grpcRoutes = appendList(o.grpcRoutes, from.grpcRoutes)
	o.tlsRoutes = appendList(o.tlsRoutes, from.tlsRoutes)
	o.tcpRoutes = appendList(o.tcpRoutes, from.tcpRoutes)
	o.udpRoutes = appendList(o.udpRoutes, from.udpRoutes)
	o.referenceGrants = appendList(o.referenceGrants, from.referenceGrants)
	o.backendTLS = appendList(o.backendTLS, from.backendTLS)
	o.services = appendList(o.services, from.services)
	o.endpointSlices = appendList(o.endpointSlices, from.endpointSlices)
	o.secrets = appendList(o.secrets, from.secrets)
	o.configMaps = appendList(o.configMaps, from.configMaps)
	o.trustBundles = appendList(o.trustBundles, from.trustBundles)
	o.namespaces = appendList(o.namespaces, from.namespaces)
	o.nodes = appendList(o.nodes, from.nodes)
}

// appendList appends from to list, or returns from itself, without room
// to grow into, when list is empty: two informers of one kind (two
// versions of ClusterTrustBundle) then append to a copy.
func appendList[T any](list, from []T) []T {
	if len(list) == 0 {
		return slices.Clip(from)
	}
	return append(list, from...)
}

func appendTo[T any](list []T, v T, hint int) []T {
	if list == nil {
		list = make([]T, 0, max(hint, 1))
	}
	return append(list, v)
}

// sort puts the kinds whose order translation follows in precedence
// order (oldest first, then namespace/name), so translation does not
// depend on the order a source listed objects in. The other kinds are
// only looked up: translation picks among duplicates (a file may list an
// object twice) and orders the groups it makes of them (the EndpointSlices
// of a Service) as a sorted list would, at a fraction of the cost of
// sorting every object of the store on every translation. The kinds that
// come by the thousand are sorted by orders, which reuse the last order:
// the Ingresses' list becomes the order's own, which the next sort
// overwrites, while HTTPRoutes and GRPCRoutes are read in order from
// theirs (order.list), and only when a translation cannot splice their
// changes. No list the source handed over is reordered: a tracked
// store's lists keep the places of its informers' objects
// (tracked.list).
func (o *objects) sort(orders *orders) {
	o.ingressClasses = sorted(o.ingressClasses)
	o.ingresses = orders.ingresses.sort(o.ingresses, o.changes)
	o.gatewayClasses = sorted(o.gatewayClasses)
	o.gateways = sorted(o.gateways)
	o.listenerSets = sorted(o.listenerSets)
	orders.httpRoutes.update(o.httpRoutes, o.changes)
	orders.grpcRoutes.update(o.grpcRoutes, o.changes)
	// Precedence matters here too: of two TCPRoutes on one listener the
	// oldest is served.
	o.tlsRoutes = sorted(o.tlsRoutes)
	o.tcpRoutes = sorted(o.tcpRoutes)
	o.udpRoutes = sorted(o.udpRoutes)
	o.nodes = sorted(o.nodes)
}

// sorted is list sorted by sortObjects: list itself when it is in
// order, a sorted copy when not.
func sorted[T metav1.Object](list []T) []T {
	for i := 1; i < len(list); i++ {
		if keyOf(list[i-1]).compare(keyOf(list[i])) > 0 {
			list = slices.Clone(list)
			sortObjects(list)
			break
		}
	}
	return list
}

// orders keep the sorted order of the kinds that come by the thousand.
type orders struct {
	ingresses  order[*networkingv1.Ingress]
	httpRoutes order[*gatewayv1.HTTPRoute]
	grpcRoutes order[*gatewayv1.GRPCRoute]
}

// order is sortObjects that remembers its last result and, when a list
// holds mostly the same objects again (one route changed among 10,000),
// merges the new ones into it instead of sorting everything: sorting took
// a tenth of a route change.
type order[T object] struct {
	sorted []T
	// pendingAdded and pendingRemoved are what came and went since sorted
	// was made, merged into it when the order is read (list): a
	// translation that splices route changes reads only what changed,
	// and copying 50,000 routes into a merged order at every route
	// change was about a tenth of its CPU. Each sort checks that they
	// can be merged (plan), so that strict holds for the order list
	// makes; at and gone are their places in sorted, which plan found.
	pendingAdded, pendingRemoved []T
	at, gone                     []int
	// strict says no two keys of sorted tie.
	strict bool
	// spare is the sorted list before the last, room for the next merge.
	spare   []T
	members membership[T]
	// added and removed are the objects the last sort found new and gone,
	// but for allNew: every object was new, the list before empty, and
	// added lists none. wasStrict is strict before it. A translation that
	// splices route changes reads them (incremental.go).
	added, removed    []T
	allNew, wasStrict bool
}

// maxPending is how many objects may wait to be merged into an order:
// each sort plans them all again (plan), and with 256 waiting a route
// change at 1,000 routes took twice as long; 16 leaves a merge every
// eight route changes.
const maxPending = 16

// sort returns the objects of list in the order sortObjects puts them in,
// in a list of o's own that the next sort overwrites.
func (o *order[T]) sort(list []T, changes *storeChanges) []T {
	o.update(list, changes)
	return o.list()
}

// update makes the objects of list those of the order, which list
// returns sorted.
func (o *order[T]) update(list []T, changes *storeChanges) {
	added, removed, first := o.members.update(list, changes)
	o.added, o.removed, o.allNew, o.wasStrict = added, removed, first && len(list) > 0, o.strict
	if first || !o.strict || o.members.len() != len(list) || !o.pend(len(list), added, removed) {
		// Everything is new, a list holds an object twice, or keys tie,
		// which a stable sort orders by position in list.
		o.sorted = append(o.sorted[:0], list...)
		sortObjects(o.sorted)
		o.strict = increasing(o.sorted)
		o.pendingAdded, o.pendingRemoved = o.pendingAdded[:0], o.pendingRemoved[:0]
	}
}

// list returns the objects of the last update in order.
func (o *order[T]) list() []T {
	if len(o.pendingAdded) > 0 || len(o.pendingRemoved) > 0 {
		o.merge()
	}
	return o.sorted
}

// pend adds the objects that came and went to those pending and reports
// whether they make an order of n objects that keeps no ties, merging them
// when too many wait.
func (o *order[T]) pend(n int, added, removed []T) bool {
	for _, obj := range removed {
		if i := slices.Index(o.pendingAdded, obj); i >= 0 {
			o.pendingAdded = slices.Delete(o.pendingAdded, i, i+1)
		} else {
			o.pendingRemoved = append(o.pendingRemoved, obj)
		}
	}
	for _, obj := range added {
		if i := slices.Index(o.pendingRemoved, obj); i >= 0 {
			o.pendingRemoved = slices.Delete(o.pendingRemoved, i, i+1)
		} else {
			o.pendingAdded = append(o.pendingAdded, obj)
		}
	}
	if !o.plan(n) {
		return false
	}
	if len(o.pendingAdded)+len(o.pendingRemoved) > maxPending {
		o.merge()
	}
	return true
}

// plan finds the places in sorted of the pending objects, for an order
// of n objects. It returns false when two objects would have the same
// key (their order is then the one of the list) or the list is not the
// last one with those changes.
//
// The last order had no ties (strict), so only the keys of the objects
// that came and went are read, and their places are found by binary
// search: reading every object's key to merge one change into 10,000 took
// longer than the rest of sorting.
func (o *order[T]) plan(n int) bool {
	added, removed := o.pendingAdded, o.pendingRemoved
	if len(o.sorted)-len(removed)+len(added) != n {
		return false
	}
	sortObjects(added)
	keys := make([]sortKey, len(added))
	o.at = o.at[:0] // where in o.sorted each added one goes
	for j, obj := range added {
		keys[j] = keyOf(obj)
		if j > 0 && keys[j-1].compare(keys[j]) == 0 {
			return false
		}
		o.at = append(o.at, o.place(keys[j]))
	}
	o.gone = o.gone[:0] // places in o.sorted
	for _, obj := range removed {
		// No other object of o.sorted has its key.
		i := o.place(keyOf(obj))
		if i == len(o.sorted) || o.sorted[i] != obj {
			return false
		}
		o.gone = append(o.gone, i)
	}
	slices.Sort(o.gone)
	// An added object whose key some staying object has ties with it.
	for j := range added {
		for i := o.at[j]; i < len(o.sorted) && keyOf(o.sorted[i]).compare(keys[j]) == 0; i++ {
			if _, found := slices.BinarySearch(o.gone, i); !found {
				return false
			}
		}
	}
	return true
}

// merge makes sorted, without the pending removed objects and with the
// added ones in the places plan found, the order. The objects between
// two places are copied as one run, where a look-up of each one's place
// in a map of those gone took most of a route change's sorting at 50,000
// routes.
func (o *order[T]) merge() {
	added := o.pendingAdded
	merged := o.spare[:0]
	next, j := 0, 0 // the first object of o.sorted not yet copied; the next added
	// insert copies up to the place i, with the added objects placed
	// before o.sorted[i].
	insert := func(i int) {
		for ; j < len(added) && o.at[j] <= i; j++ {
			merged = append(append(merged, o.sorted[next:o.at[j]]...), added[j])
			next = o.at[j]
		}
		merged = append(merged, o.sorted[next:i]...)
		next = i
	}
	for _, g := range o.gone {
		insert(g)
		next = g + 1
	}
	insert(len(o.sorted))
	o.spare, o.sorted = o.sorted, merged
	o.pendingAdded, o.pendingRemoved = o.pendingAdded[:0], o.pendingRemoved[:0]
}

// membership tells which objects of a list were not in the list before
// and which are gone from it. Objects are told apart by pointer, as
// informers hand them out: a changed object is a new pointer.
type membership[T comparable] struct {
	// seen holds the round of the last list each object was in.
	seen  map[T]uint64
	round uint64
	// listing is the source's number of the last list, 0 when unknown.
	listing uint64
}

// update makes list the members and returns the objects added and removed
// since the last list. first says there was no earlier list (or only empty
// ones): then every object is new and none is returned. changes, when not
// nil, are what came and went since the source's last listing: when that
// was the last list, they are taken instead of comparing list.
func (m *membership[T]) update(list []T, changes *storeChanges) (added, removed []T, first bool) {
	first = len(m.seen) == 0
	if changes != nil && !first && m.listing != 0 && changes.since == m.listing {
		m.listing = changes.listing
		return m.change(changes)
	}
	m.listing = 0
	if changes != nil {
		m.listing = changes.listing
	}
	m.round++
	if first {
		m.seen = make(map[T]uint64, len(list))
	}
	for _, obj := range list {
		n := len(m.seen)
		m.seen[obj] = m.round
		if len(m.seen) > n && !first {
			added = append(added, obj)
		}
	}
	if len(m.seen) > len(list) {
		for obj, round := range m.seen {
			if round != m.round {
				delete(m.seen, obj)
				removed = append(removed, obj)
			}
		}
	}
	return added, removed, first
}

// change applies changes, some of which may be of other kinds: those are
// no T.
func (m *membership[T]) change(changes *storeChanges) (added, removed []T, first bool) {
	for _, o := range changes.removed {
		if obj, ok := o.(T); ok {
			if _, in := m.seen[obj]; in {
				delete(m.seen, obj)
				removed = append(removed, obj)
			}
		}
	}
	for _, o := range changes.added {
		if obj, ok := o.(T); ok {
			m.seen[obj] = m.round
			added = append(added, obj)
		}
	}
	return added, removed, false
}

// len is the number of distinct objects in the last list.
func (m *membership[T]) len() int { return len(m.seen) }

// increasing reports whether the keys of sorted list increase strictly.
func increasing[T metav1.Object](list []T) bool {
	for i := 1; i < len(list); i++ {
		if keyOf(list[i-1]).compare(keyOf(list[i])) >= 0 {
			return false
		}
	}
	return true
}

// place is the index of the first object of o.sorted whose key is not
// less than key.
func (o *order[T]) place(key sortKey) int {
	i, _ := slices.BinarySearchFunc(o.sorted, key, func(obj T, key sortKey) int { return keyOf(obj).compare(key) })
	return i
}

// sortKey is what objects are sorted by.
type sortKey struct {
	created         time.Time
	namespace, name string
}

func keyOf(o metav1.Object) sortKey {
	return sortKey{o.GetCreationTimestamp().Time, o.GetNamespace(), o.GetName()}
}

func (a sortKey) compare(b sortKey) int {
	if c := a.created.Compare(b.created); c != 0 {
		return c
	}
	if c := cmp.Compare(a.namespace, b.namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.name, b.name)
}

// sortObjects sorts list by sortKey, stably.
func sortObjects[T metav1.Object](list []T) {
	if len(list) < 2 {
		return
	}
	// The keys are read once, not at every comparison through the
	// interface, and the position in list breaks ties as a stable sort
	// would, with the speed of an unstable one.
	type keyed struct {
		key      sortKey
		position int
		obj      T
	}
	keys := make([]keyed, len(list))
	for i, o := range list {
		keys[i] = keyed{keyOf(o), i, o}
	}
	slices.SortFunc(keys, func(a, b keyed) int {
		if c := a.key.compare(b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.position, b.position)
	})
	for i, k := range keys {
		list[i] = k.obj
	}
}

func namespacedName[T metav1.Object](o T) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}
