package watch

// Reuse of per-object results between translations.
//
// Translation recomputes the whole store, but between two translations
// few objects change, and with 10,000 routes recomputing all of them is
// most of the time a route change takes. Informer caches hand out the same
// pointer for an object until the object changes, so a result computed
// from a set of pointers is still right while every one of them is the
// same: the memo keeps such results with the pointers they read, and a
// translation uses one only after checking all of them. The output is the
// one a translation without memo makes (TestMemoMatchesFreshTranslation).
//
// What is memoized: the translation of each HTTPRoute, GRPCRoute and
// Ingress's routes (depending on the Services, ReferenceGrants and
// BackendTLSPolicies they looked up, and the ConfigMaps and
// ClusterTrustBundles of the policies that applied), the status entries
// of each translated route (depending on whether each parent Gateway
// accepted it), the endpoint set of each Service port (depending on the
// Service's EndpointSlices) and the check of each TLS Secret's key pair; the lookups translation makes of those
// objects are regrouped only where they changed (groups.go). Reused status
// entries also let the status writer tell an object whose wanted status
// did not change at a glance. Whole parts of the last Snapshot are handed
// on when everything in them is the same: the map of endpoint sets, and a
// socket's list of routes.
//
// When nothing but HTTPRoutes, GRPCRoutes, Ingresses, and Services or
// ReferenceGrants only routes looked up, changed, a translation does not
// even walk the routes and Ingresses that did not: it splices those that
// came and went, and the routes that looked up what changed, into the
// last translation's results (incremental.go, incremental_ingress.go).
//
// In cluster mode an EndpointSlice change is no translation at all:
// changeEndpoints makes the endpoint sets of its Service again, from the
// entries of the last translation, and the Source publishes the last
// Snapshot with them and the last Reports.
//
// What Snapshots and Reports get (rules, endpoint sets, status entries) is
// never changed afterwards, so they may share it; the memo's entries that
// hold them are, in place: an endpoint entry gets the new set of its
// Service, a translated route the status entries of its last translation.
// Each translation keeps only the entries it used, so the memo holds no
// more than the store does. File mode parses fresh objects on every change
// and so never hits.

import (
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/internal/shardmap"
	"github.com/hostgate/hostgate/router"
)

// memo carries the results of one translation into the next. It is not
// safe for concurrent use: a Source translates one change at a time.
type memo struct {
	// results are the last translation's.
	results
	// spare holds the emptied maps of the translation before, for the
	// next one to fill: with 10,000 routes, making them anew each time
	// was a tenth of a route change, with the garbage collection that
	// followed.
	spare results
	// groups are the lookups of the last translation, brought up to date
	// by the next.
	groups *lookups
	// endpoints are the endpoint sets of the last translation.
	endpoints endpointRegistry
	// spliced says the last translation spliced route changes into the
	// one before (incremental.go).
	spliced bool
}

// results are what one translation leaves for the next.
type results struct {
	// objects hold pointers: an entry is larger than a map keeps in
	// place, so a map of entries allocated one for every object of every
	// translation (1.8 MB of garbage a translation at 10,000 routes).
	objects map[any]*memoEntry
	certs   map[*corev1.Secret]certEntry
	// routes are each socket's routes, which the next translation hands
	// on if it places the same ones.
	routes map[string][]*router.Route
	// conditions are the conditions of good routes by generation (see
	// goodConditions).
	conditions map[int64][]metav1.Condition
	// What a translation that splices changes reads of the last one
	// (incremental.go): its Reports and inputs besides the routes it
	// splices (inputsOf), what the HTTPRoutes and GRPCRoutes added to each
	// listener's attached routes, the endpoint entries they and the
	// Ingresses registered, and its Ingresses (nil when a splice cannot
	// splice their changes). spliced says this translation's objects and
	// certs are the last one's maps, brought up to date in place.
	reports    *Reports
	inputs     *objects
	kindCounts [spliceKinds][]int32
	routePorts []*endpointEntry
	ingresses  *ingressState
	spliced    bool
}

