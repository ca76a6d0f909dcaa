package router

import (
	"bytes"
	"cmp"
	"hash/maphash"
	"net/http"
	"slices"
	"strings"
	"unsafe"
)

// Table is a compiled, immutable route set. It is safe for concurrent use.
type Table struct {
	// scopes has one entry per listener hostname (Route.Listener): exact
	// names, then wildcards from the longest, then "" (any host).
	scopes      []*scope
	exactScopes map[string]*scope
	// routes are the routes that compiled, in input order.
	routes routeList
	// listenerHostnames are Compile's, which Recompile must see again to
	// reuse anything.
	listenerHostnames []string
	// listenerFilters run before route matching, by listener hostname
	// (WithListenerFilters); nil for none.
	listenerFilters map[string][]Filter
	// serial numbers the Table (Serial). since is the serial of the Table
	// it was recompiled from by RecompileChanged, 0 for none, and gone
	// the IDs of that Table's routes it has not (GoneSince).
	serial, since uint64
	gone          []RouteID
}

// scope is what one listener hostname serves. A request goes to the most
// specific listener whose hostname matches its host and is served by that
// listener's routes only, as Gateway API listener isolation requires.
type scope struct {
	listener string
	// suffix is the part of a wildcard listener hostname after its "*".
	suffix string
	// rest holds the catch-all table. The exact and wildcard hosts are in
	// shards, picked by the top bits of the hash of the host's name or the
	// wildcard's suffix (shardKey; with seed, which every host map of the
	// scope uses, so that a lookup hashes a name once): Recompile lays out
	// again only the shards of the hosts a change touches, where one index
	// of 10,000 hosts was copied whole on every change, and then all the
	// wildcards with a change of one. A Table recompiled shares the others
	// with the one it came from, by pointer: at 50,000 hosts a copy of the
	// shards themselves was 190 KB a change.
	rest   hostIndex
	shards []*hostIndex
	seed   maphash.Seed
	// shift is 64 less the bits that pick a shard: 64 for one shard.
	shift uint8
	// hosts counts the hosts of the shards, and routes the routes of the
	// listener hostname: a scope is there while it has routes or is that
	// of a listener.
	hosts, routes int
	// wild counts the wildcard hosts by the labels of their suffix after
	// "*.", and minWild and maxWild are the fewest and most of those
	// labels (0 for none): the suffixes of a request's host that a lookup
	// tries.
	wild             []int
	minWild, maxWild int
}

func (sc *scope) shardOf(hash uint64) int { return int(hash >> sc.shift) }

// hostIndex holds host tables: a shard of a scope's exact and wildcard
// hosts, or the scope's catch-all (scope.lookup tries them in that order).
// The tables of all its hosts share the arrays nodes, tags and entries
// (see build.go).
type hostIndex struct {
	exact hostMap
	// wild holds wildcard hosts by their suffix after "*.".
	wild  hostMap
	any   *hostTable
	nodes []pathNode
	// tags are those of the keys of nodes (see cutSegment), apart so that
	// a lookup step scans a node's children in a cache line or two and
	// reads the node of the one that matches.
	tags    []uint64
	entries []entry
	// wide finds the children of nodes with more than maxLinearChildren.
	wide map[childKey]int32
}

type childKey struct {
	parent int32
	key    string
}

// span is a range of indexes in nodes or entries.
type span struct{ lo, hi int32 }

func (s span) len() int32 { return s.hi - s.lo }

func (s span) shift(by int32) span { return span{s.lo + by, s.hi + by} }

func newScope(listener string) *scope {
	sc := &scope{listener: listener}
	if strings.HasPrefix(listener, "*.") {
		sc.suffix = listener[1:]
	}
	return sc
}

// scope returns the scope of a listener hostname, creating it as needed.
func (t *Table) scope(listener string) *scope {
	if sc := t.exactScopes[listener]; sc != nil {
		return sc
	}
	sc := newScope(listener)
	t.exactScopes[listener] = sc
	t.scopes = append(t.scopes, sc)
	return sc
}

