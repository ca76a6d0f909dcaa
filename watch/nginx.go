package watch

// ingress-nginx's annotations.
//
// Ingresses moved from ingress-nginx carry nginx.ingress.kubernetes.io/*
// annotations. Each one hostgate knows is parsed here into a typed value
// (nginxSettings) with the semantics ingress-nginx documents, and every one
// gets an outcome: honoured, ignored (hostgate does not do it yet, or it
// has no effect here), refused (snippets and modsecurity: text for nginx
// that hostgate never executes) or invalid (a value that does not parse,
// which leaves the annotation out and the rest of the Ingress serving;
// the access annotations and the auth-url group fail closed instead, the
// Ingress's paths answering 503 or 500: nginx_access.go, nginx_auth.go).
// The outcomes go into the Ingress's report, so that /debug/routes, the
// log, Events and a metric show what a migrated Ingress lost; `hostgate
// check ingress-nginx` prints them before a migration.
//
// Some annotations act on every Ingress of a host, as ingress-nginx's
// server blocks do: use-regex and rewrite-target make every path of the
// host a regular expression, TLS on a host redirects all of its HTTP
// requests, and from-to-www-redirect only adds a host no Ingress serves.
// nginxHosts gathers those facts once per translation.

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hostgate/hostgate/router"
)

// NginxAnnotationPrefix starts every ingress-nginx annotation.
const NginxAnnotationPrefix = "nginx.ingress.kubernetes.io/"

// Outcome is what hostgate does with an annotation.
type Outcome string

const (
	Honoured Outcome = "honoured"
	Ignored  Outcome = "ignored"
	Refused  Outcome = "refused"
	Invalid  Outcome = "invalid"
)

// AnnotationOutcome is what became of one annotation of an Ingress.
type AnnotationOutcome struct {
	Annotation string  `json:"annotation"`
	Value      string  `json:"value"`
	Outcome    Outcome `json:"outcome"`
	Reason     string  `json:"reason,omitempty"`
}

func (o AnnotationOutcome) String() string {
	s := fmt.Sprintf("annotation %s=%q: %s", o.Annotation, o.Value, o.Outcome)
	if o.Reason != "" {
		s += ": " + o.Reason
	}
	return s
}

// nginxSettings are the typed values of an Ingress's annotations.
type nginxSettings struct {
	// useRegex makes the Ingress's paths regular expressions (and, with
	// rewriteTarget, every path of its hosts: nginxHosts).
	useRegex bool
	// rewriteTarget replaces the path of a forwarded request; $1 to $9
	// stand for the captures of the path's expression.
	rewriteTarget string
	// forwardedPrefix is sent as X-Forwarded-Prefix with rewritten
	// requests.
	forwardedPrefix string
	// appRoot is where requests for "/" are redirected (302).
	appRoot string
	// redirect answers every request of the Ingress instead of
	// forwarding it (permanent-redirect, temporal-redirect).
	redirect *router.Redirect
	// fromToWWW adds a redirect from www.<host> to <host>, or back.
	fromToWWW bool
	// sslRedirect is false where the Ingress turned the redirect of
	// hosts with TLS off; forceSSLRedirect redirects without TLS too.
	sslRedirect, forceSSLRedirect bool
	// sslPassthrough passes the TLS of the Ingress's hosts through
	// (Options.IngressSSLPassthrough).
	sslPassthrough bool
	// sslCiphers are the TLS 1.2 suites the handshakes of the Ingress's
	// hosts offer (ssl-ciphers).
	sslCiphers cipherSuites
	// backendProtocol is router.BackendRef.Protocol for the Ingress's
	// backends ("" keeps the Service's appProtocol); backendTLS, for the
	// TLS ones, is how their certificates are checked (nil for a check
	// that cannot pass: the backends are then invalid).
	backendProtocol string
	backendTLS      *router.BackendTLS
	// upstreamHost replaces the Host of forwarded requests.
	upstreamHost string
	// cors is set by enable-cors and shaped by the cors-* annotations.
	cors *router.CORS
	// access are the access annotations (nginx_access.go).
	access nginxAccess
	// proxy are the body limit, timeouts and default backend.
	proxy nginxProxy
	// auth is set by auth-url and shaped by the other auth-* annotations.
	auth *nginxAuth
	// tlsAuth are the client certificate check and backend TLS Secrets.
	tlsAuth nginxTLSAuth
	// traffic are canary, balancing, retry and access log settings
	// (nginx_traffic.go).
	traffic nginxTraffic
	// headers are custom-headers' (nginx_headers.go).
	headers nginxHeaders
	// rewrites rewrite backends' answers (nginx_rewrites.go).
	rewrites nginxRewrites
	// redirects are mirror-target, server-alias and what shapes the
	// redirect to HTTPS (nginx_redirects.go).
	redirects nginxRedirects
}

