// Package router owns hostgate's route model and the compiled, immutable
// routing table built from it.
//
// The model is plain data: watch/ translates Ingress, HTTPRoute and GRPCRoute
// objects into Routes, and proxy/ executes the Filters and picks among the
// BackendRefs of the Rule that Lookup returns. No Kubernetes type appears
// here, so the table does not change when the APIs it is fed from do.
//
// A Table never changes after Compile returns it; callers publish a new one
// behind an atomic pointer and the serving path reads it without locks.
package router

import (
	"fmt"
	"slices"
	"time"
)

// Kind names the API object a route was translated from. It decides how
// wildcard hostnames match (Ingress: exactly one label) and which precedence
// rules apply (GRPCRoute orders by service and method).
type Kind string

const (
	KindIngress   Kind = "Ingress"
	KindHTTPRoute Kind = "HTTPRoute"
	KindGRPCRoute Kind = "GRPCRoute"
)

// RouteID identifies the object a route came from, for precedence ties,
// error messages and /debug/routes.
type RouteID struct {
	Kind      Kind
	Namespace string
	Name      string
}

func (id RouteID) String() string {
	return string(id.Kind) + " " + id.Namespace + "/" + id.Name
}

// Route is one routing object: hostnames it serves and its ordered rules.
type Route struct {
	ID RouteID
	// Created breaks precedence ties: the older route wins.
	Created time.Time
	// Hostnames are lower-case DNS names, optionally with a leading "*."
	// label. Empty means every host.
	Hostnames []string
	// Listener is the hostname of the Gateway listener the route is served
	// through ("" for a listener without hostname, and for Ingress). A
	// request goes to the most specific listener hostname that matches its
	// host, and only that listener's routes can serve it.
	Listener string
	Rules    []Rule
}

// SameRoute reports whether a and b are the same route: equal, with the
// very same rules. Translators hand out the rules of an unchanged route
// again, so this is cheap where comparing every rule of 10,000 routes
// took milliseconds; rules that are equal but not the same make a route
// changed, so that a Table's Targets point to the rules it was given.
func SameRoute(a, b *Route) bool {
	return a.ID == b.ID && a.Created.Equal(b.Created) && a.Listener == b.Listener && slices.Equal(a.Hostnames, b.Hostnames) &&
		len(a.Rules) == len(b.Rules) && (len(a.Rules) == 0 || &a.Rules[0] == &b.Rules[0])
}

// Rule is a set of alternative matches sharing filters and backends.
type Rule struct {
	// Name is the rule's optional name (Gateway API sectionName of a rule).
	Name string
	// Matches are alternatives; an empty list matches every request
	// (HTTP: path prefix "/"; gRPC: any service and method).
	Matches  []Match
	Filters  []Filter
	Backends []BackendRef
	Timeouts Timeouts
	// Retry is the rule's retry policy; nil sends a request once (a failed
	// connect still moves to another endpoint).
	Retry *Retry
	// MaxRequestBody is the largest request body, in bytes, the rule
	// forwards; a larger one is answered 413 (ingress-nginx's
	// proxy-body-size). 0: no limit.
	MaxRequestBody int64 `json:",omitempty"`
	// Fallback, when set, answers for the rule's backends where they have
	// no endpoint, or answer with one of its codes (ingress-nginx's
	// default-backend and custom-http-errors).
	Fallback *Fallback `json:",omitempty"`
	// Canary, when set, decides between the backends marked Canary and
	// the others (traffic.go).
	Canary *Canary `json:",omitempty"`
	// NoAccessLog leaves the rule's requests out of the access log.
	NoAccessLog bool `json:",omitempty"`
	// ResponseRate, when set, bounds how fast each answer's body goes
	// to the client (ingress-nginx's limit-rate and limit-rate-after).
	ResponseRate *ResponseRate `json:",omitempty"`
}

