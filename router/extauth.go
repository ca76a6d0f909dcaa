package router

// External authorization: a request is forwarded only once an
// authorization service said yes. Two sources ask for it with different
// answers to the client, so the model carries both styles rather than
// either source's fields: the Gateway API's ExternalAuth filter (route
// filter or listener filter) and ingress-nginx's auth-url annotations.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// ExternalAuth asks an authorization service whether a request may go on.
type ExternalAuth struct {
	// Backend is the authorization service, an endpoint set like any
	// backend's.
	Backend BackendRef
	// Path is the path of the authorization request; with PrefixPath it
	// is put in front of the request's own path (Gateway API http.path),
	// which then keeps its query. RawQuery is the query sent otherwise.
	Path       string
	PrefixPath bool `json:",omitempty"`
	RawQuery   string
	// Method is the authorization request's method, "" for the request's.
	Method string
	// Host is the authorization request's Host, "" for the request's.
	Host string
	// AllHeaders sends every field of the request along (ingress-nginx);
	// otherwise only Authorization and AllowedHeaders are.
	AllHeaders     bool     `json:",omitempty"`
	AllowedHeaders []string `json:",omitempty"`
	// OriginalRequest adds ingress-nginx's description of the request:
	// X-Original-URL, X-Original-Method, X-Auth-Request-Redirect
	// (RequestRedirect, or the request's URI when empty).
	OriginalRequest bool   `json:",omitempty"`
	RequestRedirect string `json:",omitempty"`
	// RequestHeaders are set on the authorization request, over the
	// request's own fields and OriginalRequest's (ingress-nginx's
	// auth-proxy-set-headers).
	RequestHeaders []Header `json:",omitempty"`
	// ResponseHeaders are copied from an allowing answer into the
	// forwarded request, replacing what the client sent under those
	// names; AllResponseHeaders copies every field of the answer but
	// those that describe the answer itself (its length, type, encoding,
	// date, server) and Host.
	ResponseHeaders    []string `json:",omitempty"`
	AllResponseHeaders bool     `json:",omitempty"`
	// MaxBody is how many bytes of the request body go along (Gateway API
	// forwardBody.maxSize); 0 sends none.
	MaxBody int64 `json:",omitempty"`
	// Style says which answers allow the request and what the client
	// gets for the others.
	Style AuthStyle
	// SignIn, with AuthNginx, turns a 401 into a 302 to this URL, with
	// the request's URL in its SignInParam query parameter when that is
	// not empty (ingress-nginx auth-signin). It may hold SignInVariables,
	// filled from the request.
	SignIn      string `json:",omitempty"`
	SignInParam string `json:",omitempty"`
	// Cache, with AuthNginx, keeps the service's answers for a while.
	Cache *AuthCache `json:",omitempty"`
	// AlwaysSetCookie, with AuthNginx, gives the client the Set-Cookie
	// fields of the service's answer on every answer, denials and errors
	// included, rather than only on those that nginx's add_header adds
	// to (ingress-nginx auth-always-set-cookie).
	AlwaysSetCookie bool `json:",omitempty"`
}

// AuthCache keeps an authorization service's answers, so that a request
// with the same key is answered from the cache rather than asked about
// (ingress-nginx's auth-cache-key and auth-cache-duration: nginx's
// proxy_cache on the authorization request).
type AuthCache struct {
	// ID identifies the cache across configurations: its answers
	// survive a change of routes as long as ID stays. Two filters with
	// the same ID share answers, so it names the keyspace too (nginx's
	// is the server and the location).
	ID string
	// Key are the request's values an answer is kept under; the request's
	// host always joins them, as nginx's key starts with the server name.
	Key []HashPart
	// TTLs say how long an answer is kept by its status: the first that
	// lists the status, or lists none, applies; an answer with a status
	// none applies to is not kept.
	TTLs []AuthCacheTTL
}

// AuthCacheTTL is how long answers with one of Codes (any status when
// empty) are kept.
type AuthCacheTTL struct {
	Codes []int `json:",omitempty"`
	TTL   time.Duration
}

// TTLFor is how long an answer with status is kept; 0: not at all.
func (c *AuthCache) TTLFor(status int) time.Duration {
	for _, t := range c.TTLs {
		if len(t.Codes) == 0 || slices.Contains(t.Codes, status) {
			return t.TTL
		}
	}
	return 0
}

// maxAuthCacheTTL bounds how long an answer is kept (nginx's "1y").
const maxAuthCacheTTL = 365 * 24 * time.Hour

func validateAuthCache(c *AuthCache) error {
	if c.ID == "" || hasControl(c.ID) {
		return errors.New("cache.id: must be set, without control characters")
	}
	if err := validateHashParts("cache.key", c.Key); err != nil {
		return err
	}
	if len(c.TTLs) == 0 {
		return errors.New("cache.ttls: must say how long some answers are kept")
	}
	for i, t := range c.TTLs {
		if t.TTL <= 0 || t.TTL > maxAuthCacheTTL {
			return fmt.Errorf("cache.ttls[%d] %s: must be more than 0 and at most %s", i, t.TTL, maxAuthCacheTTL)
		}
		for _, code := range t.Codes {
			if code < 100 || code > 599 {
				return fmt.Errorf("cache.ttls[%d] code %d: must be 100 to 599", i, code)
			}
		}
	}
	return nil
}

