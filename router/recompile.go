package router

import (
	"slices"
	"unsafe"
)

// Recompiling after a change.
//
// A route change touches the tables of the route's hostnames only. Compiling
// 10,000 routes again for it cost tens of milliseconds and megabytes of
// garbage on every change; Recompile compiles the routes of the hosts that
// changed and copies the other host tables of the previous Table, which is
// a copy of two arrays with their indexes shifted.

// Recompile returns what Compile(routes, listenerHostnames...) returns, for
// routes that are mostly those prev was compiled from, as after the change
// of a route: each host table of prev whose routes are all unchanged is
// copied, not built again, with prev's routes. A route is unchanged when
// prev had one of its ID with the same creation time, listener and
// hostnames and the very same Rules in memory, which translators hand out
// for an object that did not change (a Table shares its routes' rules, so
// they cannot have changed since). prev may be nil.
//
// Unlike Compile, the Table keeps the Routes themselves, which its Targets
// point to: the caller must not change them afterwards, as translation
// never changes a route it listed. A copy of each was 144 bytes a route
// beside the caller's.
func Recompile(prev *Table, routes []*Route, listenerHostnames ...string) (*Table, []error) {
	return compile(newReuse(prev, routes, listenerHostnames), routes, listenerHostnames)
}

// RecompileChanged is Recompile for a caller that knows what changed:
// base are the routes prev was compiled from, and routes are base in the
// same order, but for the routes of the IDs in changed, which may have
// come, gone or changed. The others are taken for unchanged without
// comparing them, and what a change does not fall in is not read: the
// Table shares prev's host tables, shards and chunks of routes but for
// those of the changed routes (recompileTold). A caller that says less
// than what changed gets a Table that serves the routes it had.
func RecompileChanged(prev *Table, base, routes []*Route, changed []RouteID, listenerHostnames ...string) (*Table, []error) {
	// prev's routes are base's (or routes the same as those), one for
	// one, unless one of
	// base did not compile: then routes are paired as Recompile does.
	if reusable(prev, listenerHostnames) && prev.routes.len == len(base) {
		if t, errs, ok := recompileTold(prev, base, routes, changed, listenerHostnames); ok {
			return t, errs
		}
	}
	return Recompile(prev, routes, listenerHostnames...)
}

// reuse is what a compilation takes from a previous Table.
type reuse struct {
	prev *Table
	// kept holds, by index in the routes being compiled, prev's route for
	// each route that is unchanged; nil for the others (Recompile's).
	kept []*Route
	// shared are the chunks of prev's routes that are kept whole, in the
	// order of the places of their first routes (Recompile's).
	shared []sharedChunk
	// rebuilt are the host tables that a new, changed or removed route is
	// or was in.
	rebuilt smallSet[hostKey]
}

// sharedChunk is a chunk of routes kept whole, whose first route is at
// the place at in the routes being compiled.
type sharedChunk struct {
	at int
	*routeChunk
}

// smallSet is a set of the few keys a change touches, asked about for
// each of thousands of routes or tables: a short list is searched faster
// than a map hashes, so the map is made only once the list grows long.
type smallSet[K comparable] struct {
	list []K
	set  map[K]bool
}

// smallSetListMax is how long a smallSet's list grows before its map is
// made.
const smallSetListMax = 16

func (s *smallSet[K]) add(k K) {
	if s.has(k) {
		return
	}
	s.list = append(s.list, k)
	switch {
	case s.set != nil:
		s.set[k] = true
	case len(s.list) > smallSetListMax:
		s.set = make(map[K]bool, 2*len(s.list))
		for _, k := range s.list {
			s.set[k] = true
		}
	}
}

func (s *smallSet[K]) has(k K) bool {
	if s.set != nil {
		return s.set[k]
	}
	return slices.Contains(s.list, k)
}

type hostKey struct{ listener, host string }

