package router

// Traffic policies: how a rule splits its requests between canary backends
// and the others, and how proxy/ picks the endpoint of a backend (round
// robin, least request, a hash of request values, a session cookie).
// watch/ fills them in from ingress-nginx's canary, load-balance,
// upstream-hash-by and affinity annotations; they hold parsed values only,
// and the decisions that depend on nothing but the request are made here,
// so that every engine makes them the same way.

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/textproto"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Canary chooses between a rule's backends marked Canary and the others,
// in ingress-nginx's order of precedence:
//   - a request with the header Header: with HeaderValue (or HeaderPattern)
//     set, a value equal to it (or that it finds) goes to the canary and
//     any other value falls through; without either, "always" goes to the
//     canary, "never" to the others, and any other value falls through;
//   - then a request with the cookie Cookie: "always" or "never" alike;
//   - then the backends' weights.
type Canary struct {
	// Header is in canonical form; "" checks no header.
	Header      string `json:",omitempty"`
	HeaderValue string `json:",omitempty"`
	// HeaderPattern is searched for anywhere in the value, as nginx's
	// regular expressions are.
	HeaderPattern *regexp.Regexp `json:",omitempty"`
	Cookie        string         `json:",omitempty"`
}

// CanaryChoice is what a Canary decides for a request.
type CanaryChoice uint8

const (
	// CanaryByWeight leaves the choice to the backends' weights.
	CanaryByWeight CanaryChoice = iota
	CanaryAlways
	CanaryNever
)

// Choose decides for a request with header h.
func (c *Canary) Choose(h Headers) CanaryChoice {
	if v, ok := headerValue(h, c.Header); c.Header != "" && ok {
		switch {
		case c.HeaderValue != "":
			if v == c.HeaderValue {
				return CanaryAlways
			}
		case c.HeaderPattern != nil:
			if c.HeaderPattern.MatchString(v) {
				return CanaryAlways
			}
		case v == "always":
			return CanaryAlways
		case v == "never":
			return CanaryNever
		}
	}
	if c.Cookie != "" {
		switch v, _ := CookieValue(h, c.Cookie); v {
		case "always":
			return CanaryAlways
		case "never":
			return CanaryNever
		}
	}
	return CanaryByWeight
}

// CookieValue returns the value of the request cookie name, without
// allocating: the first one of that name over every Cookie field (HTTP/2
// and HTTP/3 may split them), unquoted.
func CookieValue(h Headers, name string) (string, bool) {
	if h == nil {
		return "", false
	}
	var fields []string
	if hh, ok := h.(http.Header); ok {
		fields = hh["Cookie"]
	} else {
		fields = h.Values("Cookie")
	}
	for _, field := range fields {
		for field != "" {
			var pair string
			pair, field, _ = strings.Cut(field, ";")
			key, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok || key != name {
				continue
			}
			if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
				value = value[1 : len(value)-1]
			}
			return value, true
		}
	}
	return "", false
}

// Balance is how proxy/ picks an endpoint of a backend: with Affinity, the
// one a session cookie names; else, with Hash, the one the request's
// values hash to (consistently: a change of endpoints moves few keys);
// else by Policy.
type Balance struct {
	Policy   BalancePolicy `json:",omitempty"`
	Hash     []HashPart    `json:",omitempty"`
	Affinity *Affinity     `json:",omitempty"`
}

// BalancePolicy is a way to spread requests over endpoints.
type BalancePolicy uint8

const (
	// BalanceDefault is proxy/'s own policy (its --lb-policy).
	BalanceDefault BalancePolicy = iota
	BalanceRoundRobin
	// BalanceLeastRequest takes the less loaded of two endpoints drawn
	// at random.
	BalanceLeastRequest
)

func (p BalancePolicy) String() string {
	switch p {
	case BalanceRoundRobin:
		return "round-robin"
	case BalanceLeastRequest:
		return "least-request"
	}
	return "default"
}

// HashSource is where a HashPart's value comes from.
type HashSource uint8

const (
	// HashText is Name itself.
	HashText HashSource = iota + 1
	// HashRequestURI is the path and query as sent.
	HashRequestURI
	// HashPath is the path as sent, without the query.
	HashPath
	// HashHost is the request's host, lower case, without port.
	HashHost
	// HashClient is the real client's address.
	HashClient
	// HashHeader, HashCookie and HashQuery are the value of the header,
	// cookie or query parameter Name (header names in canonical form).
	HashHeader
	HashCookie
	HashQuery
)

// HashPart is one value of a hash key.
type HashPart struct {
	Source HashSource
	Name   string `json:",omitempty"`
}

