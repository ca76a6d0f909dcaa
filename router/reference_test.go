package router

import (
	"cmp"
	"net/textproto"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// referenceLookup is a deliberately naive matcher written from the words of
// the Gateway API and Ingress specifications: it tries every match of every
// route, keeps those that hold, sorts them by the precedence rules and
// returns the first. Table.Lookup must agree with it on every input.
//
// Where the specifications leave a choice, it makes hostgate's documented
// one: regular-expression paths rank after exact paths and before prefixes
// (longer expressions first); of gRPC matches, an exact service and method
// ranks first, then an exact service alone, then all others by the lengths
// of their service and method.
//
// Listener isolation comes first: of the listener hostnames on the socket
// (those given and those of the routes), the request belongs to the most
// specific that matches its host, and only that listener's routes count.
func referenceLookup(routes []Route, listeners []string, skipped map[int]bool, req Request) *Target {
	if !strings.HasPrefix(req.Path, "/") {
		return nil
	}
	host := strings.ToLower(req.Host)
	if h, _, err := splitHostPortLoose(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(host, ".")

	listener, haveListener := "", false
	candidates := slices.Clone(listeners)
	for i := range routes {
		if !skipped[i] {
			candidates = append(candidates, routes[i].Listener)
		}
	}
	if len(candidates) == 0 {
		candidates = []string{""}
	}
	for _, l := range candidates {
		if !refHostMatches(l, host, KindHTTPRoute) {
			continue
		}
		if !haveListener || refMoreSpecificListener(l, listener) {
			listener, haveListener = l, true
		}
	}
	if !haveListener {
		return nil
	}

	type candidate struct {
		target    Target
		seq       int
		hostClass int // 0 exact, 1 wildcard, 2 no hostname
		hostLen   int
		pathClass int // 0 exact, 1 regex, 2 prefix, 3 other gRPC
		primary   int
		secondary int
		method    bool
		headers   int
		query     int
	}
	var found []candidate
	for seq := range routes {
		if skipped[seq] {
			continue
		}
		r := &routes[seq]
		if r.Listener != listener {
			continue
		}
		hostnames := r.Hostnames
		if len(hostnames) == 0 {
			hostnames = []string{""}
		}
		for _, hostname := range hostnames {
			if !refHostMatches(hostname, host, r.ID.Kind) {
				continue
			}
			for ri := range r.Rules {
				matches := r.Rules[ri].Matches
				implied := len(matches) == 0
				if implied {
					matches = []Match{*impliedMatch(r.ID.Kind)}
				}
				for mi := range matches {
					m := &matches[mi]
					ok, pathClass, primary, secondary := refPathMatches(m, req.Path)
					if !ok || (m.Method != "" && m.Method != req.Method) ||
						!refHeadersMatch(m.Headers, req.Header) || !refQueryMatches(m.Query, req.RawQuery) {
						continue
					}
					c := candidate{
						target:    Target{Route: r, Rule: &r.Rules[ri], RuleIndex: ri, Match: m, MatchIndex: mi},
						seq:       seq,
						hostLen:   len(hostname),
						pathClass: pathClass, primary: primary, secondary: secondary,
						method:  m.Method != "",
						headers: refDistinct(m.Headers, textproto.CanonicalMIMEHeaderKey),
						query:   refDistinct(m.Query, func(s string) string { return s }),
					}
					if implied {
						c.target.Match, c.target.MatchIndex = nil, -1
					}
					switch {
					case hostname == "":
						c.hostClass = 2
					case strings.HasPrefix(hostname, "*."):
						c.hostClass = 1
					}
					found = append(found, c)
				}
			}
		}
	}
	if len(found) == 0 {
		return nil
	}
	best := slices.MinFunc(found, func(a, b candidate) int {
		return cmpChain(
			cmp.Compare(a.hostClass, b.hostClass),
			cmp.Compare(b.hostLen, a.hostLen),
			cmp.Compare(a.pathClass, b.pathClass),
			cmp.Compare(b.primary, a.primary),
			cmp.Compare(b.secondary, a.secondary),
			cmpBool(a.method, b.method),
			cmp.Compare(b.headers, a.headers),
			cmp.Compare(b.query, a.query),
			a.target.Route.Created.Compare(b.target.Route.Created),
			cmp.Compare(a.target.Route.ID.Namespace, b.target.Route.ID.Namespace),
			cmp.Compare(a.target.Route.ID.Name, b.target.Route.ID.Name),
			cmp.Compare(a.target.Route.ID.Kind, b.target.Route.ID.Kind),
			cmp.Compare(a.seq, b.seq),
			cmp.Compare(a.target.RuleIndex, b.target.RuleIndex),
			cmp.Compare(a.target.MatchIndex, b.target.MatchIndex),
		)
	})
	return &best.target
}

// refMoreSpecificListener: an exact hostname beats a wildcard, a longer
// wildcard a shorter one, and any hostname beats none.
func refMoreSpecificListener(a, b string) bool {
	switch {
	case b == "":
		return a != ""
	case a == "":
		return false
	}
	aWild, bWild := strings.HasPrefix(a, "*"), strings.HasPrefix(b, "*")
	if aWild != bWild {
		return bWild
	}
	return len(a) > len(b)
}

func cmpChain(results ...int) int {
	for _, c := range results {
		if c != 0 {
			return c
		}
	}
	return 0
}

// cmpBool puts true first.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

func splitHostPortLoose(host string) (string, string, error) {
	i := strings.LastIndex(host, ":")
	if i < 0 || strings.Contains(host[i:], "]") {
		return host, "", nil
	}
	return host[:i], host[i+1:], nil
}

// refHostMatches: an exact hostname equals the host; "*.example.com"
// matches hosts that end in ".example.com" with one or more labels before
// it (Gateway API) or exactly one (Ingress); no hostname matches all.
func refHostMatches(hostname, host string, kind Kind) bool {
	if hostname == "" {
		return true
	}
	suffix, wildcard := strings.CutPrefix(hostname, "*")
	if !wildcard {
		return hostname == host
	}
	head, ok := strings.CutSuffix(host, suffix)
	if !ok || head == "" {
		return false
	}
	return kind != KindIngress || !strings.Contains(head, ".")
}

// refPathMatches returns whether m's path (or gRPC) condition holds and
// its rank: class, then the characters that count.
func refPathMatches(m *Match, path string) (ok bool, class, primary, secondary int) {
	if g := m.GRPC; g != nil {
		service, method, found := strings.Cut(path[1:], "/")
		if !found || service == "" || method == "" || strings.Contains(method, "/") {
			return false, 0, 0, 0
		}
		ok = (g.Service == "" || refValueMatches(g.Type, g.Service, service)) &&
			(g.Method == "" || refValueMatches(g.Type, g.Method, method))
		switch {
		case g.Type == MatchExact && g.Service != "" && g.Method != "":
			return ok, 0, len("/" + g.Service + "/" + g.Method), 0
		case g.Type == MatchExact && g.Service != "":
			return ok, 2, len("/" + g.Service), 0
		}
		return ok, 3, len(g.Service), len(g.Method)
	}
	v := m.Path.Value
	switch m.Path.Type {
	case PathExact:
		return path == v, 0, len(v), 0
	case PathRegularExpression:
		return regexp.MustCompile("^(?:" + v + ")$").MatchString(path), 1, len(v), 0
	}
	if v == "" {
		v = "/"
	}
	p := strings.TrimSuffix(v, "/")
	return path == p || strings.HasPrefix(path, p+"/"), 2, len(v), 0
}

func refValueMatches(t ValueMatchType, want, got string) bool {
	if t == MatchRegularExpression {
		return regexp.MustCompile("^(?:" + want + ")$").MatchString(got)
	}
	return want == got
}

// refHeadersMatch: of several conditions on one header name only the first
// counts; a header takes part with its first value.
func refHeadersMatch(conds []ValueMatch, h Headers) bool {
	seen := map[string]bool{}
	for _, c := range conds {
		name := textproto.CanonicalMIMEHeaderKey(c.Name)
		if seen[name] {
			continue
		}
		seen[name] = true
		if h == nil {
			return false
		}
		values := h.Values(name)
		if len(values) == 0 || !refValueMatches(c.Type, c.Value, values[0]) {
			return false
		}
	}
	return true
}

func refQueryMatches(conds []ValueMatch, raw string) bool {
	values, _ := url.ParseQuery(raw)
	seen := map[string]bool{}
	for _, c := range conds {
		if seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		got := values[c.Name]
		if len(got) == 0 || !refValueMatches(c.Type, c.Value, got[0]) {
			return false
		}
	}
	return true
}

func refDistinct(conds []ValueMatch, canonical func(string) string) int {
	seen := map[string]bool{}
	for _, c := range conds {
		seen[canonical(c.Name)] = true
	}
	return len(seen)
}
