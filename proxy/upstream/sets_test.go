package upstream

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// TestSetsFollowChanges changes random names of many, sharded Sets round
// after round: each round's Sets hold what was last given for each name,
// and the Sets given out before stay as they were, since requests read
// them.
func TestSetsFollowChanges(t *testing.T) {
	r := NewRegistry(RoundRobin, Health{})
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[string]string{} // name → the address of its one endpoint
	type given struct {
		sets *Sets
		held map[string]*Set
	}
	var before []given
	for round := range 50 {
		changed := map[string][]Endpoint{}
		var removed []string
		for range 1 + rng.IntN(20) {
			name := fmt.Sprintf("ns/svc-%d:80", rng.IntN(500))
			if rng.IntN(4) == 0 {
				removed = append(removed, name)
				delete(changed, name)
				delete(want, name)
				continue
			}
			addr := fmt.Sprintf("10.0.%d.%d:8080", round, rng.IntN(250))
			changed[name] = []Endpoint{{Address: addr}}
			want[name] = addr
		}
		sets := r.Change(changed, removed)
		if sets.Len() != len(want) {
			t.Fatalf("round %d: %d sets, want %d", round, sets.Len(), len(want))
		}
		held := map[string]*Set{}
		for name, set := range sets.All() {
			if got := set.hosts[0].addr; got != want[name] {
				t.Fatalf("round %d: set %s has %s, want %s", round, name, got, want[name])
			}
			if sets.Get(name) != set {
				t.Fatalf("round %d: Get(%s) is not the set All yields", round, name)
			}
			held[name] = set
		}
		before = append(before, given{sets, held})
	}
	for i, g := range before {
		now := map[string]*Set{}
		for name, set := range g.sets.All() {
			now[name] = set
		}
		if !maps.Equal(now, g.held) {
			t.Fatalf("the Sets of round %d changed after they were given out", i)
		}
	}
	if (*Sets)(nil).Get("x") != nil || (*Sets)(nil).Len() != 0 {
		t.Error("nil Sets hold something")
	}
}
