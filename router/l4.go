package router

// Layer 4 routes: TLSRoute (chosen by the server name of a ClientHello),
// TCPRoute and UDPRoute (one per listener). They share the model of the HTTP
// routes, Route and Rule, without matches or filters: a rule is only its
// weighted backends. What differs is the lookup, a server name or nothing,
// so an L4Table is its own small immutable structure rather than a mode of
// Table.

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
)

// Route kinds of Layer 4.
const (
	KindTLSRoute Kind = "TLSRoute"
	KindTCPRoute Kind = "TCPRoute"
	KindUDPRoute Kind = "UDPRoute"
	// KindIngressPassthrough is the TLS passthrough of an Ingress host
	// (ingress-nginx's ssl-passthrough): a TLSRoute in all but its
	// source, named after its Ingress.
	KindIngressPassthrough Kind = "Ingress(ssl-passthrough)"
)

// IsL4 reports whether routes of kind k are served by an L4Table.
func (k Kind) IsL4() bool {
	return k == KindTLSRoute || k == KindTCPRoute || k == KindUDPRoute || k == KindIngressPassthrough
}

// L4Target is what a connection to an L4 listener is served by.
type L4Target struct {
	// Terminate says that the connection's TLS ends at hostgate, with the
	// certificates of the listener's socket, and its plaintext goes to
	// the backend (a TLS listener in mode Terminate); otherwise its bytes
	// go as they came.
	Terminate bool
	Route     RouteID
	// Host is the hostname that selected the route ("" for any).
	Host string
	Rule *Rule
}

// L4Table is the compiled routes of one TLS, TCP or UDP socket. It
// never changes once CompileL4 returns it.
type L4Table struct {
	// scopes are one per listener hostname bound on the socket, most
	// specific first: a server name is given to the most specific
	// listener that admits it, and only that listener's routes can serve
	// it, as for HTTP listeners.
	scopes []l4Scope
}

// l4Scope is the routes of one listener hostname.
type l4Scope struct {
	listener string
	// https marks the hostname of an HTTPS listener on the same socket
	// (L4Listeners.HTTPS): server names it is the most specific listener
	// for are not this table's.
	https bool
	// terminate marks a TLS listener in mode Terminate.
	terminate bool
	// exact and wild hold the route hostnames as the routes wrote them,
	// not narrowed to the listener's: only names the listener admits are
	// looked up here, and among those a route's own hostname decides
	// precedence (an exact one over the wildcard of an older route that
	// the listener would have narrowed to the same name:
	// TLSRouteMultipleRoutesAttachmentSameHostnameIntersection). wild is
	// sorted longest suffix first; any is the route that serves every
	// name the listener admits (and connections without one).
	exact map[string]*L4Target
	wild  []*L4Target
	any   *L4Target
}

// L4Listeners are the listeners bound on a socket, by hostname ("" for a
// listener without one), as an L4Table serves them.
type L4Listeners struct {
	// Hostnames are those of the TLS or TCP listeners whose routes the
	// table holds; Terminate are those of them in mode Terminate.
	Hostnames, Terminate []string
	// HTTPS are those of HTTPS listeners that share the socket. Listener
	// precedence holds across both kinds, as it does among listeners of
	// one: a server name belongs to the most specific listener that
	// admits it, and Claims tells whether that is one of the table's.
	HTTPS []string
}

// CompileL4 builds the table of routes bound to a socket whose listener
// hostnames are listeners, none of them terminating TLS: CompileL4Socket
// for the common case.
func CompileL4(routes []Route, listeners ...string) (*L4Table, []error) {
	return CompileL4Socket(pointers(routes), L4Listeners{Hostnames: listeners})
}