// ResponseRate bounds the rate of an answer's body: after the first After
// bytes, at most BytesPerSecond, with one second of it allowed at once
// (nginx's limit_rate, which counts from the request's start, so that a
// client that read slowly may catch up by that much). Each request has
// its own budget, as in nginx.
type ResponseRate struct {
	BytesPerSecond int64
	After          int64 `json:",omitempty"`
}

// Timeouts are a rule's timeouts; zero means none.
type Timeouts struct {
	// Request and BackendRequest are the HTTPRoute rule timeouts: the
	// whole request, and each attempt to a backend.
	Request        time.Duration
	BackendRequest time.Duration
	// Connect bounds each connection attempt to a backend (proxy/'s dial
	// timeout when zero).
	Connect time.Duration `json:",omitempty"`
	// BackendRead is the longest wait for the backend's response between
	// two reads, the first from the request sent (nginx's
	// proxy_read_timeout): a response not begun by then is answered 504,
	// one begun is cut.
	BackendRead time.Duration `json:",omitempty"`
	// BackendSend is the longest a write of the request to the backend
	// may wait (nginx's proxy_send_timeout).
	BackendSend time.Duration `json:",omitempty"`
}

// Fallback is the backend that answers instead of a rule's, as
// ingress-nginx's default backends do: a request whose chosen backend has
// no endpoint goes to it as it is, with Headers and "X-Code: 503"; a
// request whose answer has one of Codes is sent to it again, without its
// body, for the path "/", with Headers, X-Code (the status replaced) and
// X-Original-URI (the request's path and query). Its answer, status
// included, is the client's.
type Fallback struct {
	Backend BackendRef
	// Codes are the statuses, 400 to 599, whose answers are replaced.
	Codes []int `json:",omitempty"`
	// Headers are sent to the fallback backend with every request.
	Headers []Header `json:",omitempty"`
}

// Retry says when proxy/ sends a request to the backend again: after an
// answer with one of Codes, or a failure to get an answer, up to Attempts
// more times, waiting from Backoff before each.
type Retry struct {
	// Codes are the statuses, 400 to 599, that are tried again.
	Codes []int
	// Attempts is how many times a request may be sent again; 0 never.
	Attempts int
	// Backoff is the wait before the first retry; the next ones wait
	// longer (proxy/ says how).
	Backoff time.Duration
	// Budget bounds the time, from the start of the request, within
	// which the request may go to another endpoint, whether as a retry
	// or after a failed connect; an attempt under way is not cut short
	// (nginx's proxy_next_upstream_timeout). 0: no bound. A policy may
	// have a Budget and no Attempts: it bounds only the moves after
	// failed connects, which proxy/ makes without a policy.
	Budget time.Duration `json:",omitempty"`
}

// Match is one set of conditions that must all hold. An HTTP route uses
// Path, Method and Query; a gRPC route uses GRPC. Both may use Headers.
type Match struct {
	Path    PathMatch
	Method  string
	Headers []ValueMatch
	Query   []ValueMatch
	GRPC    *GRPCMatch
}

// PathMatchType is how a PathMatch compares the request path.
type PathMatchType uint8

const (
	// PathPrefix matches element by element: "/foo" matches "/foo" and
	// "/foo/bar" but not "/foobar". A trailing "/" on the value is ignored.
	PathPrefix PathMatchType = iota
	// PathExact matches the path string exactly.
	PathExact
	// PathRegularExpression matches when the RE2 expression matches the
	// whole path.
	PathRegularExpression
)

func (t PathMatchType) String() string {
	switch t {
	case PathExact:
		return "Exact"
	case PathRegularExpression:
		return "RegularExpression"
	default:
		return "PathPrefix"
	}
}

// PathMatch is a path condition. The zero value is PathPrefix "" which,
// like "/", matches every path.
type PathMatch struct {
	Type  PathMatchType
	Value string
}

// ValueMatchType is how a header or query parameter value is compared.
type ValueMatchType uint8

