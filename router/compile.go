package router

// Compiling a route set.
//
// Every (hostname, rule, match) of every valid route becomes an entry. An
// entry lives in the table of its hostname: exact hostnames in a map,
// wildcard hostnames in a map by their suffix after "*." (lookup tries the
// suffixes of the request host from the longest), routes without hostnames
// in the catch-all table. Within a host table the path decides where the
// entry goes:
//
//   - Exact paths sit at the trie node reached by their segments;
//   - prefixes sit at the node of their segments (trailing "/" dropped), so a
//     request collects every prefix that matches it by walking down once;
//   - regular expressions, and gRPC matches that are neither an exact
//     service+method nor an exact service alone, sit in flat lists.
//
// Lookup visits, for the most specific host table first: the exact entries
// of the node the whole path reached, the regular expressions, the prefix
// entries from the deepest node up, then the remaining gRPC matches. Each
// list is sorted once here by the rest of the precedence order, so the first
// entry whose conditions hold is the winner and lookup never sorts. The
// memory layout of the result is build.go's.

import (
	"cmp"
	"fmt"
	"net/textproto"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
)

// RouteError says why a route was left out of a Table.
type RouteError struct {
	Route RouteID
	// Index is the route's position in Compile's input.
	Index int
	Err   error
}

func (e *RouteError) Error() string { return e.Route.String() + ": " + e.Err.Error() }
func (e *RouteError) Unwrap() error { return e.Err }

// Compile builds a Table from routes. A route that fails validation is left
// out and reported with a *RouteError; the others are compiled. The Table
// keeps a copy of routes, which its Targets point to, but shares what a
// Route refers to (its Rules, Hostnames): the caller must not change those
// afterwards.
//
// listenerHostnames are the hostnames of all the listeners that share the
// socket, so that a listener without routes still claims its hosts (and
// answers 404 for them) rather than leaving them to a less specific one.
func Compile(routes []Route, listenerHostnames ...string) (*Table, []error) {
	return compile(nil, pointers(slices.Clone(routes)), listenerHostnames)
}

// pointers returns a pointer to each of routes, in order.
func pointers(routes []Route) []*Route {
	list := make([]*Route, len(routes))
	for i := range routes {
		list[i] = &routes[i]
	}
	return list
}

func compile(reuse *reuse, routes []*Route, listenerHostnames []string) (*Table, []error) {
	c := newCompiler(listenerHostnames)
	var rebuild func(listener, host string) bool
	if reuse != nil {
		rebuild = reuse.rebuilds
	}
	var errs []error
	var sc *scope
	var list listBuilder
	var shared []sharedChunk
	if reuse != nil {
		shared = reuse.shared
	}
	inShared := 0 // routes left of the last chunk shared
	for i := range routes {
		// An unchanged route is the previous Table's, which the entries
		// of its tables, copied as they are, point to.
		r := reuse.keptAt(i)
		kept := r != nil
		if !kept {
			r = routes[i]
		}
		// A kept route's tables are copied: nothing of it to compile,
		// unless it shares a rebuilt host, where it is compiled again for
		// that host only (rebuild). The whole route is compiled before any
		// of its entries is added, so a route is either served completely
		// or not at all.
		if !kept || reuse.touches(r) {
			conds, err := c.compileRoute(r, i)
			if err != nil {
				errs = append(errs, &RouteError{Route: r.ID, Index: i, Err: err})
				continue
			}
			c.insert(r, conds, rebuild)
		}
		// Routes of a listener mostly follow one another: its scope is
		// the last one's.
		if sc == nil || sc.listener != r.Listener {
			sc = c.table.scope(r.Listener)
		}
		sc.routes++
		switch {
		case inShared > 0:
			inShared--
		case len(shared) > 0 && shared[0].at == i:
			list.share(shared[0].routeChunk)
			inShared = len(shared[0].routes) - 1
			shared = shared[1:]
		default:
			list.add(r)
		}
	}
	c.table.routes = list.done()
	errs = append(errs, c.table.listenerScopes(listenerHostnames)...)
	for _, sc := range c.table.scopes {
		c.index(sc).build(sc, reuse.keptHosts(sc.listener))
	}
	c.table.orderScopes()
	c.table.serial = tableSerials.Add(1)
	return c.table, errs
}

