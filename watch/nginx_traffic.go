package watch

// ingress-nginx's traffic annotations: canary Ingresses, session
// affinity, load balancing, retries to other endpoints, and the access
// log.
//
// A canary Ingress (canary: "true") serves nothing of its own: each of its
// paths adds its backend to the main Ingress of the same host, path and
// pathType, with a router.Canary that sends requests to it by header, then
// cookie, then weight. A canary with no main Ingress is ignored, as
// ingress-nginx ignores it, and its report says so. Of a canary's other
// annotations only those of its own backend count (load-balance,
// upstream-hash-by, affinity and the session cookie's); the main
// Ingress's apply to everything else. The main Ingress's routes read the
// canary, so the canaries of its paths are part of the key its routes are
// memoized under (nginxHosts.context).

import (
	"cmp"
	"fmt"
	"net/textproto"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/hostgate/hostgate/router"
)

// nginxTraffic are the typed values of the traffic annotations.
type nginxTraffic struct {
	// canary makes the Ingress a canary of main Ingresses; canaryRule,
	// canaryWeight and canaryTotal say which requests its backends get.
	canary                    bool
	canaryRule                router.Canary
	canaryWeight, canaryTotal int32
	// balance is the backends' Balance; affinity, set by affinity: cookie
	// and shaped by the session-cookie-* annotations, joins it once
	// settled, without a Path where the cookie's is each Ingress path's.
	balance  router.Balance
	affinity *router.Affinity
	// retry is proxy-next-upstream's policy, nil for none.
	retry *router.Retry
	// canaryLegacy is affinity-canary-behavior: legacy, which keeps a
	// canary's own affinity rather than take the main Ingress's.
	canaryLegacy bool
	// nextUpstreamOff is proxy-next-upstream: off, which tries and
	// timeout leave off.
	nextUpstreamOff bool
	// nextUpstreamBudget is proxy-next-upstream-timeout, the retry
	// policy's Budget; 0 for none.
	nextUpstreamBudget time.Duration
	noAccessLog        bool
}

