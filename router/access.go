package router

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/hostgate/hostgate/internal/htpasswd"
)

// Access decides by the client's address who may use a rule: an address
// in Deny is refused, and so is one outside Allow when Allow is set (403).
// Deny is checked first, as nginx's deny lines come before its allow
// lines in ingress-nginx's locations.
type Access struct {
	Deny  *AddressSet `json:",omitempty"`
	Allow *AddressSet `json:",omitempty"`
	// Closed, when set, says why the rule's access could not be set up
	// (an invalid allow list, a missing password file): every request is
	// answered 503, as ingress-nginx's denied locations are.
	Closed string `json:",omitempty"`
	// SatisfyAny makes the lists one way in of two, as nginx's satisfy
	// any: a client they allow needs no password, and one they refuse
	// may still pass the BasicAuth filter that must follow in the rule.
	SatisfyAny bool `json:",omitempty"`
}

// Allows reports whether a client at addr may use the rule; Closed is the
// caller's to check.
func (a *Access) Allows(addr netip.Addr) bool {
	if a.Deny != nil && a.Deny.Contains(addr) {
		return false
	}
	return a.Allow == nil || a.Allow.Contains(addr)
}

// BasicAuth asks for a user and password (RFC 7617) and lets through
// requests that carry one of Users with its password; others get 401 with
// a challenge for Realm.
type BasicAuth struct {
	// Source names where the users come from, e.g. "Secret default/auth".
	Source string
	Realm  string
	// Users are sorted by name; each Hash is one htpasswd.Check accepts.
	Users []htpasswd.Entry
}

// Hash returns the hash of user's password, false for an unknown user.
func (a *BasicAuth) Hash(user string) (string, bool) {
	i, ok := slices.BinarySearchFunc(a.Users, user, func(e htpasswd.Entry, u string) int { return strings.Compare(e.User, u) })
	if !ok {
		return "", false
	}
	return a.Users[i].Hash, true
}

// RateLimit bounds what each client address may ask of the rules that
// share Key: Rate requests per Per with Burst more at once, or Concurrent
// requests in flight. Exactly one of Rate and Concurrent is set. Clients
// in Exempt are not counted; the others, past the limit, get StatusCode.
type RateLimit struct {
	// Key identifies the limit across configurations: a client's count
	// survives a change of routes as long as Key stays, e.g. "Ingress
	// default/web rps".
	Key        string
	Rate       int
	Per        time.Duration
	Burst      int
	Concurrent int
	Exempt     *AddressSet `json:",omitempty"`
	StatusCode int
}

// AddressSet is a set of IP address ranges, as ParseAddressSet reads
// them. It encodes as its text, so that a state file keeps it.
type AddressSet struct {
	prefixes []netip.Prefix
	// v4 and v6 are the ranges of prefixes, sorted and merged, so that
	// Contains takes a binary search however long the list.
	v4 []addrSpan[uint32]
	v6 []addrSpan[uint128]
}

type uint128 struct{ hi, lo uint64 }

func (a uint128) cmp(b uint128) int {
	if c := cmp.Compare(a.hi, b.hi); c != 0 {
		return c
	}
	return cmp.Compare(a.lo, b.lo)
}

type addrSpan[T any] struct{ first, last T }

// ParseAddressSet reads a comma-separated list of CIDR ranges and
// addresses ("10.0.0.0/8, 192.168.1.1, 2001:db8::/32"). The error quotes
// the first entry that is neither.
func ParseAddressSet(list string) (*AddressSet, error) {
	var prefixes []netip.Prefix
	for entry := range strings.SplitSeq(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			a, aerr := netip.ParseAddr(entry)
			if aerr != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%s: not an IP address or CIDR range", quote(entry))
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		prefixes = append(prefixes, p.Masked())
	}
	if len(prefixes) == 0 {
		return nil, errors.New("no address or CIDR range")
	}
	return newAddressSet(prefixes), nil
}

func newAddressSet(prefixes []netip.Prefix) *AddressSet {
	s := &AddressSet{prefixes: prefixes}
	for _, p := range prefixes {
		a := p.Addr().Unmap()
		bits := p.Bits()
		if p.Addr().Is4In6() {
			bits -= 96
		}
		if a.Is4() {
			first := be32(a.As4())
			s.v4 = append(s.v4, addrSpan[uint32]{first, first | lowOnes32(32-max(bits, 0))})
			continue
		}
		b := a.As16()
		first := uint128{be64(b[:8]), be64(b[8:])}
		mask := lowOnes128(128 - bits)
		s.v6 = append(s.v6, addrSpan[uint128]{first, uint128{first.hi | mask.hi, first.lo | mask.lo}})
	}
	s.v4 = mergeSpans(s.v4, cmp.Compare[uint32], func(x uint32) (uint32, bool) { return x + 1, x != ^uint32(0) })
	s.v6 = mergeSpans(s.v6, uint128.cmp, func(x uint128) (uint128, bool) {
		if x.lo == ^uint64(0) {
			return uint128{x.hi + 1, 0}, x.hi != ^uint64(0)
		}
		return uint128{x.hi, x.lo + 1}, true
	})
	return s
}

