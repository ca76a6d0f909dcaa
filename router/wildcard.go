package router

import "bytes"

// lookupWild tries the wildcard tables that cover host, the longest suffix
// first: "a.b.example.com" looks up "b.example.com", then "example.com",
// then "com" among the suffixes after "*." of wildcard hostnames. A wildcard
// needs at least one label in place of its "*", so the whole host is never
// looked up. Only suffixes with as many labels as some wildcard's are
// hashed, so a host of many labels costs one scan, not one probe a label.
func (x *hostIndex) lookupWild(host []byte, req *Request) *Target {
	if x.maxWild == 0 {
		return nil
	}
	depth := bytes.Count(host, []byte{'.'}) // labels of the first suffix
	for covered, rest := 1, host; depth >= x.minWild; covered, depth = covered+1, depth-1 {
		rest = rest[bytes.IndexByte(rest, '.')+1:]
		if depth > x.maxWild {
			continue
		}
		if h := x.wild.get(rest); h != nil {
			if tg := x.lookupIn(h, req, covered); tg != nil {
				return tg
			}
		}
	}
	return nil
}
