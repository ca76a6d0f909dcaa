package shardmap

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestChangesLeaveTheBase makes Map after Map, each from the last with
// random names put and deleted: each holds what a plain map given the same
// changes holds, and every Map made before still holds what it did.
func TestChangesLeaveTheBase(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	want := map[string]int{}
	var made []*Map[int]
	var held []map[string]int
	var m *Map[int]
	for round := range 100 {
		c := Change(m)
		for range 1 + rng.IntN(30) {
			name := fmt.Sprintf("ns/svc-%d:80", rng.IntN(400))
			if rng.IntN(4) == 0 {
				c.Delete(name)
				delete(want, name)
			} else {
				c.Put(name, round)
				want[name] = round
			}
		}
		m = c.Done()
		if got := maps.Collect(m.All()); !maps.Equal(got, want) || m.Len() != len(want) {
			t.Fatalf("round %d: the Map holds %d names, %v; want %d", round, m.Len(), got, len(want))
		}
		if !reflect.DeepEqual(m, Of(want)) {
			t.Fatalf("round %d: the Map is not alike to one made of the same entries at once", round)
		}
		for name, v := range want {
			if got, ok := m.Get(name); !ok || got != v {
				t.Fatalf("round %d: Get(%s) = %d, %v; want %d", round, name, got, ok, v)
			}
		}
		made, held = append(made, m), append(held, maps.Clone(want))
	}
	for i, m := range made {
		if !maps.Equal(maps.Collect(m.All()), held[i]) {
			t.Fatalf("the Map of round %d changed after the next ones were made", i)
		}
	}
	if got := Of(map[string]int{"a": 1, "b": 2}); got.Len() != 2 {
		t.Errorf("Of made a Map of %d names, want 2", got.Len())
	}
	var none *Map[int]
	if _, ok := none.Get("a"); ok || none.Len() != 0 {
		t.Error("the nil Map holds something")
	}
}