const (
	MatchExact ValueMatchType = iota
	MatchRegularExpression
)

func (t ValueMatchType) String() string {
	if t == MatchRegularExpression {
		return "RegularExpression"
	}
	return "Exact"
}

// ValueMatch is a header or query parameter condition. Header names compare
// case-insensitively, query parameter names case-sensitively; values always
// compare case-sensitively, and a regular expression must match the whole
// value.
type ValueMatch struct {
	Type  ValueMatchType
	Name  string
	Value string
}

// GRPCMatch selects gRPC calls by service and method; an empty Value matches
// any service or method.
type GRPCMatch struct {
	Type    ValueMatchType
	Service string
	Method  string
}

// FilterType names a filter. proxy/ executes them in rule order.
type FilterType uint8

const (
	FilterRequestHeaderModifier FilterType = iota + 1
	FilterResponseHeaderModifier
	FilterRequestRedirect
	FilterURLRewrite
	FilterRequestMirror
	FilterCORS
	// FilterAccess, FilterBasicAuth and FilterRateLimit decide whether
	// a request is served at all (access.go).
	FilterAccess
	FilterBasicAuth
	FilterRateLimit
	FilterExternalAuth
	// FilterClientCertificate checks the client's TLS certificate
	// (ClientCertAuth).
	FilterClientCertificate
	// FilterResponseRewrite rewrites cookie and redirect fields of the
	// backend's answer (ResponseRewrite).
	FilterResponseRewrite
)

func (t FilterType) String() string {
	switch t {
	case FilterRequestHeaderModifier:
		return "RequestHeaderModifier"
	case FilterResponseHeaderModifier:
		return "ResponseHeaderModifier"
	case FilterRequestRedirect:
		return "RequestRedirect"
	case FilterURLRewrite:
		return "URLRewrite"
	case FilterRequestMirror:
		return "RequestMirror"
	case FilterCORS:
		return "CORS"
	case FilterAccess:
		return "Access"
	case FilterBasicAuth:
		return "BasicAuth"
	case FilterRateLimit:
		return "RateLimit"
	case FilterExternalAuth:
		return "ExternalAuth"
	case FilterClientCertificate:
		return "ClientCertificate"
	case FilterResponseRewrite:
		return "ResponseRewrite"
	}
	return "Unknown"
}

// Filter is one filter; exactly the field named by Type is set.
type Filter struct {
	Type           FilterType
	RequestHeaders *HeaderModifier
	// ResponseHeaders is set for FilterResponseHeaderModifier.
	ResponseHeaders *HeaderModifier
	Redirect        *Redirect
	Rewrite         *Rewrite
	Mirror          *Mirror
	CORS            *CORS
	Access          *Access          `json:",omitempty"`
	BasicAuth       *BasicAuth       `json:",omitempty"`
	RateLimit       *RateLimit       `json:",omitempty"`
	ExternalAuth    *ExternalAuth    `json:",omitempty"`
	ClientCert      *ClientCertAuth  `json:",omitempty"`
	ResponseRewrite *ResponseRewrite `json:",omitempty"`
}

// ResponseRewrite rewrites fields of a backend's answer that name the
// backend's own host or paths, as nginx's proxy_cookie_domain,
// proxy_cookie_path and proxy_redirect do. Nil replacements change nothing.
type ResponseRewrite struct {
	// CookieDomain replaces the Domain attribute of Set-Cookie fields
	// equal to From, compared case-insensitively and without a leading
	// dot, which is kept.
	CookieDomain *Replacement `json:",omitempty"`
	// CookiePath replaces From at the start of the Path attribute of
	// Set-Cookie fields.
	CookiePath *Replacement `json:",omitempty"`
	// Redirect replaces From at the start of the Location field and of
	// the URL of the Refresh field.
	Redirect *Replacement `json:",omitempty"`
}

// Replacement is a literal text and what replaces it.
type Replacement struct {
	From, To string
}