// nginxParse reads one annotation's value into s. An error makes the
// annotation invalid: it has no effect and the reason is reported.
type nginxParse func(value string, s *nginxSettings) error

// nginxHonoured are the annotations hostgate acts on, by group. A group
// with settings that depend on each other settles them after parsing
// (parseNginxAnnotations).
var nginxHonoured = []map[string]nginxParse{nginxPathAnnotations, nginxBackendAnnotations, nginxAccessAnnotations, nginxProxyAnnotations, nginxAuthAnnotations, nginxTLSAuthAnnotations, nginxTrafficAnnotations, nginxHeaderAnnotations, nginxRewriteAnnotations, nginxRedirectAnnotations}

// nginxParser is the parse function of an honoured annotation.
func nginxParser(name string) (nginxParse, bool) {
	for _, group := range nginxHonoured {
		if parse, ok := group[name]; ok {
			return parse, true
		}
	}
	return nil, false
}

// nginxPathAnnotations choose paths and redirects.
var nginxPathAnnotations = map[string]nginxParse{
	"use-regex": func(v string, s *nginxSettings) (err error) {
		s.useRegex, err = parseNginxBool(v)
		return err
	},
	"rewrite-target": func(v string, s *nginxSettings) (err error) {
		s.rewriteTarget, err = parseRewriteTarget(v)
		return err
	},
	"x-forwarded-prefix": func(v string, s *nginxSettings) error {
		if err := checkHeaderValue(v); err != nil {
			return err
		}
		s.forwardedPrefix = v
		return nil
	},
	"app-root": func(v string, s *nginxSettings) error {
		u, err := url.ParseRequestURI(v)
		if err != nil || u.IsAbs() || !strings.HasPrefix(v, "/") || u.RawQuery != "" {
			return fmt.Errorf("must be a path that starts with \"/\"")
		}
		if err := checkPath(v); err != nil {
			return err
		}
		s.appRoot = v
		return nil
	},
	"permanent-redirect":      func(v string, s *nginxSettings) error { return s.setRedirect(v, 301) },
	"temporal-redirect":       func(v string, s *nginxSettings) error { return s.setRedirect(v, 302) },
	"permanent-redirect-code": func(v string, s *nginxSettings) error { return nil }, // read with permanent-redirect
	"temporal-redirect-code":  func(v string, s *nginxSettings) error { return nil }, // read with temporal-redirect
	"from-to-www-redirect": func(v string, s *nginxSettings) (err error) {
		s.fromToWWW, err = parseNginxBool(v)
		return err
	},
	"ssl-redirect": func(v string, s *nginxSettings) (err error) {
		s.sslRedirect, err = parseNginxBool(v)
		return err
	},
	"force-ssl-redirect": func(v string, s *nginxSettings) (err error) {
		s.forceSSLRedirect, err = parseNginxBool(v)
		return err
	},
	"ssl-passthrough": func(v string, s *nginxSettings) (err error) {
		s.sslPassthrough, err = parseNginxBool(v)
		return err
	},
	"ssl-ciphers": func(v string, s *nginxSettings) (err error) {
		s.sslCiphers, err = parseCipherSuites(v)
		return err
	},
}

// nginxAliases are older names of annotations: the newer name wins when
// an Ingress has both.
var nginxAliases = map[string]string{
	"whitelist-source-range": "allowlist-source-range",
	"limit-whitelist":        "limit-allowlist",
}

