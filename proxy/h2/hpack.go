package h2

// HPACK encoding (RFC 7541) of the header blocks a connection sends, of our
// own rather than x/net's hpack.Encoder, whose decoder stays the reader's.
// The encoding is the same kind as x/net's: every field goes into the
// dynamic table unless it is there or in the static table already. What
// differs is the search. x/net's looks each field up in up to four maps
// (the static and the dynamic table, by name and value, then by name), and
// the engine looked its name up once more to lower it: queueing a
// response's header was 6.6% of hostgate's CPU in bench/run.sh's h2-tls,
// WriteField 4.2%. Here a connection keeps, for each header key it sent
// (the canonical key of an http.Header), its HTTP/2 name and the value it
// sent last with the dynamic table entry that holds it: a field whose
// value repeats, as most of a backend's response fields do from one
// response to the next, costs one map lookup and a string comparison, and
// its value is not validated again.

import (
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2/hpack"
)

// encoder holds a connection's HPACK encoding state, and the block being
// encoded. The connection's mutex guards it.
type encoder struct {
	// buf is the header block being encoded.
	buf []byte
	// ents is the dynamic table, oldest first; inserted counts the
	// entries ever added, so that the entry added as the nth has the
	// index len(staticTable) + inserted - n + 1 while it is there.
	ents     []dynEntry
	inserted uint64
	size     uint32
	// max is the table's maximum size, at most the peer's limit
	// (SETTINGS_HEADER_TABLE_SIZE); a change of it goes at the start of
	// the next block (RFC 7541 section 4.2). It only ever shrinks, so
	// the last change is also the smallest, the one RFC 7541 asks for.
	max    uint32
	resize bool
	// pairs and names find the latest entry of a field and of a name.
	pairs map[hpack.HeaderField]uint64
	names map[string]uint64
	// keys are the header keys sent, at most maxKeys of them; status,
	// date and length are a response's own fields.
	keys                 map[string]*sentKey
	status, date, length sentKey
}

type dynEntry struct {
	name, value string
	n           uint64 // its insertion number
}

// sentKey is what a connection knows of a header key it sent: its HTTP/2
// name, "" for a key HTTP/2 does not carry, and the value it sent last
// with its index in the static table or the number of the dynamic table
// entry holding that field; value is "" and both are 0 where neither
// table took it.
type sentKey struct {
	name, value  string
	index, entry uint64
}

// maxKeys bounds the header keys an encoder remembers: a handler may name
// its fields as it likes.
const maxKeys = 256

const defaultTableSize = 4096

func newEncoder() encoder {
	return encoder{
		max:    defaultTableSize,
		status: sentKey{name: ":status"}, date: sentKey{name: "date"}, length: sentKey{name: "content-length"},
	}
}

// setLimit takes the peer's SETTINGS_HEADER_TABLE_SIZE. The table never
// grows past the size both ends start with.
func (e *encoder) setLimit(limit uint32) {
	if limit >= e.max {
		return
	}
	e.max, e.resize = limit, true
	e.evict(0)
}

// start begins a header block.
func (e *encoder) start() {
	e.buf = e.buf[:0]
	if e.resize {
		e.buf = appendInt(e.buf, 0x20, 5, uint64(e.max))
		e.resize = false
	}
}

// header encodes h's fields, those HTTP/2 carries and skip does not name.
func (e *encoder) header(h http.Header, skip func(key string) bool) {
	for k, vv := range h {
		if skip(k) {
			continue
		}
		sk := e.key(k)
		if sk.name == "" {
			continue
		}
		for _, v := range vv {
			e.keyed(sk, v, true)
		}
	}
}