// scopeNamed returns the scope of a listener hostname, nil if none.
func (t *Table) scopeNamed(listener string) *scope {
	if i := slices.IndexFunc(t.scopes, func(sc *scope) bool { return sc.listener == listener }); i >= 0 {
		return t.scopes[i]
	}
	return nil
}

// orderScopes puts the scopes in the order selectScope tries them.
func (t *Table) orderScopes() {
	rank := func(sc *scope) int {
		switch {
		case sc.listener == "":
			return 2
		case strings.HasPrefix(sc.listener, "*."):
			return 1
		}
		return 0
	}
	slices.SortFunc(t.scopes, func(a, b *scope) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(len(b.listener), len(a.listener)); c != 0 {
			return c
		}
		return cmp.Compare(a.listener, b.listener)
	})
	for name := range t.exactScopes {
		if strings.HasPrefix(name, "*.") || name == "" {
			delete(t.exactScopes, name)
		}
	}
}

// selectScope returns the scope that serves host: an exact listener
// hostname, else the longest wildcard that covers host with at least one
// label, else the listener without hostname.
func (t *Table) selectScope(host []byte) *scope {
	if len(t.scopes) == 1 && t.scopes[0].listener == "" {
		return t.scopes[0]
	}
	if sc := t.exactScopes[string(host)]; sc != nil {
		return sc
	}
	for _, sc := range t.scopes {
		switch {
		case sc.listener == "":
			return sc
		case sc.suffix != "" && len(host) > len(sc.suffix) && bytes.HasSuffix(host, []byte(sc.suffix)):
			return sc
		}
	}
	return nil
}

// hostTable is what one hostname (exact, wildcard or any) serves.
type hostTable struct {
	name string
	// nodes are the trie nodes of its paths; the first is the root.
	nodes       span
	regex, grpc span
}

// pathNode is a node of the trie over path segments: the root stands for the
// empty prefix, its child "a" for "/a", that child's child "" for "/a/".
type pathNode struct {
	key      string
	children span
	// Its exact entries are entries[lo:mid] and its prefix entries
	// entries[mid:hi]: laid out one after the other, they need three
	// bounds, which make a node 40 bytes where two spans made it 48.
	lo, mid, hi int32
	// outer is the nearest node above this one with prefix entries, -1 for
	// none, so that lookup skips the nodes in between.
	outer int32
}

func (n *pathNode) exact() span  { return span{n.lo, n.mid} }
func (n *pathNode) prefix() span { return span{n.mid, n.hi} }

// cutSegment splits the first path segment off rest, and returns with it
// its tag: its last seven bytes and its length (255 for longer) in a word.
// Segments of up to seven bytes are equal if their tags are.
func cutSegment(rest string) (seg string, tag uint64, tail string, more bool) {
	// A plain loop: segments are short, where IndexByte's setup costs more
	// than it saves, and the tag comes for a shift.
	i, last := 0, uint64(0)
	for ; i < len(rest) && rest[i] != '/'; i++ {
		last = last<<8 | uint64(rest[i])
	}
	seg, tag = rest[:i], last<<8|uint64(min(i, 255))
	if i < len(rest) {
		return seg, tag, rest[i+1:], true
	}
	return seg, tag, "", false
}

// lookupIn finds the first entry of h that matches. wildLabels is how many
// labels the "*" of a wildcard host stands for (0 for other hosts).
func (x *hostIndex) lookupIn(h *hostTable, req *Request, wildLabels int) *Target {
	i, whole := h.nodes.lo, true
	for rest := req.Path[1:]; ; {
		seg, tag, tail, more := cutSegment(rest)
		child := x.child(i, seg, tag)
		if child < 0 {
			whole = false
			break
		}
		i = child
		if !more {
			break
		}
		rest = tail
	}
	n := &x.nodes[i]
	if whole {
		if t := x.firstMatch(n.exact(), req, wildLabels); t != nil {
			return t
		}
	}
	if t := x.firstMatch(h.regex, req, wildLabels); t != nil {
		return t
	}
	for p := n; ; p = &x.nodes[p.outer] {
		if t := x.firstMatch(p.prefix(), req, wildLabels); t != nil {
			return t
		}
		if p.outer < 0 {
			break
		}
	}
	return x.firstMatch(h.grpc, req, wildLabels)
}

