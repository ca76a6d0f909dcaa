package router

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Limits on what a route may carry. They keep one object from making the
// table or a lookup expensive, and are far above what real routes use.
const (
	maxHostnameLen = 253
	maxPathLen     = 1024
	maxValueLen    = 4096
	maxWeight      = 1_000_000
	// maxRetryAttempts bounds how many times one request can reach a
	// backend: each retry is another request the backend serves.
	maxRetryAttempts = 100
	// maxRetryBackoff keeps the waits, which grow from the backoff, far
	// from overflowing a time.Duration.
	maxRetryBackoff = time.Hour
	// maxQuoted is how much of a refused value an error message repeats.
	maxQuoted = 100
)

// validateRoute checks what Compile relies on. The error names the field as
// the route's object would (rules[1].matches[0].path.value).
func validateRoute(r *Route) error {
	switch r.ID.Kind {
	case KindIngress, KindHTTPRoute, KindGRPCRoute:
	default:
		return fmt.Errorf("kind %s: not a route kind", quote(r.ID.Kind))
	}
	if r.ID.Name == "" {
		return errors.New("name: must not be empty")
	}
	if r.Listener != "" {
		if err := validateHostname(r.Listener); err != nil {
			return fmt.Errorf("listener hostname %s: %w", quote(r.Listener), err)
		}
	}
	for i, h := range r.Hostnames {
		if err := validateHostname(h); err != nil {
			return fmt.Errorf("hostnames[%d] %s: %w", i, quote(h), err)
		}
	}
	for ri := range r.Rules {
		if err := validateRule(r.ID.Kind, &r.Rules[ri]); err != nil {
			return fmt.Errorf("rules[%d].%w", ri, err)
		}
	}
	return nil
}

func validateHostname(h string) error {
	if h == "" {
		return errors.New("must not be empty")
	}
	if len(h) > maxHostnameLen {
		return fmt.Errorf("longer than %d characters", maxHostnameLen)
	}
	name := strings.TrimPrefix(h, "*.")
	if looksNumeric(name) && net.ParseIP(name) != nil {
		return errors.New("must be a DNS name, not an IP address")
	}
	for label := range strings.SplitSeq(name, ".") {
		if err := validateLabel(label); err != nil {
			return err
		}
	}
	return nil
}

// looksNumeric is a cheap filter before net.ParseIP: an IPv4 address has
// only digits and dots (IPv6 fails label validation on its ':').
func looksNumeric(name string) bool {
	return strings.Trim(name, "0123456789.") == ""
}

func validateLabel(label string) error {
	if label == "" || len(label) > 63 {
		return errors.New("each label must have 1 to 63 characters")
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '-' && i > 0 && i < len(label)-1:
		case c == '*':
			return errors.New(`a wildcard is allowed only as the whole first label ("*.example.com")`)
		case 'A' <= c && c <= 'Z':
			return errors.New("must be lower case")
		default:
			return fmt.Errorf("invalid character %q", c)
		}
	}
	return nil
}