func newCompiler(listenerHostnames []string) *compiler {
	return &compiler{
		table:   &Table{exactScopes: map[string]*scope{}, listenerHostnames: slices.Clone(listenerHostnames)},
		indexes: map[*scope]*indexBuilder{},
		regexps: map[string]*regexp.Regexp{},
		strings: map[string]string{},
	}
}

// listenerScopes makes the scopes of listenerHostnames that t has not,
// so that a listener without routes still claims its hosts, and the scope
// of every host when t has none; it returns the errors of those that are
// not hostnames.
func (t *Table) listenerScopes(listenerHostnames []string) []error {
	var errs []error
	for _, l := range listenerHostnames {
		if err := validateHostname(l); l != "" && err != nil {
			errs = append(errs, fmt.Errorf("listener hostname %q: %w", l, err))
			continue
		}
		t.scope(l)
	}
	if len(t.scopes) == 0 {
		t.scope("")
	}
	return errs
}

// tableSerials numbers the Tables compiled (Table.Serial).
var tableSerials atomic.Uint64

type compiler struct {
	table   *Table
	indexes map[*scope]*indexBuilder
	// regexps shares compiled expressions between routes that repeat them.
	regexps map[string]*regexp.Regexp
	strings map[string]string
}

func (c *compiler) intern(s string) string {
	if v, ok := c.strings[s]; ok {
		return v
	}
	c.strings[s] = s
	return s
}

// Validate reports what Compile would refuse in r, with the same error
// (without the route's name), so that a translator can put it on the
// route's object instead of the route vanishing at compile time.
func Validate(r *Route) error {
	c := compiler{regexps: map[string]*regexp.Regexp{}}
	_, err := c.compileRoute(r, 0)
	return err
}

// compileRoute validates r and compiles its matches, one list per rule.
func (c *compiler) compileRoute(r *Route, seq int) ([][]*entry, error) {
	if err := validateRoute(r); err != nil {
		return nil, err
	}
	conds := make([][]*entry, len(r.Rules))
	for ri := range r.Rules {
		rule := &r.Rules[ri]
		if len(rule.Matches) == 0 {
			cond, err := c.entry(r, ri, -1, impliedMatch(r.ID.Kind), seq)
			if err != nil {
				return nil, fmt.Errorf("rules[%d]: %w", ri, err)
			}
			conds[ri] = append(conds[ri], cond)
			continue
		}
		for mi := range rule.Matches {
			cond, err := c.entry(r, ri, mi, &rule.Matches[mi], seq)
			if err != nil {
				return nil, fmt.Errorf("rules[%d].matches[%d].%w", ri, mi, err)
			}
			conds[ri] = append(conds[ri], cond)
		}
	}
	return conds, nil
}

// insert adds the entries of r to the tables of its hostnames, or of those
// of them that rebuild reports (nil: all).
func (c *compiler) insert(r *Route, conds [][]*entry, rebuild func(listener, host string) bool) {
	if len(conds) == 0 {
		// A route without rules has no entries, and no table of its
		// own: a host table is made of the entries in it, so that one
		// rebuilt from the entries of the one before (keepEntries) has
		// the same hosts.
		return
	}
	index := c.index(c.table.scope(r.Listener))
	for _, host := range hostsOf(r) {
		if rebuild != nil && !rebuild(r.Listener, host) {
			continue
		}
		h := index.host(host)
		singleLabel := r.ID.Kind == KindIngress && strings.HasPrefix(host, "*.")
		for _, rc := range conds {
			for _, e := range rc {
				index.add(h, e, singleLabel)
			}
		}
	}
}

// index returns the builder of the host tables of sc.
func (c *compiler) index(sc *scope) *indexBuilder {
	b := c.indexes[sc]
	if b == nil {
		b = &indexBuilder{hosts: map[string]*hostBuilder{}, intern: c.intern}
		c.indexes[sc] = b
	}
	return b
}

// hostsOf returns the hostnames whose tables r is in: "" for a route
// without hostnames.
func hostsOf(r *Route) []string {
	if len(r.Hostnames) == 0 {
		return anyHost
	}
	return r.Hostnames
}

var anyHost = []string{""}

