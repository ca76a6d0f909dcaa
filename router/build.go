package router

import (
	"hash/maphash"
	"math/bits"
	"slices"
	"strings"
)

// Laying out a listener's host tables.
//
// Compile first collects entries in tries of pointers, which are cheap to
// grow, then build copies every host into two arrays that the hosts of an
// index share: its trie nodes in breadth-first order, so that the children
// of a node are adjacent, and its entries node by node. A lookup then reads
// a few neighbouring cache lines per host instead of one object per node,
// child list and entry list, which is what its cost was made of once the
// tables outgrew the caches. A listener's exact and wildcard hosts are
// spread over shards of about hostsPerShard, each an index of its own, so
// that a change lays out again a shard, not every host of the listener;
// its catch-all host has one more index.

// indexBuilder collects the host tables of one listener hostname.
type indexBuilder struct {
	// hosts are keyed by hostname as routes give it, "" for routes without.
	hosts map[string]*hostBuilder
	// intern shares the storage of path segments that many routes repeat
	// ("api", "v1"), which keeps them in cache.
	intern func(string) string
}

// hostBuilder holds the entries of one hostname during Compile.
type hostBuilder struct {
	name        string
	root        trieNode
	regex, grpc []pending
	// nodes and entries count what layOut will lay out.
	nodes, entries int
}

// pending is an entry until layOut copies it: the compiled match, which the
// route's hostnames share, and what one hostname adds to it. Sorting these
// moves two words where an entry has two dozen.
type pending struct {
	*entry
	singleLabel bool
}

// trieNode is a node of the trie over path segments: the root stands for the
// empty prefix, its child "a" for "/a", that child's child "" for "/a/".
type trieNode struct {
	key           string
	children      children
	exact, prefix []pending
}

func (b *indexBuilder) host(name string) *hostBuilder {
	h := b.hosts[name]
	if h == nil {
		h = &hostBuilder{name: name, nodes: 1}
		b.hosts[name] = h
	}
	return h
}

func (b *indexBuilder) add(h *hostBuilder, e *entry, singleLabel bool) {
	h.entries++
	p := pending{e, singleLabel}
	switch e.place {
	case placeExact:
		n := b.descend(h, e.path[1:])
		n.exact = append(n.exact, p)
	case placePrefix:
		n := &h.root
		if e.path != "" {
			n = b.descend(h, e.path[1:])
		}
		n.prefix = append(n.prefix, p)
	case placeRegex:
		h.regex = append(h.regex, p)
	case placeGRPCOther:
		h.grpc = append(h.grpc, p)
	}
}

// descend returns the node of h for the segments of rest (a path without
// its leading "/"), creating nodes as needed.
func (b *indexBuilder) descend(h *hostBuilder, rest string) *trieNode {
	n := &h.root
	for {
		seg, _, tail, more := cutSegment(rest)
		child := n.children.get(seg)
		if child == nil {
			child = &trieNode{key: b.intern(seg)}
			n.children.add(child)
			h.nodes++
		}
		n = child
		if !more {
			return n
		}
		rest = tail
	}
}

// build lays out the collected hosts of sc, with the tables of kept (the
// previous Table's scope of the same listener hostname) that were not
// rebuilt: the catch-all table in sc.rest, the exact and wildcard hosts in
// sc.shards. What of kept no rebuilt host falls in, its rest or a shard, is
// shared as it is.
func (b *indexBuilder) build(sc *scope, kept *keptHosts) {
	var sharded, restBuilt []*hostBuilder
	for _, hb := range b.hosts {
		if hb.name == "" {
			restBuilt = append(restBuilt, hb)
		} else {
			sharded = append(sharded, hb)
		}
	}
	var prev *scope
	hosts := len(sharded) // at most, after the change
	switch {
	case kept == nil:
		sc.seed = maphash.MakeSeed()
		sc.rest = layOutIndex(nil, restBuilt, sc.seed)
	case slices.Contains(kept.rebuilt, ""):
		prev = kept.from
		sc.seed = prev.seed
		sc.rest = layOutIndex(kept.tables(&prev.rest), restBuilt, sc.seed)
	default:
		prev = kept.from
		sc.seed, sc.rest = prev.seed, prev.rest
	}
	if prev != nil {
		hosts += prev.hosts
	}

	bits := shardBits(hosts)
	if prev != nil {
		// Every host moves when the number of shards changes: the count
		// stays while the hosts no more than halve or double, so a shard
		// holds up to about four times hostsPerShard.
		if prevBits := 64 - int(prev.shift); bits >= prevBits-1 && bits <= prevBits+1 {
			bits = prevBits
		}
	}
	sc.shift = uint8(64 - bits)
	shardOf := func(host string) int { return sc.shardOf(maphash.String(sc.seed, shardKey(host))) }
	built := map[int][]*hostBuilder{}
	for _, hb := range sharded {
		s := shardOf(hb.name)
		built[s] = append(built[s], hb)
	}
	if prev != nil && prev.shift == sc.shift {
		// The shards of the rebuilt hosts are laid out again, those
		// that lost their last host included.
		for _, host := range kept.rebuilt {
			if host == "" {
				continue
			}
			if s := shardOf(host); built[s] == nil {
				built[s] = nil // present, to be laid out
			}
		}
		sc.shards, sc.hosts, sc.wild = slices.Clone(prev.shards), prev.hosts, slices.Clone(prev.wild)
		for s, hbs := range built {
			was := sc.shards[s]
			x := layOutIndex(kept.tables(was), hbs, sc.seed)
			sc.shards[s] = &x
			sc.count(was, -1)
			sc.count(&x, 1)
		}
		sc.wildRange()
		return
	}
	keptBy := make([][]indexedTable, 1<<bits)
	if prev != nil {
		for _, x := range prev.shards {
			for _, k := range kept.tables(x) {
				s := shardOf(k.name)
				keptBy[s] = append(keptBy[s], k)
			}
		}
	}
	sc.shards, sc.hosts, sc.wild = make([]*hostIndex, 1<<bits), 0, nil
	for s := range sc.shards {
		x := layOutIndex(keptBy[s], built[s], sc.seed)
		sc.shards[s] = &x
		sc.count(&x, 1)
	}
	sc.wildRange()
}

