package upstream

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/heaptest"
)

func TestPickDistribution(t *testing.T) {
	tests := []struct {
		name      string
		endpoints []Endpoint
		picks     int
		want      map[string]int
	}{
		{"round robin", []Endpoint{{Address: "a"}, {Address: "b"}, {Address: "c"}}, 9, map[string]int{"a": 3, "b": 3, "c": 3}},
		{"weighted", []Endpoint{{Address: "a", Weight: 3}, {Address: "b", Weight: 1}}, 8, map[string]int{"a": 6, "b": 2}},
		{"zero weight counts as one", []Endpoint{{Address: "a", Weight: 0}, {Address: "b", Weight: 2}}, 6, map[string]int{"a": 2, "b": 4}},
		{"single", []Endpoint{{Address: "a"}}, 3, map[string]int{"a": 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := NewRegistry(RoundRobin, Health{}).Sets(map[string][]Endpoint{"s": tt.endpoints}).Get("s")
			got := map[string]int{}
			for range tt.picks {
				got[set.Pick(nil).Address()]++
			}
			for addr, n := range tt.want {
				if got[addr] != n {
					t.Errorf("picks = %v, want %v", got, tt.want)
					break
				}
			}
		})
	}
}

func TestWeightedInterleaves(t *testing.T) {
	set := NewRegistry(RoundRobin, Health{}).Sets(map[string][]Endpoint{"s": {{Address: "a", Weight: 5}, {Address: "b", Weight: 5}, {Address: "c", Weight: 1}}}).Get("s")
	run, longest, prev := 0, 0, ""
	for range 11 {
		a := set.Pick(nil).Address()
		if a == prev {
			run++
		} else {
			run = 1
		}
		prev, longest = a, max(longest, run)
	}
	if longest > 2 {
		t.Errorf("a host was picked %d times in a row; weights should interleave", longest)
	}
}

func TestPickSkipsAndEjects(t *testing.T) {
	health := Health{FailureThreshold: 2, BaseEjection: time.Hour, MaxEjection: 2 * time.Hour}
	for _, policy := range []Policy{RoundRobin, LeastRequest} {
		set := NewRegistry(policy, health).Sets(map[string][]Endpoint{"s": {{Address: "a"}, {Address: "b"}}}).Get("s")
		a := set.hosts[0]
		for range 10 {
			if h := set.Pick([]*Host{a}); h.Address() != "b" {
				t.Fatalf("policy %d: Pick(skip a) = %s", policy, h.Address())
			}
		}
		if h := set.Pick(set.hosts); h != nil {
			t.Fatalf("policy %d: Pick(skip all) = %s, want nil", policy, h.Address())
		}
		if a.Failed() || a.Ejected() {
			t.Fatalf("policy %d: ejected below the threshold", policy)
		}
		if !a.Failed() || !a.Ejected() {
			t.Fatalf("policy %d: not ejected at the threshold", policy)
		}
		for range 10 {
			if h := set.Pick(nil); h.Address() != "b" {
				t.Fatalf("policy %d: picked ejected host", policy)
			}
		}
		if h := set.Pick([]*Host{set.hosts[1]}); h != a {
			t.Fatalf("policy %d: with every other host skipped, the ejected one should be the fallback", policy)
		}
	}
}

func TestEjectionBacksOff(t *testing.T) {
	h := &Host{health: &Health{FailureThreshold: 1, BaseEjection: time.Second, MaxEjection: 3 * time.Second}}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second} {
		h.Failed()
		got := time.Until(time.Unix(0, h.ejectedUntil.Load()))
		if got > want || got < want-time.Second/2 {
			t.Errorf("ejection %d lasts %v, want %v", i+1, got, want)
		}
	}
	h.Succeeded()
	h.Failed()
	if got := time.Until(time.Unix(0, h.ejectedUntil.Load())); got > time.Second {
		t.Errorf("after a success the back-off should restart, got %v", got)
	}
}

