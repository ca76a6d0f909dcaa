// Package shardmap is a map from names to values that is never changed
// once made, split into shards by a hash of the name, so that the next
// map, made from it with a few names changed, copies the shards of those
// names and shares the others. Endpoint sets are kept so: an EndpointSlice
// change among 10,000 Services changes one set, and copying a plain map of
// them all was most of what the change cost.
package shardmap

import (
	"hash/maphash"
	"iter"
	"maps"
)

// Map maps names to values of V. The nil *Map is empty.
type Map[V any] struct {
	shards [shards]map[string]V
	len    int
}

// shards is the number of shards: at 10,000 names a change copies about
// 160 entries, and a Map is an array of 512 bytes.
const shards = 64

var seed = maphash.MakeSeed()

func shardOf(name string) int { return int(maphash.String(seed, name) % shards) }

// Of returns a Map of the entries of m.
func Of[V any](m map[string]V) *Map[V] {
	c := Change[V](nil)
	for name, v := range m {
		c.Put(name, v)
	}
	return c.Done()
}

// Get returns the value of name, and whether m has it.
func (m *Map[V]) Get(name string) (V, bool) {
	if m == nil {
		var none V
		return none, false
	}
	v, ok := m.shards[shardOf(name)][name]
	return v, ok
}

// Len is the number of names.
func (m *Map[V]) Len() int {
	if m == nil {
		return 0
	}
	return m.len
}

// All yields every name with its value, in no order.
func (m *Map[V]) All() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		if m == nil {
			return
		}
		for _, shard := range m.shards {
			for name, v := range shard {
				if !yield(name, v) {
					return
				}
			}
		}
	}
}

// Changes makes the Map that follows a base Map, which it leaves as it
// was: the shards it changes are copies, the others base's.
type Changes[V any] struct {
	next   *Map[V]
	copied [shards]bool
}

// Change starts the Map that follows base (nil for an empty one).
func Change[V any](base *Map[V]) *Changes[V] {
	c := &Changes[V]{next: &Map[V]{}}
	if base != nil {
		*c.next = *base
	}
	return c
}

// Get is the Map's Get, with the changes made so far.
func (c *Changes[V]) Get(name string) (V, bool) { return c.next.Get(name) }

// Len is the Map's Len, with the changes made so far.
func (c *Changes[V]) Len() int { return c.next.len }

// Put gives name the value v.
func (c *Changes[V]) Put(name string, v V) {
	shard := c.shard(name)
	if _, had := shard[name]; !had {
		c.next.len++
	}
	shard[name] = v
}

// Delete takes name out.
func (c *Changes[V]) Delete(name string) {
	if _, had := c.next.Get(name); !had {
		return
	}
	shard := c.shard(name)
	delete(shard, name)
	c.next.len--
	if len(shard) == 0 {
		// As a Map made without the name has it: Maps of the same
		// entries are then alike to the last field (reflect.DeepEqual).
		c.next.shards[shardOf(name)] = nil
	}
}

// Done returns the Map made; c must not be used after.
func (c *Changes[V]) Done() *Map[V] { return c.next }

func (c *Changes[V]) shard(name string) map[string]V {
	i := shardOf(name)
	switch {
	case c.next.shards[i] == nil:
		c.next.shards[i] = map[string]V{}
	case !c.copied[i]:
		c.next.shards[i] = maps.Clone(c.next.shards[i])
	}
	c.copied[i] = true
	return c.next.shards[i]
}
