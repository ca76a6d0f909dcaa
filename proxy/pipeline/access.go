package pipeline

// The access filters' execution, the same on every engine: who may use a
// rule by address (router.Access), who by password (router.BasicAuth),
// and how much each client address may ask (router.RateLimit). They run
// in decide, before a rule's other filters, in the order nginx's phases
// give them in ingress-nginx: rate limits (preaccess), then the address
// lists, then the password (access).
//
// State that outlives a configuration lives in guardRegistry, owned by the
// Server: rate-limit counts keyed by the limit's Key, so that a route
// change does not hand every client a fresh budget, and the cache of
// verified passwords keyed by the filter, which a configuration that keeps
// the filter keeps. A listener's table resolves its filters to that state
// once per Apply (guards); requests look them up by pointer and take no
// lock but a limiter shard's.

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash/maphash"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/internal/htpasswd"
	"github.com/hostgate/hostgate/router"
)

// guards are the state of the access filters of one table, and of its
// external authorization's caches (authcache.go).
type guards struct {
	limiters   map[*router.RateLimit]*limiter
	creds      map[*router.BasicAuth]*credentialCache
	authCaches map[*router.AuthCache]*authCache
}

// guardRegistry owns the state of access filters across Applies. Only
// Apply uses it, under the server's lock.
type guardRegistry struct {
	limiters   map[string]*limiter
	creds      map[*router.BasicAuth]*credentialCache
	authCaches map[string]*authCache
	// applies counts the Applies; an entry whose used is not the current
	// count was not used by the last one.
	applies uint64
	epoch   time.Time
}

func newGuardRegistry() *guardRegistry {
	return &guardRegistry{limiters: map[string]*limiter{}, creds: map[*router.BasicAuth]*credentialCache{}, authCaches: map[string]*authCache{}, epoch: time.Now()}
}

// resolve returns the state of every access filter of routes, made or
// kept from the last Apply; nil when routes has none.
func (r *guardRegistry) resolve(routes *router.Table) *guards {
	if routes == nil {
		return nil
	}
	var g *guards
	some := func() *guards {
		if g == nil {
			g = &guards{}
		}
		return g
	}
	for f := range routes.Filters() {
		switch {
		case f.RateLimit != nil:
			l := r.limiters[f.RateLimit.Key]
			if l == nil {
				l = &limiter{epoch: r.epoch, seed: maphash.MakeSeed()}
				r.limiters[f.RateLimit.Key] = l
			}
			l.configure(f.RateLimit)
			l.used = r.applies
			setIn(&some().limiters, f.RateLimit, l)
		case f.BasicAuth != nil:
			c := r.creds[f.BasicAuth]
			if c == nil {
				c = &credentialCache{challenge: `Basic realm="` + f.BasicAuth.Realm + `"`}
				r.creds[f.BasicAuth] = c
			}
			c.used = r.applies
			setIn(&some().creds, f.BasicAuth, c)
		case f.ExternalAuth != nil && f.ExternalAuth.Cache != nil:
			ac := f.ExternalAuth.Cache
			c := r.authCaches[ac.ID]
			if c == nil {
				c = newAuthCache()
				r.authCaches[ac.ID] = c
			}
			c.used = r.applies
			setIn(&some().authCaches, ac, c)
		}
	}
	return g
}

// setIn sets (*m)[k] to v, making the map first: most tables have no
// state of most kinds.
func setIn[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}

// dropUnused forgets the state that no table of the last Apply uses.
func (r *guardRegistry) dropUnused() {
	for key, l := range r.limiters {
		if l.used != r.applies {
			delete(r.limiters, key)
		}
	}
	for a, c := range r.creds {
		if c.used != r.applies {
			delete(r.creds, a)
		}
	}
	for id, c := range r.authCaches {
		if c.used != r.applies {
			delete(r.authCaches, id)
		}
	}
	r.applies++
}