func newMemo() *memo {
	groups, uses := newLookups(), serviceUses{}
	groups.dependents.services = uses
	return &memo{groups: groups, endpoints: endpointRegistry{
		byName: map[string]*endpointEntry{}, byService: uses, changed: map[types.NamespacedName]struct{}{},
	}}
}

// serviceUses are what the memo holds by Service key: the endpoint entries
// of the Service's ports (endpointRegistry.byService) and the results that
// looked the key up (dependents.services). One map holds both, where a map
// for each took 234 B of every Service of 10,000 HTTPRoutes.
type serviceUses map[types.NamespacedName]*serviceUse

type serviceUse struct {
	entries    []*endpointEntry
	dependents []any
}

// use returns the use of key, made if there is none yet.
func (u serviceUses) use(key types.NamespacedName) *serviceUse {
	s := u[key]
	if s == nil {
		s = &serviceUse{}
		u[key] = s
	}
	return s
}

// entries are the endpoint entries of the ports of Service key.
func (u serviceUses) entries(key types.NamespacedName) []*endpointEntry {
	if s := u[key]; s != nil {
		return s.entries
	}
	return nil
}

// tidy forgets s, the use of key, once it holds nothing.
func (u serviceUses) tidy(key types.NamespacedName, s *serviceUse) {
	if len(s.entries) == 0 && len(s.dependents) == 0 {
		delete(u, key)
	}
}

// newResults returns empty results with room for as many entries as like
// has: a translation usually keeps about as many as the one before.
func newResults(like *results) results {
	return results{
		objects:    make(map[any]*memoEntry, len(like.objects)),
		certs:      make(map[*corev1.Secret]certEntry, len(like.certs)),
		routes:     make(map[string][]*router.Route, len(like.routes)),
		conditions: make(map[int64][]metav1.Condition, len(like.conditions)),
	}
}

func (r *results) clear() {
	clear(r.objects)
	clear(r.certs)
	clear(r.routes)
	clear(r.conditions)
	clear(r.routePorts)
	r.routePorts = r.routePorts[:0]
	r.reports, r.inputs, r.ingresses, r.spliced = nil, nil, nil, false
}

// translate is translate with the results of m's previous translation,
// and keeps this one's for the next.
func (m *memo) translate(objs *objects, opts Options) (*Snapshot, *Reports) {
	if m.spare.objects == nil {
		m.spare = newResults(&m.results)
	}
	next := m.spare
	own, ownCerts := next.objects, next.certs
	snap, reports := translateWith(objs, opts, m.groups, &m.results, &next, &m.endpoints)
	m.spliced = next.spliced
	if next.spliced {
		// next.objects and next.certs are the last translation's maps,
		// brought up to date: the spare takes next's own.
		m.results.objects, m.results.certs = own, ownCerts
	}
	m.results, m.spare = next, m.results
	// Emptied now rather than when the next translation starts: the
	// results of the one before hold the objects replaced since, every
	// route's after hostgate wrote all statuses.
	m.spare.clear()
	return snap, reports
}

// memoEntry is the result of one object's translation and what it read
// besides the object.
type memoEntry struct {
	value any
	deps  deps
}

// deps are the lookups a memoized translation made.
type deps struct {
	// policies are namespaces whose BackendTLSPolicies it looked up.
	policies []string
	// ports are the endpoint sets it registered, whose entries name the
	// Services it looked up (see servicesChanged).
	ports []portDep
	// other is nil but for the few objects that look up more: a memo
	// entry is kept for every object, and with every list of these in
	// it an entry was twice its size.
	other *otherDeps
}