// AuthStyle is how an authorization service's answer is acted on.
type AuthStyle uint8

const (
	// AuthGateway allows on 200 and gives the client any other answer as
	// the service gave it (Gateway API HTTP ExternalAuth, as Envoy's
	// ext_authz does).
	AuthGateway AuthStyle = iota
	// AuthNginx allows on any 2xx, gives the client 401 or 403 as such
	// (with the service's WWW-Authenticate), and 500 for anything else
	// (nginx's auth_request). The Set-Cookie fields of the service's
	// answer go to the client on answers with the statuses of
	// SetCookieStatus (ingress-nginx's add_header Set-Cookie
	// $auth_cookie), or on all with AlwaysSetCookie.
	AuthNginx
)

// SetCookieStatus reports whether nginx's add_header, without "always",
// adds a field to an answer with status.
func SetCookieStatus(status int) bool {
	switch status {
	case 200, 201, 204, 206, 301, 302, 303, 304, 307, 308:
		return true
	}
	return false
}

func (s AuthStyle) String() string {
	if s == AuthNginx {
		return "nginx"
	}
	return "gateway"
}

// SignInVariables may appear in ExternalAuth.SignIn: the request's host
// without and with its port, its scheme, its URI, and its URI escaped as
// a query parameter.
var SignInVariables = []string{"$host", "$http_host", "$scheme", "$request_uri", "$escaped_request_uri"}

// UnknownSignInVariable returns the first "$" word of s that is not one
// of SignInVariables.
func UnknownSignInVariable(s string) (string, bool) {
	for i := strings.IndexByte(s, '$'); i >= 0; i = strings.IndexByte(s, '$') {
		s = s[i:]
		end := 1
		for end < len(s) && (s[end] == '_' || 'a' <= s[end] && s[end] <= 'z' || 'A' <= s[end] && s[end] <= 'Z' || '0' <= s[end] && s[end] <= '9') {
			end++
		}
		if !slices.Contains(SignInVariables, s[:end]) {
			return s[:end], true
		}
		s = s[end:]
	}
	return "", false
}

// MaxAuthHeaders bounds the header lists of an ExternalAuth (the Gateway
// API allows 64 each).
const MaxAuthHeaders = 64

// ValidateExternalAuth checks a as Compile does, so that a translator
// can report a bad value on the field it came from.
func ValidateExternalAuth(a *ExternalAuth) error { return validateExternalAuth(a) }

func validateExternalAuth(a *ExternalAuth) error {
	if err := validateBackend(&a.Backend); err != nil {
		return fmt.Errorf("backendRef.%w", err)
	}
	if len(a.Backend.Filters) > 0 {
		return errors.New("backendRef.filters: an authorization service has none")
	}
	if a.Path != "" && !strings.HasPrefix(a.Path, "/") {
		return fmt.Errorf("path %s: must start with \"/\"", quote(a.Path))
	}
	if len(a.Path) > maxPathLen || hasControl(a.Path) || strings.ContainsAny(a.Path, " ?#") {
		return fmt.Errorf("path %s: must be at most %d characters without spaces, control characters, '?' or '#'", quote(a.Path), maxPathLen)
	}
	if len(a.RawQuery) > maxPathLen || hasControl(a.RawQuery) || strings.ContainsAny(a.RawQuery, " #") {
		return fmt.Errorf("query %s: must be at most %d characters without spaces, control characters or '#'", quote(a.RawQuery), maxPathLen)
	}
	if a.Method != "" && !isToken(a.Method) {
		return fmt.Errorf("method %s: not an HTTP method", quote(a.Method))
	}
	if a.Host != "" {
		if err := validateValue(a.Host); err != nil || strings.ContainsAny(a.Host, " /") {
			return fmt.Errorf("host %s: not a host", quote(a.Host))
		}
	}
	for _, list := range []struct {
		field string
		names []string
	}{{"allowedHeaders", a.AllowedHeaders}, {"responseHeaders", a.ResponseHeaders}} {
		if len(list.names) > MaxAuthHeaders {
			return fmt.Errorf("%s: more than %d", list.field, MaxAuthHeaders)
		}
		for i, name := range list.names {
			if !isToken(name) {
				return fmt.Errorf("%s[%d] %s: not an HTTP header name", list.field, i, quote(name))
			}
		}
	}
	if err := validateValue(a.RequestRedirect); err != nil {
		return fmt.Errorf("requestRedirect: %w", err)
	}
	if len(a.RequestHeaders) > MaxAuthHeaders {
		return fmt.Errorf("requestHeaders: more than %d", MaxAuthHeaders)
	}
	for i, h := range a.RequestHeaders {
		if err := ValidateAuthRequestHeader(h); err != nil {
			return fmt.Errorf("requestHeaders[%d] %s: %w", i, quote(h.Name), err)
		}
	}
	if a.MaxBody < 0 {
		return fmt.Errorf("maxBody %d: must not be negative", a.MaxBody)
	}
	if a.Style > AuthNginx {
		return fmt.Errorf("style: unknown style %d", a.Style)
	}
	if a.AlwaysSetCookie && a.Style != AuthNginx {
		return errors.New("alwaysSetCookie: only with the nginx style")
	}
	if a.Cache != nil {
		if a.Style != AuthNginx {
			return errors.New("cache: only with the nginx style")
		}
		if err := validateAuthCache(a.Cache); err != nil {
			return err
		}
	}
	if a.SignIn != "" {
		if a.Style != AuthNginx {
			return errors.New("signIn: only with the nginx style")
		}
		if len(a.SignIn) > maxPathLen || hasControl(a.SignIn) || a.SignInParam != "" && !isToken(a.SignInParam) {
			return fmt.Errorf("signIn %s: must be at most %d characters without control characters, with a parameter name or none", quote(a.SignIn), maxPathLen)
		}
		if v, ok := UnknownSignInVariable(a.SignIn); ok {
			return fmt.Errorf("signIn %s: %s is not one of %s", quote(a.SignIn), v, strings.Join(SignInVariables, ", "))
		}
	}
	return nil
}