// Bodies of the access filters' answers; the rate limit's status is the
// filter's own.
const (
	bodyUnauthorized = "unauthorized\n"
	bodyForbidden    = "forbidden\n"
	bodyClosed       = "access not configured\n"
	bodyLimited      = "too many requests\n"
)

// guard runs an access filter. It reports false when the plan answers the
// request itself (actDenied).
func (p *plan) guard(f *router.Filter, v *view) bool {
	switch f.Type {
	case router.FilterRateLimit:
		l := v.guards.limiters[f.RateLimit]
		if l == nil || f.RateLimit.Exempt != nil && f.RateLimit.Exempt.Contains(v.client) {
			p.charged++
			return true
		}
		if !l.take(v.client) {
			return p.deny(f.RateLimit.StatusCode, bodyLimited, "")
		}
		p.charged++
	case router.FilterAccess:
		allowed := f.Access.Allows(v.client)
		switch {
		case f.Access.Closed != "":
			return p.deny(http.StatusServiceUnavailable, bodyClosed, "")
		case f.Access.SatisfyAny:
			// The BasicAuth filter that follows decides the others,
			// with 401, as nginx prefers 401 to 403 under satisfy any.
			p.granted = allowed
		case !allowed:
			return p.deny(http.StatusForbidden, bodyForbidden, "")
		}
	case router.FilterBasicAuth:
		if p.granted {
			break
		}
		c := v.guards.creds[f.BasicAuth]
		if c == nil || !c.check(f.BasicAuth, v.Header.Values("Authorization")) {
			challenge := `Basic realm="` + f.BasicAuth.Realm + `"`
			if c != nil {
				challenge = c.challenge
			}
			return p.deny(http.StatusUnauthorized, bodyUnauthorized, challenge)
		}
	}
	return true
}

func (p *plan) deny(status int, body, challenge string) bool {
	p.action, p.status, p.body, p.challenge = actDenied, status, body, challenge
	return false
}

// release gives back what the plan's rate limits took: the requests in
// flight when the request ends and, with undo, the rates' requests too,
// for a request that another engine serves instead (and takes them
// again).
func (p *plan) release(v *view, undo bool) {
	n := p.charged
	if n == 0 {
		return
	}
	rule := p.target.Rule
	for i := range rule.Filters {
		rl := rule.Filters[i].RateLimit
		if rl == nil {
			continue
		}
		if n == 0 {
			return
		}
		n--
		l := v.guards.limiters[rl]
		if l == nil || rl.Exempt != nil && rl.Exempt.Contains(v.client) {
			continue
		}
		if rl.Concurrent > 0 || undo {
			l.give(v.client)
		}
	}
}

// A limiter counts per client address in a fixed-size table: shards of
// slots, each client's in one of probe slots from where its hash points.
// A new client takes a free slot or the one of those used longest ago,
// whose client starts afresh when it comes back (as in nginx's zones, which
// drop the least recently used states when full). Slots of clients with
// requests in flight are not taken over.
const (
	limiterShards = 64
	shardSlots    = 256
	probe         = 8
)

type limiter struct {
	// interval is the time one request of a rate uses up, tolerance how
	// far ahead of now a client may be (burst × interval), concurrent the
	// requests in flight allowed; set from the filter at each Apply.
	interval, tolerance, concurrent atomic.Int64
	epoch                           time.Time
	seed                            maphash.Seed
	used                            uint64
	shards                          [limiterShards]limiterShard
}

type limiterShard struct {
	mu sync.Mutex
	// slots are made on first use: a limit most clients never reach
	// costs little.
	slots *[shardSlots]limiterSlot
	_     [40]byte // a cache line each
}

type limiterSlot struct {
	addr [16]byte
	// n is, for a rate, the theoretical arrival time of the client's next
	// request in nanoseconds since the epoch (GCRA, the same as nginx's
	// leaky bucket with nodelay); for concurrency, the requests in
	// flight.
	n int64
	// seen is when the client last came; 0 for a free slot.
	seen int64
}