// otherDeps are the lookups that few objects make.
type otherDeps struct {
	// services are the keys of the Services it looked up but registered
	// no port of (missing, or without the port asked for): those of the
	// ports registered are their entries' (see endDeps), and a list of
	// them in every entry was 48 B of every route kept.
	services []types.NamespacedName
	// grants are the namespaces of the ReferenceGrants it looked up.
	grants []string
	// ca are the CA bundles of the BackendTLSPolicies that applied (and
	// the ConfigMaps of custom-headers).
	ca caSources
	// secrets are the Secrets of annotations it read (auth-secret).
	secrets []types.NamespacedName
}

// others returns d.other, made if d has none yet.
func (d *deps) others() *otherDeps {
	if d.other == nil {
		d.other = &otherDeps{}
	}
	return d.other
}

type portDep struct {
	port  *corev1.ServicePort
	entry *endpointEntry
}

// attachment is how a route was attached: the outcomes of its parentRefs,
// the status entries made for them, and the indices of the listeners whose
// attached routes it counted, which a translation that splices its removal
// in takes back (incremental.go). Never changed: routes attached alike
// share one (sharedAttachment).
type attachment struct {
	outcomes []parentOutcome
	parents  []gatewayv1.RouteParentStatus
	counted  []int
}

// endpointEntry is the endpoint set registered under name. Entries are
// kept from one translation to the next, and the memoized results that
// registered one point to it, so that the 10,000 routes of a translation
// that changed nothing else register their sets without looking them up
// by name: those lookups were a fifth of a translation.
type endpointEntry struct {
	name string
	key  types.NamespacedName
	// port is the Service port of the set: a port belongs to one Service
	// object, so the pointer names both.
	port *corev1.ServicePort
	set  []Endpoint
	// translation is the number of the last translation that registered
	// the entry.
	translation uint64
	// routeRefs counts the HTTPRoutes and GRPCRoutes of the last
	// translation whose memoized results registered the entry (each
	// once per run of rules that registered it, see appendUnlessLast):
	// a translation that splices route changes keeps the entry while
	// some route still does, without registering it again. listed says
	// the entry is in the translation's list of such entries
	// (translator.routePorts), where it stays, once, until the list is
	// pruned.
	routeRefs int32
	listed    bool
}

// endpointRegistry holds the endpoint sets of the last translation, which
// the next one reuses where the Service and EndpointSlices are the same.
type endpointRegistry struct {
	translation uint64
	// byName holds the entries that the last translation registered, and
	// those the current one has registered so far; byService holds the
	// same entries by Service, for changeEndpoints.
	byName    map[string]*endpointEntry
	byService serviceUses
	// changed are the Services whose sets changeEndpoints changed since
	// the last translation, which the next one makes again: its lookups
	// tell what changed since the last translation only.
	changed map[types.NamespacedName]struct{}
	// registered are the current translation's entries, in order.
	registered []*endpointEntry
	// rebuilt are the entries of the current translation that are new or
	// have a new set.
	rebuilt []*endpointEntry
	// A translation that splices route changes registers only what it
	// translates: the entries routes still count stay without being
	// registered again, which at 50,000 routes was a quarter of a route
	// change. The entries that may go are then those whose count fell
	// to 0 (released) and those the last translation registered and no
	// route counted (unrouted); routed is the number of entries routes
	// count.
	released, unrouted []*endpointEntry
	routed             int
	// published is the last Snapshot's map of endpoints, one set for each
	// entry registered: the next translation hands it on when it
	// registers the same ones, unchanged.
	published *EndpointSets
}

type certEntry struct {
	cert Cert
	err  error
}

// memoized returns build's result for obj, reused from the previous
// translation when nothing it read has changed.
func memoized[T any](t *translator, obj any, build func() T) T {
	v, _ := memoizedEntry(t, obj, build)
	return v
}

