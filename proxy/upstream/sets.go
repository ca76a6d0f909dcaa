package upstream

import (
	"hash/maphash"
	"iter"
	"maps"
)

// Sets are endpoint Sets by name (router.BackendRef.Name), immutable once
// made; the nil *Sets has none. They are split into shards by a hash of
// the name, so that a change copies the shards of the names it touches:
// with 10,000 Services, copying one map of every Set was most of what an
// EndpointSlice change cost the proxy.
type Sets struct {
	shards [setShards]map[string]*Set
	len    int
}

// setShards is the number of shards: at 10,000 Sets a change copies
// about 160 entries, and a Sets is an array of 512 bytes.
const setShards = 64

var shardSeed = maphash.MakeSeed()

func shardOf(name string) int { return int(maphash.String(shardSeed, name) % setShards) }

// Get returns the Set called name, nil for none.
func (s *Sets) Get(name string) *Set {
	if s == nil {
		return nil
	}
	return s.shards[shardOf(name)][name]
}

// Len is the number of Sets.
func (s *Sets) Len() int {
	if s == nil {
		return 0
	}
	return s.len
}

// All yields every Set with its name, in no order.
func (s *Sets) All() iter.Seq2[string, *Set] {
	return func(yield func(string, *Set) bool) {
		if s == nil {
			return
		}
		for _, shard := range s.shards {
			for name, set := range shard {
				if !yield(name, set) {
					return
				}
			}
		}
	}
}

// setsChange makes the Sets that follow base: the shards it changes are
// copies, the others base's.
type setsChange struct {
	next   *Sets
	copied [setShards]bool
}

func changeSets(base *Sets) *setsChange {
	c := &setsChange{next: &Sets{}}
	if base != nil {
		*c.next = *base
	}
	return c
}

// put makes set the one called name.
func (c *setsChange) put(name string, set *Set) {
	shard := c.shard(name)
	if _, had := shard[name]; !had {
		c.next.len++
	}
	shard[name] = set
}

// remove takes the Set called name out.
func (c *setsChange) remove(name string) {
	shard := c.shard(name)
	if _, had := shard[name]; had {
		delete(shard, name)
		c.next.len--
	}
}

func (c *setsChange) shard(name string) map[string]*Set {
	i := shardOf(name)
	if !c.copied[i] {
		c.copied[i] = true
		if shard := c.next.shards[i]; shard != nil {
			c.next.shards[i] = maps.Clone(shard)
		} else {
			c.next.shards[i] = map[string]*Set{}
		}
	}
	return c.next.shards[i]
}
