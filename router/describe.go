package router

import (
	"cmp"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strings"
)

// HostDescription lists what a Table serves for one hostname, in the order
// Lookup tries it.
type HostDescription struct {
	// Listener is the listener hostname whose routes these are (empty for a
	// listener without hostname).
	Listener string `json:"listener,omitempty"`
	// Host is an exact name, a "*." wildcard, or "*" for routes without
	// hostnames.
	Host    string             `json:"host"`
	Matches []MatchDescription `json:"matches"`
}

// MatchDescription is one match of one rule and what the rule does.
type MatchDescription struct {
	Route    string   `json:"route"`
	Rule     string   `json:"rule"`
	Path     string   `json:"path"`
	Method   string   `json:"method,omitempty"`
	Headers  []string `json:"headers,omitempty"`
	Query    []string `json:"query,omitempty"`
	Filters  []string `json:"filters,omitempty"`
	Backends []string `json:"backends,omitempty"`
	Timeouts string   `json:"timeouts,omitempty"`
	Retry    string   `json:"retry,omitempty"`
	// MaxRequestBody is in bytes.
	MaxRequestBody int64  `json:"maxRequestBody,omitempty"`
	Fallback       string `json:"fallback,omitempty"`
	Canary         string `json:"canary,omitempty"`
	// NoAccessLog says the access log leaves the match's requests out.
	NoAccessLog bool `json:"noAccessLog,omitempty"`
	// ResponseRate is the bound of the answers' rate.
	ResponseRate string `json:"responseRate,omitempty"`
}

// Serial numbers t among the Tables compiled in this process, in the
// order they were, from 1; 0 for the nil Table.
func (t *Table) Serial() uint64 {
	if t == nil {
		return 0
	}
	return t.serial
}

// GoneSince returns the IDs of the routes of the Table numbered serial
// that t no longer serves: none when that is t, those RecompileChanged
// found when t was recompiled from it; false when t cannot tell (the nil
// Table serves nothing, and tells nothing). A caller that keeps something
// per route (metrics) learns what to drop from the change, without
// walking every route of t.
func (t *Table) GoneSince(serial uint64) ([]RouteID, bool) {
	switch {
	case t == nil || serial == 0:
		return nil, false
	case serial == t.serial:
		return nil, true
	case serial == t.since:
		return t.gone, true
	}
	return nil, false
}

// RouteIDs yields the ID of every route t serves, in the order Compile
// got them; an object with routes at several listener hostnames comes
// once for each. Unlike Describe it builds no strings.
func (t *Table) RouteIDs() iter.Seq[RouteID] {
	return func(yield func(RouteID) bool) {
		for r := range t.routes.all() {
			if !yield(r.ID) {
				return
			}
		}
	}
}

// Filters yields every rule filter of t, once per reference.
func (t *Table) Filters() iter.Seq[*Filter] {
	return func(yield func(*Filter) bool) {
		for r := range t.routes.withRefs() {
			for ri := range r.Rules {
				for fi := range r.Rules[ri].Filters {
					if !yield(&r.Rules[ri].Filters[fi]) {
						return
					}
				}
			}
		}
	}
}

// BackendTLS yields the TLS identity of every backend of t that has one,
// mirrors' and authorization services' included, once per reference.
func (t *Table) BackendTLS() iter.Seq[*BackendTLS] {
	return func(yield func(*BackendTLS) bool) {
		each := func(b *BackendRef) bool {
			if b.TLS != nil && !yield(b.TLS) {
				return false
			}
			for i := range b.Filters {
				if m := b.Filters[i].Mirror; m != nil && m.Backend.TLS != nil && !yield(m.Backend.TLS) {
					return false
				}
			}
			return true
		}
		for _, filters := range t.listenerFilters {
			for i := range filters {
				if !each(&filters[i].ExternalAuth.Backend) {
					return
				}
			}
		}
		for r := range t.routes.withRefs() {
			for ri := range r.Rules {
				rule := &r.Rules[ri]
				for fi := range rule.Filters {
					if m := rule.Filters[fi].Mirror; m != nil && !each(&m.Backend) {
						return
					}
					if a := rule.Filters[fi].ExternalAuth; a != nil && !each(&a.Backend) {
						return
					}
				}
				for bi := range rule.Backends {
					if !each(&rule.Backends[bi]) {
						return
					}
				}
			}
		}
	}
}