func (l *limiter) configure(rl *router.RateLimit) {
	if rl.Rate > 0 {
		interval := int64(rl.Per) / int64(rl.Rate)
		l.interval.Store(interval)
		l.tolerance.Store(interval * int64(rl.Burst))
	}
	l.concurrent.Store(int64(rl.Concurrent))
}

// slot finds addr's slot in its shard, which the caller has locked, or
// makes one; nil when every candidate has requests in flight.
func (l *limiter) slot(s *limiterShard, addr [16]byte, h uint64, now int64, create bool) *limiterSlot {
	if s.slots == nil {
		if !create {
			return nil
		}
		s.slots = new([shardSlots]limiterSlot)
	}
	var victim *limiterSlot
	concurrent := l.concurrent.Load() > 0
	for i := range uint64(probe) {
		sl := &s.slots[(h+i)%shardSlots]
		if sl.seen != 0 && sl.addr == addr {
			return sl
		}
		if !create || concurrent && sl.n > 0 && sl.seen != 0 {
			continue
		}
		if victim == nil || sl.seen < victim.seen {
			victim = sl
		}
	}
	if victim != nil {
		*victim = limiterSlot{addr: addr, seen: now}
	}
	return victim
}

func (l *limiter) locate(client netip.Addr) (*limiterShard, [16]byte, uint64) {
	addr := client.Unmap().As16()
	h := maphash.Comparable(l.seed, addr)
	return &l.shards[h%limiterShards], addr, h / limiterShards
}

// take counts a request of client; false when it is over the limit.
func (l *limiter) take(client netip.Addr) bool {
	s, addr, h := l.locate(client)
	now := int64(time.Since(l.epoch)) + 1
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := l.slot(s, addr, h, now, true)
	if sl == nil {
		// Every candidate is busy: rather than refuse a client for
		// others' load, it goes uncounted.
		return true
	}
	sl.seen = now
	if limit := l.concurrent.Load(); limit > 0 {
		if sl.n >= limit {
			return false
		}
		sl.n++
		return true
	}
	tat := max(sl.n, now)
	if tat-now > l.tolerance.Load() {
		return false
	}
	sl.n = tat + l.interval.Load()
	return true
}

// give takes back a request take counted.
func (l *limiter) give(client netip.Addr) {
	s, addr, h := l.locate(client)
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := l.slot(s, addr, h, 0, false)
	if sl == nil {
		return
	}
	if l.concurrent.Load() > 0 {
		sl.n = max(sl.n-1, 0)
	} else {
		sl.n -= l.interval.Load()
	}
}

// credentialCache remembers the credentials a BasicAuth filter accepted,
// by their SHA-256, so that a client sending the same ones again does not
// pay for bcrypt again; a fixed number of slots, each credential in the
// one its digest picks, the last one to arrive winning it. Refusals are
// not kept: a wrong password costs its check every time.
type credentialCache struct {
	challenge string
	slots     [64]atomic.Pointer[[sha256.Size]byte]
	used      uint64
}

// check reports whether the Authorization field values carry a user of a
// and its password.
func (c *credentialCache) check(a *router.BasicAuth, values []string) bool {
	if len(values) != 1 {
		return false
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return false
	}
	token = strings.TrimLeft(token, " ")
	var buf [128]byte
	digest := sha256.Sum256(append(buf[:0], token...))
	slot := &c.slots[binary.LittleEndian.Uint64(digest[:8])%uint64(len(c.slots))]
	if known := slot.Load(); known != nil && *known == digest {
		return true
	}
	raw, err := base64.StdEncoding.DecodeString(token)
	if err != nil {
		return false
	}
	user, password, ok := strings.Cut(string(raw), ":")
	if !ok {
		return false
	}
	hash, ok := a.Hash(user)
	if !ok || !htpasswd.Verify(hash, password) {
		return false
	}
	stored := new([sha256.Size]byte)
	*stored = digest
	slot.Store(stored)
	return true
}