// nginxBackendAnnotations choose how requests reach the backends.
var nginxBackendAnnotations = map[string]nginxParse{
	"backend-protocol": func(v string, s *nginxSettings) error {
		protocol, ok := nginxBackendProtocols[strings.ToUpper(v)]
		if !ok {
			return fmt.Errorf("must be HTTP, HTTPS, GRPC, GRPCS or H2C (AUTO_HTTP and FCGI are not supported)")
		}
		s.backendProtocol = protocol
		return nil
	},
	// ingress-nginx does not check backend certificates unless told to,
	// and then needs proxy-ssl-secret, which hostgate does not read yet:
	// the annotations are settled in settleBackendTLS.
	"proxy-ssl-verify":      func(v string, s *nginxSettings) error { return checkOnOff(v) },
	"proxy-ssl-name":        func(v string, s *nginxSettings) error { return checkHostname(v) },
	"proxy-ssl-server-name": func(v string, s *nginxSettings) error { return checkOnOff(v) },
	// Applied in settleBackendTLS too.
	"proxy-ssl-protocols": func(v string, s *nginxSettings) error { _, _, err := parseTLSProtocols(v); return err },
	"proxy-ssl-ciphers":   func(v string, s *nginxSettings) error { _, err := parseCipherSuites(v); return err },
	"upstream-vhost": func(v string, s *nginxSettings) error {
		if err := checkHostname(v); err != nil {
			return err
		}
		s.upstreamHost = strings.ToLower(v)
		return nil
	},
	"enable-cors": func(v string, s *nginxSettings) error {
		on, err := parseNginxBool(v)
		if on {
			s.cors = nginxDefaultCORS()
		}
		return err
	},
	// The cors-* annotations shape enable-cors's filter: settleCORS.
	"cors-allow-origin":      func(v string, s *nginxSettings) error { return nil },
	"cors-allow-methods":     func(v string, s *nginxSettings) error { return nil },
	"cors-allow-headers":     func(v string, s *nginxSettings) error { return nil },
	"cors-expose-headers":    func(v string, s *nginxSettings) error { return nil },
	"cors-allow-credentials": func(v string, s *nginxSettings) error { return nil },
	"cors-max-age":           func(v string, s *nginxSettings) error { return nil },
}

// nginxRefused are annotations whose values are nginx configuration or
// rules for an nginx module: text that hostgate never executes.
var nginxRefused = map[string]string{
	"configuration-snippet":             "a snippet is nginx configuration; hostgate never executes annotation text",
	"server-snippet":                    "a snippet is nginx configuration; hostgate never executes annotation text",
	"auth-snippet":                      "a snippet is nginx configuration; hostgate never executes annotation text",
	"stream-snippet":                    "a snippet is nginx configuration; hostgate never executes annotation text",
	"modsecurity-snippet":               "a snippet is nginx configuration; hostgate never executes annotation text",
	"enable-modsecurity":                "hostgate has no ModSecurity web application firewall",
	"enable-owasp-core-rules":           "hostgate has no ModSecurity web application firewall",
	"modsecurity-transaction-id":        "hostgate has no ModSecurity web application firewall",
	"enable-opentelemetry":              "hostgate does not export OpenTelemetry traces",
	"opentelemetry-trust-incoming-span": "hostgate does not export OpenTelemetry traces",
}

// nginxNotApplicable are ingress-nginx annotations that change nothing a
// user of hostgate would notice, or nothing hostgate has: ignored, with
// why, rather than left for later.
var nginxNotApplicable = map[string]string{
	"http2-push-preload":        "HTTP/2 server push: browsers no longer accept pushed responses, and hostgate pushes none",
	"enable-rewrite-log":        "nginx's log of its rewrite decisions: hostgate's rewrites are in /debug/routes",
	"connection-proxy-header":   "Connection is a hop-by-hop field: hostgate keeps its backend connections alive itself and never forwards it",
	"ssl-prefer-server-ciphers": "Go's TLS picks the cipher suite by the server's preference for TLS 1.2 and by a fixed order for TLS 1.3",
	"auth-keepalive":            authKeepalive,
	"auth-keepalive-requests":   authKeepalive,
	"auth-keepalive-timeout":    authKeepalive,
	"auth-keepalive-share-vars": "hostgate shares no nginx variables with the authorization request; it carries the request's own X-Request-ID whatever this says",
}