// replacements are rw's replacements by field name, nil where unset.
func (rw *ResponseRewrite) replacements() []struct {
	name string
	r    *Replacement
} {
	return []struct {
		name string
		r    *Replacement
	}{{"cookieDomain", rw.CookieDomain}, {"cookiePath", rw.CookiePath}, {"redirect", rw.Redirect}}
}

// HeaderModifier changes headers: Set replaces, Add appends, Remove deletes.
type HeaderModifier struct {
	Set    []Header
	Add    []Header
	Remove []string
}

// Header is a header name and value.
type Header struct {
	Name  string
	Value string
}

// PathModifierType says how a redirect or rewrite changes the path.
type PathModifierType uint8

const (
	ReplaceFullPath PathModifierType = iota + 1
	// ReplacePrefixMatch replaces the part of the path that the rule's
	// PathPrefix matched.
	ReplacePrefixMatch
	// ReplaceRegexCaptures replaces the whole path with Value, in which
	// $1 to $9 stand for the captures of the rule's PathRegularExpression
	// (ingress-nginx's rewrite-target). It needs regex matches only. In a
	// URLRewrite, Value may have a query after a '?', as nginx's rewrite:
	// it then replaces the request's, which follows it after "&" unless
	// Value ends with '?'.
	ReplaceRegexCaptures
)

func (t PathModifierType) String() string {
	switch t {
	case ReplacePrefixMatch:
		return "ReplacePrefixMatch"
	case ReplaceRegexCaptures:
		return "ReplaceRegexCaptures"
	}
	return "ReplaceFullPath"
}

// PathModifier is a path replacement.
type PathModifier struct {
	Type  PathModifierType
	Value string
}

// Redirect answers with a redirect instead of forwarding. Empty or zero
// fields keep the request's value.
type Redirect struct {
	// Location, when set, is the whole Location sent, whatever the
	// request (ingress-nginx's permanent-redirect); the parts below are
	// then empty.
	Location   string `json:",omitempty"`
	Scheme     string
	Hostname   string
	Port       int
	Path       *PathModifier
	StatusCode int
	// TrimTrailingSlash drops a trailing slash of a path without a query
	// from the Location (ingress-nginx's redirect to HTTPS).
	TrimTrailingSlash bool `json:",omitempty"`
	// RequestHost puts the request's Host in the Location as the client
	// sent it, port and all, in place of the host and port above
	// (ingress-nginx's app-root, with nginx's $http_host).
	RequestHost bool `json:",omitempty"`
	// DropQuery leaves the request's query out of the Location.
	DropQuery bool `json:",omitempty"`
}

// Rewrite changes the request before it is forwarded.
type Rewrite struct {
	Hostname string
	Path     *PathModifier
}

// Mirror sends a copy of a share of requests to another backend and ignores
// its response. Numerator/Denominator of 0/0 means every request.
type Mirror struct {
	Backend     BackendRef
	Numerator   int32
	Denominator int32
	// Hostname, when set, is the Host of the copy, and Path its path (the
	// query is kept): ingress-nginx mirrors to a URL, not to the request's
	// own Host and path.
	Hostname string `json:",omitempty"`
	Path     string `json:",omitempty"`
	// NoBody sends the copy of a request that has a body without it
	// (ingress-nginx's mirror-request-body: off).
	NoBody bool `json:",omitempty"`
}