func (p HashPart) String() string {
	switch p.Source {
	case HashText:
		return fmt.Sprintf("%q", p.Name)
	case HashRequestURI:
		return "requestURI"
	case HashPath:
		return "path"
	case HashHost:
		return "host"
	case HashClient:
		return "client"
	case HashHeader:
		return "header:" + p.Name
	case HashCookie:
		return "cookie:" + p.Name
	case HashQuery:
		return "query:" + p.Name
	}
	return "unknown"
}

// HashKey is the hash of the values of b.Hash in req from client. A value
// the request lacks hashes as empty, as nginx's variables are. It does not
// allocate.
func (b *Balance) HashKey(req *Request, client netip.Addr) uint64 {
	w := keyWriter{hash: fnvOffset}
	w.parts(b.Hash, req, client)
	return uint64(w.hash)
}

// AppendKey appends the values of parts in req from client to dst, each
// followed by a zero byte, which no request value holds (HTTP forbids it
// in fields, and paths and queries are kept escaped): different values
// never give the same bytes, as a key of a cache must not.
func AppendKey(dst []byte, parts []HashPart, req *Request, client netip.Addr) []byte {
	w := keyWriter{buf: dst, appending: true}
	w.parts(parts, req, client)
	return w.buf
}

// keyWriter takes the values of HashParts, into a hash or appended to
// buf: one reading of the request for both keeps them the same.
type keyWriter struct {
	hash      fnvHash
	buf       []byte
	appending bool
}

func (w *keyWriter) add(s string) {
	if w.appending {
		w.buf = append(w.buf, s...)
	} else {
		w.hash.add(s)
	}
}

func (w *keyWriter) addByte(c byte) {
	if w.appending {
		w.buf = append(w.buf, c)
	} else {
		w.hash.addByte(c)
	}
}

// parts writes the value of each part; appending, each ends with a zero
// byte (the hash has none, so that hashes stay what they were).
func (w *keyWriter) parts(parts []HashPart, req *Request, client netip.Addr) {
	for _, p := range parts {
		switch p.Source {
		case HashText:
			w.add(p.Name)
		case HashRequestURI:
			w.add(req.Path)
			if req.RawQuery != "" {
				w.add("?")
				w.add(req.RawQuery)
			}
		case HashPath:
			w.add(req.Path)
		case HashHost:
			host := req.Host
			if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
				host = host[:i]
			}
			for i := 0; i < len(host); i++ {
				c := host[i]
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				w.addByte(c)
			}
		case HashClient:
			a := client.As16()
			for _, c := range a {
				w.addByte(c)
			}
		case HashHeader:
			v, _ := headerValue(req.Header, p.Name)
			w.add(v)
		case HashCookie:
			v, _ := CookieValue(req.Header, p.Name)
			w.add(v)
		case HashQuery:
			v, _ := queryValue(req.RawQuery, p.Name)
			w.add(v)
		}
		if w.appending {
			w.buf = append(w.buf, 0)
		}
	}
}

// fnvHash is 64-bit FNV-1a, inline so that hashing a string does not
// convert it to bytes.
type fnvHash uint64

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func (h *fnvHash) addByte(c byte) { *h = (*h ^ fnvHash(c)) * fnvPrime }

func (h *fnvHash) add(s string) {
	for i := 0; i < len(s); i++ {
		h.addByte(s[i])
	}
}

// Affinity pins a client to an endpoint with a cookie (ingress-nginx's
// session affinity). Persistent, the cookie names the endpoint (by a hash
// of its address) and the client stays with it while it is listed;
// otherwise the cookie holds a random session key that is hashed onto the
// endpoints, so that a new endpoint takes its share of the sessions.
type Affinity struct {
	Cookie string
	// Path, Domain, SameSite ("None", "Lax", "Strict"), MaxAge and
	// Expires (from the time it is sent) are the cookie's attributes,
	// left out when empty or zero.
	Path     string        `json:",omitempty"`
	Domain   string        `json:",omitempty"`
	SameSite string        `json:",omitempty"`
	MaxAge   time.Duration `json:",omitempty"`
	Expires  time.Duration `json:",omitempty"`
	// Secure, when nil, marks the cookie Secure on HTTPS requests only.
	Secure     *bool `json:",omitempty"`
	Persistent bool  `json:",omitempty"`
	// ChangeOnFailure gives a client a new cookie when its endpoint
	// failed and another answered; otherwise it comes back to its own.
	ChangeOnFailure bool `json:",omitempty"`
	// Partitioned keeps the cookie to the top-level site it was set under
	// (CHIPS), for a backend embedded in other sites.
	Partitioned bool `json:",omitempty"`
	// ConditionalSameSiteNone leaves SameSite=None out for the user agents
	// that reject such cookies (SameSiteNoneIncompatible).
	ConditionalSameSiteNone bool `json:",omitempty"`
	// Canary marks the affinity of a canary backend: its cookie's values
	// start with CanaryCookiePrefix, so that a session with the canary is
	// told from one with the main backend under the same cookie name.
	Canary bool `json:",omitempty"`
}