// hasRefs reports whether Filters or BackendTLS find anything in r.
func hasRefs(r *Route) bool {
	return slices.ContainsFunc(r.Rules, func(rule Rule) bool {
		return len(rule.Filters) > 0 || slices.ContainsFunc(rule.Backends, func(b BackendRef) bool {
			return b.TLS != nil || len(b.Filters) > 0
		})
	})
}

// Describe lists every host of t and its matches: exact hosts by name, then
// wildcards from the most specific, then the catch-all. The output is
// deterministic, so it serves both /debug/routes and golden tests.
func (t *Table) Describe() []HostDescription {
	var out []HostDescription
	for _, sc := range t.scopes {
		var hosts []indexedTable
		sc.forEachHost(func(x *hostIndex, h *hostTable) { hosts = append(hosts, indexedTable{x, h}) })
		slices.SortFunc(hosts, func(a, b indexedTable) int {
			if c := cmp.Compare(hostOrder(a.name), hostOrder(b.name)); c != 0 {
				return c
			}
			if c := cmp.Compare(strings.Count(b.name, "."), strings.Count(a.name, ".")); c != 0 {
				return c
			}
			return cmp.Compare(a.name, b.name)
		})
		for _, h := range hosts {
			hd := HostDescription{Listener: sc.listener, Host: h.name}
			for _, e := range h.from.entriesOf(h.hostTable) {
				hd.Matches = append(hd.Matches, describeEntry(e))
			}
			out = append(out, hd)
		}
	}
	return out
}

func hostOrder(name string) int {
	switch {
	case name == "*":
		return 2
	case strings.HasPrefix(name, "*."):
		return 1
	}
	return 0
}

// entriesOf returns the entries of h in the order lookup considers them for
// a path that reaches them: exact paths, regular expressions, prefixes from
// the longest, other gRPC matches.
func (x *hostIndex) entriesOf(h *hostTable) []entry {
	var exact, prefix []entry
	for _, n := range x.nodes[h.nodes.lo:h.nodes.hi] {
		exact = append(exact, x.list(n.exact())...)
		prefix = append(prefix, x.list(n.prefix())...)
	}
	byPath := func(a, b entry) int {
		if c := cmp.Compare(len(b.path), len(a.path)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.path, b.path); c != 0 {
			return c
		}
		return compareEntries(&a, &b)
	}
	slices.SortFunc(exact, byPath)
	slices.SortFunc(prefix, byPath)
	return slices.Concat(exact, x.list(h.regex), prefix, x.list(h.grpc))
}