func TestEndpoints(t *testing.T) {
	health := Health{FailureThreshold: 2, BaseEjection: time.Hour, MaxEjection: time.Hour}
	set := NewRegistry(RoundRobin, health).Sets(map[string][]Endpoint{"s": {{Address: "a", Weight: 3}, {Address: "b"}, {Address: "c"}}}).Get("s")
	a, b := set.hosts[0], set.hosts[1]
	a.Failed()
	a.Failed()
	b.Failed()
	b.Begin()
	got := set.Endpoints()
	if len(got) != 3 {
		t.Fatalf("got %d endpoints, want 3", len(got))
	}
	if e := got[0]; e.Address != "a" || e.Weight != 3 || e.Healthy || time.Until(e.EjectedUntil) < 59*time.Minute || e.ConsecutiveFailures != 0 {
		t.Errorf("ejected endpoint: %+v", e)
	}
	if e := got[1]; e.Address != "b" || e.Weight != 1 || !e.Healthy || !e.EjectedUntil.IsZero() || e.InFlight != 1 || e.ConsecutiveFailures != 1 {
		t.Errorf("failing endpoint: %+v", e)
	}
	if e := got[2]; e != (EndpointState{Address: "c", Weight: 1, Healthy: true}) {
		t.Errorf("idle endpoint: %+v", e)
	}
}

func TestLeastRequestPrefersIdle(t *testing.T) {
	set := NewRegistry(LeastRequest, Health{}).Sets(map[string][]Endpoint{"s": {{Address: "busy"}, {Address: "idle"}}}).Get("s")
	set.hosts[0].Begin()
	for range 20 {
		if h := set.Pick(nil); h.Address() != "idle" {
			t.Fatalf("picked %s", h.Address())
		}
	}
}

func TestRegistryKeepsHostState(t *testing.T) {
	r := NewRegistry(RoundRobin, Health{FailureThreshold: 1, BaseEjection: time.Hour, MaxEjection: time.Hour})
	first := r.Sets(map[string][]Endpoint{"s": {{Address: "a"}, {Address: "b"}}})
	first.Get("s").hosts[0].Failed()
	second := r.Sets(map[string][]Endpoint{"s": {{Address: "a"}}, "t": {{Address: "a"}}})
	if second.Get("s").hosts[0] != first.Get("s").hosts[0] || second.Get("t").hosts[0] != first.Get("s").hosts[0] {
		t.Fatal("address a got a new Host")
	}
	if !second.Get("s").hosts[0].Ejected() {
		t.Fatal("ejection lost across a swap")
	}
	third := r.Sets(map[string][]Endpoint{"s": {{Address: "b"}}})
	if third.Get("s").hosts[0] == first.Get("s").hosts[1] {
		t.Fatal("address b was not listed in between and should have been forgotten")
	}
}

// TestUnchangedSetKept: a set whose endpoints are the same keeps its Set,
// and with it its place in the round-robin order; a set whose endpoints or
// weights changed is rebuilt; an address that only a rebuilt set listed is
// forgotten.
func TestUnchangedSetKept(t *testing.T) {
	r := NewRegistry(RoundRobin, Health{FailureThreshold: 1, BaseEjection: time.Hour, MaxEjection: time.Hour})
	first := r.Sets(map[string][]Endpoint{"s": {{Address: "a"}, {Address: "b"}}, "t": {{Address: "c"}}, "u": {{Address: "d"}}})
	first.Get("s").Pick(nil)
	first.Get("t").hosts[0].Failed()
	second := r.Sets(map[string][]Endpoint{"s": {{Address: "a"}, {Address: "b"}}, "t": {{Address: "e"}}, "u": {{Address: "d", Weight: 3}}})
	if second.Get("s") != first.Get("s") {
		t.Error("set s was rebuilt though its endpoints are the same")
	}
	if h := second.Get("s").Pick(nil); h.Address() != "b" {
		t.Errorf("set s picked %s after a; the round-robin order started over", h.Address())
	}
	if second.Get("t") == first.Get("t") || second.Get("u") == first.Get("u") {
		t.Error("a set whose endpoint or weight changed was kept")
	}
	if second.Get("u").hosts[0] != first.Get("u").hosts[0] {
		t.Error("address d got a new Host when only its weight changed")
	}
	third := r.Sets(map[string][]Endpoint{"t": {{Address: "c"}}})
	if third.Get("t").hosts[0].Ejected() {
		t.Error("address c was not listed in between and should have been forgotten, with its ejection")
	}
	if len(r.hosts) != 1 {
		t.Errorf("the registry holds %d hosts, want 1 (c): the others are listed by no set", len(r.hosts))
	}
}

