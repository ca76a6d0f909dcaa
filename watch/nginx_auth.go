package watch

// ingress-nginx's external authentication (auth-url and the annotations
// that shape it): a router.ExternalAuth filter in the nginx style on
// every path of the Ingress. The service is named by URL, as nginx
// proxies to it; hostgate reaches it as a backend, so the URL must name
// a Service of the cluster by its DNS name.
//
// The group fails closed. An auth-url that cannot be served, or does not
// parse, and an invalid value of any annotation that shapes it (a method
// that is none, a sign-in URL, response headers, a cache, a ConfigMap of
// fields that cannot be read as written) make the Ingress's paths answer
// 500, as ingress-nginx denies the location (503) for most of them,
// rather than serve unauthenticated or ask the service otherwise than the
// Ingress says: a request the user meant to be checked one way must not
// be let through after a check of another. The outcome of the annotation
// says so.

import (
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hostgate/hostgate/router"
)

// nginxAuth is what the auth-* annotations say before the service and
// the ConfigMap of auth-proxy-set-headers are resolved
// (resolveNginxAuth).
type nginxAuth struct {
	url *url.URL
	// setHeaders is auth-proxy-set-headers' ConfigMap, its namespace ""
	// for the Ingress's.
	setHeaders types.NamespacedName
	// filter is the ExternalAuth, its backend resolved.
	filter *router.ExternalAuth
	// denied is set where an annotation of the group is invalid: the
	// filter's backend is then invalid whatever auth-url names, and the
	// Ingress's paths answer 500 (resolveNginxAuth).
	denied bool
}

// nginxAuthDenied ends the reason of an invalid annotation of the auth-url
// group: what becomes of the Ingress's paths.
const nginxAuthDenied = "; the Ingress's paths answer 500"

// nginxAuthAnnotations ask an authorization service before forwarding.
// All but auth-url are read with it, in settleAuth.
var nginxAuthAnnotations = map[string]nginxParse{
	"auth-url": func(v string, s *nginxSettings) error {
		if strings.TrimSpace(v) == "" {
			// Read as not set (settleAuth says so), as ingress-nginx
			// reads it: its parser finds no content, which does not deny
			// the location. Charts render an auth-url left unset so, and
			// 500 on every path would take down what ingress-nginx served.
			return nil
		}
		// Even a URL that does not parse asks for authentication: the
		// paths must not be served without it (resolveNginxAuth).
		s.auth = &nginxAuth{}
		u, err := url.Parse(v)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return fmt.Errorf("must be an http or https URL")
		case strings.Contains(v, "$"):
			return fmt.Errorf("nginx variables are not expanded by hostgate")
		case u.Fragment != "" || u.User != nil:
			return fmt.Errorf("must not have a fragment or user information")
		}
		if err := checkPath(u.EscapedPath()); err != nil {
			return err
		}
		s.auth.url = u
		return nil
	},
	"auth-method": func(v string, s *nginxSettings) error {
		if !nginxAuthMethods.MatchString(v) {
			return fmt.Errorf("must be one of GET, HEAD, POST, PUT, PATCH, DELETE, CONNECT, OPTIONS, TRACE")
		}
		return nil
	},
	"auth-signin":                func(v string, s *nginxSettings) error { return nil },
	"auth-signin-redirect-param": func(v string, s *nginxSettings) error { return nil },
	"auth-response-headers":      func(v string, s *nginxSettings) error { return nil },
	"auth-request-redirect":      func(v string, s *nginxSettings) error { return nil },
	"auth-cache-key":             func(v string, s *nginxSettings) error { return nil },
	"auth-cache-duration":        func(v string, s *nginxSettings) error { return nil },
	"auth-always-set-cookie":     func(v string, s *nginxSettings) error { return nil },
	"auth-proxy-set-headers": func(v string, s *nginxSettings) error {
		if _, err := parseSecretRef(v); err != nil {
			return fmt.Errorf("must be a ConfigMap's namespace/name or name")
		}
		return nil
	},
	// Settled as ignored, with the reason.
	"enable-global-auth": func(v string, s *nginxSettings) error {
		_, err := parseNginxBool(v)
		return err
	},
}