// nginxTrafficAnnotations choose where each request goes.
var nginxTrafficAnnotations = map[string]nginxParse{
	"canary": func(v string, s *nginxSettings) (err error) {
		s.traffic.canary, err = parseNginxBool(v)
		return err
	},
	"canary-by-header": func(v string, s *nginxSettings) error {
		if !isToken(v) {
			return fmt.Errorf("must be a header name")
		}
		s.traffic.canaryRule.Header = textproto.CanonicalMIMEHeaderKey(v)
		return nil
	},
	"canary-by-header-value": func(v string, s *nginxSettings) error {
		if v == "" {
			return fmt.Errorf("must not be empty")
		}
		s.traffic.canaryRule.HeaderValue = v
		return checkHeaderValue(v)
	},
	"canary-by-header-pattern": func(v string, s *nginxSettings) error {
		re, err := regexp.Compile(v)
		if err != nil || v == "" {
			return fmt.Errorf("must be a regular expression (RE2 syntax): %v", cmp.Or[error](err, fmt.Errorf("empty")))
		}
		s.traffic.canaryRule.HeaderPattern = re
		return nil
	},
	"canary-by-cookie": func(v string, s *nginxSettings) error {
		if !isToken(v) {
			return fmt.Errorf("must be a cookie name")
		}
		s.traffic.canaryRule.Cookie = v
		return nil
	},
	"canary-weight": func(v string, s *nginxSettings) (err error) {
		s.traffic.canaryWeight, err = parseCount(v, 0)
		return err
	},
	"canary-weight-total": func(v string, s *nginxSettings) (err error) {
		s.traffic.canaryTotal, err = parseCount(v, 1)
		return err
	},
	"load-balance": func(v string, s *nginxSettings) error {
		switch v {
		case "round_robin":
			s.traffic.balance.Policy = router.BalanceRoundRobin
		case "ewma":
			s.traffic.balance.Policy = router.BalanceLeastRequest
		default:
			return fmt.Errorf("must be round_robin or ewma")
		}
		return nil
	},
	"upstream-hash-by": func(v string, s *nginxSettings) (err error) {
		s.traffic.balance.Hash, err = parseHashBy(v)
		return err
	},
	"affinity": func(v string, s *nginxSettings) error {
		if v != "cookie" {
			return fmt.Errorf("must be cookie")
		}
		s.traffic.affinity = &router.Affinity{Cookie: "INGRESSCOOKIE"}
		return nil
	},
	"affinity-canary-behavior": func(v string, s *nginxSettings) error {
		if v != "sticky" && v != "legacy" {
			return fmt.Errorf("must be sticky or legacy")
		}
		s.traffic.canaryLegacy = v == "legacy"
		return nil
	},
	// The session cookie's annotations shape affinity's: settleAffinity.
	"affinity-mode":                            func(v string, s *nginxSettings) error { return nil },
	"session-cookie-name":                      func(v string, s *nginxSettings) error { return nil },
	"session-cookie-path":                      func(v string, s *nginxSettings) error { return nil },
	"session-cookie-domain":                    func(v string, s *nginxSettings) error { return nil },
	"session-cookie-samesite":                  func(v string, s *nginxSettings) error { return nil },
	"session-cookie-expires":                   func(v string, s *nginxSettings) error { return nil },
	"session-cookie-max-age":                   func(v string, s *nginxSettings) error { return nil },
	"session-cookie-secure":                    func(v string, s *nginxSettings) error { return nil },
	"session-cookie-change-on-failure":         func(v string, s *nginxSettings) error { return nil },
	"session-cookie-partitioned":               func(v string, s *nginxSettings) error { return nil },
	"session-cookie-conditional-samesite-none": func(v string, s *nginxSettings) error { return nil },
	"proxy-next-upstream": func(v string, s *nginxSettings) (err error) {
		s.traffic.retry, err = parseNextUpstream(v)
		s.traffic.nextUpstreamOff = err == nil && s.traffic.retry == nil
		return err
	},
	"proxy-next-upstream-timeout": func(v string, s *nginxSettings) error {
		// Whole seconds, as nginx reads a bare number; 0 is nginx's
		// default, no bound.
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || time.Duration(n)*time.Second > maxNginxTimeout {
			return fmt.Errorf("must be a number of seconds from 0 (no limit) to %d", int(maxNginxTimeout/time.Second))
		}
		s.traffic.nextUpstreamBudget = time.Duration(n) * time.Second
		return nil
	},
	// Read with proxy-next-upstream: settleNextUpstream.
	"proxy-next-upstream-tries": func(v string, s *nginxSettings) error {
		if v == "0" {
			return fmt.Errorf("0 (no limit in nginx) is not supported: hostgate tries at most 101 times")
		}
		_, err := parseCount(v, 1)
		return err
	},
	"enable-access-log": func(v string, s *nginxSettings) error {
		on, err := parseNginxBool(v)
		s.traffic.noAccessLog = err == nil && !on
		return err
	},
}

// parseCount reads a whole number from least to 1,000,000.
func parseCount(v string, least int) (int32, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < least || n > 1_000_000 {
		return 0, fmt.Errorf("must be a whole number from %d to 1000000", least)
	}
	return int32(n), nil
}

// nginxHashVariables are the nginx variables upstream-hash-by may use.
var nginxHashVariables = map[string]router.HashSource{
	"request_uri": router.HashRequestURI, "uri": router.HashPath, "document_uri": router.HashPath,
	"host": router.HashHost, "remote_addr": router.HashClient, "binary_remote_addr": router.HashClient,
}

// parseHashBy reads an nginx string of text and variables: those of
// nginxHashVariables and $http_<header>, $cookie_<name>, $arg_<name>,
// each optionally written ${name}.
func parseHashBy(v string) ([]router.HashPart, error) {
	if v == "" || len(v) > 1024 || strings.ContainsFunc(v, isControl) {
		return nil, fmt.Errorf("must be 1 to 1024 characters without control characters")
	}
	var parts []router.HashPart
	text := func(s string) {
		if s != "" {
			parts = append(parts, router.HashPart{Source: router.HashText, Name: s})
		}
	}
	for v != "" {
		i := strings.IndexByte(v, '$')
		if i < 0 {
			text(v)
			break
		}
		text(v[:i])
		v = v[i+1:]
		var name string
		if rest, ok := strings.CutPrefix(v, "{"); ok {
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				return nil, fmt.Errorf("\"${\" without \"}\"")
			}
			name, v = rest[:end], rest[end+1:]
		} else {
			end := strings.IndexFunc(v, func(r rune) bool {
				return !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
			})
			if end < 0 {
				end = len(v)
			}
			name, v = v[:end], v[end:]
		}
		part, err := nginxHashVariable(name)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part)
	}
	return parts, nil
}

