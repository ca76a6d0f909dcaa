package pipeline

// The per-request pipeline, independent of the HTTP engine.
//
// An engine fills a view from whatever it parsed and asks decide for a
// plan: which rule serves the request, whether it is answered here (no
// route, redirect, CORS preflight, invalid backend, no endpoint) or
// forwarded, and if so to which endpoint set with which path and host.
// Only filters that change the outcome run here; header modifiers, CORS's
// allow fields and mirrors run where the engine holds the headers.
// Nothing here allocates on the forwarding path.

import (
	"crypto/x509"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore"
)

// view is what the pipeline reads of a request.
type view struct {
	router.Request
	// scheme is the client-facing scheme, "http" or "https".
	scheme string
	// port is the listener's port, which a redirect keeps by default.
	port int
	// serverName is the TLS server name (SNI) of the request's
	// connection, and tls the certificates and client validations of its
	// listener, looked up only where the table is Shared.
	serverName string
	tls        *tlsstore.Store
	// client is the real client's address (client.go), for rules on who
	// may do what.
	client netip.Addr
	// guards are the state of the access filters of the table (access.go).
	guards *guards
	// conn (the native engine) or req (net/http) lead to the
	// certificates the client presented in the TLS handshake, read only
	// by rules that check them.
	conn *guard.TrackedConn
	req  *http.Request
}

// action is what a plan does with the request.
type action uint8

const (
	actNotFound action = iota
	actRedirect
	// actPreflight answers a CORS preflight request.
	actPreflight
	actForward
	actInvalidBackend
	actNoEndpoints
	actMisdirected
	// actDenied answers with status, body and, for 401, challenge: an
	// access filter refused the request.
	actDenied
)

// plan is the pipeline's decision.
type plan struct {
	action action
	target *router.Target
	// backend and set are the chosen backend and its endpoints (actForward).
	backend *router.BackendRef
	set     *upstream.Set
	// path and host replace the request's when not empty: the redirect's
	// Location path, or the forwarded request's path and Host.
	path, host string
	// query replaces the forwarded request's query, "" sending none, where
	// rewritesQuery says a rewrite had a query of its own.
	query         string
	rewritesQuery bool
	// redirect is the RequestRedirect filter (actRedirect).
	redirect *router.Redirect
	// cors is the rule's CORS filter, if any, and allowOrigin the
	// Access-Control-Allow-Origin of the answer, "" for an origin it
	// does not allow.
	cors        *router.CORS
	allowOrigin string
	// status, body and challenge (WWW-Authenticate) are the answer of
	// actDenied; charged counts the rule's RateLimit filters that counted
	// the request, for release.
	status          int
	body, challenge string
	charged         uint8
	// granted says an Access filter with SatisfyAny let the client in,
	// so the rule's BasicAuth does not ask for a password.
	granted bool
	// fallback says the request goes to the rule's fallback backend.
	fallback bool
	// authorize says the rule asks an authorization service before
	// forwarding (extauth.go).
	authorize bool
	// clientCert is the rule's check of the client's certificate, whose
	// outcome goes to the backend.
	clientCert *certCheck
	// responseRewrite is the rule's rewrite of its backends' answers.
	responseRewrite *router.ResponseRewrite
	// balancing is how the endpoint is picked where the backend has a
	// Balance (traffic.go), nil where it has none: a pointer, so that
	// requests without pay a word for it.
	balancing *balancing
}

// decide runs the pipeline up to the choice of an endpoint set.
func decide(routes *router.Table, sets *upstream.Sets, v *view) plan {
	var p plan
	if routes == nil {
		return p
	}
	if routes.Misdirected(v.serverName, v.Host) || v.tls.OtherClientValidation(v.serverName, v.Host) {
		p.action = actMisdirected
		return p
	}
	p.target = routes.Lookup(v.Request)
	if p.target == nil {
		return p
	}
	rule := p.target.Rule
	for i := range rule.Filters {
		f := &rule.Filters[i]
		switch f.Type {
		case router.FilterCORS:
			if p.applyCORS(f.CORS, &v.Request) {
				p.action = actPreflight
				return p
			}
		case router.FilterRequestRedirect:
			p.action, p.redirect = actRedirect, f.Redirect
			if f.Redirect.Path != nil {
				p.path = modifyPath(v.Path, p.target, f.Redirect.Path)
			}
			return p
		case router.FilterURLRewrite:
			p.rewrite(v, f.Rewrite)
		case router.FilterAccess, router.FilterBasicAuth, router.FilterRateLimit:
			if !p.guard(f, v) {
				return p
			}
		case router.FilterExternalAuth:
			p.authorize = true
		case router.FilterResponseRewrite:
			p.responseRewrite = f.ResponseRewrite
		case router.FilterClientCertificate:
			if p.checkClientCert(v, f.ClientCert) {
				return p
			}
		}
	}
	if rule.Canary != nil {
		p.backend = chooseCanary(rule, v.Header)
	} else {
		p.backend = router.ChooseBackend(rule.Backends)
	}
	switch {
	case p.backend == nil || p.backend.Invalid:
		p.action = actInvalidBackend
	default:
		// A backend's own rewrite applies to the requests sent to it,
		// after the rule's (HTTPRouteBackendURLRewrite).
		for i := range p.backend.Filters {
			if f := &p.backend.Filters[i]; f.Type == router.FilterURLRewrite {
				p.rewrite(v, f.Rewrite)
			}
		}
		p.set = sets.Get(p.backend.Name)
		p.action = actForward
		if p.set == nil || p.set.Len() == 0 {
			p.action = actNoEndpoints
			if fb := rule.Fallback; fb != nil {
				if set := sets.Get(fb.Backend.Name); set != nil && set.Len() > 0 {
					p.action, p.fallback, p.backend, p.set = actForward, true, &fb.Backend, set
				}
			}
		}
		if b := p.backend.Balance; b != nil && p.action == actForward {
			p.prepare(v, b)
		}
	}
	return p
}