// emptyAnnotation is why an annotation of the group with an empty value is
// ignored.
const emptyAnnotation = "empty: read as not set, as ingress-nginx reads it"

var (
	nginxAuthMethods = regexp.MustCompile(`^(GET|HEAD|POST|PUT|PATCH|DELETE|CONNECT|OPTIONS|TRACE)$`)
	nginxAuthHeader  = regexp.MustCompile(`^[a-zA-Z\d\-_]+$`)
)

// settleAuth reads the annotations that shape auth-url's filter, all but
// its backend. Where one of them, or auth-url itself, is invalid, the
// filter is denied: the paths answer 500 instead of asking the service
// without what the annotation says.
func (s *nginxSettings) settleAuth(annotations map[string]string, id string, outcomes []AnnotationOutcome) {
	setOutcome(outcomes, "enable-global-auth", Ignored, "hostgate has no global authentication URL (global-auth-url of ingress-nginx's ConfigMap): only auth-url applies")
	shaping := []string{"auth-method", "auth-signin", "auth-signin-redirect-param", "auth-response-headers", "auth-request-redirect", "auth-cache-key", "auth-cache-duration", "auth-always-set-cookie", "auth-proxy-set-headers"}
	if s.auth == nil {
		if _, ok := annotations[NginxAnnotationPrefix+"auth-url"]; ok {
			setOutcome(outcomes, "auth-url", Ignored, emptyAnnotation)
		}
		for _, name := range shaping {
			if _, ok := annotations[NginxAnnotationPrefix+name]; ok {
				setOutcome(outcomes, name, Ignored, "without auth-url")
			}
		}
		return
	}
	// nginx sends GET unless told otherwise.
	a := &router.ExternalAuth{Style: router.AuthNginx, Method: "GET", AllHeaders: true, OriginalRequest: true, Path: "/"}
	if u := s.auth.url; u != nil {
		a.Path, a.RawQuery, a.Host = cmp.Or(u.EscapedPath(), "/"), u.RawQuery, u.Hostname()
	}
	for _, name := range shaping {
		v, ok := annotations[NginxAnnotationPrefix+name]
		if !ok {
			continue
		}
		if strings.TrimSpace(v) == "" {
			// As ingress-nginx reads one, and as charts that always
			// write the annotation render one left unset: not a value
			// the paths should answer 500 for.
			setOutcome(outcomes, name, Ignored, emptyAnnotation)
			continue
		}
		if name == "auth-signin-redirect-param" && annotations[NginxAnnotationPrefix+"auth-signin"] == "" {
			setOutcome(outcomes, name, Ignored, "without auth-signin")
			continue
		}
		if err := setNginxAuth(a, name, v, annotations); err != nil {
			setOutcome(outcomes, name, Invalid, err.Error())
		}
	}
	if a.Cache != nil {
		a.Cache.ID = id + " auth-cache"
	} else if duration := nginxOutcome(outcomes, "auth-cache-duration"); duration != nil && duration.Outcome == Honoured {
		duration.Outcome, duration.Reason = Ignored, "without a valid auth-cache-key"
	}
	if v, ok := annotations[NginxAnnotationPrefix+"auth-proxy-set-headers"]; ok {
		s.auth.setHeaders, _ = parseSecretRef(v)
	}
	// An invalid value of the group, whether its parser or setNginxAuth
	// refused it, leaves nothing half applied: no method, sign-in,
	// headers or cache of a default stands in for the one written.
	for _, name := range append([]string{"auth-url"}, shaping...) {
		if o := nginxOutcome(outcomes, name); o != nil && o.Outcome == Invalid {
			o.Reason += nginxAuthDenied
			s.auth.denied = true
		}
	}
	s.auth.filter = a
	if s.auth.denied {
		denyNginxAuth(a)
	}
}

// denyNginxAuth makes a answer 500 on every request: its backend is
// invalid, and it keeps no cache, whose answers, kept under the same
// identity across configuration changes, were given about another
// configuration and would otherwise still be acted on.
func denyNginxAuth(a *router.ExternalAuth) {
	a.Backend, a.Cache = router.BackendRef{Invalid: true, Weight: 1}, nil
}