// shardKey is what picks the shard of a host table, and what a lookup
// hashes to find it: an exact name, or the suffix of a wildcard after "*.".
func shardKey(host string) string { return strings.TrimPrefix(host, "*.") }

// count adds by times the hosts of x, a shard, to those of sc.
func (sc *scope) count(x *hostIndex, by int) {
	sc.hosts += by * (x.exact.len() + x.wild.len())
	x.wild.each(func(h *hostTable) {
		labels := wildLabels(h.name)
		if labels >= len(sc.wild) {
			sc.wild = append(sc.wild, make([]int, labels+1-len(sc.wild))...)
		}
		sc.wild[labels] += by
	})
}

// wildRange sets the fewest and most labels of sc's wildcard suffixes.
func (sc *scope) wildRange() {
	sc.minWild, sc.maxWild = 0, 0
	for labels, n := range sc.wild {
		if n > 0 {
			if sc.maxWild == 0 {
				sc.minWild = labels
			}
			sc.maxWild = labels
		}
	}
}

// wildLabels is how many labels the suffix of a wildcard hostname has.
func wildLabels(host string) int { return 1 + strings.Count(host[2:], ".") }

// hostsPerShard is about how many hosts a shard holds: few enough
// that laying one out again takes microseconds.
const hostsPerShard = 64

// shardBits is how many bits of a name's hash pick the shard of a scope of
// n exact and wildcard hosts.
func shardBits(n int) int { return min(bits.Len(uint(n/hostsPerShard)), 16) }

// indexedTable is a host table and the index that holds its nodes and
// entries: one of a previous Table that a build copies, or one Describe
// lists.
type indexedTable struct {
	from *hostIndex
	*hostTable
}

// layOutIndex lays out the tables of kept and built in one index, whose
// host maps hash with seed.
func layOutIndex(kept []indexedTable, built []*hostBuilder, seed maphash.Seed) hostIndex {
	var nodes, entries int
	for _, k := range kept {
		nodes += int(k.nodes.len())
		entries += len(k.from.entriesIn(k.hostTable))
	}
	for _, hb := range built {
		nodes += hb.nodes
		entries += hb.entries
	}
	x := hostIndex{
		nodes:   make([]pathNode, 0, nodes),
		tags:    make([]uint64, 0, nodes),
		entries: make([]entry, 0, entries),
	}
	tables := make([]hostTable, 0, len(kept)+len(built))
	for _, k := range kept {
		tables = append(tables, x.relocate(k.from, k.hostTable))
	}
	var queue []*trieNode
	for _, hb := range built {
		var h hostTable
		h, queue = x.layOut(hb, queue[:0])
		tables = append(tables, h)
	}
	// The host maps and the catch-all share the one array of tables, in
	// runs: wildcards, exact names, "*".
	slices.SortFunc(tables, func(a, b hostTable) int { return hostKind(a.name) - hostKind(b.name) })
	wild := runEnd(tables, 0, kindWild)
	exact := runEnd(tables, wild, kindExact)
	if exact < len(tables) {
		x.any = &tables[exact]
	}
	x.wild = newHostMap(tables[:wild:wild], len("*."), seed)
	x.exact = newHostMap(tables[wild:exact:exact], 0, seed)
	return x
}

