package h2

import (
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
	"weak"

	"golang.org/x/net/http2/hpack"
)

// FuzzEncoder encodes header blocks decoded from the fuzzer's bytes (a
// response's own fields, a header of repeated and changing values, table
// size limits from the peer between blocks) and decodes each with x/net's
// decoder, as a peer would: every block must decode to the fields sent, in
// order, and the dynamic table must stay within the limit.
func FuzzEncoder(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 0, 1, 2, 3})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{5, 9, 200, 7, 1, 5, 0, 3, 250, 4, 2, 5, 255, 8, 8, 8})
	f.Add([]byte{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3})
	f.Fuzz(func(t *testing.T, program []byte) {
		e := newEncoder()
		limit := uint32(defaultTableSize)
		var got []hpack.HeaderField
		dec := hpack.NewDecoder(defaultTableSize, func(f hpack.HeaderField) { got = append(got, f) })
		values := []string{"text/plain", "nginx/1.22.1", "", "a", "gzip, deflate", strings.Repeat("a", 300), "Sat, 28 Nov 2026 16:00:00 GMT", "\x7f"}
		keys := []string{"Content-Type", "Server", "Accept-Encoding", "X-Custom", "Set-Cookie", "Date", "Connection", "bad key"}
		for block := 0; len(program) > 0 && block < 64; block++ {
			op := program[0]
			program = program[1:]
			if op%5 == 4 && len(program) > 0 {
				// The peer's SETTINGS_HEADER_TABLE_SIZE, before the
				// next block.
				limit = uint32(program[0]) * 24
				program = program[1:]
				e.setLimit(limit)
				dec.SetAllowedMaxDynamicTableSize(limit)
				continue
			}
			status := 100 + int(op)*3
			var want []hpack.HeaderField
			e.start()
			e.keyed(&e.status, strconv.Itoa(status), false)
			want = append(want, hpack.HeaderField{Name: ":status", Value: strconv.Itoa(status)})
			if op%2 == 0 {
				e.keyed(&e.length, strconv.Itoa(int(op)), false)
				want = append(want, hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(int(op))})
			}
			h := http.Header{}
			for n := int(op % 7); n > 0 && len(program) > 0; n-- {
				k, v := keys[program[0]%8], values[program[0]/8%8]
				program = program[1:]
				if !slices.Contains(h[k], v) {
					h[k] = append(h[k], v)
				}
			}
			e.header(h, noKey)
			for k, vv := range h {
				if k == "Connection" || k == "bad key" {
					continue
				}
				for _, v := range vv {
					if v != "\x7f" {
						want = append(want, hpack.HeaderField{Name: commonLowerOr(k), Value: v})
					}
				}
			}
			got = got[:0]
			if _, err := dec.Write(e.buf); err != nil {
				t.Fatalf("block %d: %v", block, err)
			}
			if err := dec.Close(); err != nil {
				t.Fatalf("block %d: %v", block, err)
			}
			// header's map order is the block's: compare as sets
			// after the response's own fields.
			own := 1 + int(1-op%2)
			if len(got) != len(want) || !slices.Equal(got[:own], want[:own]) || !sameFields(got[own:], want[own:]) {
				t.Fatalf("block %d decodes to %v, want %v", block, got, want)
			}
			if e.size > limit || e.size > e.max {
				t.Fatalf("table of %d bytes past the limit %d", e.size, limit)
			}
		}
	})
}

func commonLowerOr(k string) string {
	if name, ok := commonLower[k]; ok {
		return name
	}
	return "x-custom"
}

func sameFields(a, b []hpack.HeaderField) bool {
	key := func(f hpack.HeaderField) string { return f.Name + "\x00" + f.Value }
	as, bs := make([]string, 0, len(a)), make([]string, 0, len(b))
	for _, f := range a {
		as = append(as, key(f))
	}
	for _, f := range b {
		bs = append(bs, key(f))
	}
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(as, bs)
}

// TestEncoderRepeats: a response's fields repeated on a connection are
// indexed, one byte each, as x/net's encoder had them; a value that
// changes is sent whole once, then indexed.
func TestEncoderRepeats(t *testing.T) {
	e := newEncoder()
	h := http.Header{"Content-Type": {"text/plain"}, "Server": {"nginx/1.22.1"}, "Date": {"Sat, 28 Nov 2026 16:00:00 GMT"}}
	block := func() []byte {
		e.start()
		e.keyed(&e.status, "200", false)
		e.keyed(&e.length, "13", false)
		e.header(h, noKey)
		return e.buf
	}
	if first := block(); len(first) < 30 {
		t.Fatalf("first block of %d bytes, want the values literal", len(first))
	}
	if again := block(); len(again) != 5 {
		t.Fatalf("second block %x, want 5 indexed fields", again)
	}
	h["Date"] = []string{"Sat, 28 Nov 2026 16:00:01 GMT"}
	if changed := block(); len(changed) < 20 || len(changed) > 30 {
		t.Fatalf("block with a new date of %d bytes, want the date literal", len(changed))
	}
	if again := block(); len(again) != 5 {
		t.Fatalf("block %x, want 5 indexed fields", again)
	}
}

// TestEncoderKeepsNoHead: what the encoder remembers of a header block
// keeps none of the head its fields came in, as h1wire's fields are
// substrings of a whole head (up to MaxHeaderBytes): not a value it sent
// as a literal (larger than the dynamic table, or any towards a peer whose
// table is 0, as a backend's, see newClientConn), nor one the static
// table holds, nor a header key. Otherwise up to maxKeys heads would stay
// in memory for as long as the connection lives.
func TestEncoderKeepsNoHead(t *testing.T) {
	for _, tc := range []struct {
		name     string
		limit    uint32
		key      string
		from, to int
	}{
		{"table of 0", 0, "X-Big", 25, 125},
		{"larger than the table", defaultTableSize, "X-Big", 25, 8 << 10},
		{"static table's field, table of 0", 0, "Accept-Encoding", 0, 13},
		{"a key", defaultTableSize, "", 25, 125},
		{"a common key", defaultTableSize, "", 13, 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEncoder()
			e.setLimit(tc.limit)
			head := make([]byte, 64<<10)
			n := copy(head, "gzip, deflateContent-Type")
			for i := n; i < len(head); i++ {
				head[i] = 'a'
			}
			gone := weak.Make(&head[0])
			all := unsafe.String(&head[0], len(head))
			e.start()
			h := http.Header{tc.key: {all[tc.from:tc.to]}}
			if tc.key == "" {
				// A key the encoder remembers, whose value goes
				// into the table as a string of its own.
				h = http.Header{all[tc.from:tc.to]: {"v"}}
			}
			e.header(h, noKey)
			head, all, h = nil, "", nil
			runtime.GC()
			if gone.Value() != nil {
				t.Errorf("the encoder keeps the %d-byte head of a field it sent", 64<<10)
			}
			runtime.KeepAlive(&e)
		})
	}
}