func nginxHashVariable(name string) (router.HashPart, error) {
	if source, ok := nginxHashVariables[name]; ok {
		return router.HashPart{Source: source}, nil
	}
	for prefix, source := range map[string]router.HashSource{"http_": router.HashHeader, "cookie_": router.HashCookie, "arg_": router.HashQuery} {
		if rest, ok := strings.CutPrefix(name, prefix); ok && rest != "" {
			if source == router.HashHeader {
				// nginx's $http_x_user is the header X-User.
				rest = textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(rest, "_", "-"))
			}
			return router.HashPart{Source: source, Name: rest}, nil
		}
	}
	return router.HashPart{}, fmt.Errorf("$%s: hostgate hashes on $request_uri, $uri, $host, $remote_addr, $http_<header>, $cookie_<name> and $arg_<name> only", name)
}

// nginxRetryCodes are the http_<code> conditions of proxy-next-upstream.
var nginxRetryCodes = map[string]int{"http_500": 500, "http_502": 502, "http_503": 503, "http_504": 504, "http_403": 403, "http_404": 404, "http_429": 429}

// parseNextUpstream reads proxy-next-upstream's conditions; "off" is no
// policy (nil). A failure to connect or to get an answer is retried
// whenever there is a policy (proxy/retry.go), so error, timeout and
// invalid_header add nothing to the codes.
func parseNextUpstream(v string) (*router.Retry, error) {
	fields := strings.Fields(v)
	if len(fields) == 0 {
		return nil, fmt.Errorf("must list conditions or be off")
	}
	r := &router.Retry{Attempts: 2}
	for _, f := range fields {
		switch {
		case f == "off" && len(fields) == 1:
			return nil, nil
		case f == "error" || f == "timeout" || f == "invalid_header" || f == "non_idempotent":
		case nginxRetryCodes[f] != 0:
			r.Codes = append(r.Codes, nginxRetryCodes[f])
		default:
			return nil, fmt.Errorf("%q: must be error, timeout, invalid_header, http_500, http_502, http_503, http_504, http_403, http_404, http_429, non_idempotent or off alone", f)
		}
	}
	slices.Sort(r.Codes)
	r.Codes = slices.Compact(r.Codes)
	return r, nil
}

// nextUpstreamReason says where hostgate's retries differ from what the
// conditions of proxy-next-upstream ask, "" where they do not.
func nextUpstreamReason(v string) string {
	fields := strings.Fields(v)
	var reasons []string
	if !slices.Contains(fields, "error") || !slices.Contains(fields, "timeout") {
		reasons = append(reasons, "failures to connect or to get an answer are retried too")
	}
	if slices.Contains(fields, "non_idempotent") {
		reasons = append(reasons, "a request whose body went out is never sent twice")
	}
	return strings.Join(reasons, "; ")
}

// nginxCanaryAnnotation reports whether a canary Ingress's backend keeps
// the annotation name; the main Ingress's others apply (ingress-nginx's
// canary documentation).
func nginxCanaryAnnotation(name string) bool {
	return strings.HasPrefix(name, "canary") || isAffinityAnnotation(name) ||
		slices.Contains([]string{"affinity-canary-behavior", "load-balance", "upstream-hash-by"}, name)
}

// isAffinityAnnotation reports whether name shapes session affinity.
func isAffinityAnnotation(name string) bool {
	return name == "affinity" || name == "affinity-mode" || strings.HasPrefix(name, "session-cookie-")
}