// authKeepalive is why the auth-keepalive annotations change nothing.
const authKeepalive = "hostgate keeps connections to the authorization service alive in its pool, as to every backend"

// parseNginxAnnotations reads the ingress-nginx annotations of ing, in
// name order, with defaults for those it does not carry.
func parseNginxAnnotations(ing *networkingv1.Ingress) (nginxSettings, []AnnotationOutcome) {
	s := nginxSettings{sslRedirect: true, access: nginxAccess{burstMultiplier: defaultBurstMultiplier}}
	var outcomes []AnnotationOutcome
	for _, name := range sortedNginxNames(ing.Annotations) {
		value := ing.Annotations[name]
		short := strings.TrimPrefix(name, NginxAnnotationPrefix)
		o := AnnotationOutcome{Annotation: name, Value: value}
		if newer, ok := nginxAliases[short]; ok && hasKey(ing.Annotations, NginxAnnotationPrefix+newer) {
			o.Outcome, o.Reason = Ignored, NginxAnnotationPrefix+newer+" takes precedence"
		} else if parse, ok := nginxParser(short); ok {
			if err := parse(value, &s); err != nil {
				o.Outcome, o.Reason = Invalid, err.Error()
			} else {
				o.Outcome = Honoured
			}
		} else if reason, ok := nginxRefused[short]; ok {
			o.Outcome, o.Reason = Refused, reason
		} else if reason, ok := nginxNotApplicable[short]; ok {
			o.Outcome, o.Reason = Ignored, reason
		} else {
			o.Outcome, o.Reason = Ignored, "not an ingress-nginx annotation hostgate knows"
		}
		outcomes = append(outcomes, o)
	}
	s.settleRedirects(ing.Annotations, outcomes)
	s.settleTLSAuth(ing.Namespace, outcomes)
	s.settleBackendTLS(ing.Annotations, outcomes)
	s.settleCORS(ing.Annotations, outcomes)
	s.settleNginxProxy(outcomes)
	s.settleAuth(ing.Annotations, "Ingress "+ing.Namespace+"/"+ing.Name, outcomes)
	s.settleTraffic(outcomes)
	s.settleRewrites(outcomes)
	s.settleMirror(outcomes)
	return s, outcomes
}

// nginxBackendProtocols maps backend-protocol values to how proxy/ speaks
// to the backend.
var nginxBackendProtocols = map[string]string{"HTTP": "", "HTTPS": "https", "GRPC": "h2c", "GRPCS": "h2", "H2C": "h2c"}

// settleBackendTLS decides how the certificates of HTTPS and GRPCS
// backends are checked. ingress-nginx checks none unless proxy-ssl-verify
// is on, with the CA of proxy-ssl-secret, which the translation reads
// (applyProxySSL).
func (s *nginxSettings) settleBackendTLS(annotations map[string]string, outcomes []AnnotationOutcome) {
	verify := annotations[NginxAnnotationPrefix+"proxy-ssl-verify"] == "on"
	if s.backendProtocol != "https" && s.backendProtocol != "h2" {
		for _, name := range []string{"proxy-ssl-name", "proxy-ssl-server-name", "proxy-ssl-verify", "proxy-ssl-secret", "proxy-ssl-verify-depth", "proxy-ssl-protocols", "proxy-ssl-ciphers"} {
			setOutcome(outcomes, name, Ignored, "without backend-protocol HTTPS or GRPCS")
		}
		return
	}
	name := strings.ToLower(annotations[NginxAnnotationPrefix+"proxy-ssl-name"])
	s.backendTLS = &router.BackendTLS{SkipVerify: !verify}
	switch {
	case verify && name == "":
		// The certificate must hold some name; without one no backend
		// could pass, so its requests fail at once with 500.
		setOutcome(outcomes, "proxy-ssl-verify", Invalid, "needs proxy-ssl-name, the name the backend's certificate must hold")
		s.backendTLS = nil
	case verify || annotations[NginxAnnotationPrefix+"proxy-ssl-server-name"] == "on":
		s.backendTLS.ServerName = name
	}
	s.settleTLSOffer(annotations, outcomes)
}