// impliedMatch is what a rule without matches matches: every path for
// HTTP, every service and method for gRPC.
func impliedMatch(kind Kind) *Match {
	if kind == KindGRPCRoute {
		return &Match{GRPC: &GRPCMatch{}}
	}
	return &Match{Path: PathMatch{Type: PathPrefix, Value: "/"}}
}

// placement says which list of a host table an entry belongs to. The order
// of the constants is the precedence order between the lists.
type placement uint8

const (
	placeExact placement = iota
	placeRegex
	placePrefix
	placeGRPCOther
)

// entry is one compiled match. Compile copies it into the table of each of
// the route's hostnames, so that a lookup reads one contiguous list instead
// of chasing pointers.
type entry struct {
	// The fields that every match attempt reads come first, to share a
	// cache line.

	// singleLabel restricts an Ingress wildcard host to requests with
	// exactly one label in place of the "*".
	singleLabel bool
	// grpc entries match only paths of the form "/service/method".
	grpc bool
	// place is not read by a match attempt, and headers counts the header
	// conditions at the start of conds, the rest being query ones: they
	// fill the bools' word, where a slice of each kind was 24 bytes more
	// in every entry of a Table.
	place   placement
	headers int32
	method  string
	// pattern matches the whole path for regex and gRPC-other entries; nil
	// for a gRPC match of every call.
	pattern *regexp.Regexp
	conds   []valueCond

	target Target
	// path is the literal path of exact and prefix entries (prefixes without
	// their trailing "/").
	path string
	rank rank
}

// rank orders entries within one list by the precedence rules that remain
// after hostname and path placement, but for those the entry holds anyway
// (a method, the numbers of header and query conditions; compareEntries).
// Every entry of a Table keeps one, hence the small numbers where ints
// would do: with them an entry is 128 bytes, two cache lines.
type rank struct {
	// primary is the length of the path value (prefix, exact or regex) or,
	// for gRPC-other matches, of the service; secondary that of the method.
	// Validation bounds them far below 1<<16 (maxPathLen, maxValueLen).
	primary, secondary uint16
	seq                int32 // position of the route in Compile's input
}

func (e *entry) headerConds() []valueCond { return e.conds[:e.headers] }
func (e *entry) queryConds() []valueCond  { return e.conds[e.headers:] }

type valueCond struct {
	name    string
	value   string
	pattern *regexp.Regexp
}

func (c *compiler) entry(r *Route, ruleIndex, matchIndex int, m *Match, seq int) (*entry, error) {
	cond := &entry{
		target: Target{Route: r, Rule: &r.Rules[ruleIndex], RuleIndex: ruleIndex, MatchIndex: matchIndex},
		method: m.Method,
		rank:   rank{seq: int32(seq)},
	}
	if matchIndex >= 0 {
		cond.target.Match = m
	}
	var err error
	if m.GRPC != nil {
		err = c.placeGRPC(cond, m.GRPC)
	} else {
		err = c.placePath(cond, m.Path)
	}
	if err != nil {
		return nil, err
	}
	if n := len(m.Headers) + len(m.Query); n > 0 {
		cond.conds = make([]valueCond, 0, n)
	}
	if cond.conds, err = c.valueConds(cond.conds, m.Headers, textproto.CanonicalMIMEHeaderKey); err != nil {
		return nil, fmt.Errorf("header %w", err)
	}
	cond.headers = int32(len(cond.conds))
	if cond.conds, err = c.valueConds(cond.conds, m.Query, func(name string) string { return name }); err != nil {
		return nil, fmt.Errorf("query parameter %w", err)
	}
	return cond, nil
}

// valueConds appends to conds the header or query conditions of matches. As
// the Gateway API asks, of several conditions on one name (after canonical)
// only the first counts.
func (c *compiler) valueConds(conds []valueCond, matches []ValueMatch, canonical func(string) string) ([]valueCond, error) {
	from := len(conds)
	for _, m := range matches {
		name := canonical(m.Name)
		if slices.ContainsFunc(conds[from:], func(vc valueCond) bool { return vc.name == name }) {
			continue
		}
		vc := valueCond{name: name, value: m.Value}
		if m.Type == MatchRegularExpression {
			re, err := c.regexp(m.Value)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", m.Name, err)
			}
			vc.pattern = re
		}
		conds = append(conds, vc)
	}
	return conds, nil
}

