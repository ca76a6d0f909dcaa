package router

import (
	"bytes"
	"hash/maphash"
)

// lookupWild tries the wildcard tables that cover host, the longest suffix
// first: "a.b.example.com" looks up "b.example.com", then "example.com",
// then "com" among the suffixes after "*." of wildcard hostnames, each in
// its shard. A wildcard needs at least one label in place of its "*", so
// the whole host is never looked up. Only suffixes with as many labels as
// some wildcard's are hashed, so a host of many labels costs one scan, not
// one probe a label.
func (sc *scope) lookupWild(host []byte, req *Request) *Target {
	if sc.maxWild == 0 {
		return nil
	}
	depth := bytes.Count(host, []byte{'.'}) // labels of the first suffix
	for covered, rest := 1, host; depth >= sc.minWild; covered, depth = covered+1, depth-1 {
		rest = rest[bytes.IndexByte(rest, '.')+1:]
		if depth > sc.maxWild {
			continue
		}
		hash := maphash.Bytes(sc.seed, rest)
		x := sc.shards[sc.shardOf(hash)]
		if h := x.wild.getHashed(hash, rest); h != nil {
			if tg := x.lookupIn(h, req, covered); tg != nil {
				return tg
			}
		}
	}
	return nil
}