const (
	kindWild = iota
	kindExact
	kindAny
)

// hostKind is which of an index's runs of tables a host's goes in.
func hostKind(name string) int {
	switch {
	case name == "*":
		return kindAny
	case strings.HasPrefix(name, "*."):
		return kindWild
	}
	return kindExact
}

// runEnd is where the run of kind that starts at from in tables ends.
func runEnd(tables []hostTable, from, kind int) int {
	for from < len(tables) && hostKind(tables[from].name) == kind {
		from++
	}
	return from
}

// layOut appends the nodes and entries of hb to x, sorting each entry list
// into precedence order. queue is scratch space, returned for reuse.
func (x *hostIndex) layOut(hb *hostBuilder, queue []*trieNode) (hostTable, []*trieNode) {
	name := hb.name
	if name == "" {
		name = "*"
	}
	h := hostTable{name: name}
	h.nodes.lo = int32(len(x.nodes))
	x.nodes = append(x.nodes, pathNode{outer: -1})
	x.tags = append(x.tags, 0)
	queue = append(queue, &hb.root)
	// queue[k] is laid out at x.nodes[h.nodes.lo+k].
	for k := 0; k < len(queue); k++ {
		tn, i := queue[k], h.nodes.lo+int32(k)
		exact, prefix := x.appendEntries(tn.exact), x.appendEntries(tn.prefix)
		x.nodes[i].lo, x.nodes[i].mid, x.nodes[i].hi = exact.lo, prefix.lo, prefix.hi
		outer := x.nodes[i].outer
		if len(tn.prefix) > 0 {
			outer = i
		}
		first := int32(len(x.nodes))
		tn.children.each(func(c *trieNode) {
			_, tag, _, _ := cutSegment(c.key)
			x.nodes = append(x.nodes, pathNode{key: c.key, outer: outer})
			x.tags = append(x.tags, tag)
			queue = append(queue, c)
		})
		kids := span{first, int32(len(x.nodes))}
		x.nodes[i].children = kids
		x.indexWide(i)
	}
	h.nodes.hi = int32(len(x.nodes))
	h.regex = x.appendEntries(hb.regex)
	h.grpc = x.appendEntries(hb.grpc)
	return h, queue
}

func (x *hostIndex) appendEntries(list []pending) span {
	slices.SortFunc(list, func(a, b pending) int { return compareEntries(a.entry, b.entry) })
	lo := int32(len(x.entries))
	for _, p := range list {
		e := *p.entry
		e.singleLabel = p.singleLabel
		x.entries = append(x.entries, e)
	}
	return span{lo, int32(len(x.entries))}
}

// indexWide puts the children of node i in wide when they are too many
// to scan.
func (x *hostIndex) indexWide(i int32) {
	kids := x.nodes[i].children
	if kids.len() <= maxLinearChildren {
		return
	}
	if x.wide == nil {
		x.wide = map[childKey]int32{}
	}
	for c := kids.lo; c < kids.hi; c++ {
		x.wide[childKey{i, x.nodes[c].key}] = c
	}
}

// entriesIn returns the entries of h, a table of x: a host's entries are
// contiguous, from those of its root to its gRPC list (see layOut).
func (x *hostIndex) entriesIn(h *hostTable) []entry {
	return x.entries[x.nodes[h.nodes.lo].lo:h.grpc.hi]
}

// relocate appends the nodes and entries of h, a host table of from, to x,
// and returns its table in x. Its routes are unchanged and the new Table
// has the same copies of them: the entries are copied as they are. A
// host's nodes are contiguous in from.
func (x *hostIndex) relocate(from *hostIndex, h *hostTable) hostTable {
	nodeShift := int32(len(x.nodes)) - h.nodes.lo
	entryShift := int32(len(x.entries)) - from.nodes[h.nodes.lo].lo
	x.entries = append(x.entries, from.entriesIn(h)...)
	x.tags = append(x.tags, from.tags[h.nodes.lo:h.nodes.hi]...)
	for i := h.nodes.lo; i < h.nodes.hi; i++ {
		n := from.nodes[i]
		n.children = n.children.shift(nodeShift)
		n.lo, n.mid, n.hi = n.lo+entryShift, n.mid+entryShift, n.hi+entryShift
		if n.outer >= 0 {
			n.outer += nodeShift
		}
		x.nodes = append(x.nodes, n)
	}
	// Once all are in place: indexWide reads the keys of the children.
	for i := h.nodes.lo + nodeShift; i < h.nodes.hi+nodeShift; i++ {
		x.indexWide(i)
	}
	return hostTable{name: h.name, nodes: h.nodes.shift(nodeShift), regex: h.regex.shift(entryShift), grpc: h.grpc.shift(entryShift)}
}