// settleTraffic says which traffic annotations lose to others or lack the
// one they shape, and shapes affinity's cookie and the retry policy.
func (s *nginxSettings) settleTraffic(outcomes []AnnotationOutcome) {
	t := &s.traffic
	for _, o := range outcomes {
		name := strings.TrimPrefix(o.Annotation, NginxAnnotationPrefix)
		if o.Outcome != Honoured {
			continue
		}
		switch {
		case name == "affinity-canary-behavior" && !t.canary:
			setOutcome(outcomes, name, Ignored, `only a canary Ingress's counts, without canary: "true" here`)
		case t.canary && !t.canaryLegacy && isAffinityAnnotation(name):
			setOutcome(outcomes, name, Ignored, "affinity-canary-behavior sticky (the default): the canary takes the main Ingress's session affinity; legacy keeps the canary's own")
		case t.canary && !nginxCanaryAnnotation(name):
			setOutcome(outcomes, name, Ignored, "on a canary Ingress: the main Ingress's annotations apply to its paths")
		case name != "canary" && strings.HasPrefix(name, "canary") && !t.canary:
			setOutcome(outcomes, name, Ignored, `without canary: "true"`)
		case (name == "canary-by-header-value" || name == "canary-by-header-pattern") && t.canaryRule.Header == "":
			setOutcome(outcomes, name, Ignored, "without canary-by-header")
		case name == "canary-by-header-pattern" && t.canaryRule.HeaderValue != "":
			setOutcome(outcomes, name, Ignored, "canary-by-header-value takes precedence")
			t.canaryRule.HeaderPattern = nil
		case name == "canary-weight-total" && t.canaryTotal < 100:
			setOutcome(outcomes, name, Ignored, "ingress-nginx's balancer counts a total below 100 as 100")
		case (name == "affinity-mode" || strings.HasPrefix(name, "session-cookie-")) && t.affinity == nil:
			setOutcome(outcomes, name, Ignored, "without affinity: cookie")
		case (name == "affinity-mode" || strings.HasPrefix(name, "session-cookie-")):
			if err := setAffinity(t.affinity, name, o.Value); err != nil {
				setOutcome(outcomes, name, Invalid, err.Error())
			}
		case name == "upstream-hash-by" && t.affinity != nil:
			setOutcome(outcomes, name, Ignored, "affinity takes precedence")
		case name == "load-balance" && (t.affinity != nil || len(t.balance.Hash) > 0):
			setOutcome(outcomes, name, Ignored, "affinity or upstream-hash-by takes precedence")
			t.balance.Policy = router.BalanceDefault
		case name == "load-balance" && o.Value == "ewma":
			setOutcome(outcomes, name, Honoured, "as least-request (the less loaded of two endpoints drawn at random): hostgate keeps no latency averages")
		case name == "proxy-next-upstream" && t.retry != nil:
			if reason := nextUpstreamReason(o.Value); reason != "" {
				setOutcome(outcomes, name, Honoured, reason)
			}
		case (name == "proxy-next-upstream-tries" || name == "proxy-next-upstream-timeout") && t.nextUpstreamOff:
			setOutcome(outcomes, name, Ignored, "proxy-next-upstream is off")
			t.nextUpstreamBudget = 0
		case name == "proxy-next-upstream-tries":
			tries, _ := parseCount(o.Value, 1)
			if t.retry == nil {
				t.retry = &router.Retry{}
			}
			t.retry.Attempts = int(min(tries-1, 100))
		}
	}
	if t.canaryTotal < 100 {
		t.canaryTotal = 100
	}
	if a := t.affinity; a != nil && a.ConditionalSameSiteNone && a.SameSite != "None" {
		a.ConditionalSameSiteNone = false
		setOutcome(outcomes, "session-cookie-conditional-samesite-none", Ignored, "without session-cookie-samesite: None")
	}
	if t.affinity != nil {
		t.balance.Affinity = t.affinity
		t.balance.Hash = nil
	}
	if t.nextUpstreamBudget > 0 {
		// Without proxy-next-upstream the budget still bounds the moves
		// to another endpoint after a failed connect, which nginx's
		// default "error timeout" makes too.
		if t.retry == nil {
			t.retry = &router.Retry{}
		}
		t.retry.Budget = t.nextUpstreamBudget
	}
	if t.retry != nil && t.retry.Attempts == 0 && t.retry.Budget == 0 {
		t.retry = nil
	}
}