// child returns the index of the child of node parent for seg, -1 if none.
func (x *hostIndex) child(parent int32, seg string, tag uint64) int32 {
	kids := x.nodes[parent].children
	if kids.len() > maxLinearChildren {
		if c, ok := x.wide[childKey{parent, seg}]; ok {
			return c
		}
		return -1
	}
	for c := kids.lo; c < kids.hi; c++ {
		if x.tags[c] == tag && (len(seg) < 8 || x.nodes[c].key == seg) {
			return c
		}
	}
	return -1
}

func (x *hostIndex) list(s span) []entry { return x.entries[s.lo:s.hi] }

func (x *hostIndex) firstMatch(s span, req *Request, wildLabels int) *Target {
	list := x.list(s)
	for i := range list {
		if list[i].matches(req, wildLabels) {
			return &list[i].target
		}
	}
	return nil
}

func (e *entry) matches(req *Request, wildLabels int) bool {
	if e.singleLabel && wildLabels != 1 {
		return false
	}
	if e.method != "" && e.method != req.Method {
		return false
	}
	if e.grpc && !isGRPCPath(req.Path) {
		return false
	}
	if e.pattern != nil && !e.pattern.MatchString(req.Path) {
		return false
	}
	headers := e.headerConds()
	for i := range headers {
		c := &headers[i]
		v, ok := headerValue(req.Header, c.name)
		if !ok || !c.matches(v) {
			return false
		}
	}
	query := e.queryConds()
	for i := range query {
		c := &query[i]
		v, ok := queryValue(req.RawQuery, c.name)
		if !ok || !c.matches(v) {
			return false
		}
	}
	return true
}

// headerValue returns the first value of the header name, which is in
// canonical form. An http.Header is indexed directly, as its Values would
// canonicalise the name again.
func headerValue(h Headers, name string) (string, bool) {
	var values []string
	switch h := h.(type) {
	case nil:
		return "", false
	case http.Header:
		values = h[name]
	default:
		values = h.Values(name)
	}
	if len(values) == 0 {
		return "", false
	}
	return values[0], true
}

// isGRPCPath reports whether path has the "/service/method" form of a gRPC
// call, both parts non-empty.
func isGRPCPath(path string) bool {
	service, method, ok := strings.Cut(path[1:], "/")
	return ok && service != "" && method != "" && !strings.Contains(method, "/")
}

func (c *valueCond) matches(v string) bool {
	if c.pattern != nil {
		return c.pattern.MatchString(v)
	}
	return v == c.value
}

func (x *hostIndex) forEachHost(f func(*hostTable)) {
	x.exact.each(f)
	x.wild.each(f)
	if x.any != nil {
		f(x.any)
	}
}

// forEachHost calls f with every host table of sc and the index it is in.
func (sc *scope) forEachHost(f func(*hostIndex, *hostTable)) {
	for _, x := range sc.shards {
		x.forEachHost(func(h *hostTable) { f(x, h) })
	}
	sc.rest.forEachHost(func(h *hostTable) { f(&sc.rest, h) })
}

// maxHostLen bounds the host Lookup copies to lower-case it on the stack;
// a longer name is not a valid DNS name and can only match the catch-all.
const maxHostLen = 255

// Lookup returns the rule that serves req, or nil when none does. The
// listener hostname comes first (see scope), then hostname precedence: the
// exact host, then wildcard hosts from the most specific, then routes
// without hostnames; within one hostname the rest of the Gateway API order
// decides.
func (t *Table) Lookup(req Request) *Target {
	if !strings.HasPrefix(req.Path, "/") {
		return nil
	}
	host := trimHost(req.Host)
	if hasUpper(host) {
		return t.lookupFolded(host, &req)
	}
	// Most clients send lower-case hosts: those are used in place, and
	// only read.
	return t.lookup(unsafe.Slice(unsafe.StringData(host), len(host)), &req)
}