// ValidateAuthRequestHeader refuses a field the authorization request
// must not be given: one that frames the message or names the host, which
// the proxy sets, or one that is no field at all.
func ValidateAuthRequestHeader(h Header) error {
	if !isToken(h.Name) {
		return errors.New("not an HTTP header name")
	}
	switch strings.ToLower(h.Name) {
	case "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer", "expect":
		return errors.New("set by the proxy")
	}
	return validateValue(h.Value)
}

func describeExternalAuth(b *strings.Builder, a *ExternalAuth) {
	fmt.Fprintf(b, " %s style=%s", describeBackend(a.Backend), a.Style)
	if a.Method != "" {
		fmt.Fprintf(b, " method=%s", a.Method)
	}
	if a.PrefixPath {
		describeSet(b, "pathPrefix", a.Path)
	} else {
		describeSet(b, "path", a.Path)
	}
	describeSet(b, "query", a.RawQuery)
	describeSet(b, "host", a.Host)
	if a.AllHeaders {
		b.WriteString(" allHeaders")
	}
	describeSet(b, "allowedHeaders", strings.Join(a.AllowedHeaders, ","))
	if a.OriginalRequest {
		b.WriteString(" originalRequest")
	}
	describeSet(b, "requestRedirect", a.RequestRedirect)
	// Names only: a value may be a credential for the service.
	names := make([]string, len(a.RequestHeaders))
	for i, h := range a.RequestHeaders {
		names[i] = h.Name
	}
	describeSet(b, "requestHeaders", strings.Join(names, ","))
	if a.AllResponseHeaders {
		b.WriteString(" allResponseHeaders")
	}
	describeSet(b, "responseHeaders", strings.Join(a.ResponseHeaders, ","))
	if a.MaxBody > 0 {
		fmt.Fprintf(b, " maxBody=%d", a.MaxBody)
	}
	if a.SignIn != "" {
		fmt.Fprintf(b, " signIn=%s param=%s", a.SignIn, a.SignInParam)
	}
	if a.AlwaysSetCookie {
		b.WriteString(" alwaysSetCookie")
	}
	if c := a.Cache; c != nil {
		fmt.Fprintf(b, " cache=%q key=%v", c.ID, c.Key)
		for _, t := range c.TTLs {
			if len(t.Codes) == 0 {
				fmt.Fprintf(b, " ttl(any)=%s", t.TTL)
			} else {
				fmt.Fprintf(b, " ttl%v=%s", t.Codes, t.TTL)
			}
		}
	}
}

// WithListenerFilters returns a copy of t whose listener hostnames run
// filters, each its list in order, on every request before route
// matching (Gateway API listener filters). Only ExternalAuth filters may
// run there. t itself does not change.
func (t *Table) WithListenerFilters(filters map[string][]Filter) (*Table, error) {
	for _, name := range slices.Sorted(maps.Keys(filters)) {
		for i := range filters[name] {
			f := &filters[name][i]
			if f.Type != FilterExternalAuth {
				return nil, fmt.Errorf("listener %q: filters[%d].type: %s cannot run before route matching", name, i, f.Type)
			}
			if err := validateFilter(f); err != nil {
				return nil, fmt.Errorf("listener %q: filters[%d].%w", name, i, err)
			}
		}
	}
	c := *t
	c.listenerFilters = filters
	if len(filters) == 0 {
		c.listenerFilters = nil
	}
	return &c, nil
}

// HasListenerFilters reports whether some listener of t runs filters
// before route matching.
func (t *Table) HasListenerFilters() bool { return t.listenerFilters != nil }

// ListenerFilters are the filters that the listener serving host (as the
// client wrote it) runs before route matching.
func (t *Table) ListenerFilters(host string) []Filter {
	if t.listenerFilters == nil {
		return nil
	}
	sc := t.scopeOf(host)
	if sc == nil {
		return nil
	}
	return t.listenerFilters[sc.listener]
}