// newReuse pairs routes with those of prev; nil when nothing can be
// reused.
//
// Translators list routes in the same order every time, so the previous
// route of an ID is mostly at the same place, give or take the few added
// and removed before it: pairing walks both lists, and only the routes it
// misses go through a map, which for all 10,000 routes of a change cost
// more than the rest of the pairing.
func newReuse(prev *Table, routes []*Route, listenerHostnames []string) *reuse {
	if !reusable(prev, listenerHostnames) {
		return nil
	}
	u := &reuse{prev: prev, kept: make([]*Route, len(routes))}
	prevRoutes := slices.AppendSeq(make([]*Route, 0, prev.routes.len), prev.routes.all())
	// pairedTo holds, for each of prevRoutes, the index in routes of the
	// route it is kept for, -1 for none.
	pairedTo := make([]int32, len(prevRoutes))
	for k := range pairedTo {
		pairedTo[k] = -1
	}
	// pair keeps prevRoutes[k] for routes[i] and reports whether the two
	// are the same.
	pair := func(i, k int) bool {
		if !SameRoute(prevRoutes[k], routes[i]) {
			return false
		}
		u.kept[i], pairedTo[k] = prevRoutes[k], int32(i)
		return true
	}
	var missed []int // of routes
	j := 0
	for i := range routes {
		id := routes[i].ID
		switch {
		case j < len(prevRoutes) && prevRoutes[j].ID == id:
			j++
		case j+1 < len(prevRoutes) && prevRoutes[j+1].ID == id: // prevRoutes[j] went
			j += 2
		default:
			missed = append(missed, i)
			continue
		}
		if !pair(i, j-1) {
			missed = append(missed, i)
		}
	}
	if len(missed) > 0 {
		// Routes of one ID can be equal in everything that orders them,
		// and then the first listed wins. A missed route paired here may
		// have moved past its twin, paired here or by the walk: the hosts
		// of a route whose ID the previous table had more than once are
		// laid out again. The names of the missed routes pick the previous
		// routes to count, so that most are passed over at the cost of
		// hashing a name.
		names := make(map[string]bool, len(missed))
		for _, i := range missed {
			names[routes[i].ID.Name] = true
		}
		type previous struct {
			count    int
			unpaired []int
		}
		byID := map[RouteID]*previous{}
		for k, old := range prevRoutes {
			if !names[old.ID.Name] {
				continue
			}
			p := byID[old.ID]
			if p == nil {
				p = &previous{}
				byID[old.ID] = p
			}
			p.count++
			if pairedTo[k] < 0 {
				p.unpaired = append(p.unpaired, k)
			}
		}
		for _, i := range missed {
			p := byID[routes[i].ID]
			if p == nil {
				u.rebuild(routes[i])
				continue
			}
			for _, k := range p.unpaired {
				if pairedTo[k] < 0 && pair(i, k) {
					break
				}
			}
			if u.kept[i] == nil || p.count > 1 {
				u.rebuild(routes[i])
			}
		}
	}
	for k, old := range prevRoutes {
		if pairedTo[k] < 0 {
			u.rebuild(old)
		}
	}
	// A chunk whose routes are all kept, in a row and in order, is the
	// new Table's too.
	k := 0
	for _, ch := range prev.routes.chunks {
		at := pairedTo[k]
		whole := at >= 0
		for n := range ch.routes {
			whole = whole && pairedTo[k+n] == at+int32(n)
		}
		if whole {
			u.shared = append(u.shared, sharedChunk{int(at), ch})
		}
		k += len(ch.routes)
	}
	slices.SortFunc(u.shared, func(a, b sharedChunk) int { return a.at - b.at })
	return u
}

// sameCopy reports whether a and b are one Route, or copies of one with
// their strings and lists in the same memory: then they are the same
// route, whatever a caller says changed, without reading a byte of them.
func sameCopy(a, b *Route) bool {
	return a == b || sameString(a.ID.Name, b.ID.Name) && sameString(a.ID.Namespace, b.ID.Namespace) && a.ID.Kind == b.ID.Kind &&
		a.Created == b.Created && sameString(a.Listener, b.Listener) &&
		len(a.Hostnames) == len(b.Hostnames) && unsafe.SliceData(a.Hostnames) == unsafe.SliceData(b.Hostnames) &&
		len(a.Rules) == len(b.Rules) && unsafe.SliceData(a.Rules) == unsafe.SliceData(b.Rules)
}

func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// reusable reports whether a compilation for listenerHostnames can reuse
// anything of prev.
func reusable(prev *Table, listenerHostnames []string) bool {
	return prev != nil && slices.Equal(prev.listenerHostnames, listenerHostnames)
}

// keptAt returns prev's route for routes[i] when it is unchanged, else nil.
func (u *reuse) keptAt(i int) *Route {
	if u == nil {
		return nil
	}
	return u.kept[i]
}

func (u *reuse) rebuild(r *Route) {
	for _, host := range hostsOf(r) {
		u.rebuilt.add(hostKey{r.Listener, host})
	}
}

func (u *reuse) rebuilds(listener, host string) bool {
	return u.rebuilt.has(hostKey{listener, host})
}

// touches reports whether a table r is in is rebuilt.
func (u *reuse) touches(r *Route) bool {
	return slices.ContainsFunc(hostsOf(r), func(host string) bool { return u.rebuilds(r.Listener, host) })
}

// keptHosts are the host tables of a listener hostname that a build copies
// from a previous Table.
type keptHosts struct {
	from *scope
	keep func(*hostTable) bool
	// rebuilt are the hostnames of the listener whose tables are rebuilt.
	rebuilt []string
}

// tables returns the tables of x, an index of k.from, that are not
// rebuilt.
func (k *keptHosts) tables(x *hostIndex) []indexedTable {
	var out []indexedTable
	x.forEachHost(func(h *hostTable) {
		if k.keep(h) {
			out = append(out, indexedTable{x, h})
		}
	})
	return out
}

// keptHosts returns the tables of prev's scope for listener that are not
// rebuilt; nil when there are none.
func (u *reuse) keptHosts(listener string) *keptHosts {
	if u == nil {
		return nil
	}
	from := u.prev.scopeNamed(listener)
	if from == nil {
		return nil
	}
	var rebuilt []string
	for _, k := range u.rebuilt.list {
		if k.listener == listener {
			rebuilt = append(rebuilt, k.host)
		}
	}
	return &keptHosts{
		from:    from,
		rebuilt: rebuilt,
		keep: func(h *hostTable) bool {
			host := h.name
			if host == "*" {
				host = ""
			}
			return !u.rebuilds(listener, host)
		},
	}
}
