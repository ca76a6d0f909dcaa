package router

import (
	"bytes"
	"cmp"
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
	routes []*Route
}

// scope is what one listener hostname serves. A request goes to the most
// specific listener whose hostname matches its host and is served by that
// listener's routes only, as Gateway API listener isolation requires.
type scope struct {
	listener string
	// suffix is the part of a wildcard listener hostname after its "*".
	suffix string
	hosts  hostIndex
}

// hostIndex finds the host tables for a request host: exact hosts, then
// wildcards from the most specific, then the catch-all.
type hostIndex struct {
	exact map[string]*hostTable
	wild  *wildNode
	any   *hostTable
}

func newScope(listener string) *scope {
	sc := &scope{listener: listener, hosts: hostIndex{exact: map[string]*hostTable{}, wild: newWildNode(nil, 0)}}
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

// entry is one compiled match in the table of one hostname.
type entry struct {
	// conditions are copied into each host's entry rather than shared, so
	// that a lookup reads one contiguous list instead of chasing pointers.
	conditions
	// singleLabel restricts an Ingress wildcard host to requests with
	// exactly one label in place of the "*".
	singleLabel bool
}

// hostTable holds the entries of one hostname (exact, wildcard or any).
type hostTable struct {
	name string
	// root is inline: one pointer less between the host and its paths.
	root  pathNode
	regex []entry
	grpc  []entry
}

func newHostTable(name string) *hostTable {
	return &hostTable{name: name}
}

// pathNode is a node of the trie over path segments: the root stands for the
// empty prefix, its child "a" for "/a", that child's child "" for "/a/".
type pathNode struct {
	children children[pathNode]
	parent   *pathNode
	exact    []entry
	prefix   []entry
	// prefixed is the nearest node at or above this one that has prefix
	// entries, so lookup skips the nodes in between.
	prefixed *pathNode
}

func (h *hostTable) add(e entry, intern func(string) string) {
	switch e.place {
	case placeExact:
		n := h.root.descend(e.path[1:], intern)
		n.exact = append(n.exact, e)
	case placePrefix:
		n := &h.root
		if e.path != "" {
			n = n.descend(e.path[1:], intern)
		}
		n.prefix = append(n.prefix, e)
	case placeRegex:
		h.regex = append(h.regex, e)
	case placeGRPCOther:
		h.grpc = append(h.grpc, e)
	}
}

// descend returns the node for the segments of rest (a path without its
// leading "/"), creating nodes as needed. intern shares the storage of
// segments that many routes repeat ("api", "v1"), which keeps them in cache.
func (n *pathNode) descend(rest string, intern func(string) string) *pathNode {
	for {
		seg, tail, more := cutSegment(rest)
		child := get(&n.children, seg)
		if child == nil {
			child = &pathNode{parent: n}
			n.children.add(intern(seg), child)
		}
		n = child
		if !more {
			return n
		}
		rest = tail
	}
}

// cutSegment splits the first path segment off rest.
func cutSegment(rest string) (seg, tail string, more bool) {
	// A plain loop: segments are short, where IndexByte's setup costs more
	// than it saves.
	for i := 0; i < len(rest); i++ {
		if rest[i] == '/' {
			return rest[:i], rest[i+1:], true
		}
	}
	return rest, "", false
}

// finish sorts every list and links prefix nodes; the table is read-only
// afterwards.
func (h *hostTable) finish() {
	sortEntries(h.regex)
	sortEntries(h.grpc)
	var walk func(n *pathNode)
	walk = func(n *pathNode) {
		sortEntries(n.exact)
		sortEntries(n.prefix)
		switch {
		case len(n.prefix) > 0:
			n.prefixed = n
		case n.parent != nil:
			n.prefixed = n.parent.prefixed
		}
		n.children.each(walk)
	}
	walk(&h.root)
}

// lookup finds the first entry of h that matches. wildLabels is how many
// labels the "*" of a wildcard host stands for (0 for other hosts).
func (h *hostTable) lookup(req *Request, wildLabels int) *Target {
	path := req.Path
	n, whole := &h.root, true
	for rest := path[1:]; ; {
		seg, tail, more := cutSegment(rest)
		child := get(&n.children, seg)
		if child == nil {
			whole = false
			break
		}
		n = child
		if !more {
			break
		}
		rest = tail
	}
	if whole {
		if t := firstMatch(n.exact, req, wildLabels); t != nil {
			return t
		}
	}
	if t := firstMatch(h.regex, req, wildLabels); t != nil {
		return t
	}
	for p := n.prefixed; p != nil; {
		if t := firstMatch(p.prefix, req, wildLabels); t != nil {
			return t
		}
		if p.parent == nil {
			break
		}
		p = p.parent.prefixed
	}
	return firstMatch(h.grpc, req, wildLabels)
}

func firstMatch(list []entry, req *Request, wildLabels int) *Target {
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
	for i := range e.headers {
		c := &e.headers[i]
		if req.Header == nil {
			return false
		}
		values := req.Header.Values(c.name)
		if len(values) == 0 || !c.matches(values[0]) {
			return false
		}
	}
	for i := range e.query {
		c := &e.query[i]
		v, ok := queryValue(req.RawQuery, c.name)
		if !ok || !c.matches(v) {
			return false
		}
	}
	return true
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

func (x *hostIndex) hostTable(host string) *hostTable {
	switch {
	case host == "":
		if x.any == nil {
			x.any = newHostTable("*")
		}
		return x.any
	case strings.HasPrefix(host, "*."):
		n := x.wild.descend(host[2:])
		if n.table == nil {
			n.table = newHostTable(host)
		}
		return n.table
	default:
		h := x.exact[host]
		if h == nil {
			h = newHostTable(host)
			x.exact[host] = h
		}
		return h
	}
}

func (x *hostIndex) forEachHost(f func(*hostTable)) {
	for _, h := range x.exact {
		f(h)
	}
	x.wild.forEach(func(n *wildNode) {
		if n.table != nil {
			f(n.table)
		}
	})
	if x.any != nil {
		f(x.any)
	}
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
	var buf [maxHostLen]byte
	host, ok := normalizeHost(req.Host, buf[:0])
	if !ok {
		host = nil // too long to be a name: only catch-alls can match
	}
	sc := t.selectScope(host)
	if sc == nil {
		return nil
	}
	return sc.hosts.lookup(host, &req)
}

func (x *hostIndex) lookup(host []byte, req *Request) *Target {
	if len(host) > 0 {
		if h := x.exact[string(host)]; h != nil {
			if tg := h.lookup(req, 0); tg != nil {
				return tg
			}
		}
		if tg := x.wild.lookup(host, req); tg != nil {
			return tg
		}
	}
	if x.any != nil {
		return x.any.lookup(req, 0)
	}
	return nil
}

// normalizeHost drops a port and a trailing dot from host and lower-cases
// it, into buf only when it has upper-case letters: most clients send
// lower-case hosts, and those are used in place. The result is only read.
// ok is false when a host to lower-case does not fit in buf.
func normalizeHost(host string, buf []byte) ([]byte, bool) {
	for i := len(host) - 1; i >= 0; i-- {
		if c := host[i]; c == ':' {
			host = host[:i]
			break
		} else if c == ']' {
			break // an IPv6 literal without port
		}
	}
	host = strings.TrimSuffix(host, ".")
	upper := false
	for i := 0; i < len(host); i++ {
		if 'A' <= host[i] && host[i] <= 'Z' {
			upper = true
			break
		}
	}
	if !upper {
		return unsafe.Slice(unsafe.StringData(host), len(host)), true
	}
	if len(host) > cap(buf) {
		return nil, false
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	return buf, true
}