// nginxDefaultAuthCache is auth-cache-duration's default, ingress-nginx's.
const nginxDefaultAuthCache = "200 202 401 5m"

// nginxRemoteUser is nginx's $remote_user, the user name of Basic
// authentication.
var nginxRemoteUser = regexp.MustCompile(`\$(remote_user\b|\{remote_user\})`)

// parseAuthCacheKey reads auth-cache-key: text and the request's values
// as upstream-hash-by takes them, in the characters ingress-nginx
// accepts. $remote_user stands for the whole Authorization field: a key
// finer than the user name alone, so that an answer about one password
// is not reused for another.
func parseAuthCacheKey(v string) ([]router.HashPart, error) {
	if v == "" || !nginxAuthCacheKey.MatchString(v) {
		return nil, fmt.Errorf("must be nginx variables and text of letters, digits, '-' and '_'")
	}
	parts, err := parseHashBy(nginxRemoteUser.ReplaceAllLiteralString(v, "$http_authorization"))
	// "$remote_user$http_authorization", the example ingress-nginx
	// gives, names the field twice: once is enough.
	return slices.Compact(parts), err
}

var nginxAuthCacheKey = regexp.MustCompile(`^[A-Za-z0-9\-_${}]+$`)

// maxAuthCacheTime bounds how long an answer is kept: nginx's "1y".
const maxAuthCacheTime = 365 * 24 * time.Hour

// nginxTimeUnits are nginx's units of time (its "M" is 30 days, "y" 365).
var nginxTimeUnits = map[string]time.Duration{
	"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour,
	"d": 24 * time.Hour, "w": 7 * 24 * time.Hour, "M": 30 * 24 * time.Hour, "y": 365 * 24 * time.Hour,
}

var nginxTimePart = regexp.MustCompile(`^(\d{1,9})(ms|s|m|h|d|w|M|y)$`)

// parseAuthCacheDurations reads auth-cache-duration: entries separated by
// commas, each status codes (or "any") then a time, as nginx's
// proxy_cache_valid takes them ("200 202 10m, 401 1m"); a time alone
// keeps 200, 301 and 302 answers, as in nginx.
func parseAuthCacheDurations(v string) ([]router.AuthCacheTTL, error) {
	var ttls []router.AuthCacheTTL
	for entry := range strings.SplitSeq(v, ",") {
		fields := strings.Fields(entry)
		if len(fields) == 0 {
			continue
		}
		var t router.AuthCacheTTL
		codes, anyCode := 0, false
		for _, f := range fields {
			if m := nginxTimePart.FindStringSubmatch(f); m != nil {
				n, _ := strconv.Atoi(m[1])
				unit := nginxTimeUnits[m[2]]
				if time.Duration(n) > maxAuthCacheTime/unit {
					return nil, fmt.Errorf("%q: at most 1y", strings.TrimSpace(entry))
				}
				t.TTL += time.Duration(n) * unit
				continue
			}
			if t.TTL > 0 {
				return nil, fmt.Errorf("%q: status codes come before the time", strings.TrimSpace(entry))
			}
			if f == "any" {
				anyCode = true
				continue
			}
			code, err := strconv.Atoi(f)
			if err != nil || len(f) != 3 || code < 100 || code > 599 {
				return nil, fmt.Errorf("%q: not a status code, any, or a time such as 30s, 5m or 1h", f)
			}
			t.Codes = append(t.Codes, code)
			codes++
		}
		switch {
		case t.TTL <= 0:
			return nil, fmt.Errorf("%q: needs a time such as 5m after its status codes", strings.TrimSpace(entry))
		case t.TTL > maxAuthCacheTime:
			return nil, fmt.Errorf("%q: at most 1y", strings.TrimSpace(entry))
		case anyCode:
			t.Codes = nil
		case codes == 0:
			t.Codes = []int{200, 301, 302}
		}
		ttls = append(ttls, t)
	}
	if len(ttls) == 0 {
		return nil, fmt.Errorf("must be status codes and a time, such as %q", nginxDefaultAuthCache)
	}
	return ttls, nil
}

