package pipeline

// A rule's canary and a backend's balance (router/traffic.go), executed
// for every engine: decide chooses the backend and reads what the pick
// needs of the request; the engines' attempts pick through plan.pick; the
// answer carries the session cookie where editResponse adds it.
//
// Affinity keeps no table: a persistent cookie holds the token of its
// endpoint (upstream.Host.Token, a hash of the address), a balanced one a
// session key that is hashed onto the endpoints, so a session survives a
// configuration swap, a restart, and a move to another node by
// construction.

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
)

// balancing is what plan.pick needs besides the set.
type balancing struct {
	balance *router.Balance
	// hashed says key chooses the endpoint (a hash of request values, or
	// a balanced session's key).
	hashed bool
	key    uint64
	// pinned is the endpoint a persistent cookie names, nil when none.
	pinned *upstream.Host
	// secure says the answer goes over HTTPS, for the cookie's Secure.
	secure bool
	// cookie is the Set-Cookie of the answer, "" for none.
	cookie string
	// sameSite is the cookie's SameSite, "" for none.
	sameSite string
}

// chooseCanary chooses among the backends of a rule with a canary. A
// client with a session cookie of the main backend stays with it, and one
// with a session of the canary (whose affinity is the main's under
// ingress-nginx's affinity-canary-behavior sticky) with the canary, before
// any header, cookie or weight, as ingress-nginx's balancer decides.
func chooseCanary(rule *router.Rule, h router.Headers) *router.BackendRef {
	for _, canary := range []bool{false, true} {
		for i := range rule.Backends {
			b := &rule.Backends[i]
			if b.Canary != canary || b.Balance == nil || b.Balance.Affinity == nil {
				continue
			}
			if _, ok := b.Balance.Affinity.Session(h); ok {
				return b
			}
		}
	}
	choice := rule.Canary.Choose(h)
	if choice == router.CanaryByWeight {
		return router.ChooseBackend(rule.Backends)
	}
	for i := range rule.Backends {
		if b := &rule.Backends[i]; b.Canary == (choice == router.CanaryAlways) {
			return b
		}
	}
	return nil
}

// prepare reads what b's pick needs of the request.
func (p *plan) prepare(v *view, b *router.Balance) {
	bal := &balancing{balance: b}
	p.balancing = bal
	a := b.Affinity
	if a == nil {
		if len(b.Hash) > 0 {
			bal.hashed, bal.key = true, b.HashKey(&v.Request, v.client)
		}
		return
	}
	bal.secure, bal.sameSite = v.scheme == "https", a.SameSiteFor(v.Header)
	key, valid := a.Session(v.Header)
	switch {
	case a.Persistent:
		if valid {
			bal.pinned = p.set.Find(key)
		}
	case valid:
		bal.hashed, bal.key = true, key
	default:
		bal.hashed, bal.key = true, rand.Uint64()
		bal.cookie = affinityCookie(a, bal.key, bal.secure, bal.sameSite)
	}
}

// pick returns the endpoint of the next attempt, not one of skip (those
// tried), and sets the cookie of a persistent session that it starts or
// moves.
func (p *plan) pick(skip []*upstream.Host) *upstream.Host {
	bal := p.balancing
	if bal == nil {
		return p.set.Pick(skip)
	}
	if bal.pinned != nil && upstream.Usable(bal.pinned, skip) {
		return bal.pinned
	}
	var h *upstream.Host
	switch b := bal.balance; {
	case bal.hashed:
		h = p.set.PickHash(bal.key, skip)
	case b.Policy == router.BalanceLeastRequest:
		h = p.set.PickBy(upstream.LeastRequest, skip)
	case b.Policy == router.BalanceRoundRobin:
		h = p.set.PickBy(upstream.RoundRobin, skip)
	default:
		h = p.set.Pick(skip)
	}
	// A session whose endpoint is gone starts anew; one whose endpoint
	// failed comes back to it unless the cookie is to change.
	if a := bal.balance.Affinity; a != nil && a.Persistent && h != nil && (bal.pinned == nil || a.ChangeOnFailure) {
		bal.cookie = affinityCookie(a, h.Token(), bal.secure, bal.sameSite)
	}
	return h
}

// affinityCookie is the Set-Cookie value that holds value (HttpOnly, as
// ingress-nginx sends it), with sameSite for a.SameSite: the user agent
// may not take SameSite=None.
func affinityCookie(a *router.Affinity, value uint64, https bool, sameSite string) string {
	var b strings.Builder
	b.WriteString(a.Cookie)
	b.WriteByte('=')
	if a.Canary {
		b.WriteString(router.CanaryCookiePrefix)
	}
	fmt.Fprintf(&b, "%016x", value)
	if a.Path != "" {
		b.WriteString("; Path=" + a.Path)
	}
	if a.Domain != "" {
		b.WriteString("; Domain=" + a.Domain)
	}
	if a.Expires > 0 {
		b.WriteString("; Expires=" + time.Now().Add(a.Expires).UTC().Format(http.TimeFormat))
	}
	if a.MaxAge > 0 {
		b.WriteString("; Max-Age=" + strconv.FormatInt(int64(a.MaxAge/time.Second), 10))
	}
	if a.Secure != nil && *a.Secure || a.Secure == nil && https {
		b.WriteString("; Secure")
	}
	b.WriteString("; HttpOnly")
	if sameSite != "" {
		b.WriteString("; SameSite=" + sameSite)
	}
	if a.Partitioned {
		b.WriteString("; Partitioned")
	}
	return b.String()
}