// settleTLSOffer applies proxy-ssl-protocols and proxy-ssl-ciphers to the
// backends' TLS. ingress-nginx applies them only with proxy-ssl-secret;
// hostgate with any HTTPS or GRPCS backend, since they say what to offer
// whatever the certificates.
func (s *nginxSettings) settleTLSOffer(annotations map[string]string, outcomes []AnnotationOutcome) {
	b := s.backendTLS
	if b == nil {
		return
	}
	if o := nginxOutcome(outcomes, "proxy-ssl-protocols"); o != nil && o.Outcome == Honoured {
		b.MinVersion, b.MaxVersion, _ = parseTLSProtocols(o.Value)
	}
	o := nginxOutcome(outcomes, "proxy-ssl-ciphers")
	if o == nil || o.Outcome != Honoured {
		return
	}
	suites, _ := parseCipherSuites(o.Value)
	if b.MinVersion == tls.VersionTLS13 {
		o.Outcome, o.Reason = Ignored, "proxy-ssl-protocols offers TLS 1.3 only, whose suites Go chooses itself"
		return
	}
	b.CipherSuites, o.Reason = suites.ids, suites.note
}

// nginxDefaultCORS is enable-cors's filter with ingress-nginx's defaults:
// every origin, credentials, 20 days.
func nginxDefaultCORS() *router.CORS {
	return &router.CORS{
		AllowMethods:     []string{"GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"},
		AllowHeaders:     []string{"DNT", "Keep-Alive", "User-Agent", "X-Requested-With", "If-Modified-Since", "Cache-Control", "Content-Type", "Range", "Authorization"},
		AllowCredentials: true,
		MaxAge:           1728000 * time.Second,
		AllowOrigins:     []router.Origin{{}},
		// ingress-nginx answers "*" whatever cors-allow-credentials says.
		LiteralWildcard: true,
	}
}

// settleCORS applies the cors-* annotations to enable-cors's filter.
func (s *nginxSettings) settleCORS(annotations map[string]string, outcomes []AnnotationOutcome) {
	for _, o := range outcomes {
		name := strings.TrimPrefix(o.Annotation, NginxAnnotationPrefix)
		if !strings.HasPrefix(name, "cors-") || o.Outcome != Honoured {
			continue
		}
		if s.cors == nil {
			setOutcome(outcomes, name, Ignored, "without enable-cors")
			continue
		}
		if name == "cors-allow-origin" {
			origins, note, err := nginxCORSOrigins(o.Value)
			if err != nil {
				setOutcome(outcomes, name, Invalid, err.Error())
				continue
			}
			s.cors.AllowOrigins = origins
			setOutcome(outcomes, name, Honoured, note)
			continue
		}
		if err := setNginxCORS(s.cors, name, o.Value); err != nil {
			setOutcome(outcomes, name, Invalid, err.Error())
		}
	}
}

// nginxCORSOriginsValue and nginxCORSOrigin are ingress-nginx's checks
// of cors-allow-origin (internal/ingress/annotations/cors/main.go): the
// first of the whole value without its spaces, which when it fails leaves
// the default, every origin; the second of each entry, which when it fails
// is left out.
var (
	nginxCORSOriginsValue = regexp.MustCompile(`^((((([a-z]+://)?(\*\.)?[A-Za-z0-9\-.]*(:\d+)?,?)|null)+)|\*)?$`)
	nginxCORSOrigin       = regexp.MustCompile(`^([a-z]+://(\*\.)?[A-Za-z0-9\-.]*(:\d+)?|\*|null)?$`)
)