// setNginxAuth applies one of the annotations that shape auth-url's
// filter to a.
func setNginxAuth(a *router.ExternalAuth, name, v string, annotations map[string]string) error {
	switch name {
	case "auth-method":
		if nginxAuthMethods.MatchString(v) {
			a.Method = v
		}
	case "auth-signin":
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || checkHeaderValue(v) != nil {
			return fmt.Errorf("must be an http or https URL")
		}
		if bad, ok := router.UnknownSignInVariable(v); ok {
			return fmt.Errorf("nginx variable %s is not expanded by hostgate (only %s are)", bad, strings.Join(router.SignInVariables, ", "))
		}
		param := cmp.Or(annotations[NginxAnnotationPrefix+"auth-signin-redirect-param"], "rd")
		if !nginxAuthHeader.MatchString(param) {
			param = "rd"
		}
		// A sign-in URL that names the parameter already is sent as it is.
		if u.Query().Has(param) {
			param = ""
		}
		a.SignIn, a.SignInParam = v, param
	case "auth-signin-redirect-param":
		// Without auth-signin it is ignored (settleAuth).
		if !nginxAuthHeader.MatchString(v) {
			return fmt.Errorf("must be a query parameter name of letters, digits, '-' and '_'")
		}
	case "auth-response-headers":
		var names []string
		for _, h := range strings.Split(v, ",") {
			h = strings.TrimSpace(h)
			if h == "" {
				continue
			}
			if !nginxAuthHeader.MatchString(h) {
				return fmt.Errorf("%q: not a header name of letters, digits, '-' and '_'", h)
			}
			names = append(names, h)
		}
		if len(names) > 64 {
			return fmt.Errorf("more than 64 header names")
		}
		a.ResponseHeaders = names
	case "auth-cache-key":
		key, err := parseAuthCacheKey(v)
		if err != nil {
			return err
		}
		ttls, err := parseAuthCacheDurations(cmp.Or(annotations[NginxAnnotationPrefix+"auth-cache-duration"], nginxDefaultAuthCache))
		if err != nil {
			// Reported on auth-cache-duration, which denies the filter
			// (settleAuth).
			return nil
		}
		// The ID gets each path's: pathFilters.
		a.Cache = &router.AuthCache{Key: key, TTLs: ttls}
	case "auth-cache-duration":
		if _, err := parseAuthCacheDurations(v); err != nil {
			return err
		}
	case "auth-always-set-cookie":
		always, err := parseNginxBool(v)
		a.AlwaysSetCookie = always
		return err
	case "auth-request-redirect":
		if strings.Contains(v, "$") {
			return fmt.Errorf("nginx variables are not expanded by hostgate")
		}
		if err := checkHeaderValue(v); err != nil {
			return err
		}
		a.RequestRedirect = v
	}
	return nil
}

// resolveNginxAuth finds the Service that auth-url names: a host of the
// form <service>.<namespace>.svc[.<cluster domain>] or
// <service>.<namespace>, at the URL's port (80 or 443 by default), and the
// fields auth-proxy-set-headers' ConfigMap adds to the authorization
// request. A URL that names no Service, or a ConfigMap that cannot be
// read as ingress-nginx would, denies the filter, as an invalid
// annotation of the group has (settleAuth): the paths of the Ingress in
// namespace answer 500 instead of going unauthenticated or asking the
// service without what it was meant to be told. A denied filter still
// has its Service and ConfigMap looked up, so that the report names every
// problem at once.
func (t *translator) resolveNginxAuth(namespace string, s *nginxSettings, outcomes []AnnotationOutcome) {
	if s.auth == nil || s.auth.filter == nil {
		return
	}
	a := s.auth.filter
	if s.auth.url == nil {
		return
	}
	ref, err := t.nginxURLService(s.auth.url)
	if err != nil {
		setOutcome(outcomes, "auth-url", Invalid, err.Error()+nginxAuthDenied)
		s.auth.denied = true
	}
	a.Backend = ref
	if s.auth.setHeaders.Name != "" {
		if a.RequestHeaders, err = t.authSetHeaders(namespace, s.auth.setHeaders); err != nil {
			setOutcome(outcomes, "auth-proxy-set-headers", Invalid, err.Error()+nginxAuthDenied)
			s.auth.denied = true
		}
	}
	if s.auth.denied {
		denyNginxAuth(a)
	}
}

