// Package upstream owns the backend side of proxying: endpoint sets, the
// state of each endpoint address that outlives them (passive health and
// in-flight requests), and the choice of an endpoint for a request.
//
// Endpoint sets change with every pod that comes or goes, so a Set is cheap
// to rebuild and immutable once built; the state that must survive a
// rebuild lives in a Host, which the Registry hands to every Set that lists
// the same address. Picking an endpoint takes no lock.
//
// It also keeps the HTTP/1.1 connections to endpoints (pool.go): a Pool of
// idle keep-alive connections per address, and the Conn a request is
// written on, whose reads can watch the client meanwhile. It knows no
// request, route or client connection: those belong to the request path
// and the engines that use it. HTTP/2 backends have their own client in
// proxy/h2.
package upstream

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hostgate/hostgate/internal/shardmap"
)

// Endpoint is one backend address.
type Endpoint struct {
	// Address is host:port.
	Address string
	// Weight is relative among the endpoints of a set; 0 counts as 1, so
	// sources without weights (EndpointSlices) need not set it.
	Weight uint32
}

// Policy is how a Set spreads requests over its endpoints.
type Policy uint8

const (
	// RoundRobin takes endpoints in turn, in proportion to their weights.
	RoundRobin Policy = iota
	// LeastRequest takes the less loaded (in-flight requests per weight) of
	// two endpoints drawn at random: the "power of two choices".
	LeastRequest
)

// Health configures passive health checking: FailureThreshold consecutive
// failures eject an endpoint for BaseEjection, doubled at each ejection in a
// row up to MaxEjection; one success resets both counts.
type Health struct {
	FailureThreshold int
	BaseEjection     time.Duration
	MaxEjection      time.Duration
}

// Registry owns the Host of every endpoint address currently listed.
type Registry struct {
	policy Policy
	health Health

	mu    sync.Mutex
	hosts map[string]*Host
	// sets are those of the last call to Sets or Change, which keep the
	// ones whose endpoints did not change: an EndpointSlice change at
	// 10,000 services rebuilds one Set, not 10,000.
	sets *Sets
}

// NewRegistry returns an empty Registry whose Sets use policy and health.
func NewRegistry(policy Policy, health Health) *Registry {
	return &Registry{policy: policy, health: health, hosts: map[string]*Host{}}
}

// Sets returns a Set per name. A name whose endpoints are those of the
// last call keeps its Set. An address the Registry already knows keeps its
// Host, and with it its health and in-flight count; addresses no longer
// listed are forgotten (Sets still in use by requests keep working).
func (r *Registry) Sets(endpoints map[string][]Endpoint) *Sets {
	r.mu.Lock()
	defer r.mu.Unlock()
	var removed []string
	for name := range r.sets.All() {
		if _, ok := endpoints[name]; !ok {
			removed = append(removed, name)
		}
	}
	return r.change(endpoints, removed)
}

// Change is Sets of the last call's endpoints with those of changed
// (new names or new endpoints) and without the names removed: after an
// EndpointSlice change among 10,000 Services, the caller passes the one
// that changed instead of 10,000 to compare.
func (r *Registry) Change(changed map[string][]Endpoint, removed []string) *Sets {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.change(changed, removed)
}

func (r *Registry) change(changed map[string][]Endpoint, removed []string) *Sets {
	// The Sets given out before are in use by requests: the shards
	// changed are copies.
	sets := shardmap.Change(r.sets.shardmap())
	var replaced []*Set
	for name, eps := range changed {
		old, _ := sets.Get(name)
		if old != nil && old.lists(eps) {
			continue
		}
		set := &Set{policy: r.policy, hosts: make([]*Host, len(eps))}
		for i, ep := range eps {
			h := r.hosts[ep.Address]
			if h == nil {
				h = &Host{addr: ep.Address, health: &r.health, token: endpointToken(ep.Address)}
				r.hosts[ep.Address] = h
			}
			h.sets++
			set.hosts[i] = h
		}
		set.weigh(eps)
		sets.Put(name, set)
		if old != nil {
			replaced = append(replaced, old)
		}
	}
	for _, name := range removed {
		if old, _ := sets.Get(name); old != nil {
			sets.Delete(name)
			replaced = append(replaced, old)
		}
	}
	// Released after the new Sets took theirs, so that an address moving
	// from one Set to another keeps its Host.
	for _, old := range replaced {
		for _, h := range old.hosts {
			if h.sets--; h.sets == 0 {
				delete(r.hosts, h.addr)
			}
		}
	}
	r.sets = (*Sets)(sets.Done())
	return r.sets
}

func weight(ep Endpoint) uint64 { return uint64(max(ep.Weight, 1)) }

// lists reports whether s was built from eps.
func (s *Set) lists(eps []Endpoint) bool {
	if len(eps) != len(s.hosts) {
		return false
	}
	for i, ep := range eps {
		if ep.Address != s.hosts[i].addr || weight(ep) != s.weight(i) {
			return false
		}
	}
	return true
}

