package proxy

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

// TestStreamsKeepTheirOwn sends many HTTP/2 streams at once over a few
// connections, bridged to an HTTP/1.1 backend and relayed to an h2c one,
// some reset at random points: every response a client reads carries its
// own request's id in its header, body and trailer, and in its Early
// Hints where bridged (none on net/http's HTTP/2 server, which relays
// none). It guards the pools a response passes through (the engine's
// header maps and write buffers, the bridge's state, the backends'
// connections).
func TestStreamsKeepTheirOwn(t *testing.T) {
	backend := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		if got := r.Header.Get("X-Id"); got != id {
			http.Error(w, "request header of "+got, http.StatusTeapot)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if want := strings.Repeat(id+";", strings.Count(string(body), ";")); string(body) != want {
			http.Error(w, "request body "+string(body), http.StatusTeapot)
			return
		}
		pieces, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("X-Id", id)
		if pieces == 0 {
			w.Header().Set("Content-Length", strconv.Itoa(len(id)+1))
			io.WriteString(w, id+";")
			return
		}
		if r.ProtoMajor == 1 {
			// Not over h2c: net/http's HTTP/2 server encodes a 1xx
			// header after WriteHeader returns, racing the handler.
			w.Header().Set("Link", "<"+id+">")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Del("Link")
		}
		w.Header().Set("Trailer", "X-Tail")
		for i := range pieces {
			io.WriteString(w, strings.Repeat(id+";", 200*(i+1)))
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
		w.Header().Set("X-Tail", id)
	}))
	opts := testOptions()
	bridgingEngine(&opts)
	s := startServer(t, opts)
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t,
		route("h1", nil, router.Rule{Matches: prefix("/h1"), Backends: backends("web")}),
		route("h2c", nil, router.Rule{Matches: prefix("/h2c"), Backends: []router.BackendRef{{Name: "web", Weight: 1, Protocol: "h2c"}}}),
	)})[0]
	clients := h2cClients(t, 3, 20*time.Second)

	var mu sync.Mutex
	var wg sync.WaitGroup
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		t.Errorf(format, args...)
	}
	var served, cut int
	for w := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := clients[w%len(clients)]
			for i := range 40 {
				id := fmt.Sprintf("w%di%d", w, i)
				path := []string{"/h1", "/h2c"}[i%2]
				pieces := rand.IntN(6)
				method, body := "GET", io.Reader(http.NoBody)
				if i%3 == 0 {
					method, body = "POST", strings.NewReader(strings.Repeat(id+";", 1+rand.IntN(3000)))
				}
				ctx, cancel := context.WithCancel(context.Background())
				// Fewer than the rapid-reset budget (guard.ResetBurst) a connection.
				canceled := rand.IntN(8) == 0
				if canceled {
					time.AfterFunc(time.Duration(rand.IntN(3000))*time.Microsecond, cancel)
				}
				var hints []string
				trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
					hints = append(hints, h.Get("Link"))
					return nil
				}}
				req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), method, "http://"+addr+path+"?id="+id+"&n="+strconv.Itoa(pieces), body)
				req.Header.Set("X-Id", id)
				resp, err := client.Do(req)
				if err != nil {
					if !canceled {
						fail("%s %s: %v", method, id, err)
					}
					cancel()
					continue
				}
				var got []byte
				var rerr error
				if canceled && pieces > 1 && rand.IntN(2) == 0 {
					// Reset in mid-body.
					got = make([]byte, 1+rand.IntN(2000))
					n, _ := io.ReadFull(resp.Body, got)
					got = got[:n]
					cancel()
					rest, err := io.ReadAll(resp.Body)
					got, rerr = append(got, rest...), err
				} else {
					got, rerr = io.ReadAll(resp.Body)
				}
				resp.Body.Close()
				cancel()
				if resp.StatusCode != http.StatusOK {
					if !canceled || resp.StatusCode == http.StatusTeapot {
						fail("%s %s: %d %q", method, id, resp.StatusCode, got)
					}
					continue
				}
				if h := resp.Header.Get("X-Id"); h != id {
					fail("%s %s: header of %q", method, id, h)
				}
				for _, hint := range hints {
					if hint != "<"+id+">" {
						fail("%s %s: Early Hints of %q", method, id, hint)
					}
				}
				parts := strings.Split(string(got), ";")
				for j, p := range parts {
					if p != id && (j < len(parts)-1 || !strings.HasPrefix(id, p)) {
						fail("%s %s: body holds %q", method, id, p)
						break
					}
				}
				mu.Lock()
				if rerr != nil {
					if !canceled {
						t.Errorf("%s %s: body: %v", method, id, rerr)
					}
					cut++
				} else {
					served++
				}
				mu.Unlock()
				if rerr == nil && pieces > 0 && resp.Trailer.Get("X-Tail") != id {
					fail("%s %s: trailer of %q", method, id, resp.Trailer.Get("X-Tail"))
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d responses read whole, %d cut short", served, cut)
}