// CompileL4Socket builds the table of routes bound to a socket whose
// listeners are listeners. Routes come in precedence order (oldest
// first): where two claim one hostname the first keeps it, as the Gateway
// API asks for TCPRoutes on one listener. A route that is not valid is
// left out and reported.
func CompileL4Socket(routes []*Route, listeners L4Listeners) (*L4Table, []error) {
	var errs []error
	t := &L4Table{}
	scopes := map[string]*l4Scope{}
	scope := func(h string) *l4Scope {
		s := scopes[h]
		if s == nil {
			s = &l4Scope{listener: h, exact: map[string]*L4Target{}, terminate: slices.Contains(listeners.Terminate, h)}
			scopes[h] = s
		}
		return s
	}
	for _, h := range listeners.Hostnames {
		scope(h)
	}
	for _, h := range listeners.HTTPS {
		if scopes[h] == nil {
			scopes[h] = &l4Scope{listener: h, https: true}
		}
	}
	for i := range routes {
		r := routes[i]
		if err := ValidateL4(r); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.ID, err))
			continue
		}
		s := scope(r.Listener)
		if s.https {
			errs = append(errs, fmt.Errorf("%s: listener %q of the socket is an HTTPS one, which serves HTTP routes, not this", r.ID, r.Listener))
			continue
		}
		hosts := r.Hostnames
		if len(hosts) == 0 {
			hosts = []string{""}
		}
		for _, h := range hosts {
			target := &L4Target{Terminate: s.terminate, Route: r.ID, Host: h, Rule: &r.Rules[0]}
			switch {
			case h == "":
				if s.any == nil {
					s.any = target
				}
			case strings.HasPrefix(h, "*."):
				if !slices.ContainsFunc(s.wild, func(w *L4Target) bool { return w.Host == h }) {
					s.wild = append(s.wild, target)
				}
			default:
				if s.exact[h] == nil {
					s.exact[h] = target
				}
			}
		}
	}
	for _, s := range scopes {
		// Stable, so that of equal suffixes the earlier route stays first.
		slices.SortStableFunc(s.wild, func(a, b *L4Target) int { return cmp.Compare(len(b.Host), len(a.Host)) })
		t.scopes = append(t.scopes, *s)
	}
	slices.SortFunc(t.scopes, func(a, b l4Scope) int { return compareSpecificity(a.listener, b.listener) })
	return t, errs
}

// wildcardCovers reports whether a Gateway API wildcard ("*.example.com",
// one or more labels) covers host.
func wildcardCovers(wildcard, host string) bool {
	suffix, ok := strings.CutPrefix(wildcard, "*")
	return ok && len(host) > len(suffix) && strings.HasSuffix(host, suffix)
}

// compareSpecificity orders hostnames exact first, then wildcards longest
// first, then "" (any).
func compareSpecificity(a, b string) int {
	rank := func(h string) int {
		switch {
		case h == "":
			return 2
		case strings.HasPrefix(h, "*."):
			return 1
		}
		return 0
	}
	if c := cmp.Compare(rank(a), rank(b)); c != 0 {
		return c
	}
	if c := cmp.Compare(len(b), len(a)); c != 0 {
		return c
	}
	return cmp.Compare(a, b)
}

// admits reports whether a listener hostname admits serverName.
func admits(listener, serverName string) bool {
	return listener == "" || listener == serverName || wildcardCovers(listener, serverName)
}

// Lookup returns the route for a connection whose ClientHello named
// serverName (lower case; "" when it named none, and for TCP), or nil
// when no route serves it. A nil table serves nothing.
func (t *L4Table) Lookup(serverName string) *L4Target {
	s := t.scopeOf(serverName)
	if s == nil || s.https {
		return nil
	}
	if serverName != "" {
		if target := s.exact[serverName]; target != nil {
			return target
		}
		for _, w := range s.wild {
			if wildcardCovers(w.Host, serverName) {
				return w
			}
		}
	}
	return s.any
}

// Claims reports whether a connection for serverName is this table's to
// serve or refuse: the most specific listener that admits the name is
// one of its own, not an HTTPS listener beside it (L4Listeners.HTTPS).
func (t *L4Table) Claims(serverName string) bool {
	s := t.scopeOf(serverName)
	return s != nil && !s.https
}

// scopeOf is the most specific listener scope that admits serverName.
func (t *L4Table) scopeOf(serverName string) *l4Scope {
	if t == nil {
		return nil
	}
	for i := range t.scopes {
		if s := &t.scopes[i]; admits(s.listener, serverName) {
			return s
		}
	}
	return nil
}

// Terminates reports whether a listener of the table is in mode
// Terminate: its connections' TLS may end at hostgate.
func (t *L4Table) Terminates() bool {
	if t == nil {
		return false
	}
	for _, s := range t.scopes {
		if s.terminate {
			return true
		}
	}
	return false
}

// Len is the number of hostnames the table serves, a route without
// hostname counting one.
func (t *L4Table) Len() int {
	if t == nil {
		return 0
	}
	n := 0
	for _, s := range t.scopes {
		n += len(s.exact) + len(s.wild)
		if s.any != nil {
			n++
		}
	}
	return n
}

// L4Description is one hostname of an L4Table and what serves it.
type L4Description struct {
	Listener string `json:"listener,omitempty"`
	// Terminate says that TLS ends at hostgate.
	Terminate bool     `json:"terminate,omitempty"`
	Host      string   `json:"host"`
	Route     string   `json:"route"`
	Backends  []string `json:"backends"`
}