// keyed encodes the field of sk's name with value v, which is validated
// first if validate says so, and not if it is the value sk sent last.
func (e *encoder) keyed(sk *sentKey, v string, validate bool) {
	if v == sk.value && sk.index != 0 {
		e.buf = appendInt(e.buf, 0x80, 7, sk.index)
		return
	}
	if v == sk.value && e.holds(sk.entry) {
		e.buf = appendInt(e.buf, 0x80, 7, e.index(sk.entry))
		return
	}
	if !validate || httpguts.ValidHeaderFieldValue(v) {
		sk.index, sk.entry = e.field(sk.name, v)
		// A value is remembered only where a table holds it. A value
		// is a substring of the whole head it came in (h1wire), and a
		// literal (larger than the table, or any towards a backend,
		// whose table is 0) kept here would hold that head, up to
		// MaxHeaderBytes, for the connection's life, for each key.
		switch {
		case sk.index != 0:
			sk.value = staticTable[sk.index-1].Value
		case sk.entry != 0:
			sk.value = v
		default:
			sk.value = ""
		}
	}
}

// key is what the encoder knows of header key k, learnt now if it knew
// nothing of it.
func (e *encoder) key(k string) *sentKey {
	if sk, ok := e.keys[k]; ok {
		return sk
	}
	// A copy: k is a substring of the whole head it came in (h1wire),
	// which the map, or the table through the name, would keep.
	k = strings.Clone(k)
	sk := &sentKey{}
	if name, ok := commonLower[k]; ok {
		sk.name = name
	} else if httpguts.ValidHeaderFieldName(k) {
		sk.name = strings.ToLower(k)
	}
	if len(e.keys) < maxKeys {
		if e.keys == nil {
			e.keys = map[string]*sentKey{}
		}
		e.keys[k] = sk
	}
	return sk
}

// field encodes the field name: value, adding it to the dynamic table
// unless it is in a table already or larger than the table, and returns
// its index in the static table or the number of the dynamic table entry
// holding it, 0 for none.
func (e *encoder) field(name, value string) (index, entry uint64) {
	f := hpack.HeaderField{Name: name, Value: value}
	if i, ok := staticPairs[f]; ok {
		e.buf = appendInt(e.buf, 0x80, 7, i)
		return i, 0
	}
	if n, ok := e.pairs[f]; ok {
		e.buf = appendInt(e.buf, 0x80, 7, e.index(n))
		return 0, n
	}
	nameIndex := staticNames[name]
	if n, ok := e.names[name]; ok && nameIndex == 0 {
		nameIndex = e.index(n)
	}
	size := f.Size()
	if size > e.max {
		// Literal without indexing.
		e.buf = appendInt(e.buf, 0, 4, nameIndex)
	} else {
		e.buf = appendInt(e.buf, 0x40, 6, nameIndex)
	}
	if nameIndex == 0 {
		e.buf = appendString(e.buf, name)
	}
	e.buf = appendString(e.buf, value)
	if size > e.max {
		return 0, 0
	}
	e.evict(size)
	e.inserted++
	n := e.inserted
	e.ents = append(e.ents, dynEntry{name, value, n})
	e.size += size
	if e.pairs == nil {
		e.pairs, e.names = map[hpack.HeaderField]uint64{}, map[string]uint64{}
	}
	e.pairs[f] = n
	e.names[name] = n
	return 0, n
}

// evict drops the oldest entries until room more fits in the table.
func (e *encoder) evict(room uint32) {
	drop := 0
	for ; drop < len(e.ents) && e.size+room > e.max; drop++ {
		old := &e.ents[drop]
		e.size -= hpack.HeaderField{Name: old.name, Value: old.value}.Size()
		if f := (hpack.HeaderField{Name: old.name, Value: old.value}); e.pairs[f] == old.n {
			delete(e.pairs, f)
		}
		if e.names[old.name] == old.n {
			delete(e.names, old.name)
		}
		*old = dynEntry{}
	}
	if drop > 0 {
		e.ents = e.ents[drop:]
		if cap(e.ents)-len(e.ents) < 8 && len(e.ents) < cap(e.ents)/2 {
			// Entries are added at the end and taken at the start:
			// the slice moves back before append has to grow it.
			e.ents = append(make([]dynEntry, 0, 2*len(e.ents)+8), e.ents...)
		}
	}
}