// setAffinity applies one affinity-mode or session-cookie-* annotation.
func setAffinity(a *router.Affinity, name, value string) error {
	var err error
	switch name {
	case "affinity-mode":
		switch value {
		case "balanced":
		case "persistent":
			a.Persistent = true
		default:
			return fmt.Errorf("must be balanced or persistent")
		}
	case "session-cookie-name":
		if !isToken(value) {
			return fmt.Errorf("must be a cookie name")
		}
		a.Cookie = value
	case "session-cookie-path":
		if !strings.HasPrefix(value, "/") || checkPath(value) != nil || strings.Contains(value, ";") {
			return fmt.Errorf("must be a path that starts with \"/\", without ';'")
		}
		a.Path = value
	case "session-cookie-domain":
		if err := checkHostname(strings.TrimPrefix(value, ".")); err != nil {
			return err
		}
		a.Domain = value
	case "session-cookie-samesite":
		i := slices.IndexFunc([]string{"None", "Lax", "Strict"}, func(s string) bool { return strings.EqualFold(s, value) })
		if i < 0 {
			return fmt.Errorf("must be None, Lax or Strict")
		}
		a.SameSite = []string{"None", "Lax", "Strict"}[i]
	case "session-cookie-expires", "session-cookie-max-age":
		seconds, perr := parseCount(value, 1)
		if perr != nil {
			return fmt.Errorf("must be a number of seconds from 1 to 1000000")
		}
		if name == "session-cookie-expires" {
			a.Expires = time.Duration(seconds) * time.Second
		} else {
			a.MaxAge = time.Duration(seconds) * time.Second
		}
	case "session-cookie-secure":
		var secure bool
		secure, err = parseNginxBool(value)
		a.Secure = &secure
	case "session-cookie-change-on-failure":
		a.ChangeOnFailure, err = parseNginxBool(value)
	case "session-cookie-partitioned":
		a.Partitioned, err = parseNginxBool(value)
	case "session-cookie-conditional-samesite-none":
		a.ConditionalSameSiteNone, err = parseNginxBool(value)
	}
	return err
}

// isToken reports whether v is a non-empty HTTP token, as header and
// cookie names are.
func isToken(v string) bool {
	return v != "" && len(v) <= 256 && !strings.ContainsFunc(v, func(r rune) bool { return !isTokenRune(r) })
}

// trafficRule puts the Ingress's retry policy, access log choice and
// balance on rule, whose path is path ("/" where the path is an
// expression or absent): affinity's cookie is for that path unless
// session-cookie-path says otherwise.
func (s *nginxSettings) trafficRule(rule *router.Rule, path string) {
	t := &s.traffic
	rule.Retry, rule.NoAccessLog = t.retry, t.noAccessLog
	if b := t.balanceFor(path); b != nil {
		for i := range rule.Backends {
			if !rule.Backends[i].Invalid {
				rule.Backends[i].Balance = b
			}
		}
	}
}

// balanceFor is the Balance of backends of path, nil for proxy/'s own.
func (t *nginxTraffic) balanceFor(path string) *router.Balance {
	// Made only for Ingresses that ask: translation asks for every path.
	if t.balance.Policy == router.BalanceDefault && t.balance.Hash == nil && t.balance.Affinity == nil {
		return nil
	}
	b := t.balance
	if b.Affinity != nil && b.Affinity.Path == "" {
		a := *b.Affinity
		a.Path = path
		b.Affinity = &a
	}
	return &b
}

// nginxCanary is a canary Ingress's path, as its main Ingresses read it.
type nginxCanary struct {
	ing      *networkingv1.Ingress
	backend  *networkingv1.IngressBackend
	settings *nginxSettings
	// main is the backend (serviceKey) of a main Ingress of the path,
	// "" when none serves it.
	main string
}

// canaryPath is where in its host a canary's path joins a main Ingress's:
// the same path and pathType (ingress-nginx's mergeAlternativeBackends).
type canaryPath struct {
	path     string
	pathType networkingv1.PathType
}

