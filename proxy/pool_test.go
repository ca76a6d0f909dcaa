package proxy

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

// TestBackendConnectionsOutlastBursts sends bursts of concurrent requests,
// over many HTTP/1.1 connections and over one h2c connection that
// multiplexes them: the backend connections the first burst opened serve
// the later ones, where a pool smaller than the burst would close the
// extra connections after each request and open new ones for the next
// burst (connection churn that cost a fifth of the proxy's CPU time under
// HTTP/2 load, and leaves sockets in TIME_WAIT).
func TestBackendConnectionsOutlastBursts(t *testing.T) {
	const concurrency, bursts = 150, 3
	var opened atomic.Int64
	backend := startBackendServer(t, &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Long enough for the whole burst to be in flight at once.
			time.Sleep(50 * time.Millisecond)
			io.WriteString(w, "ok")
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				opened.Add(1)
			}
		},
	})

	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
	tbl := compile(t, route("web", nil, router.Rule{Backends: backends("web")}))
	url := "http://" + apply(t, s, Listener{Address: "127.0.0.1:0", Protocol: HTTP, Routes: tbl})[0] + "/"

	clients := map[string]*http.Transport{
		"HTTP/1.1": {MaxIdleConnsPerHost: concurrency},
		"h2c":      {Protocols: new(http.Protocols)},
	}
	clients["h2c"].Protocols.SetUnencryptedHTTP2(true)
	for name, tr := range clients {
		t.Run(name, func(t *testing.T) {
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			before := opened.Load()
			for range bursts {
				var wg sync.WaitGroup
				for range concurrency {
					wg.Go(func() {
						resp, err := client.Get(url)
						if err != nil {
							t.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							t.Errorf("status %d", resp.StatusCode)
						}
					})
				}
				wg.Wait()
			}
			if n := opened.Load() - before; n > concurrency {
				t.Errorf("the backend accepted %d connections for %d bursts of %d concurrent requests, want at most %d", n, bursts, concurrency, concurrency)
			}
		})
	}
}

// TestNegativeIdleBoundRefused refuses a pool bound below zero (zero picks
// the default), naming the option.
func TestNegativeIdleBoundRefused(t *testing.T) {
	opts := testOptions()
	opts.MaxIdleConnsPerEndpoint = -1
	if _, err := New(opts); err == nil || !strings.Contains(err.Error(), "max idle connections per endpoint -1") {
		t.Errorf("New with MaxIdleConnsPerEndpoint -1: %v, want an error naming it", err)
	}
}
