package router

import (
	"hash/maphash"
	"math/bits"
	"strings"
)

// hostMap finds host tables by name. The tables are in a slice of their
// own, and the open-addressed slots (linear probing, at most half full, so
// that a miss meets a free slot soon) hold a table's position with the low
// half of its name's hash: a probe that meets another name reads eight
// bytes and no table. Slots with the tables in them were 64 bytes each at
// two to four per host, a third of a Table's heap at 10,000 hosts. The
// seed (a scope's) is random so that hostnames cannot be chosen to collide.
type hostMap struct {
	seed   maphash.Seed
	slots  []hostSlot // a power of two of them
	tables []hostTable
	// skip is how many bytes of a table's name come before its key: 2 for
	// the "*." of wildcards, which are found by their suffix.
	skip int
}

type hostSlot struct {
	hash uint32 // the low half of the key's
	at   uint32 // 1 + the table's index in tables, 0 in a free slot
}

func newHostMap(tables []hostTable, skip int, seed maphash.Seed) hostMap {
	if len(tables) == 0 {
		return hostMap{}
	}
	m := hostMap{seed: seed, skip: skip, tables: tables, slots: make([]hostSlot, 1<<bits.Len(uint(2*len(tables)-1)))}
	mask := uint64(len(m.slots) - 1)
	// The names are copied into one string, so that comparing them reads a
	// few pages of names rather than wherever each route's hostnames are.
	var names strings.Builder
	size := 0
	for _, t := range tables {
		size += len(t.name)
	}
	names.Grow(size)
	for _, t := range tables {
		names.WriteString(t.name)
	}
	all := names.String()
	for at := range tables {
		t := &tables[at]
		t.name, all = all[:len(t.name)], all[len(t.name):]
		hash := maphash.String(m.seed, t.name[skip:])
		i := hash & mask
		for m.slots[i].at != 0 {
			i = (i + 1) & mask
		}
		m.slots[i] = hostSlot{hash: uint32(hash), at: uint32(at + 1)}
	}
	return m
}

func (m *hostMap) len() int { return len(m.tables) }

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
		s := m.slots[i]
		if s.at == 0 {
			return nil
		}
		if s.hash == uint32(hash) {
			if t := &m.tables[s.at-1]; t.name[m.skip:] == string(key) {
				return t
			}
		}
	}
}

func (m *hostMap) each(f func(*hostTable)) {
	for i := range m.tables {
		f(&m.tables[i])
	}
}