// nginxCORSOrigins reads cors-allow-origin as ingress-nginx does: entries
// separated by commas, empty ones skipped, "*" anywhere allowing every
// origin; an entry that is not scheme://host[:port] is left out, and so is
// one hostgate cannot compare (another scheme than http and https, or
// "null"), each said in note. A value ingress-nginx's validator refuses
// is an error, and ingress-nginx then allows every origin.
func nginxCORSOrigins(value string) (origins []router.Origin, note string, err error) {
	if strings.TrimSpace(value) == "" || !nginxCORSOriginsValue.MatchString(strings.ReplaceAll(value, " ", "")) {
		return nil, "", fmt.Errorf("must be origins such as https://example.com or *, separated by commas; every origin is allowed, as ingress-nginx does")
	}
	origins = []router.Origin{}
	var skipped []string
	for item := range strings.SplitSeq(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if item == "*" {
			return []router.Origin{{}}, "", nil
		}
		origin, perr := router.ParseOrigin(item)
		if !nginxCORSOrigin.MatchString(item) || perr != nil {
			skipped = append(skipped, strconv.Quote(item))
			continue
		}
		origins = append(origins, origin)
	}
	if len(skipped) > 0 {
		note = fmt.Sprintf("left out, not an http or https origin (scheme://host[:port]): %s", strings.Join(skipped, ", "))
		if len(origins) == 0 {
			note += "; no origin is allowed"
		}
	}
	return origins, note, nil
}

// setNginxCORS applies one cors-* annotation to c, other than
// cors-allow-origin (nginxCORSOrigins).
func setNginxCORS(c *router.CORS, name, value string) error {
	items := func() ([]string, error) {
		var out []string
		for _, item := range strings.Split(value, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			if item != "*" && strings.ContainsFunc(item, func(r rune) bool { return !isTokenRune(r) }) {
				return nil, fmt.Errorf("%q: not a method or header name", item)
			}
			out = append(out, item)
		}
		return out, nil
	}
	var err error
	switch name {
	case "cors-allow-methods":
		c.AllowMethods, err = items()
	case "cors-allow-headers":
		c.AllowHeaders, err = items()
	case "cors-expose-headers":
		c.ExposeHeaders, err = items()
	case "cors-allow-credentials":
		c.AllowCredentials, err = parseNginxBool(value)
	case "cors-max-age":
		seconds, perr := strconv.Atoi(value)
		if perr != nil || seconds < 0 {
			return fmt.Errorf("must be a number of seconds")
		}
		c.MaxAge = time.Duration(seconds) * time.Second
	}
	return err
}

// isTokenRune reports whether r may appear in an HTTP token (RFC 9110).
func isTokenRune(r rune) bool {
	return r < 0x7f && r > 0x20 && !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
}

// setOutcome changes the outcome of annotation name (without prefix), if
// the Ingress has it.
func setOutcome(outcomes []AnnotationOutcome, name string, outcome Outcome, reason string) {
	if o := nginxOutcome(outcomes, name); o != nil {
		o.Outcome, o.Reason = outcome, reason
	}
}

func hasKey(m map[string]string, key string) bool {
	_, ok := m[key]
	return ok
}