// BackendRef names an endpoint set that proxy/ resolves; Weight is relative
// among a rule's backends (0 takes no traffic).
type BackendRef struct {
	// Name keys the endpoint set, e.g. "default/web:8080".
	Name    string
	Weight  int32
	Filters []Filter
	// Protocol is how proxy/ speaks to the backend ("", "h2c", "https",
	// "h2"); empty means HTTP/1.1 or whatever the request was.
	Protocol string
	// Invalid marks a reference that could not be resolved; requests that
	// pick it get 500, as the Gateway API asks, and the other backends keep
	// their share of the traffic.
	Invalid bool
	// TLS, set with Protocol "https" or "h2", is how the backend's
	// certificate is checked; nil checks it as proxy/'s defaults say.
	// References to one backend share one value, so that proxy/ can tell
	// the identities of a table apart by pointer.
	TLS *BackendTLS `json:",omitempty"`
	// Canary marks a backend of a rule's Canary.
	Canary bool `json:",omitempty"`
	// Balance, when set, is how proxy/ picks the backend's endpoint for a
	// request instead of its default policy (traffic.go).
	Balance *Balance `json:",omitempty"`
	// ProxyProtocol, 1 or 2, is the version of the PROXY protocol header
	// a Layer 4 backend expects at the start of each TCP connection,
	// naming the client; 0: none.
	ProxyProtocol uint8 `json:",omitempty"`
}

// BackendTLS is the TLS identity a backend must prove (Gateway API
// BackendTLSPolicy).
type BackendTLS struct {
	// ServerName is sent in SNI and, without SubjectAltNames, is the name
	// the certificate must hold.
	ServerName string
	// CAPEM holds the certificates of the authorities to trust; nil trusts
	// the system's roots.
	CAPEM []byte
	// SubjectAltNames, when given, replace ServerName in the check: the
	// certificate must hold one of them.
	SubjectAltNames []SubjectAltName `json:",omitempty"`
	// SkipVerify leaves the backend's certificate unchecked: what
	// ingress-nginx does for HTTPS backends unless proxy-ssl-verify is on.
	// ServerName is then only sent.
	SkipVerify bool `json:",omitempty"`
	// VerifyDepth, when not 0, is the most certificates a verified chain
	// may have above the backend's own (ingress-nginx's
	// proxy-ssl-verify-depth).
	VerifyDepth int `json:",omitempty"`
	// ClientCertificate, when set, is presented to the backend (Gateway
	// API Gateway spec.tls.backend.clientCertificateRef): backends of
	// routes on different Gateways may differ in it alone.
	ClientCertificate *ClientCertificate `json:",omitempty"`
	// MinVersion and MaxVersion, when not 0, bound the TLS versions
	// offered (crypto/tls's VersionTLS12 and VersionTLS13; ingress-nginx's
	// proxy-ssl-protocols).
	MinVersion uint16 `json:",omitempty"`
	MaxVersion uint16 `json:",omitempty"`
	// CipherSuites, when set, are the TLS 1.2 cipher suites offered, by
	// crypto/tls ID (ingress-nginx's proxy-ssl-ciphers). TLS 1.3's are
	// Go's choice: crypto/tls has no setting for them.
	CipherSuites []uint16 `json:",omitempty"`
}

// ClientCertificate is a certificate chain and its key that proxy/
// presents to backends.
type ClientCertificate struct {
	// Name is where it comes from, e.g. a Secret's "namespace/name".
	Name    string
	CertPEM []byte
	KeyPEM  PrivateKey
}

// PrivateKey is PEM key material. It prints as "[REDACTED]" so that a
// logged or dumped table does not leak keys.
type PrivateKey []byte

// Format implements fmt.Formatter for every verb.
func (PrivateKey) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte("[REDACTED]")) }

// MarshalText keeps keys out of JSON and YAML encodings too.
func (PrivateKey) MarshalText() ([]byte, error) { return []byte("[REDACTED]"), nil }

// UnmarshalText reads what MarshalText writes as no key at all: a key
// cannot come back from an encoding, and whoever keeps one keeps it apart.
func (k *PrivateKey) UnmarshalText([]byte) error { *k = nil; return nil }

// SubjectAltName is a DNS name or a URI that a backend certificate may
// hold; exactly one of them is set.
type SubjectAltName struct {
	Hostname string `json:",omitempty"`
	URI      string `json:",omitempty"`
}
