package watch

import (
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// groups is the objects of one kind that translation looks up, grouped by
// key, each group in sorted order. A memo keeps one per kind from one
// translation to the next and regroups only the keys whose objects were
// added or removed in between: grouping 10,000 Services and EndpointSlices
// afresh took a good part of a route change. The keys that changed also
// tell the memo which of its results may depend on a change, without
// looking up each of their dependencies. A list never holds one object
// (one pointer) twice.
//
// Most keys have one object (a Service, its EndpointSlice): those are in
// one, the others in many. A map of lists took 57 B and a list of 8 B for
// each key, where a map of objects takes 41 B.
//
// Which objects of a list are new and which are gone, the groups tell
// themselves (compare): a map of every object listed took 30 B more of
// each Service and EndpointSlice. Objects without a key are in no group
// and change none.
type groups[K comparable, T object] struct {
	key  func(T) (K, bool)
	one  map[K]T
	many map[K][]T
	// held is the number of objects the groups hold, listed the length of
	// the last list and listing the source's number of it, 0 when unknown.
	held    int
	listed  int
	listing uint64
	// changed are the keys whose group the last update changed; all is set
	// instead by the first update, which changed every key.
	changed map[K]struct{}
	all     bool
}

func newGroups[K comparable, T object](key func(T) (K, bool)) *groups[K, T] {
	return &groups[K, T]{key: key, one: map[K]T{}, many: map[K][]T{}, changed: map[K]struct{}{}}
}

// update makes g the grouping of list. first says there was no earlier
// list (or only empty ones): then every object is new. changes, when not
// nil, are what came and went since the source's last listing: when that
// was the last list, they are taken instead of comparing list.
func (g *groups[K, T]) update(list []T, changes *storeChanges) {
	first := g.listed == 0
	told := changes != nil && !first && g.listing != 0 && changes.since == g.listing
	g.listed, g.listing = len(list), 0
	if changes != nil {
		g.listing = changes.listing
	}
	var added, removed []T
	switch {
	case told:
		added, removed = g.change(changes)
	case !first:
		added, removed = g.compare(list)
	}
	clear(g.changed)
	// A kind with no objects yet changes no key: most clusters have no
	// BackendTLSPolicy, and every result depending on one would otherwise
	// be made again on every translation.
	g.all = first && len(list) > 0
	if first {
		g.fill(list)
		return
	}
	for _, touched := range [][]T{added, removed} {
		for _, o := range touched {
			if k, ok := g.key(o); ok {
				g.changed[k] = struct{}{}
			}
		}
	}
	if len(g.changed) == 0 {
		return
	}
	// Changed groups are new slices: results of earlier translations may
	// hold the old ones.
	regrouped := make(map[K][]T, len(g.changed))
	gone := removedSet(removed)
	var one [1]T
	for k := range g.changed {
		for _, o := range g.of(k, &one) {
			if !gone(o) {
				regrouped[k] = append(regrouped[k], o)
			}
		}
	}
	for _, o := range added {
		if k, ok := g.key(o); ok {
			regrouped[k] = append(regrouped[k], o)
		}
	}
	for k := range g.changed {
		grp := regrouped[k]
		sortObjects(grp)
		g.set(k, grp)
	}
}

// change returns the objects of changes that are T, with a key: those
// added, and those removed that the groups hold.
func (g *groups[K, T]) change(changes *storeChanges) (added, removed []T) {
	for _, o := range changes.removed {
		if obj, ok := o.(T); ok && g.holds(obj) {
			removed = append(removed, obj)
		}
	}
	for _, o := range changes.added {
		if obj, ok := o.(T); ok {
			if _, keyed := g.key(obj); keyed {
				added = append(added, obj)
			}
		}
	}
	return added, removed
}

// compare returns the objects of list with a key that the groups do not
// hold (added), and those they hold that list has not (removed).
func (g *groups[K, T]) compare(list []T) (added, removed []T) {
	kept := 0
	for _, o := range list {
		if k, ok := g.key(o); ok {
			if g.holdsAt(k, o) {
				kept++
			} else {
				added = append(added, o)
			}
		}
	}
	if kept == g.held {
		return added, nil
	}
	listed := make(map[T]struct{}, len(list))
	for _, o := range list {
		listed[o] = struct{}{}
	}
	for _, o := range g.one {
		if _, ok := listed[o]; !ok {
			removed = append(removed, o)
		}
	}
	for _, grp := range g.many {
		for _, o := range grp {
			if _, ok := listed[o]; !ok {
				removed = append(removed, o)
			}
		}
	}
	return added, removed
}

// removedSet returns whether an object is one of removed.
func removedSet[T comparable](removed []T) func(T) bool {
	if len(removed) <= 8 {
		return func(o T) bool { return slices.Contains(removed, o) }
	}
	set := make(map[T]struct{}, len(removed))
	for _, o := range removed {
		set[o] = struct{}{}
	}
	return func(o T) bool {
		_, ok := set[o]
		return ok
	}
}

// holds reports whether obj is in its group.
func (g *groups[K, T]) holds(obj T) bool {
	k, ok := g.key(obj)
	return ok && g.holdsAt(k, obj)
}

// holdsAt reports whether obj is in the group of k.
func (g *groups[K, T]) holdsAt(k K, obj T) bool {
	if o, ok := g.one[k]; ok {
		return o == obj
	}
	return slices.Contains(g.many[k], obj)
}

// fill groups list, replacing every group.
func (g *groups[K, T]) fill(list []T) {
	clear(g.one)
	clear(g.many)
	g.held = 0
	for _, o := range list {
		k, ok := g.key(o)
		if !ok {
			continue
		}
		g.held++
		if grp, ok := g.many[k]; ok {
			g.many[k] = append(grp, o)
		} else if first, ok := g.one[k]; ok {
			delete(g.one, k)
			g.many[k] = []T{first, o}
		} else {
			g.one[k] = o
		}
	}
	for _, grp := range g.many {
		sortObjects(grp)
	}
}

// set makes grp, sorted, the group of k.
func (g *groups[K, T]) set(k K, grp []T) {
	var one [1]T
	g.held += len(grp) - len(g.of(k, &one))
	switch len(grp) {
	case 0:
		delete(g.one, k)
		delete(g.many, k)
	case 1:
		g.one[k] = grp[0]
		delete(g.many, k)
	default:
		delete(g.one, k)
		g.many[k] = grp
	}
}

// of returns the group of k, in sorted order; a group of one object is
// returned in one, which the caller provides (on its stack) for as long
// as it reads the group.
func (g *groups[K, T]) of(k K, one *[1]T) []T {
	if o, ok := g.one[k]; ok {
		one[0] = o
		return one[:]
	}
	return g.many[k]
}

// last is the object of key k that a stable sort puts last, the one a map
// filled from a sorted list would keep; the zero T when there is none.
func (g *groups[K, T]) last(k K) T {
	if o, ok := g.one[k]; ok {
		return o
	}
	var zero T
	grp := g.many[k]
	if len(grp) == 0 {
		return zero
	}
	return grp[len(grp)-1]
}

// changedKey reports whether the group of k may differ from the one of the
// translation before the last update.
func (g *groups[K, T]) changedKey(k K) bool {
	if g.all {
		return true
	}
	_, ok := g.changed[k]
	return ok
}

// changedAny reports whether any group may differ from the one of the
// translation before the last update.
func (g *groups[K, T]) changedAny() bool { return g.all || len(g.changed) > 0 }

// object is an API object as informers hand it out: a pointer.
type object interface {
	comparable
	metav1.Object
}

// lookups are the groups translation looks objects up in, and the orders
// of the kinds it walks.
type lookups struct {
	order      orders
	services   *groups[types.NamespacedName, *service]
	secrets    *groups[types.NamespacedName, *corev1.Secret]
	configMaps *groups[types.NamespacedName, *corev1.ConfigMap]
	// trustBundles are ClusterTrustBundles by name.
	trustBundles *groups[string, *certificatesv1.ClusterTrustBundle]
	namespaces   *groups[string, *corev1.Namespace]
	// slices maps a Service to its EndpointSlices.
	slices *groups[types.NamespacedName, *endpointSlice]
	grants *groups[string, *gatewayv1.ReferenceGrant]
	// policies are BackendTLSPolicies by namespace, which is the
	// namespace of the Services they target.
	policies *groups[string, *gatewayv1.BackendTLSPolicy]
	// dependents are what looked up each Service and the grants of each
	// namespace (incremental.go).
	dependents dependents
}

func newLookups() *lookups {
	return &lookups{
		dependents:   dependents{services: serviceUses{}, grants: map[string][]any{}},
		services:     newGroups(keyed(namespacedName[*service])),
		secrets:      newGroups(keyed(namespacedName[*corev1.Secret])),
		configMaps:   newGroups(keyed(namespacedName[*corev1.ConfigMap])),
		trustBundles: newGroups(keyed((*certificatesv1.ClusterTrustBundle).GetName)),
		namespaces:   newGroups(keyed((*corev1.Namespace).GetName)),
		slices:       newGroups(sliceService),
		grants:       newGroups(keyed((*gatewayv1.ReferenceGrant).GetNamespace)),
		policies:     newGroups(keyed((*gatewayv1.BackendTLSPolicy).GetNamespace)),
	}
}

// update sorts objs and brings every group to its objects.
func (l *lookups) update(objs *objects) {
	objs.sort(&l.order)
	l.services.update(objs.services, objs.changes)
	l.secrets.update(objs.secrets, objs.changes)
	l.configMaps.update(objs.configMaps, objs.changes)
	l.trustBundles.update(objs.trustBundles, objs.changes)
	l.namespaces.update(objs.namespaces, objs.changes)
	l.slices.update(objs.endpointSlices, objs.changes)
	l.grants.update(objs.referenceGrants, objs.changes)
	l.policies.update(objs.backendTLS, objs.changes)
}

func keyed[K any, T any](key func(T) K) func(T) (K, bool) {
	return func(o T) (K, bool) { return key(o), true }
}