// lookupFolded looks up a host with upper-case letters, lower-cased on the
// stack. It is apart from Lookup so that other hosts do not pay for
// clearing the buffer.
func (t *Table) lookupFolded(host string, req *Request) *Target {
	if len(host) > maxHostLen {
		return t.lookup(nil, req) // too long to be a name: only catch-alls can match
	}
	var buf [maxHostLen]byte
	for i := 0; i < len(host); i++ {
		c := host[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return t.lookup(buf[:len(host)], req)
}

// Shared reports whether listeners of more than one hostname share the
// table, the only case where Misdirected can be true: engines look up a
// connection's server name only then.
func (t *Table) Shared() bool { return len(t.scopes) > 1 }

// Misdirected reports whether a request for host came on a TLS
// connection whose server name (SNI) selects another listener of the
// table than host does. That connection was set up (its certificate, its
// client certificate checks) for the other listener, so the request is to
// be answered 421 Misdirected Request (RFC 9110 section 15.5.20) and the
// client retries on a connection of its own. A table of one listener
// hostname has nothing to confuse.
func (t *Table) Misdirected(serverName, host string) bool {
	if !t.Shared() || serverName == "" {
		return false
	}
	return t.scopeOf(serverName) != t.scopeOf(host)
}

// scopeOf is the scope that serves host, given as a client wrote it.
func (t *Table) scopeOf(host string) *scope {
	host = trimHost(host)
	if hasUpper(host) {
		host = strings.ToLower(host)
	}
	return t.selectScope(unsafe.Slice(unsafe.StringData(host), len(host))) // only read
}

func (t *Table) lookup(host []byte, req *Request) *Target {
	sc := t.selectScope(host)
	if sc == nil {
		return nil
	}
	return sc.lookup(host, req)
}

func (sc *scope) lookup(host []byte, req *Request) *Target {
	if len(host) > 0 {
		// One shard: get hashes the host only if there are exact hosts
		// (a scope of wildcards or a catch-all has none).
		x := sc.shards[0]
		var h *hostTable
		if len(sc.shards) == 1 {
			h = x.exact.get(host)
		} else {
			hash := maphash.Bytes(sc.seed, host)
			x = sc.shards[sc.shardOf(hash)]
			h = x.exact.getHashed(hash, host)
		}
		if h != nil {
			if tg := x.lookupIn(h, req, 0); tg != nil {
				return tg
			}
		}
		if tg := sc.lookupWild(host, req); tg != nil {
			return tg
		}
	}
	if sc.rest.any != nil {
		return sc.rest.lookupIn(sc.rest.any, req, 0)
	}
	return nil
}

// trimHost drops a port and a trailing dot from host.
func trimHost(host string) string {
	// IndexByte first: it is fast, and most hosts come without a port.
	if strings.IndexByte(host, ':') >= 0 {
		if i := strings.LastIndexByte(host, ':'); strings.IndexByte(host[i:], ']') < 0 {
			host = host[:i] // else an IPv6 literal without port
		}
	}
	return strings.TrimSuffix(host, ".")
}

// hasUpper reports whether s has an ASCII upper-case letter. It tests eight
// bytes at a time, as it runs on every request; the last eight overlap the
// ones before.
func hasUpper(s string) bool {
	if len(s) < 8 {
		for i := 0; i < len(s); i++ {
			if 'A' <= s[i] && s[i] <= 'Z' {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(s); i += 8 {
		w := s[min(i, len(s)-8):]
		word := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		// Bit 7 of a byte of the result is set when that byte of word is
		// above 'A'-1 and below 'Z'+1 ("hasbetween", Bit Twiddling Hacks).
		const ones, m, n = 0x0101010101010101, 'A' - 1, 'Z' + 1
		low := word & (ones * 127)
		if (ones*(127+n)-low)&^word&(low+ones*(127-m))&(ones*128) != 0 {
			return true
		}
	}
	return false
}