func (c *compiler) placePath(cond *entry, p PathMatch) error {
	cond.rank.primary = uint16(len(p.Value))
	switch p.Type {
	case PathExact:
		cond.place, cond.path = placeExact, p.Value
	case PathRegularExpression:
		re, err := c.regexp(p.Value)
		if err != nil {
			return fmt.Errorf("path: %w", err)
		}
		cond.place, cond.pattern, cond.target.Pattern = placeRegex, re, re
	default:
		cond.place, cond.path = placePrefix, trimPrefixValue(p.Value)
		if p.Value == "" {
			cond.rank.primary = 1 // same as "/"
		}
	}
	return nil
}

// placeGRPC turns a gRPC match into a path condition on "/service/method".
// An exact service and method is an exact path and an exact service alone a
// prefix, which puts them ahead of every looser gRPC match, as the
// GRPCRoute precedence (most characters of service, then of method) wants.
func (c *compiler) placeGRPC(cond *entry, g *GRPCMatch) error {
	cond.grpc = true
	if g.Type == MatchExact && g.Service != "" {
		if g.Method != "" {
			cond.place, cond.path = placeExact, "/"+g.Service+"/"+g.Method
		} else {
			cond.place, cond.path = placePrefix, "/"+g.Service
		}
		cond.rank.primary = uint16(len(cond.path))
		return nil
	}
	cond.place = placeGRPCOther
	cond.rank.primary, cond.rank.secondary = uint16(len(g.Service)), uint16(len(g.Method))
	if g.Service == "" && g.Method == "" {
		return nil
	}
	service, method := "[^/]+", "[^/]+"
	if g.Type == MatchExact {
		if g.Service != "" {
			service = regexp.QuoteMeta(g.Service)
		}
		if g.Method != "" {
			method = regexp.QuoteMeta(g.Method)
		}
	} else {
		if g.Service != "" {
			service = "(?:" + g.Service + ")"
		}
		if g.Method != "" {
			method = "(?:" + g.Method + ")"
		}
	}
	re, err := c.regexp("/" + service + "/" + method)
	if err != nil {
		return fmt.Errorf("grpc service/method: %w", err)
	}
	cond.pattern = re
	return nil
}

// regexp compiles an expression that must match a whole string.
func (c *compiler) regexp(expr string) (*regexp.Regexp, error) {
	if re, ok := c.regexps[expr]; ok {
		return re, nil
	}
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression %q: %w", expr, err)
	}
	c.regexps[expr] = re
	return re, nil
}

// trimPrefixValue drops the trailing "/" that element-wise prefix matching
// ignores; the root prefix becomes "".
func trimPrefixValue(v string) string {
	return strings.TrimSuffix(v, "/")
}

// compareEntries orders two entries of one list: higher rank first, then
// the older route, then namespace/name, then rule and match order.
func compareEntries(a, b *entry) int {
	ra, rb := &a.rank, &b.rank
	if c := cmp.Compare(rb.primary, ra.primary); c != 0 {
		return c
	}
	if c := cmp.Compare(rb.secondary, ra.secondary); c != 0 {
		return c
	}
	if ma, mb := a.method != "", b.method != ""; ma != mb {
		if ma {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(len(b.headerConds()), len(a.headerConds())); c != 0 {
		return c
	}
	if c := cmp.Compare(len(b.queryConds()), len(a.queryConds())); c != 0 {
		return c
	}
	return compareOrigin(&a.target, &b.target, int(ra.seq), int(rb.seq))
}

// compareOrigin is the end of every precedence order: the oldest route,
// then namespace and name (and kind, between a GRPCRoute and an HTTPRoute
// of the same name), then input order, then rule and match order.
func compareOrigin(a, b *Target, seqA, seqB int) int {
	if c := a.Route.Created.Compare(b.Route.Created); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Route.ID.Namespace, b.Route.ID.Namespace); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Route.ID.Name, b.Route.ID.Name); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Route.ID.Kind, b.Route.ID.Kind); c != 0 {
		return c
	}
	if c := cmp.Compare(seqA, seqB); c != 0 {
		return c
	}
	if c := cmp.Compare(a.RuleIndex, b.RuleIndex); c != 0 {
		return c
	}
	return cmp.Compare(a.MatchIndex, b.MatchIndex)
}