// Describe lists what the table serves, in lookup order, for
// /debug/routes and golden tests.
func (t *L4Table) Describe() []L4Description {
	if t == nil {
		return nil
	}
	var out []L4Description
	add := func(s *l4Scope, target *L4Target) {
		d := L4Description{Listener: s.listener, Terminate: target.Terminate, Host: cmp.Or(target.Host, "*"), Route: target.Route.String()}
		for _, b := range target.Rule.Backends {
			d.Backends = append(d.Backends, describeBackend(b))
		}
		out = append(out, d)
	}
	for i := range t.scopes {
		s := &t.scopes[i]
		for _, h := range slices.Sorted(maps.Keys(s.exact)) {
			add(s, s.exact[h])
		}
		for _, w := range s.wild {
			add(s, w)
		}
		if s.any != nil {
			add(s, s.any)
		}
	}
	return out
}

// WriteText prints Describe as indented text.
func (t *L4Table) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, d := range t.Describe() {
		fmt.Fprintf(&b, "sni %s", d.Host)
		if d.Listener != "" {
			fmt.Fprintf(&b, " (listener %s)", d.Listener)
		}
		if d.Terminate {
			b.WriteString(" terminate")
		}
		fmt.Fprintf(&b, " -> %s\n", d.Route)
		for _, be := range d.Backends {
			fmt.Fprintf(&b, "  backend %s\n", be)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ValidateL4 checks a TLSRoute, TCPRoute or UDPRoute: one rule with
// backends and nothing an L4 proxy cannot do (matches, filters), valid
// hostnames, and no hostnames on a TCPRoute or UDPRoute.
func ValidateL4(r *Route) error {
	if !r.ID.Kind.IsL4() {
		return fmt.Errorf("kind %s: not a Layer 4 route kind", quote(r.ID.Kind))
	}
	if r.ID.Name == "" {
		return errors.New("name: must not be empty")
	}
	if r.Listener != "" {
		if err := validateHostname(r.Listener); err != nil {
			return fmt.Errorf("listener hostname %s: %w", quote(r.Listener), err)
		}
	}
	if r.ID.Kind != KindTLSRoute && r.ID.Kind != KindIngressPassthrough && len(r.Hostnames) > 0 {
		return fmt.Errorf("hostnames: a %s has none", r.ID.Kind)
	}
	for i, h := range r.Hostnames {
		if err := validateHostname(h); err != nil {
			return fmt.Errorf("hostnames[%d] %s: %w", i, quote(h), err)
		}
	}
	if len(r.Rules) != 1 {
		return fmt.Errorf("rules: exactly one rule is served, not %d", len(r.Rules))
	}
	rule := &r.Rules[0]
	switch {
	case len(rule.Matches) > 0:
		return errors.New("rules[0].matches: a Layer 4 rule has none")
	case len(rule.Filters) > 0:
		return errors.New("rules[0].filters: a Layer 4 rule has none")
	case len(rule.Backends) == 0:
		return errors.New("rules[0].backendRefs: must not be empty")
	}
	for bi := range rule.Backends {
		b := &rule.Backends[bi]
		if len(b.Filters) > 0 {
			return fmt.Errorf("rules[0].backendRefs[%d].filters: a Layer 4 backend has none", bi)
		}
		// A Layer 4 backend has no protocol: its TLS, when it has an
		// identity (a terminated TLSRoute's BackendTLSPolicy), is made
		// over the stream, so only the identity itself is checked.
		plain := *b
		plain.TLS = nil
		err := validateBackend(&plain)
		if err == nil && b.TLS != nil {
			err = validateBackendTLS(b.TLS)
		}
		if err != nil {
			return fmt.Errorf("rules[0].backendRefs[%d].%w", bi, err)
		}
	}
	return nil
}

// ChooseBackend draws a backend in proportion to the weights. Drawing at
// random needs no shared state per rule, and the weights hold on average.
// It returns nil when no backend takes traffic, which the Gateway API
// answers with 500 (HTTP) or a refused connection (Layer 4). An Invalid
// backend is returned like any other: its share of the traffic fails.
func ChooseBackend(refs []BackendRef) *BackendRef {
	if len(refs) == 1 {
		if refs[0].Weight > 0 {
			return &refs[0]
		}
		return nil
	}
	var total int64
	for i := range refs {
		total += int64(max(refs[i].Weight, 0))
	}
	if total == 0 {
		return nil
	}
	n := rand.Int64N(total)
	for i := range refs {
		n -= int64(max(refs[i].Weight, 0))
		if n < 0 {
			return &refs[i]
		}
	}
	return nil
}