func pathOf(p networkingv1.HTTPIngressPath) canaryPath {
	pathType := networkingv1.PathTypeImplementationSpecific
	if p.PathType != nil {
		pathType = *p.PathType
	}
	return canaryPath{p.Path, pathType}
}

// isNginxCanary reports whether ing is a canary Ingress. It is asked of
// every Ingress on every translation, so an Ingress without the
// annotation costs no parse (and no error allocated).
func isNginxCanary(ing *networkingv1.Ingress) bool {
	v, ok := ing.Annotations[NginxAnnotationPrefix+"canary"]
	if !ok {
		return false
	}
	on, err := strconv.ParseBool(v)
	return err == nil && on
}

// addCanaries records the paths of the canary Ingresses among ingresses
// that ours says are served: for each host and path, the oldest canary's.
func (h nginxHosts) addCanaries(ingresses []*networkingv1.Ingress, ours func(*networkingv1.Ingress) bool) {
	for _, ing := range ingresses {
		if !ours(ing) || !isNginxCanary(ing) {
			continue
		}
		settings, _ := parseNginxAnnotations(ing)
		for _, rule := range ing.Spec.Rules {
			if rule.HTTP == nil {
				continue
			}
			host := strings.ToLower(rule.Host)
			facts := h.facts[host]
			if facts.canaries == nil {
				facts.canaries = map[canaryPath]*nginxCanary{}
				h.facts[host] = facts
			}
			for i := range rule.HTTP.Paths {
				p := &rule.HTTP.Paths[i]
				if c := facts.canaries[pathOf(*p)]; c != nil && !ingressOlder(ing, c.ing) {
					continue
				}
				facts.canaries[pathOf(*p)] = &nginxCanary{ing: ing, backend: &p.Backend, settings: &settings}
			}
		}
	}
}

// joinCanaries tells the canaries of the paths of rule, a rule of the
// main Ingress ing, that a main Ingress serves them.
func (h nginxHosts) joinCanaries(ing *networkingv1.Ingress, rule *networkingv1.IngressRule) {
	canaries := h.facts[strings.ToLower(rule.Host)].canaries
	if canaries == nil || rule.HTTP == nil {
		return
	}
	for i := range rule.HTTP.Paths {
		if c := canaries[pathOf(rule.HTTP.Paths[i])]; c != nil && c.main == "" {
			c.main = serviceKey(ing.Namespace, &rule.HTTP.Paths[i].Backend)
		}
	}
}

// serviceKey names the Service port of an Ingress backend.
func serviceKey(namespace string, b *networkingv1.IngressBackend) string {
	if b.Service == nil {
		return ""
	}
	return namespace + "/" + b.Service.Name + ":" + ingressPortString(b.Service.Port)
}

// ingressOlder reports whether a was created before b, namespace and name
// breaking ties.
func ingressOlder(a, b *networkingv1.Ingress) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// canaryContext appends to b what of the canaries the routes of ing
// read: the identity and version of the canary of each of its paths.
func (h nginxHosts) canaryContext(b []byte, ing *networkingv1.Ingress) []byte {
	for _, rule := range ing.Spec.Rules {
		canaries := h.facts[strings.ToLower(rule.Host)].canaries
		if canaries == nil || rule.HTTP == nil {
			continue
		}
		for _, p := range rule.HTTP.Paths {
			if c := canaries[pathOf(p)]; c != nil {
				b = fmt.Appendf(b, "canary %p %s/%s@%s;", c.ing, c.ing.Namespace, c.ing.Name, c.ing.ResourceVersion)
			}
		}
	}
	return b
}