func validateRule(kind Kind, rule *Rule) error {
	// A modifier that replaces what the match matched needs matches of
	// its kind.
	var needs *PathModifier
	for fi := range rule.Filters {
		if err := validateFilter(&rule.Filters[fi]); err != nil {
			return fmt.Errorf("filters[%d].%w", fi, err)
		}
		if a := rule.Filters[fi].Access; a != nil && a.SatisfyAny && !slices.ContainsFunc(rule.Filters[fi+1:], func(f Filter) bool { return f.Type == FilterBasicAuth }) {
			return fmt.Errorf("filters[%d].access.satisfyAny: needs a BasicAuth filter after it", fi)
		}
		needs = cmp.Or(needs, matchDependentPath(&rule.Filters[fi]))
	}
	for bi := range rule.Backends {
		for fi := range rule.Backends[bi].Filters {
			needs = cmp.Or(needs, matchDependentPath(&rule.Backends[bi].Filters[fi]))
		}
	}
	if needs != nil && len(rule.Matches) == 0 && needs.Type == ReplaceRegexCaptures {
		return errors.New("matches: ReplaceRegexCaptures needs a PathRegularExpression match")
	}
	for mi := range rule.Matches {
		m := &rule.Matches[mi]
		if err := validateMatch(kind, m); err != nil {
			return fmt.Errorf("matches[%d].%w", mi, err)
		}
		if needs != nil && m.Path.Type != matchTypeFor(needs.Type) {
			return fmt.Errorf("matches[%d].path.type: %s needs a %s match, not %s", mi, needs.Type, matchTypeFor(needs.Type), m.Path.Type)
		}
	}
	for bi := range rule.Backends {
		if err := validateBackend(&rule.Backends[bi]); err != nil {
			return fmt.Errorf("backendRefs[%d].%w", bi, err)
		}
	}
	t := rule.Timeouts
	if t.Request < 0 || t.BackendRequest < 0 || t.Connect < 0 || t.BackendRead < 0 || t.BackendSend < 0 {
		return errors.New("timeouts: must not be negative")
	}
	if t.Request > 0 && t.BackendRequest > t.Request {
		return fmt.Errorf("timeouts.backendRequest: %s is longer than timeouts.request %s", t.BackendRequest, t.Request)
	}
	if rule.Retry != nil {
		if err := validateRetry(rule.Retry); err != nil {
			return fmt.Errorf("retry.%w", err)
		}
	}
	if rule.MaxRequestBody < 0 {
		return errors.New("maxRequestBody: must not be negative")
	}
	if r := rule.ResponseRate; r != nil && (r.BytesPerSecond <= 0 || r.After < 0) {
		return errors.New("responseRate: bytesPerSecond must be positive and after not negative")
	}
	if f := rule.Fallback; f != nil {
		if err := validateBackend(&f.Backend); err != nil {
			return fmt.Errorf("fallback.backend.%w", err)
		}
		if i := slices.IndexFunc(f.Codes, func(c int) bool { return c < 400 || c > 599 }); i >= 0 {
			return fmt.Errorf("fallback.codes[%d]: %d is not a status from 400 to 599", i, f.Codes[i])
		}
		if err := validateHeaderModifier(&HeaderModifier{Set: f.Headers}); err != nil {
			return fmt.Errorf("fallback.headers: %w", err)
		}
	}
	if rule.Canary != nil {
		return validateCanary(rule)
	}
	return nil
}

func validateRetry(r *Retry) error {
	for i, code := range r.Codes {
		if code < 400 || code > 599 {
			return fmt.Errorf("codes[%d] %d: must be 400 to 599", i, code)
		}
	}
	if r.Attempts < 0 || r.Attempts > maxRetryAttempts {
		return fmt.Errorf("attempts %d: must be 0 to %d", r.Attempts, maxRetryAttempts)
	}
	if r.Backoff < 0 || r.Backoff > maxRetryBackoff {
		return fmt.Errorf("backoff %s: must be 0 to %s", r.Backoff, maxRetryBackoff)
	}
	if r.Budget < 0 {
		return fmt.Errorf("budget %s: must not be negative", r.Budget)
	}
	return nil
}

// matchDependentPath is f's path modifier if it replaces what a match
// matched, nil otherwise.
func matchDependentPath(f *Filter) *PathModifier {
	var p *PathModifier
	switch {
	case f.Redirect != nil:
		p = f.Redirect.Path
	case f.Rewrite != nil:
		p = f.Rewrite.Path
	}
	if p == nil || p.Type == ReplaceFullPath {
		return nil
	}
	return p
}

// matchTypeFor is the path match a modifier of type t depends on.
func matchTypeFor(t PathModifierType) PathMatchType {
	if t == ReplaceRegexCaptures {
		return PathRegularExpression
	}
	return PathPrefix
}