// Host is the state of one endpoint address.
type Host struct {
	addr   string
	health *Health
	// token stands for addr where a client may see it (Token).
	token uint64
	// sets counts the Registry's current Sets that list the address
	// (once per listing); the Registry forgets the Host at zero. Guarded
	// by the Registry's mutex.
	sets     int
	inflight atomic.Int64
	// fails counts consecutive failures, ejections consecutive ejections.
	fails, ejections atomic.Int32
	ejectedUntil     atomic.Int64 // unix nanoseconds
}

// Address returns host:port.
func (h *Host) Address() string { return h.addr }

// Token stands for the endpoint in a session cookie: the same on every
// node and across restarts, as it depends on the address alone, which it
// does not show as it is.
func (h *Host) Token() uint64 { return h.token }

func endpointToken(addr string) uint64 {
	sum := sha256.Sum256([]byte("hostgate endpoint " + addr))
	return binary.BigEndian.Uint64(sum[:8])
}

// Begin counts a request in flight to h; End ends it.
func (h *Host) Begin() { h.inflight.Add(1) }

// End is the counterpart of Begin.
func (h *Host) End() { h.inflight.Add(-1) }

// Succeeded records a request that reached the endpoint.
func (h *Host) Succeeded() {
	// Loads first: successes are the common case and stores would make
	// every request write to a shared cache line.
	if h.fails.Load() != 0 {
		h.fails.Store(0)
	}
	if h.ejections.Load() != 0 {
		h.ejections.Store(0)
	}
}

// Failed records a failure to connect to or exchange with the endpoint, and
// ejects it when that makes FailureThreshold in a row. It reports whether
// this failure ejected h, so that the caller can count ejections.
func (h *Host) Failed() (ejected bool) {
	if h.health.FailureThreshold <= 0 || int(h.fails.Add(1)) < h.health.FailureThreshold {
		return false
	}
	h.fails.Store(0)
	n := h.ejections.Add(1)
	d := h.health.BaseEjection << min(n-1, 30)
	if d <= 0 || d > h.health.MaxEjection {
		d = h.health.MaxEjection
	}
	h.ejectedUntil.Store(time.Now().Add(d).UnixNano())
	return true
}

// Ejected reports whether passive health has taken h out of rotation.
func (h *Host) Ejected() bool {
	until := h.ejectedUntil.Load()
	return until != 0 && time.Now().UnixNano() < until
}

// Set is an immutable endpoint set with the rotation state of its policy.
type Set struct {
	policy Policy
	hosts  []*Host
	// even is the weight of every host when they have the same, and
	// uneven holds the weights when they differ, nil otherwise: then
	// round-robin simply takes hosts in turn. Most Sets have even
	// weights, and at 10,000 Services a slice of weights in each and the
	// fields of weighted rotation were a fifth of what the Sets held.
	even   uint64
	uneven *weights
	next   atomic.Uint64
}

// weights are those of the hosts of a Set where they differ.
type weights struct {
	// cumulative holds their running sums.
	cumulative []uint64
	// stride walks positions 0..total-1 in a scattered order that still
	// visits each exactly once per cycle, so weighted hosts interleave.
	total, stride uint64
}

// weigh sets the weights of s, those of its endpoints eps.
func (s *Set) weigh(eps []Endpoint) {
	for _, ep := range eps {
		if weight(ep) != weight(eps[0]) {
			s.uneven = newWeights(eps)
			return
		}
	}
	if len(eps) > 0 {
		s.even = weight(eps[0])
	}
}

func newWeights(eps []Endpoint) *weights {
	w := &weights{cumulative: make([]uint64, len(eps))}
	for i, ep := range eps {
		w.total += weight(ep)
		w.cumulative[i] = w.total
	}
	w.stride = w.total*5/8 | 1
	for gcd(w.stride, w.total) != 1 {
		w.stride++
	}
	return w
}