// mergeCanary gives rule, the main Ingress's rule of a path, the backend
// of its canary, if it has one that resolves to another backend. The
// canary's backend speaks the main Ingress's backend protocol and is
// balanced as its own annotations say.
func (t *translator) mergeCanary(rule *router.Rule, c *nginxCanary, main *nginxSettings, path string) {
	if len(rule.Backends) != 1 || rule.Backends[0].Invalid {
		return
	}
	ref, err := t.ingressBackend(c.ing.Namespace, c.backend)
	if err != nil || ref.Name == rule.Backends[0].Name || ref.Invalid {
		return // said in the canary's report
	}
	main.applyBackendProtocol(&ref)
	ct := &c.settings.traffic
	primary := rule.Backends[0]
	ref.Canary, ref.Weight, ref.Balance = true, min(ct.canaryWeight, ct.canaryTotal), canaryBalance(ct.balanceFor(path), primary.Balance, ct.canaryLegacy)
	primary.Weight = ct.canaryTotal - ref.Weight
	rule.Backends = []router.BackendRef{primary, ref}
	canary := ct.canaryRule
	rule.Canary = &canary
}

// canaryBalance is the Balance of a canary's backend: its own balancing,
// with the main backend's session affinity (ingress-nginx copies it to
// the canary unless affinity-canary-behavior is legacy, which keeps the
// canary's own). A canary's affinity marks its cookies, so that a client
// with a canary session is told from one with a main session and stays.
func canaryBalance(own, main *router.Balance, legacy bool) *router.Balance {
	var b router.Balance
	if own != nil {
		b = *own
	}
	if !legacy {
		b.Affinity = nil
		if main != nil {
			b.Affinity = main.Affinity
		}
	}
	if b.Affinity != nil {
		a := *b.Affinity
		a.Canary = true
		b.Affinity, b.Hash = &a, nil
	}
	if b.Policy == router.BalanceDefault && b.Hash == nil && b.Affinity == nil {
		return nil
	}
	return &b
}

// applyBackendProtocol gives ref the backend protocol of the annotations,
// unless a BackendTLSPolicy of the Service, which says more, gave it one.
func (s *nginxSettings) applyBackendProtocol(ref *router.BackendRef) {
	if s.backendProtocol != "" && ref.TLS == nil {
		ref.Protocol, ref.TLS = s.backendProtocol, s.backendTLS
		ref.Invalid = ref.Invalid || ref.TLS == nil && (ref.Protocol == "https" || ref.Protocol == "h2")
	}
}

// canaryProblem says why the path p of host of the canary Ingress ing
// joins no main Ingress, "" when it joins one.
func (h nginxHosts) canaryProblem(ing *networkingv1.Ingress, host string, p networkingv1.HTTPIngressPath) string {
	host = strings.ToLower(host)
	c := h.facts[host].canaries[pathOf(p)]
	switch {
	case c == nil:
		return "ignored: not a canary Ingress"
	case c.ing != ing:
		return fmt.Sprintf("ignored: canary Ingress %s/%s is older", c.ing.Namespace, c.ing.Name)
	case c.main == "":
		return fmt.Sprintf("ignored: no Ingress that is not a canary serves host %q path %q (%s)", host, p.Path, pathOf(p).pathType)
	case c.main == serviceKey(ing.Namespace, &p.Backend):
		return "ignored: the main Ingress has the same backend"
	}
	return ""
}

// canaryReport is the report of a canary Ingress: its annotations, and
// where it joins no main Ingress, as ingress-nginx ignores it there.
func (t *translator) canaryReport(ing *networkingv1.Ingress, hosts nginxHosts) IngressReport {
	report := IngressReport{Object: ing}
	_, report.Annotations = parseNginxAnnotations(ing)
	for _, o := range report.Annotations {
		if o.Outcome != Honoured {
			report.Problems = append(report.Problems, o.String())
		}
	}
	if ing.Spec.DefaultBackend != nil {
		report.Problems = append(report.Problems, "spec.defaultBackend: a canary Ingress's default backend is not served")
	}
	for i, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for j, p := range rule.HTTP.Paths {
			field := fmt.Sprintf("spec.rules[%d].http.paths[%d]", i, j)
			if _, err := t.ingressBackend(ing.Namespace, &p.Backend); err != nil {
				report.Problems = append(report.Problems, fmt.Sprintf("%s.backend: %v", field, err))
			} else if problem := hosts.canaryProblem(ing, rule.Host, p); problem != "" {
				report.Problems = append(report.Problems, field+": "+problem)
			}
		}
	}
	return report
}