// mergeSpans sorts spans and joins those that overlap or touch.
func mergeSpans[T any](spans []addrSpan[T], compare func(a, b T) int, next func(T) (T, bool)) []addrSpan[T] {
	slices.SortFunc(spans, func(a, b addrSpan[T]) int { return compare(a.first, b.first) })
	out := spans[:0]
	for _, s := range spans {
		if n := len(out); n > 0 {
			last := &out[n-1]
			after, ok := next(last.last)
			if !ok || compare(s.first, after) <= 0 {
				if compare(s.last, last.last) > 0 {
					last.last = s.last
				}
				continue
			}
		}
		out = append(out, s)
	}
	return slices.Clip(out)
}

// Contains reports whether addr is in s. IPv4 addresses match IPv4
// ranges whether written as such or IPv4-mapped.
func (s *AddressSet) Contains(addr netip.Addr) bool {
	addr = addr.Unmap()
	if addr.Is4() {
		return within(s.v4, be32(addr.As4()), cmp.Compare[uint32])
	}
	b := addr.As16()
	return within(s.v6, uint128{be64(b[:8]), be64(b[8:])}, uint128.cmp)
}

func within[T any](spans []addrSpan[T], x T, compare func(a, b T) int) bool {
	i, found := slices.BinarySearchFunc(spans, x, func(s addrSpan[T], x T) int { return compare(s.first, x) })
	if found {
		return true
	}
	return i > 0 && compare(x, spans[i-1].last) <= 0
}

func be32(b [4]byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func be64(b []byte) uint64 {
	return uint64(be32([4]byte(b[:4])))<<32 | uint64(be32([4]byte(b[4:8])))
}

func lowOnes32(n int) uint32 {
	if n >= 32 {
		return ^uint32(0)
	}
	return 1<<n - 1
}

func lowOnes128(n int) uint128 {
	if n <= 64 {
		if n == 64 {
			return uint128{0, ^uint64(0)}
		}
		return uint128{0, 1<<n - 1}
	}
	return uint128{uint64(1)<<(n-64) - 1, ^uint64(0)}
}

// String is the list as given, normalized: "10.0.0.0/8,192.168.1.1/32".
func (s *AddressSet) String() string {
	out := make([]string, len(s.prefixes))
	for i, p := range s.prefixes {
		out[i] = p.String()
	}
	return strings.Join(out, ",")
}

func (s *AddressSet) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

func (s *AddressSet) UnmarshalText(text []byte) error {
	parsed, err := ParseAddressSet(string(text))
	if err != nil {
		return err
	}
	*s = *parsed
	return nil
}

func validateAccess(a *Access) error {
	if a.Deny == nil && a.Allow == nil && a.Closed == "" {
		return errors.New("neither deny, allow nor closed")
	}
	return nil
}

func validateBasicAuth(a *BasicAuth) error {
	if strings.ContainsFunc(a.Realm, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '"' || r == '\\' }) {
		return fmt.Errorf("realm: %s: must not hold control characters, '\"' or '\\'", quote(a.Realm))
	}
	for i, u := range a.Users {
		if i > 0 && a.Users[i-1].User >= u.User {
			return fmt.Errorf("users[%d]: not sorted by name, or named twice", i)
		}
		if err := htpasswd.Check(u.Hash); err != nil {
			return fmt.Errorf("users[%d] (%s): %w", i, quote(u.User), err)
		}
	}
	return nil
}

func validateRateLimit(l *RateLimit) error {
	switch {
	case l.Key == "":
		return errors.New("key: must not be empty")
	case (l.Rate > 0) == (l.Concurrent > 0):
		return errors.New("exactly one of rate and concurrent must be set")
	case l.Rate < 0 || l.Concurrent < 0 || l.Burst < 0:
		return errors.New("rate, burst and concurrent must not be negative")
	case l.Rate > 0 && l.Per < time.Second:
		return errors.New("per: must be at least 1s")
	case l.StatusCode < 400 || l.StatusCode > 599:
		return fmt.Errorf("statusCode: %d is not from 400 to 599", l.StatusCode)
	}
	return nil
}