// TestChangeKeepsTheRest: Change rebuilds the sets it is given that
// changed, drops the names removed, keeps every other set as it was, and
// leaves the Sets it returned before as they were, since requests read it.
func TestChangeKeepsTheRest(t *testing.T) {
	r := NewRegistry(RoundRobin, Health{FailureThreshold: 1, BaseEjection: time.Hour, MaxEjection: time.Hour})
	first := r.Sets(map[string][]Endpoint{"s": {{Address: "a"}}, "t": {{Address: "b"}}, "u": {{Address: "c"}}, "v": {{Address: "d"}}})
	first.Get("u").hosts[0].Failed()
	second := r.Change(map[string][]Endpoint{"t": {{Address: "b"}, {Address: "e"}}, "v": {{Address: "d"}}, "w": {{Address: "a"}}}, []string{"u"})
	if first.Len() != 4 || first.Get("u") == nil || len(first.Get("t").hosts) != 1 {
		t.Fatal("Change altered the Sets given out before")
	}
	if second.Get("s") != first.Get("s") || second.Get("v") != first.Get("v") {
		t.Error("a set not changed was rebuilt")
	}
	if len(second.Get("t").hosts) != 2 || second.Get("t").hosts[0] != first.Get("t").hosts[0] {
		t.Error("set t: want its two endpoints, with address b keeping its Host")
	}
	if second.Get("w") == nil || second.Get("w").hosts[0] != first.Get("s").hosts[0] {
		t.Error("new set w: want address a with the Host set s has")
	}
	if second.Get("u") != nil {
		t.Error("removed set u is still there")
	}
	third := r.Change(map[string][]Endpoint{"u": {{Address: "c"}}}, nil)
	if third.Get("u").hosts[0].Ejected() {
		t.Error("address c was listed by no set in between and should have been forgotten, with its ejection")
	}
	if third.Len() != 5 {
		t.Errorf("%d sets; want s, t, u, v and w", third.Len())
	}
}

func BenchmarkPick(b *testing.B) {
	for _, policy := range []Policy{RoundRobin, LeastRequest} {
		set := NewRegistry(policy, Health{}).Sets(map[string][]Endpoint{"s": {{Address: "a", Weight: 2}, {Address: "b"}, {Address: "c"}}}).Get("s")
		b.Run(map[Policy]string{RoundRobin: "round-robin", LeastRequest: "least-request"}[policy], func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					set.Pick(nil)
				}
			})
		})
	}
}

// BenchmarkSetsOneChange is what an EndpointSlice change costs the proxy
// at 10,000 services of ten endpoints each: one set changes.
func BenchmarkSetsOneChange(b *testing.B) {
	endpoints := map[string][]Endpoint{}
	for s := range 10000 {
		eps := make([]Endpoint, 10)
		for i := range eps {
			eps[i].Address = fmt.Sprintf("10.%d.%d.%d:8080", s/256, s%256, i)
		}
		endpoints[fmt.Sprintf("ns/svc-%d:80", s)] = eps
	}
	r := NewRegistry(RoundRobin, Health{})
	r.Sets(endpoints)
	b.Run("sets", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			endpoints["ns/svc-0:80"] = []Endpoint{{Address: fmt.Sprintf("10.255.0.%d:8080", i%2)}}
			r.Sets(endpoints)
		}
	})
	// What a caller that knows which set changed pays.
	b.Run("change", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r.Change(map[string][]Endpoint{"ns/svc-0:80": {{Address: fmt.Sprintf("10.255.0.%d:8080", i%2)}}}, nil)
		}
	})
}

// BenchmarkRegistryHeap reports the live heap a Registry keeps per set
// for 10,000 Services of one endpoint each, the endpoints themselves made
// before and not counted.
func BenchmarkRegistryHeap(b *testing.B) {
	const n = 10000
	endpoints := map[string][]Endpoint{}
	for s := range n {
		endpoints[fmt.Sprintf("ns%d/r%d:80", s%50, s)] = []Endpoint{{Address: fmt.Sprintf("10.%d.%d.1:8080", s/256, s%256)}}
	}
	var perSet float64
	b.ReportAllocs()
	for b.Loop() {
		before := heaptest.Live()
		r := NewRegistry(RoundRobin, Health{})
		sets := r.Sets(endpoints)
		perSet = float64(heaptest.Live()-before) / n
		if sets.Len() != n {
			b.Fatalf("%d sets; want %d", sets.Len(), n)
		}
		runtime.KeepAlive(r)
	}
	b.ReportMetric(perSet, "live-B/set")
}