// CanaryCookiePrefix starts the values of a canary backend's session
// cookie; the main backend's are 16 hexadecimal digits.
const CanaryCookiePrefix = "c"

// Session reports whether the request has a session cookie of a: a
// request whose cookie another backend's affinity wrote, or that is
// malformed, has none.
func (a *Affinity) Session(h Headers) (key uint64, ok bool) {
	value, _ := CookieValue(h, a.Cookie)
	if a.Canary {
		var tagged bool
		if value, tagged = strings.CutPrefix(value, CanaryCookiePrefix); !tagged {
			return 0, false
		}
	}
	if len(value) != 16 {
		return 0, false
	}
	key, err := strconv.ParseUint(value, 16, 64)
	return key, err == nil
}

func (c *Canary) String() string {
	var b strings.Builder
	b.WriteString("canary")
	describeSet(&b, "header", c.Header)
	describeSet(&b, "value", c.HeaderValue)
	if c.HeaderPattern != nil {
		describeSet(&b, "pattern", c.HeaderPattern.String())
	}
	describeSet(&b, "cookie", c.Cookie)
	return b.String()
}

func (b *Balance) String() string {
	var s strings.Builder
	s.WriteString("balance=" + b.Policy.String())
	if len(b.Hash) > 0 {
		parts := make([]string, len(b.Hash))
		for i, p := range b.Hash {
			parts[i] = p.String()
		}
		s.WriteString(" hash=" + strings.Join(parts, "+"))
	}
	if a := b.Affinity; a != nil {
		mode := "balanced"
		if a.Persistent {
			mode = "persistent"
		}
		fmt.Fprintf(&s, " affinity=%s cookie=%s", mode, a.Cookie)
		if a.Canary {
			s.WriteString(" (canary sessions)")
		}
		describeSet(&s, "path", a.Path)
		describeSet(&s, "domain", a.Domain)
		describeSet(&s, "samesite", a.SameSite)
		if a.MaxAge != 0 {
			fmt.Fprintf(&s, " maxAge=%s", a.MaxAge)
		}
		if a.Expires != 0 {
			fmt.Fprintf(&s, " expires=%s", a.Expires)
		}
		if a.Secure != nil {
			fmt.Fprintf(&s, " secure=%t", *a.Secure)
		}
		if a.ChangeOnFailure {
			s.WriteString(" changeOnFailure")
		}
		if a.Partitioned {
			s.WriteString(" partitioned")
		}
		if a.ConditionalSameSiteNone {
			s.WriteString(" conditionalSameSiteNone")
		}
	}
	return s.String()
}

// validateCanary checks a rule's Canary against its backends.
func validateCanary(rule *Rule) error {
	c := rule.Canary
	canaries := 0
	for i := range rule.Backends {
		if rule.Backends[i].Canary {
			canaries++
		}
	}
	switch {
	case canaries == 0 || canaries == len(rule.Backends):
		return errors.New("canary: needs canary backends and others")
	case c.Header != textproto.CanonicalMIMEHeaderKey(c.Header) || !isToken(c.Header):
		return fmt.Errorf("canary.header %q: must be a header name in canonical form", c.Header)
	case c.Cookie != "" && !isToken(c.Cookie):
		return fmt.Errorf("canary.cookie %q: must be a cookie name", c.Cookie)
	}
	return nil
}

// validateHashParts checks the parts of a key; field names the list.
func validateHashParts(field string, parts []HashPart) error {
	for i, p := range parts {
		if p.Source < HashText || p.Source > HashQuery {
			return fmt.Errorf("%s[%d]: unknown source", field, i)
		}
		if (p.Source == HashHeader || p.Source == HashCookie || p.Source == HashQuery) && p.Name == "" {
			return fmt.Errorf("%s[%d]: %s needs a name", field, i, p)
		}
	}
	return nil
}

// validateBalance checks a backend's Balance.
func validateBalance(b *Balance) error {
	if err := validateHashParts("hash", b.Hash); err != nil {
		return err
	}
	a := b.Affinity
	if a == nil {
		return nil
	}
	switch {
	case !isToken(a.Cookie):
		return fmt.Errorf("affinity.cookie %q: must be a cookie name", a.Cookie)
	case !isCookieAttribute(a.Path) || !isCookieAttribute(a.Domain):
		return errors.New("affinity: path and domain must not hold ';' or control characters")
	case a.SameSite != "" && a.SameSite != "None" && a.SameSite != "Lax" && a.SameSite != "Strict":
		return fmt.Errorf("affinity.sameSite %q: must be None, Lax or Strict", a.SameSite)
	case a.MaxAge < 0 || a.Expires < 0:
		return errors.New("affinity: maxAge and expires must not be negative")
	}
	return nil
}

func isCookieAttribute(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ';' })
}
