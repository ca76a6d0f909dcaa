package router

import (
	"hash/maphash"
	"iter"
	"slices"
)

// A Table's list of routes.
//
// A Table lists its routes in order, and those with filters or backend
// TLS identities apart (Filters, BackendTLS). A route change at 50,000
// routes copied both lists whole, 400 KB of pointers that the collector
// then scanned; the list is cut in chunks of about routesPerChunk, and a
// Table that RecompileChanged builds shares those of the previous Table
// that the change does not fall in.

// routesPerChunk is about how many routes a chunk holds: enough that the
// list of chunks is short, few enough that copying one is cheap.
const routesPerChunk = 256

// routeChunk is a run of a Table's routes. Like a Table, it never changes
// once made.
type routeChunk struct {
	routes []*Route
	// withRefs are those of routes that have filters or backends with a
	// TLS identity, in the same order: what Filters and BackendTLS walk on
	// every change, where most routes have neither.
	withRefs []*Route
	// names are the hashes of the routes' names, sorted, so that a look
	// for the routes of an ID (RecompileChanged's for those that went)
	// reads a few of them in each chunk instead of every route.
	names []uint64
}

// nameSeed hashes routes' names for every chunk, so that the chunks of
// one Table can be asked with one hash.
var nameSeed = maphash.MakeSeed()

func hashName(name string) uint64 { return maphash.String(nameSeed, name) }

func newRouteChunk(routes []*Route) *routeChunk {
	ch := &routeChunk{routes: routes, names: make([]uint64, len(routes))}
	for i, r := range routes {
		if hasRefs(r) {
			ch.withRefs = append(ch.withRefs, r)
		}
		ch.names[i] = hashName(r.ID.Name)
	}
	slices.Sort(ch.names)
	return ch
}

// routeList is a Table's routes in order, chunk after chunk.
type routeList struct {
	chunks []*routeChunk
	len    int
}

func (l *routeList) all() iter.Seq[*Route] {
	return eachOf(l.chunks, func(ch *routeChunk) []*Route { return ch.routes })
}

func (l *routeList) withRefs() iter.Seq[*Route] {
	return eachOf(l.chunks, func(ch *routeChunk) []*Route { return ch.withRefs })
}

// eachOf yields the items of each chunk's list, as list picks it.
func eachOf[T any](chunks []*routeChunk, list func(*routeChunk) []T) iter.Seq[T] {
	return func(yield func(T) bool) {
		for _, ch := range chunks {
			for _, v := range list(ch) {
				if !yield(v) {
					return
				}
			}
		}
	}
}

// has reports whether a route of the ID is in l.
func (l *routeList) has(id RouteID) bool {
	h := hashName(id.Name)
	for _, ch := range l.chunks {
		if _, ok := slices.BinarySearch(ch.names, h); ok && slices.ContainsFunc(ch.routes, func(r *Route) bool { return r.ID == id }) {
			return true
		}
	}
	return false
}

// listBuilder makes a routeList of routes added in order and of chunks
// shared as they are.
type listBuilder struct {
	list routeList
	// next are the routes added since the last chunk was made.
	next []*Route
}

func (b *listBuilder) add(r *Route) {
	b.next = append(b.next, r)
	if len(b.next) == 2*routesPerChunk {
		b.cut()
	}
}

func (b *listBuilder) share(ch *routeChunk) {
	b.cut()
	b.list.chunks = append(b.list.chunks, ch)
	b.list.len += len(ch.routes)
}

// cut makes chunks of the routes added since the last: one, or as many
// of routesPerChunk or more as they fill. A chunk that grew by a route
// is cut in two halves, not in a full one and a chunk of one route.
func (b *listBuilder) cut() {
	rest := b.next
	for k := (len(rest) + routesPerChunk - 1) / routesPerChunk; k > 0; k-- {
		size := len(rest) / k
		b.list.chunks = append(b.list.chunks, newRouteChunk(slices.Clone(rest[:size])))
		b.list.len += size
		rest = rest[size:]
	}
	b.next = b.next[:0]
}

// unshare takes back the last chunk, shared or made, to add routes to it,
// so that routes added at the end of the list do not make a chunk each.
func (b *listBuilder) unshare() {
	b.cut()
	if last := len(b.list.chunks) - 1; last >= 0 {
		ch := b.list.chunks[last]
		b.list.chunks, b.list.len = b.list.chunks[:last], b.list.len-len(ch.routes)
		b.next = append(b.next, ch.routes...)
	}
}

func (b *listBuilder) done() routeList {
	b.cut()
	return b.list
}