func validateMatch(kind Kind, m *Match) error {
	if kind == KindGRPCRoute {
		if m.GRPC == nil {
			return errors.New("method: a GRPCRoute match needs a gRPC service/method match")
		}
		if m.Path != (PathMatch{}) || m.Method != "" || len(m.Query) > 0 {
			return errors.New("path: a GRPCRoute match takes no path, method or query conditions")
		}
		if err := validateGRPC(m.GRPC); err != nil {
			return fmt.Errorf("method.%w", err)
		}
	} else {
		if m.GRPC != nil {
			return fmt.Errorf("method: a gRPC match is only valid in a %s", KindGRPCRoute)
		}
		if err := validatePath(m.Path); err != nil {
			return fmt.Errorf("path.value %s: %w", quote(m.Path.Value), err)
		}
		if m.Method != "" && !isToken(m.Method) {
			return fmt.Errorf("method %s: not an HTTP method token", quote(m.Method))
		}
	}
	for i, h := range m.Headers {
		if !isToken(h.Name) {
			return fmt.Errorf("headers[%d].name %s: not an HTTP header name", i, quote(h.Name))
		}
		if err := validateValue(h.Value); err != nil {
			return fmt.Errorf("headers[%d].value: %w", i, err)
		}
	}
	for i, q := range m.Query {
		if q.Name == "" || len(q.Name) > maxValueLen || hasControl(q.Name) {
			return fmt.Errorf("queryParams[%d].name %s: must be 1 to %d printable characters", i, quote(q.Name), maxValueLen)
		}
		if err := validateValue(q.Value); err != nil {
			return fmt.Errorf("queryParams[%d].value: %w", i, err)
		}
	}
	return nil
}

func validatePath(p PathMatch) error {
	switch p.Type {
	case PathPrefix, PathExact:
		if p.Value == "" && p.Type == PathPrefix {
			return nil
		}
		if !strings.HasPrefix(p.Value, "/") {
			return errors.New(`must start with "/"`)
		}
		if len(p.Value) > maxPathLen {
			return fmt.Errorf("longer than %d characters", maxPathLen)
		}
		if strings.ContainsAny(p.Value, " ?#") || hasControl(p.Value) {
			return errors.New("must not contain spaces, control characters, '?' or '#'")
		}
	case PathRegularExpression:
		if p.Value == "" || len(p.Value) > maxPathLen {
			return fmt.Errorf("a regular expression must have 1 to %d characters", maxPathLen)
		}
	default:
		return fmt.Errorf("unknown path match type %d", p.Type)
	}
	return nil
}

func validateGRPC(g *GRPCMatch) error {
	if g.Type == MatchExact {
		if strings.Contains(g.Service, "/") || strings.Contains(g.Method, "/") || hasControl(g.Service+g.Method) {
			return errors.New(`service and method must not contain "/" or control characters`)
		}
	}
	if len(g.Service) > maxValueLen || len(g.Method) > maxValueLen {
		return fmt.Errorf("service and method must be at most %d characters", maxValueLen)
	}
	return nil
}

func validateValue(v string) error {
	if len(v) > maxValueLen {
		return fmt.Errorf("longer than %d characters", maxValueLen)
	}
	if hasControl(v) {
		return errors.New("must not contain control characters")
	}
	return nil
}