// authSetHeaders reads auth-proxy-set-headers' ConfigMap ref of an
// Ingress in namespace: each key that can be a header name
// (nginxHeaderName; ingress-nginx's cache keeps no others, nor does
// hostgate's) is a field of the authorization request. A value must be
// sent as it is: nginx would expand its variables, hostgate does not.
func (t *translator) authSetHeaders(namespace string, ref types.NamespacedName) ([]router.Header, error) {
	if ref.Namespace == "" {
		ref.Namespace = namespace
	}
	if ref.Namespace != namespace {
		return nil, fmt.Errorf("ConfigMap %s: of another namespace, refused as ingress-nginx does", ref)
	}
	t.dependOnConfigMap(ref)
	cm := t.configMaps.last(ref)
	if cm == nil {
		return nil, fmt.Errorf("ConfigMap %s: not found", ref)
	}
	var headers []router.Header
	for _, key := range slices.Sorted(maps.Keys(cm.Data)) {
		value := cm.Data[key]
		switch {
		case !nginxHeaderName.MatchString(key):
			continue
		case strings.Contains(value, "$"):
			return nil, fmt.Errorf("ConfigMap %s: %s: nginx variables are not expanded by hostgate", ref, key)
		case checkHeaderValue(value) != nil:
			return nil, fmt.Errorf("ConfigMap %s: %s: its value has control characters or is longer than 4096", ref, key)
		}
		h := router.Header{Name: key, Value: value}
		if err := router.ValidateAuthRequestHeader(h); err != nil {
			return nil, fmt.Errorf("ConfigMap %s: %s: %w", ref, key, err)
		}
		headers = append(headers, h)
	}
	if len(headers) > router.MaxAuthHeaders {
		return nil, fmt.Errorf("ConfigMap %s: more than %d headers", ref, router.MaxAuthHeaders)
	}
	return headers, nil
}

// nginxServiceKey is the Service that an annotation's URL names by its
// DNS name (auth-url, mirror-target), or why it names none.
func nginxServiceKey(u *url.URL) (types.NamespacedName, error) {
	labels := strings.Split(strings.ToLower(u.Hostname()), ".")
	if len(labels) < 2 || len(labels) > 2 && labels[2] != "svc" {
		return types.NamespacedName{}, fmt.Errorf("host %q: must name a Service of the cluster (<service>.<namespace>.svc); hostgate reaches no other host", u.Hostname())
	}
	return types.NamespacedName{Namespace: labels[1], Name: labels[0]}, nil
}

// nginxURLService is the backend of the Service that an annotation's
// URL names, or why there is none.
func (t *translator) nginxURLService(u *url.URL) (router.BackendRef, error) {
	key, err := nginxServiceKey(u)
	if err != nil {
		return router.BackendRef{}, err
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return router.BackendRef{}, fmt.Errorf("port %q: not a port number", p)
		}
		port = n
	}
	svc := t.services.last(key)
	t.dependOnService(key)
	if svc == nil {
		return router.BackendRef{}, fmt.Errorf("Service %s/%s: %w", key.Namespace, key.Name, errServiceNotFound)
	}
	i := slices.IndexFunc(svc.Ports, func(p corev1.ServicePort) bool { return int(p.Port) == port })
	if i < 0 {
		return router.BackendRef{}, fmt.Errorf("Service %s/%s: has no port %d", key.Namespace, key.Name, port)
	}
	ref, berr := t.servicePort(svc, &svc.Ports[i], forHTTP)
	if berr != nil {
		return router.BackendRef{}, berr
	}
	if u.Scheme == "https" && ref.TLS == nil {
		// nginx does not check the service's certificate unless told to.
		ref.Protocol, ref.TLS = "https", &router.BackendTLS{ServerName: u.Hostname(), SkipVerify: true}
	}
	return ref, nil
}