// memoizedEntry is memoized that also returns the memo's entry for obj,
// nil without a memo.
func memoizedEntry[T any](t *translator, obj any, build func() T) (T, *memoEntry) {
	if t.next == nil {
		return build(), nil
	}
	if e, ok := t.prev.objects[obj]; ok && t.unchanged(&e.deps) {
		for _, p := range e.deps.ports {
			t.register(p.entry, p.port)
		}
		t.next.objects[obj] = e
		return e.value.(T), e
	}
	e := &memoEntry{}
	t.deps = &e.deps
	v := build()
	e.value = v
	t.next.objects[obj] = e
	t.endDeps()
	t.dependents.add(obj, &e.deps)
	return v, e
}

// endDeps ends the recording of lookups in t.deps: of the Services looked
// up (lookedUp), those it registered no port of are kept in it.
func (t *translator) endDeps() {
	if d := t.deps; d != nil {
		for _, key := range t.lookedUp {
			if !slices.ContainsFunc(d.ports, func(p portDep) bool { return p.entry.key == key }) {
				o := d.others()
				o.services = appendUnlessLast(o.services, key)
			}
		}
	}
	t.lookedUp = t.lookedUp[:0]
	t.deps = nil
}

// servicesChanged reports whether any Service d looked up may have changed
// in the last update of services.
func (d *deps) servicesChanged(services *groups[types.NamespacedName, *service]) bool {
	if d.other != nil {
		for _, key := range d.other.services {
			if services.changedKey(key) {
				return true
			}
		}
	}
	for _, p := range d.ports {
		if services.changedKey(p.entry.key) {
			return true
		}
	}
	return false
}

// unchanged reports whether every lookup recorded in d finds what it
// found in the previous translation. A result in prev was right for that
// translation, so only lookups of keys that changed since can differ.
func (t *translator) unchanged(d *deps) bool {
	if d.servicesChanged(t.services) {
		return false
	}
	for _, namespace := range d.policies {
		if t.policies.changedKey(namespace) {
			return false
		}
	}
	o := d.other
	if o == nil {
		return true
	}
	for _, namespace := range o.grants {
		if t.grants.changedKey(namespace) {
			return false
		}
	}
	for _, key := range o.ca.configMaps {
		if t.configMaps.changedKey(key) {
			return false
		}
	}
	for _, key := range o.secrets {
		if t.secrets.changedKey(key) {
			return false
		}
	}
	for _, name := range o.ca.trustBundles {
		if t.trustBundles.changedKey(name) {
			return false
		}
	}
	return true
}

func (t *translator) dependOnService(key types.NamespacedName) {
	if t.deps != nil {
		t.lookedUp = appendUnlessLast(t.lookedUp, key)
	}
}

// appendUnlessLast appends v to s unless s ends with it: the rules of a
// route commonly send to the same Service, and a dependency recorded once
// per rule took a memo entry's lists to twice their size or more.
func appendUnlessLast[T comparable](s []T, v T) []T {
	if len(s) > 0 && s[len(s)-1] == v {
		return s
	}
	return append(s, v)
}

func (t *translator) dependOnGrants(namespace string) {
	if t.deps != nil {
		o := t.deps.others()
		o.grants = append(o.grants, namespace)
	}
}

func (t *translator) dependOnPolicies(namespace string) {
	switch {
	case t.deps == nil:
	case len(t.deps.policies) == 0:
		// Most results look up the policies of one namespace: those share
		// a list of it, which an append copies (its room is its length),
		// where a list of its own was 16 B of every route kept.
		list, ok := t.policyDeps[namespace]
		if !ok {
			if t.policyDeps == nil {
				t.policyDeps = map[string][]string{}
			}
			list = []string{namespace}
			t.policyDeps[namespace] = list
		}
		t.deps.policies = list
	default:
		t.deps.policies = appendUnlessLast(t.deps.policies, namespace)
	}
}

func (t *translator) dependOnCA(used *caSources) {
	if t.deps != nil {
		if len(used.configMaps) == 0 && len(used.trustBundles) == 0 {
			return
		}
		o := t.deps.others()
		o.ca.configMaps = append(o.ca.configMaps, used.configMaps...)
		o.ca.trustBundles = append(o.ca.trustBundles, used.trustBundles...)
	}
}

