package router

// children is the child set of a trie node. Most nodes have a handful of
// children, where comparing a few strings beats hashing; nodes with many
// children switch to a map.
type children[T any] struct {
	keys  []string
	nodes []*T
	index map[string]*T
}

const maxLinearChildren = 8

func get[T any, K string | []byte](c *children[T], key K) *T {
	if c.index != nil {
		return c.index[string(key)]
	}
	for i, k := range c.keys {
		if k == string(key) {
			return c.nodes[i]
		}
	}
	return nil
}

func (c *children[T]) add(key string, node *T) {
	if c.index != nil {
		c.index[key] = node
		return
	}
	c.keys = append(c.keys, key)
	c.nodes = append(c.nodes, node)
	if len(c.keys) > maxLinearChildren {
		c.index = make(map[string]*T, len(c.keys))
		for i, k := range c.keys {
			c.index[k] = c.nodes[i]
		}
		c.keys, c.nodes = nil, nil
	}
}

func (c *children[T]) each(f func(*T)) {
	if c.index != nil {
		for _, n := range c.index {
			f(n)
		}
		return
	}
	for _, n := range c.nodes {
		f(n)
	}
}
