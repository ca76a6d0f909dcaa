package proxy

import (
	"bufio"
	"context"
	"encoding/base64"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/hostgate/hostgate/router"
)

// TestH2DrainSendsGoAway stops a server with an idle h2c connection open,
// one with prior knowledge and one upgraded from HTTP/1.1: each gets
// GOAWAY(NO_ERROR) naming the stream it was served, then closes, so its
// client knows to go elsewhere rather than finding a dead socket.
func TestH2DrainSendsGoAway(t *testing.T) {
	for _, upgrade := range []bool{false, true} {
		name := map[bool]string{false: "prior knowledge", true: "upgrade"}[upgrade]
		t.Run(name, func(t *testing.T) {
			opts := testOptions()
			if upgrade && opts.HTTP2Engine == EngineStdlib {
				t.Skip("net/http's HTTP/2 server does not drain connections it was handed by ServeConn")
			}
			opts.ShutdownGrace = 5 * time.Second
			s, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: startBackend(t, echo("web"))}}})
			addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, route("all", nil, router.Rule{Backends: backends("web")}))})[0]
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			fr := http2.NewFramer(c, br)
			fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
			if upgrade {
				var settings [0]byte
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: "+base64.RawURLEncoding.EncodeToString(settings[:])+"\r\n\r\n")
				status, err := br.ReadString('\n')
				if err != nil || !strings.Contains(status, " 101 ") {
					t.Fatalf("upgrade answered %q, %v", status, err)
				}
				for line := "x"; line != "\r\n"; {
					if line, err = br.ReadString('\n'); err != nil {
						t.Fatal(err)
					}
				}
			}
			io.WriteString(c, http2.ClientPreface)
			fr.WriteSettings()
			if !upgrade {
				var hbuf strings.Builder
				enc := hpack.NewEncoder(&hbuf)
				for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "a.test"}, {":path", "/"}} {
					enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
				}
				fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte(hbuf.String()), EndStream: true, EndHeaders: true})
			}
			answered := false
			for !answered {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("before the answer of stream 1: %v", err)
				}
				if h, ok := f.(*http2.MetaHeadersFrame); ok && h.StreamID == 1 {
					answered = h.PseudoValue("status") == "200"
				}
			}

			stopped := make(chan error, 1)
			go func() { stopped <- s.Shutdown(context.Background()) }()
			var away *http2.GoAwayFrame
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					break
				}
				if g, ok := f.(*http2.GoAwayFrame); ok {
					away = &http2.GoAwayFrame{LastStreamID: g.LastStreamID, ErrCode: g.ErrCode}
				}
			}
			if away == nil || away.ErrCode != http2.ErrCodeNo || away.LastStreamID != 1 {
				t.Errorf("GOAWAY before the connection closed: %+v, want NO_ERROR naming stream 1", away)
			}
			if err := <-stopped; err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
}