func describeEntry(e entry) MatchDescription {
	tg := &e.target
	d := MatchDescription{
		Route:  tg.Route.ID.String(),
		Rule:   fmt.Sprintf("rules[%d]", tg.RuleIndex),
		Path:   describePath(e),
		Method: e.method,
	}
	if tg.Rule.Name != "" {
		d.Rule += " (" + tg.Rule.Name + ")"
	}
	if tg.MatchIndex >= 0 {
		d.Rule += fmt.Sprintf(".matches[%d]", tg.MatchIndex)
	}
	if e.singleLabel {
		d.Path += " (one label for *)"
	}
	for _, h := range e.headerConds() {
		d.Headers = append(d.Headers, describeValue(h))
	}
	for _, q := range e.queryConds() {
		d.Query = append(d.Query, describeValue(q))
	}
	d.Filters = describeFilters(tg.Rule.Filters)
	for _, b := range tg.Rule.Backends {
		d.Backends = append(d.Backends, describeBackend(b))
	}
	if to := tg.Rule.Timeouts; to != (Timeouts{}) {
		d.Timeouts = fmt.Sprintf("request=%s backendRequest=%s", to.Request, to.BackendRequest)
		if to.Connect != 0 || to.BackendRead != 0 || to.BackendSend != 0 {
			d.Timeouts += fmt.Sprintf(" connect=%s backendRead=%s backendSend=%s", to.Connect, to.BackendRead, to.BackendSend)
		}
	}
	if n := tg.Rule.MaxRequestBody; n > 0 {
		d.MaxRequestBody = n
	}
	if f := tg.Rule.Fallback; f != nil {
		d.Fallback = describeBackend(f.Backend)
		if len(f.Codes) > 0 {
			d.Fallback += fmt.Sprintf(" codes=%v", f.Codes)
		}
	}
	if r := tg.Rule.Retry; r != nil {
		d.Retry = fmt.Sprintf("codes=%v attempts=%d backoff=%s", r.Codes, r.Attempts, r.Backoff)
		if r.Budget > 0 {
			d.Retry += fmt.Sprintf(" budget=%s", r.Budget)
		}
	}
	if c := tg.Rule.Canary; c != nil {
		d.Canary = c.String()
	}
	d.NoAccessLog = tg.Rule.NoAccessLog
	if r := tg.Rule.ResponseRate; r != nil {
		d.ResponseRate = fmt.Sprintf("%dB/s after=%dB", r.BytesPerSecond, r.After)
	}
	return d
}

func describePath(e entry) string {
	if m := e.target.Match; m != nil && m.GRPC != nil {
		g := m.GRPC
		return fmt.Sprintf("gRPC %s service=%q method=%q", g.Type, g.Service, g.Method)
	}
	if e.target.Match == nil && e.place == placeGRPCOther {
		return "gRPC any"
	}
	value := "/"
	if m := e.target.Match; m != nil && m.Path.Value != "" {
		value = m.Path.Value
	}
	switch e.place {
	case placeExact:
		return "Exact " + value
	case placeRegex:
		return "RegularExpression " + value
	}
	return "PathPrefix " + value
}

func describeValue(c valueCond) string {
	if c.pattern != nil {
		return c.name + "~" + c.value
	}
	return c.name + "=" + c.value
}

func describeFilters(filters []Filter) []string {
	var out []string
	for i := range filters {
		out = append(out, describeFilter(&filters[i]))
	}
	return out
}

func describeFilter(f *Filter) string {
	var b strings.Builder
	b.WriteString(f.Type.String())
	switch f.Type {
	case FilterRequestHeaderModifier:
		describeHeaderModifier(&b, f.RequestHeaders)
	case FilterResponseHeaderModifier:
		describeHeaderModifier(&b, f.ResponseHeaders)
	case FilterRequestRedirect:
		r := f.Redirect
		describeSet(&b, "location", r.Location)
		describeSet(&b, "scheme", r.Scheme)
		describeSet(&b, "hostname", r.Hostname)
		if r.Port != 0 {
			fmt.Fprintf(&b, " port=%d", r.Port)
		}
		describePathModifier(&b, r.Path)
		if r.StatusCode != 0 {
			fmt.Fprintf(&b, " status=%d", r.StatusCode)
		}
		if r.TrimTrailingSlash {
			b.WriteString(" trimTrailingSlash")
		}
		if r.RequestHost {
			b.WriteString(" requestHost")
		}
		if r.DropQuery {
			b.WriteString(" dropQuery")
		}
	case FilterURLRewrite:
		describeSet(&b, "hostname", f.Rewrite.Hostname)
		describePathModifier(&b, f.Rewrite.Path)
	case FilterRequestMirror:
		m := f.Mirror
		fmt.Fprintf(&b, " %s", describeBackend(m.Backend))
		if m.Denominator > 0 {
			fmt.Fprintf(&b, " fraction=%d/%d", m.Numerator, m.Denominator)
		}
		describeSet(&b, "hostname", m.Hostname)
		describeSet(&b, "path", m.Path)
		if m.NoBody {
			b.WriteString(" without-body")
		}
	case FilterCORS:
		describeCORS(&b, f.CORS)
	case FilterAccess:
		describeAccess(&b, f.Access)
	case FilterBasicAuth:
		describeBasicAuth(&b, f.BasicAuth)
	case FilterRateLimit:
		describeRateLimit(&b, f.RateLimit)
	case FilterExternalAuth:
		describeExternalAuth(&b, f.ExternalAuth)
	case FilterClientCertificate:
		b.WriteString(describeClientCertAuth(f.ClientCert))
	case FilterResponseRewrite:
		for _, r := range f.ResponseRewrite.replacements() {
			if r.r != nil {
				fmt.Fprintf(&b, " %s=%s->%s", r.name, r.r.From, r.r.To)
			}
		}
	}
	return b.String()
}