// sortedNginxNames are the names of the ingress-nginx annotations among
// annotations, sorted.
func sortedNginxNames(annotations map[string]string) []string {
	var names []string
	for name := range annotations {
		if strings.HasPrefix(name, NginxAnnotationPrefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// setRedirect reads a permanent- or temporal-redirect URL. ingress-nginx
// sends the URL as written, so the Location is exactly it.
func (s *nginxSettings) setRedirect(value string, code int) error {
	u, err := url.Parse(value)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("must be an http or https URL")
	}
	if strings.Contains(value, "$") {
		return fmt.Errorf("nginx variables are not expanded by hostgate")
	}
	if err := checkHeaderValue(value); err != nil {
		return err
	}
	// temporal-redirect wins over permanent-redirect, as in ingress-nginx.
	if s.redirect == nil || code == 302 {
		s.redirect = &router.Redirect{Location: value, StatusCode: code}
	}
	return nil
}

// settleRedirects applies the -code annotations to the redirect they
// belong to, and says which redirect annotation lost to the other.
func (s *nginxSettings) settleRedirects(annotations map[string]string, outcomes []AnnotationOutcome) {
	outcome := func(short string) *AnnotationOutcome { return nginxOutcome(outcomes, short) }
	if p, t := outcome("permanent-redirect"), outcome("temporal-redirect"); p != nil && p.Outcome == Honoured && t != nil && t.Outcome == Honoured {
		p.Outcome, p.Reason = Ignored, "temporal-redirect takes precedence"
	}
	for _, r := range []struct {
		of       string
		code     int
		min, max int
	}{{"permanent-redirect", 301, 300, 308}, {"temporal-redirect", 302, 300, 307}} {
		o := outcome(r.of + "-code")
		if o == nil {
			continue
		}
		redirect := outcome(r.of)
		if redirect == nil || redirect.Outcome != Honoured {
			o.Outcome, o.Reason = Ignored, "without "+NginxAnnotationPrefix+r.of
			continue
		}
		code, err := strconv.Atoi(annotations[o.Annotation])
		if err != nil || code < r.min || code > r.max {
			o.Outcome, o.Reason = Invalid, fmt.Sprintf("must be a status code from %d to %d; %d is sent", r.min, r.max, r.code)
			continue
		}
		s.redirect.StatusCode = code
	}
}

// checkOnOff accepts nginx's "on" and "off".
func checkOnOff(v string) error {
	if v != "on" && v != "off" {
		return fmt.Errorf("must be on or off")
	}
	return nil
}

// checkHostname accepts a DNS name, as sent in Host or SNI.
func checkHostname(v string) error {
	if errs := validation.IsDNS1123Subdomain(strings.ToLower(v)); len(errs) > 0 {
		return fmt.Errorf("must be a DNS name")
	}
	return nil
}

// parseNginxBool reads a boolean as ingress-nginx does (Go's ParseBool).
func parseNginxBool(v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("must be true or false")
	}
	return b, nil
}

// parseRewriteTarget reads a rewrite target: a path, and maybe a query
// after a '?', in which $1 to $9 stand for the captures of the path's
// expression. Any other "$" would be an nginx variable, which hostgate
// does not have. The query is nginx's rewrite's (router's
// ReplaceRegexCaptures), as ingress-nginx renders the target into one;
// its validation of annotations, on by default since v1.12, refuses a
// '?' and leaves such a target out, but migrating users had it served.
func parseRewriteTarget(v string) (string, error) {
	if v == "" {
		return "", fmt.Errorf("must not be empty")
	}
	for i := 0; i < len(v); i++ {
		if v[i] == '$' && (i+1 == len(v) || v[i+1] < '0' || v[i+1] > '9') {
			return "", fmt.Errorf("only $1 to $9 (captures of the path) may follow a \"$\"; nginx variables are not expanded")
		}
	}
	if !strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "$") {
		v = "/" + v
	}
	if strings.ContainsFunc(v, func(c rune) bool { return c == ' ' || c == '#' || isControl(c) }) {
		return "", fmt.Errorf("must not have spaces, control characters or '#'")
	}
	path, query, _ := strings.Cut(v, "?")
	if len(path) > 1024 || len(query) > 1024 {
		return "", fmt.Errorf("the path and the query after '?' must be at most 1024 characters each")
	}
	// Sent on the request line as it is.
	if strings.ContainsFunc(query, func(c rune) bool { return c > 0x7f }) {
		return "", fmt.Errorf("the query after '?' must be ASCII: percent-encode other characters")
	}
	return v, nil
}

// checkPath refuses what no request path may hold.
func checkPath(v string) error {
	if len(v) > 1024 || strings.ContainsAny(v, " ?#") || strings.ContainsFunc(v, isControl) {
		return fmt.Errorf("must be at most 1024 characters of a path, without spaces, control characters, '?' or '#'")
	}
	return nil
}