// weight is that of s.hosts[i].
func (s *Set) weight(i int) uint64 {
	switch {
	case s.uneven == nil:
		return s.even
	case i == 0:
		return s.uneven.cumulative[0]
	}
	return s.uneven.cumulative[i] - s.uneven.cumulative[i-1]
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Len returns the number of endpoints.
func (s *Set) Len() int { return len(s.hosts) }

// EndpointState is what one endpoint of a Set looks like at an instant.
type EndpointState struct {
	Address string `json:"address"`
	// Weight is the effective weight: 0 in the Endpoint reads as 1.
	Weight uint32 `json:"weight"`
	// Healthy is false while passive health keeps the endpoint ejected,
	// until EjectedUntil.
	Healthy      bool      `json:"healthy"`
	EjectedUntil time.Time `json:"ejectedUntil,omitzero"`
	InFlight     int64     `json:"inFlight"`
	// ConsecutiveFailures counts toward the next ejection.
	ConsecutiveFailures int `json:"consecutiveFailures"`
}

// Endpoints returns the state of each endpoint, in the order they were
// listed. Each field is read atomically on its own, so a snapshot taken
// while requests run may be a moment apart between fields, never torn
// within one.
func (s *Set) Endpoints() []EndpointState {
	now := time.Now().UnixNano()
	out := make([]EndpointState, len(s.hosts))
	for i, h := range s.hosts {
		out[i] = EndpointState{
			Address:             h.addr,
			Weight:              uint32(s.weight(i)),
			Healthy:             true,
			InFlight:            h.inflight.Load(),
			ConsecutiveFailures: int(h.fails.Load()),
		}
		if until := h.ejectedUntil.Load(); until > now {
			out[i].Healthy, out[i].EjectedUntil = false, time.Unix(0, until)
		}
	}
	return out
}

// Pick returns an endpoint that is not in skip, preferring endpoints that
// are not ejected; when every endpoint is ejected it still returns one, as
// failing open beats refusing everything. It returns nil when skip holds
// every endpoint.
func (s *Set) Pick(skip []*Host) *Host {
	return s.PickBy(s.policy, skip)
}

// PickBy is Pick with policy instead of the Set's own.
func (s *Set) PickBy(policy Policy, skip []*Host) *Host {
	if len(s.hosts) == 0 {
		return nil
	}
	if policy == LeastRequest && len(s.hosts) > 1 {
		if h := s.pickTwo(skip); h != nil {
			return h
		}
	} else if h := s.pickNext(skip); h != nil {
		return h
	}
	return s.scan(skip)
}

// PickHash is Pick by consistent hashing of key: of the usable endpoints,
// the one whose token mixed with key scores highest (rendezvous hashing).
// An endpoint that comes or goes moves only the keys that score highest
// with it, and every node picks the same for the same key without shared
// state. It costs a hash per endpoint, which for the endpoint counts of a
// Service is less than keeping a ring per Set.
func (s *Set) PickHash(key uint64, skip []*Host) *Host {
	var best *Host
	var top uint64
	for _, h := range s.hosts {
		if score := mix(key ^ h.token); usable(h, skip) && (best == nil || score > top) {
			best, top = h, score
		}
	}
	if best != nil {
		return best
	}
	return s.scan(skip)
}

// mix is splitmix64's finalizer: every bit of x moves every bit of the
// result.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// Find returns the endpoint whose Token is token, nil when the Set lists
// none.
func (s *Set) Find(token uint64) *Host {
	for _, h := range s.hosts {
		if h.token == token {
			return h
		}
	}
	return nil
}

// Usable reports whether h may take a request: not ejected, not in skip.
func Usable(h *Host, skip []*Host) bool { return usable(h, skip) }

// pickNext takes the next hosts of the round-robin order until one is
// usable; scan covers the case where none of them is.
func (s *Set) pickNext(skip []*Host) *Host {
	for range len(s.hosts) {
		n := s.next.Add(1) - 1
		var h *Host
		if w := s.uneven; w == nil {
			h = s.hosts[n%uint64(len(s.hosts))]
		} else {
			h = s.hosts[w.at(n*w.stride%w.total)]
		}
		if usable(h, skip) {
			return h
		}
	}
	return nil
}

// at returns the index of the host whose weight range holds pos.
func (w *weights) at(pos uint64) int {
	lo, hi := 0, len(w.cumulative)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if w.cumulative[mid] > pos {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

func (s *Set) pickTwo(skip []*Host) *Host {
	i := rand.IntN(len(s.hosts))
	j := rand.IntN(len(s.hosts) - 1)
	if j >= i {
		j++
	}
	a, b := s.hosts[i], s.hosts[j]
	okA, okB := usable(a, skip), usable(b, skip)
	switch {
	case okA && okB:
		// Compare load per weight without dividing: a/wa <= b/wb, where
		// equal weights cancel out.
		wa, wb := uint64(1), uint64(1)
		if s.uneven != nil {
			wa, wb = s.weight(i), s.weight(j)
		}
		if uint64(a.inflight.Load())*wb <= uint64(b.inflight.Load())*wa {
			return a
		}
		return b
	case okA:
		return a
	case okB:
		return b
	}
	return nil
}

// scan returns the first host not skipped, healthy ones first.
func (s *Set) scan(skip []*Host) *Host {
	var fallback *Host
	for _, h := range s.hosts {
		if skipped(h, skip) {
			continue
		}
		if !h.Ejected() {
			return h
		}
		if fallback == nil {
			fallback = h
		}
	}
	return fallback
}

func usable(h *Host, skip []*Host) bool { return !h.Ejected() && !skipped(h, skip) }

func skipped(h *Host, skip []*Host) bool {
	for _, s := range skip {
		if s == h {
			return true
		}
	}
	return false
}
