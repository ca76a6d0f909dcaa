package router

import (
	"bytes"
	"strings"
)

// wildNode is a node of the tree over reversed hostname labels that holds
// wildcard hosts: "*.example.com" is the table of the node com → example.
type wildNode struct {
	children children[wildNode]
	parent   *wildNode
	depth    int // labels from the root
	table    *hostTable
}

func newWildNode(parent *wildNode, depth int) *wildNode {
	return &wildNode{parent: parent, depth: depth}
}

// descend returns the node for suffix ("example.com"), creating nodes as
// needed.
func (n *wildNode) descend(suffix string) *wildNode {
	for suffix != "" {
		label := suffix
		if i := strings.LastIndexByte(suffix, '.'); i >= 0 {
			label, suffix = suffix[i+1:], suffix[:i]
		} else {
			suffix = ""
		}
		child := get(&n.children, label)
		if child == nil {
			child = newWildNode(n, n.depth+1)
			n.children.add(label, child)
		}
		n = child
	}
	return n
}

func (n *wildNode) forEach(f func(*wildNode)) {
	f(n)
	n.children.each(func(c *wildNode) { c.forEach(f) })
}

// lookup tries the wildcard tables that cover host, the longest suffix
// first. A wildcard needs at least one label in place of its "*", so the
// node that consumed the whole host does not count.
func (n *wildNode) lookup(host []byte, req *Request) *Target {
	labels := 1 + bytes.Count(host, []byte{'.'})
	rest := host
	for len(rest) > 0 {
		i := bytes.LastIndexByte(rest, '.')
		child := get(&n.children, rest[i+1:])
		if child == nil || i < 0 {
			break
		}
		n, rest = child, rest[:i]
	}
	for ; n != nil; n = n.parent {
		if n.table == nil || n.depth == labels {
			continue
		}
		if tg := n.table.lookup(req, labels-n.depth); tg != nil {
			return tg
		}
	}
	return nil
}
