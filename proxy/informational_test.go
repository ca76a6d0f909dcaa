package proxy

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

// TestEarlyHintsOnResetStreams has an HTTP/1.1 backend send 103 Early
// Hints of many fields and then cancel the HTTP/2 client's request, at
// once or a moment later, so that the client resets its stream while the
// proxy relays the hints: through the bridge (a body of known length) and
// through ReverseProxy (one of unknown length), on both HTTP/2 engines. A
// stream not reset gets its own hints and then its answer without their
// fields on hostgate's engine, and its answer alone on net/http's
// (--http2-engine=stdlib), which relays no 1xx: its WriteHeader returns on
// a reset without waiting for the goroutine that encodes the 1xx from the
// handler's header map, which the proxy edits next (relaysInformational).
// The race detector failed every run of it there while the proxy relayed
// them, on both paths.
func TestEarlyHintsOnResetStreams(t *testing.T) {
	const hintFields = 100
	var resets sync.Map // id → the client's context.CancelFunc
	backend := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		io.Copy(io.Discard, r.Body)
		h := w.Header()
		h.Set("Link", "<"+id+">")
		for i := range hintFields {
			h.Set(fmt.Sprintf("X-Hint-%d", i), id)
		}
		w.WriteHeader(http.StatusEarlyHints)
		clear(h)
		if cancel, ok := resets.LoadAndDelete(id); ok {
			if d := rand.IntN(4); d > 0 {
				time.Sleep(time.Duration(d*100) * time.Microsecond)
			}
			cancel.(context.CancelFunc)()
		}
		h.Set("X-Id", id)
		io.WriteString(w, id)
	}))
	for _, engine := range []Engine{EngineNative, EngineStdlib} {
		t.Run(string(engine), func(t *testing.T) {
			opts := testOptions()
			opts.HTTP2Engine = engine
			bridgingEngine(&opts)
			s := startServer(t, opts)
			s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
			addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t,
				route("web", nil, router.Rule{Matches: prefix("/"), Backends: backends("web")}),
			)})[0]
			for _, path := range []string{"bridge", "reverseproxy"} {
				t.Run(path, func(t *testing.T) {
					// Fewer resets a connection than the rapid-reset
					// budget (guard.ResetBurst).
					clients := h2cClients(t, 3, 10*time.Second)
					var mu sync.Mutex
					var whole, hinted int
					var wg sync.WaitGroup
					for w := range 8 {
						wg.Go(func() {
							for i := range 24 {
								id := fmt.Sprintf("%s-w%di%d", path, w, i)
								ctx, cancel := context.WithCancel(context.Background())
								reset := i%3 != 0
								if reset {
									resets.Store(id, cancel)
								}
								// A reset stream's hints may come after Do returned.
								var hintsMu sync.Mutex
								var hints []textproto.MIMEHeader
								trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
									hintsMu.Lock()
									defer hintsMu.Unlock()
									hints = append(hints, h)
									return nil
								}}
								body := io.Reader(strings.NewReader(id))
								if path == "reverseproxy" {
									body = struct{ io.Reader }{body}
								}
								req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), "POST", "http://"+addr+"/?id="+id, body)
								resp, err := clients[w%len(clients)].Do(req)
								var got []byte
								if err == nil {
									got, err = io.ReadAll(resp.Body)
									resp.Body.Close()
								}
								resets.Delete(id)
								cancel()
								hintsMu.Lock()
								seen := hints
								hintsMu.Unlock()
								for _, h := range seen {
									if engine == EngineStdlib || h.Get("Link") != "<"+id+">" || h.Get(fmt.Sprintf("X-Hint-%d", hintFields-1)) != id {
										t.Errorf("%s: Early Hints with Link %q, X-Hint-0 %q", id, h.Get("Link"), h.Get("X-Hint-0"))
									}
								}
								if reset {
									continue
								}
								if err != nil {
									t.Errorf("%s: %v", id, err)
									continue
								}
								if resp.StatusCode != http.StatusOK || string(got) != id || resp.Header.Get("X-Id") != id || resp.Header.Get("X-Hint-0") != "" || resp.Header.Get("Link") != "" {
									t.Errorf("%s: %d %q, X-Id %q, Link %q, X-Hint-0 %q", id, resp.StatusCode, got, resp.Header.Get("X-Id"), resp.Header.Get("Link"), resp.Header.Get("X-Hint-0"))
								}
								mu.Lock()
								whole++
								hinted += len(seen)
								mu.Unlock()
							}
						})
					}
					wg.Wait()
					want := whole
					if engine == EngineStdlib {
						want = 0
					}
					if whole == 0 || hinted != want {
						t.Errorf("%d answers not reset, with %d Early Hints between them; want %d", whole, hinted, want)
					}
				})
			}
		})
	}
}
