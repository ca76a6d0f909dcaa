package router

import (
	"hash/maphash"
	"math/bits"
	"strings"
)

// hostMap finds host tables by name. It keeps each table in its slot, with
// the hash of its name: a hit reads that slot and the name, where a Go map
// of pointers also reads a control word and then the table elsewhere. Open
// addressing with linear probing, at most half full, so that a miss meets
// a free slot soon; the seed (a scope's) is random so that hostnames cannot
// be chosen to collide.
type hostMap struct {
	seed  maphash.Seed
	slots []hostSlot // a power of two of them
	n     int        // of them taken
}

type hostSlot struct {
	hash  uint64
	key   string // "" in a free slot
	table hostTable
}

func newHostMap(tables []hostTable, key func(*hostTable) string, seed maphash.Seed) hostMap {
	if len(tables) == 0 {
		return hostMap{}
	}
	m := hostMap{seed: seed, n: len(tables), slots: make([]hostSlot, 1<<bits.Len(uint(2*len(tables)-1)))}
	mask := uint64(len(m.slots) - 1)
	// The keys are copied into one string, so that comparing them reads a
	// few pages of names rather than wherever each route's hostnames are.
	var names strings.Builder
	for _, t := range tables {
		names.WriteString(key(&t))
	}
	all := names.String()
	for _, t := range tables {
		k := all[:len(key(&t))]
		all = all[len(k):]
		hash := maphash.String(m.seed, k)
		i := hash & mask
		for m.slots[i].key != "" {
			i = (i + 1) & mask
		}
		m.slots[i] = hostSlot{hash: hash, key: k, table: t}
	}
	return m
}

func (m *hostMap) get(key []byte) *hostTable {
	if len(m.slots) == 0 {
		return nil
	}
	return m.getHashed(maphash.Bytes(m.seed, key), key)
}

// getHashed is get of a key whose hash with m's seed is known.
func (m *hostMap) getHashed(hash uint64, key []byte) *hostTable {
	if len(m.slots) == 0 {
		return nil
	}
	mask := uint64(len(m.slots) - 1)
	for i := hash & mask; ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.key == "" {
			return nil
		}
		if s.hash == hash && s.key == string(key) {
			return &s.table
		}
	}
}

func (m *hostMap) each(f func(*hostTable)) {
	for i := range m.slots {
		if m.slots[i].key != "" {
			f(&m.slots[i].table)
		}
	}
}
