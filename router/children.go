package router

// children is the child set of a trieNode while Compile grows it. Most
// nodes have one child, kept inline to save an allocation; a handful more
// are compared in a list, where comparing a few strings beats hashing;
// nodes with many children switch to a map.
type children struct {
	first *trieNode
	list  []*trieNode
	index map[string]*trieNode
}

const maxLinearChildren = 16

func (c *children) get(key string) *trieNode {
	if c.first != nil && c.first.key == key {
		return c.first
	}
	if c.index != nil {
		return c.index[key]
	}
	for _, n := range c.list {
		if n.key == key {
			return n
		}
	}
	return nil
}

func (c *children) add(n *trieNode) {
	switch {
	case c.first == nil:
		c.first = n
	case c.index != nil:
		c.index[n.key] = n
	default:
		c.list = append(c.list, n)
		if len(c.list) > maxLinearChildren {
			c.index = make(map[string]*trieNode, len(c.list))
			for _, n := range c.list {
				c.index[n.key] = n
			}
			c.list = nil
		}
	}
}

func (c *children) each(f func(*trieNode)) {
	if c.first != nil {
		f(c.first)
	}
	for _, n := range c.list {
		f(n)
	}
	for _, n := range c.index {
		f(n)
	}
}
