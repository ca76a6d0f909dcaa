package upstream

import (
	"iter"

	"github.com/hostgate/hostgate/internal/shardmap"
)

// Sets are endpoint Sets by name (router.BackendRef.Name), never changed
// once made; the nil *Sets has none. A change copies the shards of the
// names it touches (shardmap): with 10,000 Services, copying one map of
// every Set was most of what an EndpointSlice change cost the proxy.
type Sets shardmap.Map[*Set]

func (s *Sets) shardmap() *shardmap.Map[*Set] { return (*shardmap.Map[*Set])(s) }

// Get returns the Set called name, nil for none.
func (s *Sets) Get(name string) *Set {
	set, _ := s.shardmap().Get(name)
	return set
}

// Len is the number of Sets.
func (s *Sets) Len() int { return s.shardmap().Len() }

// All yields every Set with its name, in no order.
func (s *Sets) All() iter.Seq2[string, *Set] { return s.shardmap().All() }