// rewrite applies a URLRewrite filter to the forwarded request's host,
// path and, for a template of captures with a '?', query.
func (p *plan) rewrite(v *view, rw *router.Rewrite) {
	if rw.Hostname != "" {
		p.host = rw.Hostname
	}
	switch {
	case rw.Path == nil:
	case rw.Path.Type == router.ReplaceRegexCaptures:
		p.path, p.query, p.rewritesQuery = expandCaptures(rw.Path.Value, &v.Request, p.target.Pattern)
	default:
		p.path = modifyPath(v.Path, p.target, rw.Path)
	}
}

// checkClientCert applies a client certificate check to the request and
// reports whether it decided the answer: 400 (or a redirect to the error
// page) for a certificate missing or that does not verify, 403 for a
// subject not allowed.
func (p *plan) checkClientCert(v *view, a *router.ClientCertAuth) bool {
	var certs []*x509.Certificate
	var peer *guard.ClientPeer
	switch {
	case v.conn != nil:
		peer = &v.conn.Peer
	case v.req != nil:
		certs, peer = clientCerts(v.req)
	}
	c := checkClientCert(a, certs, peer)
	switch {
	case c.status == 0:
		p.clientCert = c
		return false
	case c.status == http.StatusBadRequest && a.ErrorRedirect() != nil:
		p.action, p.redirect = actRedirect, a.ErrorRedirect()
	default:
		p.deny(c.status, errorBodies[c.status], "")
	}
	return true
}

// matchedPrefix is the path prefix that selected target, without its
// trailing "/": what ReplacePrefixMatch replaces. Rules without matches
// match the prefix "/".
func matchedPrefix(target *router.Target) string {
	if target.Match == nil || target.Match.Path.Type != router.PathPrefix {
		return ""
	}
	return strings.TrimSuffix(target.Match.Path.Value, "/")
}

// modifyPath applies a path modifier to the path target matched. A prefix
// replacement keeps the rest of the path, so "/foo" → "/bar" turns
// "/foo/x" into "/bar/x", and "/foo" → "/" turns "/foo/x" into "/x" and
// "/foo" into "/".
func modifyPath(path string, target *router.Target, m *router.PathModifier) string {
	switch m.Type {
	case router.ReplaceFullPath:
		return m.Value
	case router.ReplaceRegexCaptures:
		// Only rewrites have a query in their template (router's
		// validation), so a redirect's path is the whole of it.
		path, _, _ = expandCaptures(m.Value, &router.Request{Path: path}, target.Pattern)
		return path
	}
	prefix := matchedPrefix(target)
	rest := path[min(len(prefix), len(path)):]
	out := strings.TrimSuffix(m.Value, "/") + rest
	if out == "" {
		return "/"
	}
	return out
}

