package router

// children is the child set of a trie node. Most nodes have a handful of
// children, where comparing a few strings beats hashing; nodes with many
// children switch to a map.
type children[T any] struct {
	list  []child[T]
	index map[string]*T
}

type child[T any] struct {
	key  string
	node *T
}

const maxLinearChildren = 16

func get[T any, K string | []byte](c *children[T], key K) *T {
	if c.index != nil {
		return c.index[string(key)]
	}
	for i := range c.list {
		if c.list[i].key == string(key) {
			return c.list[i].node
		}
	}
	return nil
}

func (c *children[T]) add(key string, node *T) {
	if c.index != nil {
		c.index[key] = node
		return
	}
	c.list = append(c.list, child[T]{key, node})
	if len(c.list) > maxLinearChildren {
		c.index = make(map[string]*T, len(c.list))
		for _, ch := range c.list {
			c.index[ch.key] = ch.node
		}
		c.list = nil
	}
}

func (c *children[T]) each(f func(*T)) {
	if c.index != nil {
		for _, n := range c.index {
			f(n)
		}
		return
	}
	for _, ch := range c.list {
		f(ch.node)
	}
}