func validateFilter(f *Filter) error {
	var field string
	var err error
	missing := false
	switch f.Type {
	case FilterRequestHeaderModifier:
		missing = f.RequestHeaders == nil
		if !missing {
			field, err = "requestHeaderModifier", validateHeaderModifier(f.RequestHeaders)
		}
	case FilterResponseHeaderModifier:
		missing = f.ResponseHeaders == nil
		if !missing {
			field, err = "responseHeaderModifier", validateHeaderModifier(f.ResponseHeaders)
		}
	case FilterRequestRedirect:
		missing = f.Redirect == nil
		if !missing {
			field, err = "requestRedirect", validateRedirect(f.Redirect)
		}
	case FilterURLRewrite:
		missing = f.Rewrite == nil
		if !missing {
			field, err = "urlRewrite", validateRewrite(f.Rewrite)
		}
	case FilterRequestMirror:
		missing = f.Mirror == nil
		if !missing {
			field, err = "requestMirror", validateMirror(f.Mirror)
		}
	case FilterCORS:
		missing = f.CORS == nil
		if !missing {
			field, err = "cors", validateCORS(f.CORS)
		}
	case FilterAccess:
		missing = f.Access == nil
		if !missing {
			field, err = "access", validateAccess(f.Access)
		}
	case FilterBasicAuth:
		missing = f.BasicAuth == nil
		if !missing {
			field, err = "basicAuth", validateBasicAuth(f.BasicAuth)
		}
	case FilterRateLimit:
		missing = f.RateLimit == nil
		if !missing {
			field, err = "rateLimit", validateRateLimit(f.RateLimit)
		}
	case FilterExternalAuth:
		missing = f.ExternalAuth == nil
		if !missing {
			field, err = "externalAuth", validateExternalAuth(f.ExternalAuth)
		}
	case FilterClientCertificate:
		missing = f.ClientCert == nil
		if !missing {
			field, err = "clientCertificate", validateClientCertAuth(f.ClientCert)
		}
	case FilterResponseRewrite:
		missing = f.ResponseRewrite == nil
		if !missing {
			field, err = "responseRewrite", validateResponseRewrite(f.ResponseRewrite)
		}
	default:
		return fmt.Errorf("type: unknown filter type %d", f.Type)
	}
	if missing {
		return fmt.Errorf("type: %s filter without its configuration", f.Type)
	}
	if err != nil {
		return fmt.Errorf("%s.%w", field, err)
	}
	return nil
}

func validateHeaderModifier(m *HeaderModifier) error {
	for _, list := range []struct {
		field   string
		headers []Header
	}{{"set", m.Set}, {"add", m.Add}} {
		for i, h := range list.headers {
			if !isToken(h.Name) {
				return fmt.Errorf("%s[%d].name %s: not an HTTP header name", list.field, i, quote(h.Name))
			}
			if err := validateValue(h.Value); err != nil {
				return fmt.Errorf("%s[%d].value: %w", list.field, i, err)
			}
		}
	}
	for i, name := range m.Remove {
		if !isToken(name) {
			return fmt.Errorf("remove[%d] %s: not an HTTP header name", i, quote(name))
		}
	}
	return nil
}

func validateRedirect(r *Redirect) error {
	switch r.Scheme {
	case "", "http", "https":
	default:
		return fmt.Errorf("scheme %s: must be http or https", quote(r.Scheme))
	}
	if r.Hostname != "" {
		if err := validateDNSName(r.Hostname); err != nil {
			return err
		}
	}
	if r.Port < 0 || r.Port > 65535 {
		return fmt.Errorf("port %d: out of range", r.Port)
	}
	if r.RequestHost && (r.Hostname != "" || r.Port != 0) {
		return errors.New("requestHost: the request's host leaves hostname and port empty")
	}
	if r.Location != "" {
		if r.Scheme != "" || r.Hostname != "" || r.Port != 0 || r.Path != nil {
			return errors.New("location: a whole Location leaves scheme, hostname, port and path empty")
		}
		if len(r.Location) > maxPathLen || hasControl(r.Location) {
			return fmt.Errorf("location %s: must be at most %d characters without control characters", quote(r.Location), maxPathLen)
		}
	}
	switch r.StatusCode {
	case 0, 300, 301, 302, 303, 304, 305, 307, 308:
	default:
		return fmt.Errorf("statusCode %d: must be a redirect status (301, 302, 303, 307 or 308)", r.StatusCode)
	}
	return validatePathModifier(r.Path)
}

func validateRewrite(r *Rewrite) error {
	if r.Hostname != "" {
		if err := validateDNSName(r.Hostname); err != nil {
			return err
		}
	}
	if p := r.Path; p != nil && p.Type == ReplaceRegexCaptures {
		if path, query, ok := strings.Cut(p.Value, "?"); ok {
			// Written as is on the request line: visible ASCII, as a
			// query may have it, and no '#'.
			if len(query) > maxPathLen || strings.ContainsFunc(query, func(c rune) bool { return c <= ' ' || c >= 0x7f || c == '#' }) {
				return fmt.Errorf("path %s: its query must be at most %d characters of visible ASCII without '#'", quote(p.Value), maxPathLen)
			}
			return validatePathModifier(&PathModifier{Type: p.Type, Value: path})
		}
	}
	return validatePathModifier(r.Path)
}