func (t *translator) dependOnConfigMap(key types.NamespacedName) {
	if t.deps != nil {
		o := t.deps.others()
		o.ca.configMaps = append(o.ca.configMaps, key)
	}
}

func (t *translator) dependOnSecret(key types.NamespacedName) {
	if t.deps != nil {
		o := t.deps.others()
		o.secrets = append(o.secrets, key)
	}
}

// registerEndpoints makes the endpoint set of a Service port part of the
// Snapshot under name, and returns the name to refer to it by: with a
// memo, the entry's, which every reference shares where each kept a copy
// of its own.
func (t *translator) registerEndpoints(name string, svc *service, port *corev1.ServicePort) string {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	if t.next == nil {
		if _, done := t.endpoints[name]; !done {
			var one [1]*endpointSlice
			t.endpoints[name] = endpointSet(t.slices.of(key, &one), port)
		}
		return name
	}
	e := t.eps.byName[name]
	if e == nil {
		e = &endpointEntry{name: name, key: key}
		t.eps.byName[name] = e
		u := t.eps.byService.use(key)
		u.entries = append(u.entries, e)
	}
	t.register(e, port)
	if t.deps != nil {
		t.deps.ports = appendUnlessLast(t.deps.ports, portDep{port, e})
	}
	return e.name
}

// register makes e, registered by the last translation or new, part of
// this one with the endpoint set of port. The first port registered under
// a name in a translation is the one served.
func (t *translator) register(e *endpointEntry, port *corev1.ServicePort) {
	if e.translation == t.eps.translation {
		return
	}
	e.translation = t.eps.translation
	// The set is right for the last translation, as each translation
	// drops the entries it did not register, unless changeEndpoints
	// changed it since.
	_, changed := t.eps.changed[e.key]
	if e.port != port || changed || t.slices.changedKey(e.key) {
		var one [1]*endpointSlice
		set := endpointSet(t.slices.of(e.key, &one), port)
		// Compared, not just replaced: changeEndpoints may have brought
		// the set up to date already, and an equal set keeps the map.
		if e.port == nil || !slices.Equal(set, e.set) {
			e.set = set
			t.eps.rebuilt = append(t.eps.rebuilt, e)
		}
		e.port = port
	}
	t.eps.registered = append(t.eps.registered, e)
}

// start begins the registration of a translation's endpoint sets.
func (r *endpointRegistry) start() {
	r.translation++
	r.registered = r.registered[:0]
	r.rebuilt = r.rebuilt[:0]
	r.released = r.released[:0]
}

// endpointMap is the Snapshot's endpoint sets. When every set registered
// is the previous translation's, under the same names, they are the
// previous Snapshot's: with 10,000 sets, a new map for every route change
// was a sixth of the garbage it made. Otherwise they are made from those,
// with the sets new or rebuilt and without the names no longer registered.
func (t *translator) endpointMap() *EndpointSets {
	if t.next == nil {
		return NewEndpointSets(t.endpoints)
	}
	r := t.eps
	var dropped []string
	if t.next.spliced {
		dropped = t.dropUnregistered()
	} else if len(r.byName) > len(r.registered) {
		for _, e := range r.byName {
			if e.translation != r.translation {
				r.drop(e)
			}
		}
	}
	clear(r.changed) // every set registered is made again or right
	r.unrouted = r.unrouted[:0]
	for _, e := range r.registered {
		if e.routeRefs == 0 {
			r.unrouted = append(r.unrouted, e)
		}
	}
	// Each entry registered and not rebuilt was the last translation's,
	// with its set published (by it, or by changeEndpoints since): as
	// many of them means the same ones. An entry dropped from byName
	// comes back new, and so rebuilt: were one registered again without
	// that, its set would be left out of the sets made below, where a
	// rebuild of them all would have had it. A splice keeps every entry
	// it does not drop.
	if len(r.rebuilt) == 0 && r.published != nil && (t.next.spliced && len(dropped) == 0 || len(r.registered) == r.published.Len()) {
		return r.published
	}
	sets := shardmap.Change(r.published)
	rebuilt := r.rebuilt
	if r.published == nil {
		rebuilt = r.registered
	}
	for _, e := range rebuilt {
		sets.Put(e.name, e.set)
	}
	for _, name := range dropped {
		sets.Delete(name)
	}
	if !t.next.spliced && sets.Len() != len(r.registered) {
		for name := range r.published.All() {
			if r.byName[name] == nil {
				sets.Delete(name)
			}
		}
	}
	r.published = sets.Done()
	return r.published
}