// checkHeaderValue refuses what would end a header line.
func checkHeaderValue(v string) error {
	if len(v) > 4096 || strings.ContainsFunc(v, isControl) {
		return fmt.Errorf("must be at most 4096 characters without control characters")
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// nginxHosts are what ingress-nginx decides per host rather than per
// Ingress, over every Ingress of ours.
type nginxHosts struct {
	facts map[string]hostFacts
	// clientAuth is the client certificate check of each host that has
	// one, proxySSL the proxy-ssl-secret of each Ingress with one
	// (nginx_tlsauth.go).
	clientAuth map[string]*hostClientAuth
	proxySSL   map[*networkingv1.Ingress]*proxySSLSecret
}

// hostFacts are what the Ingresses of a host say of it together.
type hostFacts struct {
	// regex hosts have every path treated as a case-insensitive regular
	// expression (use-regex or rewrite-target on some Ingress of theirs).
	regex bool
	// tls hosts are named in some Ingress's spec.tls.
	tls bool
	// served hosts have rules in some Ingress.
	served bool
	// canaries are the paths of the host's canary Ingresses, nil for a
	// host without (nginx_traffic.go).
	canaries map[canaryPath]*nginxCanary
}

// nginxHosts are the hosts of ingresses, those of ours.
func (t *translator) nginxHosts(ingresses []*networkingv1.Ingress) nginxHosts {
	h := collectNginxHosts(ingresses, t.ourIngress)
	t.nginxSecrets(&h, ingresses)
	return h
}

// collectNginxHosts gathers the hosts of the Ingresses that ours says
// are served.
func collectNginxHosts(ingresses []*networkingv1.Ingress, ours func(*networkingv1.Ingress) bool) nginxHosts {
	h := nginxHosts{facts: make(map[string]hostFacts, len(ingresses))}
	set := func(host string, f func(*hostFacts)) {
		facts := h.facts[host]
		f(&facts)
		h.facts[host] = facts
	}
	h.addCanaries(ingresses, ours)
	for _, ing := range ingresses {
		if !ours(ing) || isNginxCanary(ing) {
			continue
		}
		regex := false
		if b, err := parseNginxBool(ing.Annotations[NginxAnnotationPrefix+"use-regex"]); err == nil && b {
			regex = true
		}
		target, err := parseRewriteTarget(ing.Annotations[NginxAnnotationPrefix+"rewrite-target"])
		for _, rule := range ing.Spec.Rules {
			h.joinCanaries(ing, &rule)
			// A rewrite to the path itself is none (ingress-nginx's
			// needsRewrite).
			rewrites := err == nil && rule.HTTP != nil && slices.ContainsFunc(rule.HTTP.Paths, func(p networkingv1.HTTPIngressPath) bool { return p.Path != target })
			set(strings.ToLower(rule.Host), func(f *hostFacts) { f.served, f.regex = true, f.regex || regex || rewrites })
		}
		for _, tls := range ing.Spec.TLS {
			for _, host := range tls.Hosts {
				set(strings.ToLower(host), func(f *hostFacts) { f.tls = true })
			}
		}
	}
	return h
}

// wwwTaken reports whether an Ingress serves the host that
// from-to-www-redirect would redirect to host, and if so says in outcomes
// that the annotation is ignored for host, as ingress-nginx does.
func (h *nginxHosts) wwwTaken(host string, outcomes []AnnotationOutcome) bool {
	alt := wwwAlternative(host)
	if !h.facts[alt].served {
		return false
	}
	i := slices.IndexFunc(outcomes, func(o AnnotationOutcome) bool {
		return o.Annotation == NginxAnnotationPrefix+"from-to-www-redirect"
	})
	outcomes[i].Outcome, outcomes[i].Reason = Ignored, fmt.Sprintf("for %s: an Ingress serves %s", host, alt)
	return true
}

// context is what of h the translation of ing reads: part of the key its
// memoized translation is kept under. With 10,000 Ingresses it is made
// for each of them on every translation, hence no fmt.
func (h *nginxHosts) context(ing *networkingv1.Ingress) string {
	var b []byte
	for _, rule := range ing.Spec.Rules {
		host := strings.ToLower(rule.Host)
		own, alt := h.facts[host], h.facts[wwwAlternative(host)]
		b = append(b, host...)
		b = append(b, '0'+btoi(own.regex)|btoi(own.tls)<<1|btoi(alt.served)<<2|btoi(alt.tls)<<3, ';')
	}
	b = append(b, h.tlsAuthContext(ing)...)
	b = h.aliasContext(b, ing)
	return string(h.canaryContext(b, ing))
}

func btoi(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// wwwAlternative is the host from-to-www-redirect redirects from.
func wwwAlternative(host string) string {
	if rest, ok := strings.CutPrefix(host, "www."); ok {
		return rest
	}
	return "www." + host
}