func describeCORS(b *strings.Builder, c *CORS) {
	origins := make([]string, len(c.AllowOrigins))
	for i, o := range c.AllowOrigins {
		origins[i] = o.String()
	}
	describeSet(b, "allowOrigins", strings.Join(origins, ","))
	describeSet(b, "allowMethods", strings.Join(c.AllowMethods, ","))
	describeSet(b, "allowHeaders", strings.Join(c.AllowHeaders, ","))
	describeSet(b, "exposeHeaders", strings.Join(c.ExposeHeaders, ","))
	if c.AllowCredentials {
		b.WriteString(" allowCredentials")
	}
	if c.LiteralWildcard {
		b.WriteString(" literalWildcard")
	}
	if c.MaxAge != 0 {
		fmt.Fprintf(b, " maxAge=%s", c.MaxAge)
	}
}

func describeAccess(b *strings.Builder, a *Access) {
	if a.Deny != nil {
		describeSet(b, "deny", a.Deny.String())
	}
	if a.Allow != nil {
		describeSet(b, "allow", a.Allow.String())
	}
	if a.Closed != "" {
		fmt.Fprintf(b, " closed=%q", a.Closed)
	}
	if a.SatisfyAny {
		b.WriteString(" satisfy=any")
	}
}

// describeBasicAuth names the users, never their hashes.
func describeBasicAuth(b *strings.Builder, a *BasicAuth) {
	users := make([]string, len(a.Users))
	for i, u := range a.Users {
		users[i] = u.User
	}
	fmt.Fprintf(b, " source=%q realm=%q users=%s", a.Source, a.Realm, strings.Join(users, ","))
}

func describeRateLimit(b *strings.Builder, l *RateLimit) {
	fmt.Fprintf(b, " key=%q", l.Key)
	if l.Rate > 0 {
		fmt.Fprintf(b, " rate=%d/%s burst=%d", l.Rate, l.Per, l.Burst)
	} else {
		fmt.Fprintf(b, " concurrent=%d", l.Concurrent)
	}
	if l.Exempt != nil {
		describeSet(b, "exempt", l.Exempt.String())
	}
	fmt.Fprintf(b, " status=%d", l.StatusCode)
}

func describeSet(b *strings.Builder, field, value string) {
	if value != "" {
		fmt.Fprintf(b, " %s=%s", field, value)
	}
}

func describeHeaderModifier(b *strings.Builder, m *HeaderModifier) {
	for _, h := range m.Set {
		fmt.Fprintf(b, " set %s=%q", h.Name, h.Value)
	}
	for _, h := range m.Add {
		fmt.Fprintf(b, " add %s=%q", h.Name, h.Value)
	}
	for _, name := range m.Remove {
		fmt.Fprintf(b, " remove %s", name)
	}
}

func describePathModifier(b *strings.Builder, p *PathModifier) {
	if p != nil {
		fmt.Fprintf(b, " path=%s:%q", p.Type, p.Value)
	}
}

