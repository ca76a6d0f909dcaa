//go:build linux

package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

// reuseServer serves every request on a cleartext listener of engine from
// backend, under the rule timeouts given, and returns the listener's
// address.
func reuseServer(t *testing.T, engine Engine, backend string, timeouts router.Timeouts) string {
	t.Helper()
	opts := testOptions()
	opts.HTTP1Engine = engine
	s := startServer(t, opts)
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
	rule := router.Rule{Backends: backends("web"), Timeouts: timeouts}
	return apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, route("all", nil, rule))})[0]
}

// TestStrayResponseBytesGoToNoOne: bytes a backend sends past the end of a
// response, here the body of a HEAD response that a backend writes anyway,
// are not the answer to the next request sent on its connection, another
// client's. The bytes make up a response of their own, as they may
// (response splitting), and come with the head or a moment after it.
func TestStrayResponseBytesGoToNoOne(t *testing.T) {
	const stray = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret"
	for _, engine := range []Engine{EngineNative, EngineLoop} {
		for _, later := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/later=%v", engine, later), func(t *testing.T) {
				backend := rawBackend(t, func(c net.Conn) {
					br := bufio.NewReader(c)
					for {
						r, err := http.ReadRequest(br)
						if err != nil {
							return
						}
						io.Copy(io.Discard, r.Body)
						if r.Method != http.MethodHead {
							io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nmine")
							continue
						}
						head := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(stray))
						if later {
							io.WriteString(c, head)
							time.Sleep(50 * time.Millisecond)
							io.WriteString(c, stray)
						} else {
							io.WriteString(c, head+stray)
						}
					}
				})
				addr := reuseServer(t, engine, backend, router.Timeouts{})
				a, abr := dialRaw(t, addr)
				io.WriteString(a, "HEAD /page HTTP/1.1\r\nHost: a\r\n\r\n")
				if resp, _ := readResp(t, abr, http.MethodHead); resp.StatusCode != http.StatusOK {
					t.Fatalf("HEAD: %d", resp.StatusCode)
				}
				// The stray bytes arrive, if they come later.
				time.Sleep(150 * time.Millisecond)
				b, bbr := dialRaw(t, addr)
				io.WriteString(b, "GET /mine HTTP/1.1\r\nHost: a\r\n\r\n")
				if resp, body := readResp(t, bbr, http.MethodGet); resp.StatusCode != http.StatusOK || body != "mine" {
					t.Errorf("the next client: %d %q, want 200 %q", resp.StatusCode, body, "mine")
				}
			})
		}
	}
}