// dropUnregistered brings the entries of a splice up to date: those that
// routes still count and that it did not register, of Services whose
// EndpointSlices changed since the last translation (or whose sets
// changeEndpoints changed), get their sets again, and the entries that no
// route counts and it did not register are dropped. It returns the names
// dropped.
func (t *translator) dropUnregistered() []string {
	r := t.eps
	for _, changed := range []map[types.NamespacedName]struct{}{t.slices.changed, r.changed} {
		for key := range changed {
			for _, e := range r.byService.entries(key) {
				if e.routeRefs > 0 {
					t.register(e, e.port)
				}
			}
		}
	}
	var dropped []string
	for _, list := range [][]*endpointEntry{r.released, r.unrouted} {
		for _, e := range list {
			if e.translation != r.translation && e.routeRefs == 0 && r.byName[e.name] == e {
				r.drop(e)
				dropped = append(dropped, e.name)
			}
		}
	}
	return dropped
}

// drop forgets e.
func (r *endpointRegistry) drop(e *endpointEntry) {
	delete(r.byName, e.name)
	u := r.byService[e.key]
	u.entries = slices.DeleteFunc(u.entries, func(o *endpointEntry) bool { return o == e })
	r.byService.tidy(e.key, u)
}

// changeEndpoints brings the endpoint sets of the Services keys to the
// EndpointSlices slicesOf finds for them, and returns last, the Snapshot of
// the last translation or change, with those sets; nil when none changed.
// No route is translated: a Service's EndpointSlices decide its endpoint
// sets and nothing else, so the result is what a translation of the store
// would make (TestChangeEndpointsMatchesTranslation,
// TestEndpointChangesAmongTranslations), at the cost of the sets changed
// and a copy of their shards of the sets (shardmap). slicesOf must list what
// the store's next list will: the next translation compares its sets with
// these.
func (m *memo) changeEndpoints(last *Snapshot, keys []types.NamespacedName, slicesOf func(types.NamespacedName) []*endpointSlice) *Snapshot {
	r := &m.endpoints
	type change struct {
		entry *endpointEntry
		set   []Endpoint
	}
	// Entries change only once every list is read: the next translation
	// must find the sets published.
	var changes []change
	for _, key := range keys {
		entries := r.byService.entries(key)
		if len(entries) == 0 {
			continue // no route refers to the Service
		}
		list := slicesOf(key)
		sortObjects(list)
		for _, e := range entries {
			if set := endpointSet(list, e.port); !slices.Equal(set, e.set) {
				changes = append(changes, change{e, set})
			}
		}
	}
	if len(changes) == 0 {
		return nil
	}
	// The last sets are the published Snapshot's: the next are made from
	// them.
	base := r.published
	sets := shardmap.Change(base)
	names := make([]string, len(changes))
	for i, c := range changes {
		c.entry.set = c.set
		sets.Put(c.entry.name, c.set)
		r.changed[c.entry.key] = struct{}{}
		names[i] = c.entry.name
	}
	r.published = sets.Done()
	snap := *last
	snap.Endpoints = r.published
	snap.EndpointChanges = &EndpointChanges{Base: base, Names: names}
	return &snap
}