func describeBackend(r BackendRef) string {
	s := fmt.Sprintf("%s weight=%d", r.Name, r.Weight)
	if r.Protocol != "" {
		s += " protocol=" + r.Protocol
	}
	if r.Invalid {
		s += " invalid"
	}
	if r.Canary {
		s += " canary"
	}
	if r.Balance != nil {
		s += " " + r.Balance.String()
	}
	if r.TLS != nil {
		s += " " + describeBackendTLS(r.TLS)
	}
	if r.ProxyProtocol != 0 {
		s += fmt.Sprintf(" proxy-protocol=v%d", r.ProxyProtocol)
	}
	if len(r.Filters) > 0 {
		s += " filters=[" + strings.Join(describeFilters(r.Filters), "; ") + "]"
	}
	return s
}

// WriteText writes Describe as indented text, one line per match and one
// per filter or backend.
func (t *Table) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(t.listenerFilters)) {
		for _, f := range describeFilters(t.listenerFilters[name]) {
			fmt.Fprintf(&b, "listener %q filter %s\n", name, f)
		}
	}
	for _, h := range t.Describe() {
		fmt.Fprintf(&b, "host %s", h.Host)
		if h.Listener != "" {
			fmt.Fprintf(&b, " (listener %s)", h.Listener)
		}
		b.WriteString("\n")
		for _, m := range h.Matches {
			fmt.Fprintf(&b, "  %s", m.Path)
			if m.Method != "" {
				fmt.Fprintf(&b, " method=%s", m.Method)
			}
			for _, hd := range m.Headers {
				fmt.Fprintf(&b, " header %s", hd)
			}
			for _, q := range m.Query {
				fmt.Fprintf(&b, " query %s", q)
			}
			fmt.Fprintf(&b, " -> %s %s\n", m.Route, m.Rule)
			for _, f := range m.Filters {
				fmt.Fprintf(&b, "    filter %s\n", f)
			}
			for _, be := range m.Backends {
				fmt.Fprintf(&b, "    backend %s\n", be)
			}
			if m.Timeouts != "" {
				fmt.Fprintf(&b, "    timeouts %s\n", m.Timeouts)
			}
			if m.Retry != "" {
				fmt.Fprintf(&b, "    retry %s\n", m.Retry)
			}
			if m.MaxRequestBody != 0 {
				fmt.Fprintf(&b, "    maxRequestBody %d\n", m.MaxRequestBody)
			}
			if m.Fallback != "" {
				fmt.Fprintf(&b, "    fallback %s\n", m.Fallback)
			}
			if m.Canary != "" {
				fmt.Fprintf(&b, "    %s\n", m.Canary)
			}
			if m.NoAccessLog {
				b.WriteString("    no access log\n")
			}
			if m.ResponseRate != "" {
				fmt.Fprintf(&b, "    responseRate %s\n", m.ResponseRate)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func describeBackendTLS(t *BackendTLS) string {
	s := "tls=" + t.ServerName
	if t.SkipVerify {
		s += " unverified"
	} else if t.CAPEM == nil {
		s += " ca=system"
	} else {
		sum := sha256.Sum256(t.CAPEM)
		s += fmt.Sprintf(" ca=%x", sum[:8])
	}
	for _, san := range t.SubjectAltNames {
		s += " san=" + san.Hostname + san.URI
	}
	if t.VerifyDepth > 0 {
		s += fmt.Sprintf(" depth=%d", t.VerifyDepth)
	}
	if c := t.ClientCertificate; c != nil {
		sum := sha256.Sum256(c.CertPEM)
		s += fmt.Sprintf(" client=%s/%x", c.Name, sum[:8])
	}
	if t.MinVersion != 0 || t.MaxVersion != 0 {
		s += fmt.Sprintf(" versions=%s-%s", tlsVersionName(t.MinVersion), tlsVersionName(t.MaxVersion))
	}
	if len(t.CipherSuites) > 0 {
		names := make([]string, len(t.CipherSuites))
		for i, id := range t.CipherSuites {
			names[i] = tls.CipherSuiteName(id)
		}
		s += " suites=" + strings.Join(names, ",")
	}
	return s
}

// tlsVersionName names a bound of a backend's TLS versions; 0 is none.
func tlsVersionName(v uint16) string {
	if v == 0 {
		return "any"
	}
	return tls.VersionName(v)
}