func validatePathModifier(p *PathModifier) error {
	if p == nil {
		return nil
	}
	switch p.Type {
	case ReplaceFullPath, ReplacePrefixMatch, ReplaceRegexCaptures:
	default:
		return fmt.Errorf("path.type: unknown path modifier %d", p.Type)
	}
	// A capture may hold the leading "/" itself.
	if p.Value != "" && !strings.HasPrefix(p.Value, "/") && !(p.Type == ReplaceRegexCaptures && strings.HasPrefix(p.Value, "$")) {
		return fmt.Errorf("path %s: must start with \"/\"", quote(p.Value))
	}
	if len(p.Value) > maxPathLen || hasControl(p.Value) || strings.ContainsAny(p.Value, " ?#") {
		return fmt.Errorf("path %s: must be at most %d characters without spaces, control characters, '?' or '#'", quote(p.Value), maxPathLen)
	}
	return nil
}

// validateDNSName accepts a hostname without a wildcard, as sent in Host.
func validateDNSName(h string) error {
	if err := validateHostname(h); err != nil || strings.HasPrefix(h, "*") {
		return fmt.Errorf("hostname %s: not a DNS name", quote(h))
	}
	return nil
}

func validateMirror(m *Mirror) error {
	if err := validateBackend(&m.Backend); err != nil {
		return fmt.Errorf("backendRef.%w", err)
	}
	if m.Numerator < 0 || m.Denominator < 0 || m.Numerator > m.Denominator {
		return fmt.Errorf("fraction %d/%d: needs 0 <= numerator <= denominator", m.Numerator, m.Denominator)
	}
	if m.Numerator > 0 && m.Denominator == 0 {
		return errors.New("fraction: denominator must not be 0")
	}
	if m.Hostname != "" {
		if err := validateDNSName(m.Hostname); err != nil {
			return err
		}
	}
	if m.Path != "" {
		return validatePathModifier(&PathModifier{Type: ReplaceFullPath, Value: m.Path})
	}
	return nil
}

func validateBackend(b *BackendRef) error {
	if b.Name == "" && !b.Invalid {
		return errors.New("name: must not be empty")
	}
	if b.Weight < 0 || b.Weight > maxWeight {
		return fmt.Errorf("weight %d: must be 0 to %d", b.Weight, maxWeight)
	}
	for fi := range b.Filters {
		switch t := b.Filters[fi].Type; t {
		case FilterCORS, FilterAccess, FilterBasicAuth, FilterRateLimit, FilterExternalAuth, FilterResponseRewrite:
			// proxy/ answers these, and asks for authorization, before it
			// picks a backend; it rewrites answers as the rule says.
			return fmt.Errorf("filters[%d].type: a %s filter applies to a whole rule, not to one of its backends", fi, t)
		}
		if err := validateFilter(&b.Filters[fi]); err != nil {
			return fmt.Errorf("filters[%d].%w", fi, err)
		}
	}
	if b.Balance != nil {
		if err := validateBalance(b.Balance); err != nil {
			return fmt.Errorf("balance.%w", err)
		}
	}
	if t := b.TLS; t != nil {
		if b.Protocol != "https" && b.Protocol != "h2" {
			return fmt.Errorf("tls: protocol %q does not use TLS", b.Protocol)
		}
		return validateBackendTLS(t)
	}
	return nil
}

