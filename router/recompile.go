package router

import "slices"

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
// copied, not built again. A route is unchanged when prev had one of its ID
// with the same creation time, listener and hostnames and the very same
// Rules in memory, which translators hand out for an object that did not
// change (a Table refers to its routes, so their rules cannot have changed
// since). prev may be nil.
func Recompile(prev *Table, routes []Route, listenerHostnames ...string) (*Table, []error) {
	return compile(newReuse(prev, routes, listenerHostnames), routes, listenerHostnames)
}

// reuse is what a compilation takes from a previous Table.
type reuse struct {
	prev *Table
	// kept says, by index in the routes being compiled, which are
	// unchanged; moved maps each of prev's routes to its unchanged self.
	kept  []bool
	moved map[*Route]*Route
	// rebuilt are the host tables that a new, changed or removed route is
	// or was in.
	rebuilt map[hostKey]bool
}

type hostKey struct{ listener, host string }

// newReuse pairs routes with those of prev; nil when nothing can be
// reused.
func newReuse(prev *Table, routes []Route, listenerHostnames []string) *reuse {
	if prev == nil || !slices.Equal(prev.listenerHostnames, listenerHostnames) {
		return nil
	}
	before := make(map[RouteID]*Route, len(prev.routes))
	for _, r := range prev.routes {
		if before[r.ID] != nil {
			return nil // two routes of one ID cannot be told apart
		}
		before[r.ID] = r
	}
	u := &reuse{prev: prev, kept: make([]bool, len(routes)), moved: make(map[*Route]*Route, len(prev.routes)), rebuilt: map[hostKey]bool{}}
	for i := range routes {
		r := &routes[i]
		if old := before[r.ID]; old != nil && u.moved[old] == nil && unchanged(old, r) {
			u.kept[i] = true
			u.moved[old] = r
			continue
		}
		u.rebuild(r)
	}
	for _, old := range prev.routes {
		if u.moved[old] == nil {
			u.rebuild(old)
		}
	}
	return u
}

func unchanged(old, r *Route) bool {
	return old.Created.Equal(r.Created) && old.Listener == r.Listener && slices.Equal(old.Hostnames, r.Hostnames) &&
		len(old.Rules) == len(r.Rules) && (len(r.Rules) == 0 || &old.Rules[0] == &r.Rules[0])
}

func (u *reuse) rebuild(r *Route) {
	for _, host := range hostsOf(r) {
		u.rebuilt[hostKey{r.Listener, host}] = true
	}
}

func (u *reuse) rebuilds(listener, host string) bool { return u.rebuilt[hostKey{listener, host}] }

// touches reports whether a table r is in is rebuilt.
func (u *reuse) touches(r *Route) bool {
	return slices.ContainsFunc(hostsOf(r), func(host string) bool { return u.rebuilds(r.Listener, host) })
}

// keptHosts are the host tables of a listener hostname that a build copies
// from a previous Table.
type keptHosts struct {
	from  *hostIndex
	keep  func(*hostTable) bool
	moved map[*Route]*Route
}

// keptHosts returns the tables of prev's scope for listener that are not
// rebuilt; nil when there are none.
func (u *reuse) keptHosts(listener string) *keptHosts {
	if u == nil {
		return nil
	}
	i := slices.IndexFunc(u.prev.scopes, func(sc *scope) bool { return sc.listener == listener })
	if i < 0 {
		return nil
	}
	return &keptHosts{
		from: &u.prev.scopes[i].hosts,
		keep: func(h *hostTable) bool {
			host := h.name
			if host == "*" {
				host = ""
			}
			return !u.rebuilds(listener, host)
		},
		moved: u.moved,
	}
}