// expandCaptures fills $1 to $9 in template with the captures of pattern
// in r's path, as nginx's rewrite does: one digit each, and a capture that
// took no part in the match is empty. The path always starts with "/".
// Like nginx's, a template with a '?' replaces the query too
// (rewritesQuery): with what follows the first '?', then "&" and r's
// query; and a template that ends with '?' drops r's query, that '?' not
// being part of it.
func expandCaptures(template string, r *router.Request, pattern *regexp.Regexp) (path, query string, rewritesQuery bool) {
	var groups []int
	if pattern != nil {
		groups = pattern.FindStringSubmatchIndex(r.Path)
	}
	template, dropQuery := strings.CutSuffix(template, "?")
	out := make([]byte, 0, len(template)+len(r.Path)+len(r.RawQuery)+1)
	queryAt, quoted := -1, false
	for i := 0; i < len(template); i++ {
		c := template[i]
		switch {
		case c == '?' && queryAt < 0:
			queryAt = len(out)
			quoted = strings.ContainsAny(r.Path, "%+")
			out = append(out, c)
		case c != '$' || i+1 == len(template) || template[i+1] < '0' || template[i+1] > '9':
			out = append(out, c)
		default:
			i++
			n := int(template[i]-'0') * 2
			if n+1 >= len(groups) || groups[n] < 0 {
				continue
			}
			if capture := r.Path[groups[n]:groups[n+1]]; queryAt < 0 {
				out = append(out, capture...)
			} else {
				out = appendArgument(out, capture, quoted)
			}
		}
	}
	if len(out) == 0 || out[0] != '/' {
		out = append([]byte{'/'}, out...)
		if queryAt >= 0 {
			queryAt++
		}
	}
	if queryAt < 0 {
		return string(out), "", dropQuery
	}
	if !dropQuery && r.RawQuery != "" {
		out = append(append(out, '&'), r.RawQuery...)
	}
	s := string(out)
	return s[:queryAt], s[queryAt+1:], true
}

// appendArgument appends a capture of the request path to a query as
// nginx's rewrite puts it there. nginx matches the decoded path and, when
// the path as sent had a '%' or a '+' (its quoted_uri and plus_in_uri),
// escapes the capture for arguments (NGX_ESCAPE_ARGS), so that "a%26b" or
// "a+b" stay one value ("a%26b", "a%2Bb") rather than "&" splitting it or
// "+" reading as a space; otherwise it copies the capture as is, so a path
// "/s/a&b" does give two arguments. hostgate matches the path as sent:
// decoding a quoted capture and escaping it again gives nginx's bytes.
// Bytes no request line may carry in its query (spaces, control
// characters, '#', non-ASCII) are escaped whatever the path, where nginx
// would copy them unescaped from a path that had neither '%' nor '+'.
func appendArgument(out []byte, capture string, quoted bool) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(capture); i++ {
		c := capture[i]
		if quoted && c == '%' && i+2 < len(capture) {
			hi, okHi := guard.HexDigit(capture[i+1])
			lo, okLo := guard.HexDigit(capture[i+2])
			if okHi && okLo {
				c = hi<<4 | lo
				i += 2
			}
		}
		if c <= ' ' || c >= 0x7f || c == '#' || quoted && strings.IndexByte("%&+;?", c) >= 0 {
			out = append(out, '%', hex[c>>4], hex[c&0xf])
		} else {
			out = append(out, c)
		}
	}
	return out
}

// location builds the Location of a redirect. Unset parts keep the
// request's.
func location(v *view, p *plan) string {
	rd := p.redirect
	if rd.Location != "" {
		return rd.Location
	}
	scheme := v.scheme
	if rd.Scheme != "" {
		scheme = rd.Scheme
	}
	host := v.Host
	// Without a Host (HTTP/1.0) nginx's $http_host would leave the
	// Location without one.
	if !rd.RequestHost || host == "" {
		host = redirectAuthority(v, rd, scheme)
	}
	path := v.Path
	if p.path != "" {
		path = p.path
	}
	if rd.TrimTrailingSlash && v.RawQuery == "" {
		path = strings.TrimSuffix(path, "/")
	}
	loc := scheme + "://" + host + path
	if v.RawQuery != "" && !rd.DropQuery {
		loc += "?" + v.RawQuery
	}
	return loc
}

// redirectAuthority is the host and port of the Location of rd, sent
// over scheme. The port follows the Gateway API: the redirect's, else the
// scheme's well-known one when the scheme changes, else the listener's,
// and it is left out when it is the scheme's default.
func redirectAuthority(v *view, rd *router.Redirect, scheme string) string {
	host := rd.Hostname
	if host == "" {
		host = hostOnly(v.Host)
	}
	port := rd.Port
	if port == 0 {
		port = v.port
		switch rd.Scheme {
		case "http":
			port = 80
		case "https":
			port = 443
		}
	}
	if (scheme == "http" && port != 80) || (scheme == "https" && port != 443) {
		return net.JoinHostPort(host, strconv.Itoa(port))
	}
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

// answer fills the header of an answer the plan gives without a backend,
// a redirect or a preflight's, and returns its status.
func answer(p *plan, v *view, h headerEditor) int {
	editResponse(p, h)
	if p.action == actPreflight {
		preflightFields(p, v.Header, h)
		return http.StatusNoContent
	}
	h.Set("Location", location(v, p))
	return redirectStatus(p.redirect)
}

// redirectStatus is the redirect's status, 302 unless it says otherwise.
func redirectStatus(rd *router.Redirect) int {
	if rd.StatusCode != 0 {
		return rd.StatusCode
	}
	return http.StatusFound
}

// hostOnly drops the port of a Host header value and the brackets of an
// IPv6 literal.
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}
