package upstream

import (
	"fmt"
	"testing"
)

// TestPickHash: a key keeps its endpoint; an endpoint that goes moves only
// its own keys, and one that comes takes about its share; Find names an
// endpoint by its token in any Set that lists it.
func TestPickHash(t *testing.T) {
	r := NewRegistry(RoundRobin, Health{})
	eps := func(n int) []Endpoint {
		var out []Endpoint
		for i := range n {
			out = append(out, Endpoint{Address: fmt.Sprintf("10.0.0.%d:80", i)})
		}
		return out
	}
	four := r.Sets(map[string][]Endpoint{"s": eps(4)}).Get("s")
	const keys = 4000
	before := make([]string, keys)
	for k := range keys {
		before[k] = four.PickHash(uint64(k)*0x9e3779b97f4a7c15, nil).Address()
		if again := four.PickHash(uint64(k)*0x9e3779b97f4a7c15, nil).Address(); again != before[k] {
			t.Fatalf("key %d: %s then %s", k, before[k], again)
		}
	}
	five := r.Sets(map[string][]Endpoint{"s": eps(5)}).Get("s")
	moved := 0
	for k := range keys {
		if after := five.PickHash(uint64(k)*0x9e3779b97f4a7c15, nil).Address(); after != before[k] {
			if after != "10.0.0.4:80" {
				t.Fatalf("key %d moved from %s to %s, not to the new endpoint", k, before[k], after)
			}
			moved++
		}
	}
	if moved < keys/5-keys/20 || moved > keys/5+keys/20 {
		t.Errorf("the fifth endpoint took %d of %d keys, want about a fifth", moved, keys)
	}
	h := five.Find(four.hosts[2].Token())
	if h == nil || h.Address() != "10.0.0.2:80" || five.Find(12345) != nil {
		t.Errorf("Find: %v", h)
	}
	if skip := []*Host{five.PickHash(7, nil)}; five.PickHash(7, skip) == skip[0] {
		t.Error("PickHash returned the endpoint it was to skip")
	}
}