// holds reports whether the entry added as the nth is in the table.
func (e *encoder) holds(n uint64) bool {
	return n != 0 && n+uint64(len(e.ents)) > e.inserted
}

// index is the HPACK index of the entry added as the nth.
func (e *encoder) index(n uint64) uint64 {
	return uint64(len(staticTable)) + e.inserted - n + 1
}

// appendInt appends i with an n-bit prefix after the bits of first (RFC
// 7541 section 5.1).
func appendInt(dst []byte, first byte, n uint8, i uint64) []byte {
	limit := uint64(1)<<n - 1
	if i < limit {
		return append(dst, first|byte(i))
	}
	dst = append(dst, first|byte(limit))
	for i -= limit; i >= 128; i >>= 7 {
		dst = append(dst, byte(0x80|i&0x7f))
	}
	return append(dst, byte(i))
}

// appendString appends s as a string literal, Huffman-coded when that is
// shorter (RFC 7541 section 5.2).
func appendString(dst []byte, s string) []byte {
	if n := hpack.HuffmanEncodeLength(s); n < uint64(len(s)) {
		dst = appendInt(dst, 0x80, 7, n)
		return hpack.AppendHuffmanString(dst, s)
	}
	dst = appendInt(dst, 0, 7, uint64(len(s)))
	return append(dst, s...)
}

// staticTable is RFC 7541's Appendix A; staticPairs and staticNames index
// it by field and by name (the first entry of a name).
var staticTable = [...]hpack.HeaderField{
	{Name: ":authority"}, {Name: ":method", Value: "GET"}, {Name: ":method", Value: "POST"},
	{Name: ":path", Value: "/"}, {Name: ":path", Value: "/index.html"}, {Name: ":scheme", Value: "http"},
	{Name: ":scheme", Value: "https"}, {Name: ":status", Value: "200"}, {Name: ":status", Value: "204"},
	{Name: ":status", Value: "206"}, {Name: ":status", Value: "304"}, {Name: ":status", Value: "400"},
	{Name: ":status", Value: "404"}, {Name: ":status", Value: "500"}, {Name: "accept-charset"},
	{Name: "accept-encoding", Value: "gzip, deflate"}, {Name: "accept-language"}, {Name: "accept-ranges"},
	{Name: "accept"}, {Name: "access-control-allow-origin"}, {Name: "age"}, {Name: "allow"},
	{Name: "authorization"}, {Name: "cache-control"}, {Name: "content-disposition"},
	{Name: "content-encoding"}, {Name: "content-language"}, {Name: "content-length"},
	{Name: "content-location"}, {Name: "content-range"}, {Name: "content-type"}, {Name: "cookie"},
	{Name: "date"}, {Name: "etag"}, {Name: "expect"}, {Name: "expires"}, {Name: "from"}, {Name: "host"},
	{Name: "if-match"}, {Name: "if-modified-since"}, {Name: "if-none-match"}, {Name: "if-range"},
	{Name: "if-unmodified-since"}, {Name: "last-modified"}, {Name: "link"}, {Name: "location"},
	{Name: "max-forwards"}, {Name: "proxy-authenticate"}, {Name: "proxy-authorization"}, {Name: "range"},
	{Name: "referer"}, {Name: "refresh"}, {Name: "retry-after"}, {Name: "server"}, {Name: "set-cookie"},
	{Name: "strict-transport-security"}, {Name: "transfer-encoding"}, {Name: "user-agent"}, {Name: "vary"},
	{Name: "via"}, {Name: "www-authenticate"},
}

var staticPairs, staticNames = func() (map[hpack.HeaderField]uint64, map[string]uint64) {
	pairs, names := map[hpack.HeaderField]uint64{}, map[string]uint64{}
	for i, f := range staticTable {
		pairs[f] = uint64(i + 1)
		if _, ok := names[f.Name]; !ok {
			names[f.Name] = uint64(i + 1)
		}
	}
	return pairs, names
}()
