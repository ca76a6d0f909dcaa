package router

// children is the child set of a trie node. Most nodes have one child, kept
// inline so that a lookup step reads the node and nothing else; a handful
// more are compared in a list, where comparing a few strings beats hashing;
// nodes with many children switch to a map.
type children[T any] struct {
	firstKey string
	first    *T
	list     []child[T]
	index    map[string]*T
	hasFirst bool
}

type child[T any] struct {
	key  string
	node *T
}

const maxLinearChildren = 16

func get[T any, K string | []byte](c *children[T], key K) *T {
	if c.hasFirst && c.firstKey == string(key) {
		return c.first
	}
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
	switch {
	case !c.hasFirst:
		c.firstKey, c.first, c.hasFirst = key, node, true
	case c.index != nil:
		c.index[key] = node
	default:
		c.list = append(c.list, child[T]{key, node})
		if len(c.list) > maxLinearChildren {
			c.index = make(map[string]*T, len(c.list))
			for _, ch := range c.list {
				c.index[ch.key] = ch.node
			}
			c.list = nil
		}
	}
}

func (c *children[T]) each(f func(*T)) {
	if c.hasFirst {
		f(c.first)
	}
	for _, ch := range c.list {
		f(ch.node)
	}
	for _, n := range c.index {
		f(n)
	}
}