// validateBackendTLS checks a backend's TLS identity, whatever speaks over
// it.
func validateBackendTLS(t *BackendTLS) error {
	switch {
	case t.ServerName == "" && !t.SkipVerify:
		return errors.New("tls.serverName: must not be empty: it is what the certificate is checked for")
	case t.ClientCertificate != nil && (len(t.ClientCertificate.CertPEM) == 0 || len(t.ClientCertificate.KeyPEM) == 0):
		return fmt.Errorf("tls.clientCertificate %s: needs a certificate and a key", t.ClientCertificate.Name)
	case !knownTLSVersion(t.MinVersion) || !knownTLSVersion(t.MaxVersion) || t.MaxVersion != 0 && t.MinVersion > t.MaxVersion:
		return fmt.Errorf("tls: versions %#x to %#x: must be TLS 1.2 or 1.3, the lower first", t.MinVersion, t.MaxVersion)
	}
	for i, id := range t.CipherSuites {
		if !slices.ContainsFunc(slices.Concat(tls.CipherSuites(), tls.InsecureCipherSuites()), func(c *tls.CipherSuite) bool { return c.ID == id }) {
			return fmt.Errorf("tls.cipherSuites[%d] %#x: not a suite crypto/tls implements", i, id)
		}
	}
	for i, san := range t.SubjectAltNames {
		if (san.Hostname == "") == (san.URI == "") {
			return fmt.Errorf("tls.subjectAltNames[%d]: exactly one of hostname and uri must be set", i)
		}
	}
	return nil
}

// knownTLSVersion reports whether v bounds a backend's TLS versions: 0
// (none) or a version offered to backends.
func knownTLSVersion(v uint16) bool {
	return v == 0 || v == tls.VersionTLS12 || v == tls.VersionTLS13
}

func validateCORS(c *CORS) error {
	for i, o := range c.AllowOrigins {
		// Origins come parsed; one that does not read back the same
		// was not made by ParseOrigin.
		parsed, err := ParseOrigin(o.String())
		if err != nil {
			return fmt.Errorf("allowOrigins[%d] %w", i, err)
		}
		if parsed != o {
			return fmt.Errorf("allowOrigins[%d] %s: not in the form ParseOrigin gives", i, quote(o.String()))
		}
		if o.Scheme == "" && len(c.AllowOrigins) > 1 {
			return fmt.Errorf(`allowOrigins[%d]: "*" must be the only origin`, i)
		}
	}
	for _, list := range []struct {
		field    string
		values   []string
		loneStar bool
	}{{"allowMethods", c.AllowMethods, true}, {"allowHeaders", c.AllowHeaders, true}, {"exposeHeaders", c.ExposeHeaders, false}} {
		for i, v := range list.values {
			switch {
			case v == "*" && list.loneStar && len(list.values) > 1:
				return fmt.Errorf(`%s[%d]: "*" must be the only value`, list.field, i)
			case !isToken(v):
				return fmt.Errorf("%s[%d] %s: not an HTTP token", list.field, i, quote(v))
			}
		}
	}
	if c.MaxAge < 0 {
		return fmt.Errorf("maxAge %s: must not be negative", c.MaxAge)
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token, the syntax of header names
// and methods.
func isToken(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x7f || c <= ' ' || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// quote quotes a value for an error message as %q does, escaping control
// characters, and cuts it after maxQuoted bytes: messages go into status
// conditions, which the API server caps at 32 KiB, and into logs.
func quote[S ~string](s S) string {
	if len(s) > maxQuoted {
		return fmt.Sprintf("%q... (%d bytes)", s[:maxQuoted], len(s))
	}
	return strconv.Quote(string(s))
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return true
		}
	}
	return false
}

func validateResponseRewrite(rw *ResponseRewrite) error {
	if rw.CookieDomain == nil && rw.CookiePath == nil && rw.Redirect == nil {
		return errors.New("needs a replacement")
	}
	for _, r := range rw.replacements() {
		if r.r == nil {
			continue
		}
		if r.r.From == "" {
			return fmt.Errorf("%s.from: must not be empty", r.name)
		}
		// The texts go into header fields, within a cookie's attributes.
		for _, text := range []string{r.r.From, r.r.To} {
			if strings.ContainsFunc(text, func(c rune) bool { return c <= ' ' || c >= 0x7f || c == ';' || c == '"' }) {
				return fmt.Errorf("%s %q: must be printable ASCII without spaces, ';' or '\"'", r.name, text)
			}
		}
	}
	return nil
}
