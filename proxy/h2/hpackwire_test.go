package h2

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestTableSizeChangesKeepFields: a client that shrinks the server's HPACK
// table (SETTINGS_HEADER_TABLE_SIZE) between bursts of concurrent streams
// decodes every response with its own stream's fields.
func TestTableSizeChangesKeepFields(t *testing.T) {
	addr, _ := serveConns(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		w.Header().Set("X-Id", id)
		w.Header().Set("X-Per", strings.Repeat(id, 9))
		w.Header().Set("X-Shared", strings.Repeat("s", 40))
		io.WriteString(w, id)
	})}, nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	dec := hpack.NewDecoder(4096, nil)
	fr.ReadMetaHeaders = dec
	fr.WriteSettings()
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	next := uint32(1)
	for round, size := range []uint32{4096, 4096, 120, 120, 0, 0, 64, 64} {
		if round > 0 && size != 4096 {
			fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: size})
			dec.SetAllowedMaxDynamicTableSize(size)
		}
		want := map[uint32]string{}
		for i := range 6 {
			id := fmt.Sprintf("r%ds%d", round, i)
			hbuf.Reset()
			for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "a.test"}, {":path", "/?id=" + id}} {
				enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
			}
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: next, BlockFragment: hbuf.Bytes(), EndStream: true, EndHeaders: true})
			want[next] = id
			next += 2
		}
		for len(want) > 0 {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				id := want[f.StreamID]
				h := map[string]string{}
				for _, hf := range f.RegularFields() {
					h[hf.Name] = hf.Value
				}
				if h["x-id"] != id || h["x-per"] != strings.Repeat(id, 9) || h["x-shared"] != strings.Repeat("s", 40) {
					t.Errorf("round %d (table %d): stream %d, %s's, has the fields %v", round, size, f.StreamID, id, h)
				}
			case *http2.DataFrame:
				if id := want[f.StreamID]; len(f.Data()) > 0 && string(f.Data()) != id {
					t.Errorf("stream %d, %s's, has the body %q", f.StreamID, id, f.Data())
				}
				if f.StreamEnded() {
					delete(want, f.StreamID)
				}
			case *http2.GoAwayFrame:
				t.Fatalf("round %d: GOAWAY %v", round, f.ErrCode)
			}
		}
	}
}