// memoParents returns r's status entries for outcomes, or the previous
// ones when r is the same translated route and its Gateways decided the
// same, and keeps them in r with counted, the listeners it was counted
// on. outcomes and counted may be scratch space: what is kept is a copy.
func (t *translator) memoParents(r *route, controller gatewayv1.GatewayController, outcomes []parentOutcome, counted []int) []gatewayv1.RouteParentStatus {
	// Kept in the route, which a translation reuses only when the last one
	// used it: a map of the routes' entries took a tenth of a translation.
	a := r.attached
	switch {
	case a == nil || !slices.Equal(a.outcomes, outcomes):
		r.attached = t.sharedAttachment(outcomes, t.sharedParents(t.parentStatuses(r, controller, outcomes)), counted)
	case !slices.Equal(a.counted, counted):
		r.attached = t.sharedAttachment(outcomes, a.parents, counted)
	}
	return r.attached.parents
}

// sharedAttachment returns an attachment of outcomes, parents and counted:
// the one it made last when the same, where an attachment of its own was
// 48 B of every route kept.
func (t *translator) sharedAttachment(outcomes []parentOutcome, parents []gatewayv1.RouteParentStatus, counted []int) *attachment {
	last := t.lastAttachment
	if last != nil && slices.Equal(last.outcomes, outcomes) && slices.Equal(last.counted, counted) &&
		len(last.parents) == len(parents) && (len(parents) == 0 || &last.parents[0] == &parents[0]) {
		return last
	}
	t.lastAttachment = &attachment{outcomes: keep(&t.lastOutcomes, outcomes), parents: parents, counted: keep(&t.lastCounted, counted)}
	return t.lastAttachment
}

// keep returns a copy of s to keep, never nil: *last, the copy it made
// last, when equal, or a new one that it leaves in *last. Neither is
// ever changed, and most routes of a cluster name the same parents, are
// accepted by them alike and counted on the same listeners, where copies
// of their own were 124 B of every route kept.
func keep[E comparable](last *[]E, s []E) []E {
	if *last == nil || !slices.Equal(*last, s) {
		*last = append([]E{}, s...)
	}
	return *last
}

// sharedParents is parents, or the status entries made last when they
// are the same: routes that name their Gateway alike and are accepted at
// the same generation share their conditions (goodConditions) and so
// their entries, which Reports never change, where a list of its own was
// 94 B of every route kept.
func (t *translator) sharedParents(parents []gatewayv1.RouteParentStatus) []gatewayv1.RouteParentStatus {
	if slices.EqualFunc(t.lastParents, parents, sameParentStatus) && t.lastParents != nil {
		return t.lastParents
	}
	t.lastParents = parents
	return parents
}

// sameParentStatus reports whether a and b are the same entry: their
// conditions the same list, and their parentRefs equal.
func sameParentStatus(a, b gatewayv1.RouteParentStatus) bool {
	return a.ControllerName == b.ControllerName && len(a.Conditions) == len(b.Conditions) && len(a.Conditions) > 0 &&
		&a.Conditions[0] == &b.Conditions[0] && reflect.DeepEqual(&a.ParentRef, &b.ParentRef)
}

// lastRoutes are the routes of the socket called name in the last
// translation.
func (t *translator) lastRoutes(name string) []*router.Route {
	if t.next == nil {
		return nil
	}
	return t.prev.routes[name]
}

// memoKeyPair is checkKeyPair, reused while the Secret is the same object.
func (t *translator) memoKeyPair(s *corev1.Secret) (Cert, error) {
	if t.next == nil {
		return checkKeyPair(s)
	}
	e, ok := t.prev.certs[s]
	if !ok {
		e.cert, e.err = checkKeyPair(s)
	}
	t.next.certs[s] = e
	return e.cert, e.err
}
