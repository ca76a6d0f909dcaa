package proxy

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

// flaky is a backend that answers the first "fail" requests of each "id"
// (query parameters) with status "code", after stalling for "stall", and
// the later ones with 200. The body names the attempt, of a failure only
// with "failbody": the proxy keeps the connection of one without.
type flaky struct {
	mu   sync.Mutex
	seen map[string]int
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	q := r.URL.Query()
	f.mu.Lock()
	f.seen[q.Get("id")]++
	n := f.seen[q.Get("id")]
	f.mu.Unlock()
	if fail, _ := strconv.Atoi(q.Get("fail")); n <= fail {
		stall, _ := time.ParseDuration(q.Get("stall"))
		select {
		case <-time.After(stall):
		case <-r.Context().Done():
			return
		}
		code, _ := strconv.Atoi(q.Get("code"))
		w.WriteHeader(code)
		if !q.Has("failbody") {
			return
		}
	}
	fmt.Fprintf(w, "attempt %d", n)
}

func (f *flaky) attempts(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[id]
}

// TestRetry runs the rule retry policy on every engine: the HTTP/1.1
// engine, the bridge (h2c on the native engine) and ReverseProxy (the
// stdlib engine, both protocols).
func TestRetry(t *testing.T) {
	backend := &flaky{seen: map[string]int{}}
	live := startBackend(t, backend)
	dead := deadAddr(t)
	rule := func(path, backend string, retry *router.Retry, timeouts router.Timeouts) router.Route {
		return route(strings.TrimPrefix(path, "/"), nil, router.Rule{Matches: prefix(path), Backends: backends(backend), Retry: retry, Timeouts: timeouts})
	}
	routes := compile(t,
		rule("/codes", "flaky", &router.Retry{Codes: []int{503}, Attempts: 3, Backoff: time.Millisecond}, router.Timeouts{}),
		rule("/off", "flaky", &router.Retry{Codes: []int{503}}, router.Timeouts{}),
		rule("/plain", "flaky", nil, router.Timeouts{}),
		rule("/attempt-timeout", "flaky", &router.Retry{Codes: []int{503}, Attempts: 2, Backoff: time.Millisecond}, router.Timeouts{Request: 5 * time.Second, BackendRequest: 200 * time.Millisecond}),
		rule("/request-timeout", "flaky", &router.Retry{Codes: []int{503}, Attempts: 5, Backoff: 10 * time.Millisecond}, router.Timeouts{Request: 2 * time.Second}),
		rule("/refused", "mixed", &router.Retry{Attempts: 1, Backoff: time.Millisecond}, router.Timeouts{}),
	)
	tests := []struct {
		name, method, target, body string
		status                     int
		answer                     string
		attempts                   int
		// slowest bounds the time the request takes.
		slowest time.Duration
	}{
		{name: "succeeds after two failures", target: "/codes?fail=2&code=503", status: 200, answer: "attempt 3", attempts: 3},
		{name: "code not listed", target: "/codes?fail=2&code=500&failbody", status: 500, answer: "attempt 1", attempts: 1},
		{name: "attempts exhausted give the last answer", target: "/codes?fail=9&code=503&failbody", status: 503, answer: "attempt 4", attempts: 4},
		{name: "bodiless POST retried on a code", method: "POST", target: "/codes?fail=1&code=503", status: 200, answer: "attempt 2", attempts: 2},
		{name: "streamed body not sent twice", method: "POST", target: "/codes?fail=1&code=503&failbody", body: "payload", status: 503, answer: "attempt 1", attempts: 1},
		{name: "zero attempts", target: "/off?fail=1&code=503&failbody", status: 503, answer: "attempt 1", attempts: 1},
		{name: "no policy", target: "/plain?fail=1&code=503&failbody", status: 503, answer: "attempt 1", attempts: 1},
		{name: "attempt timeout retried", target: "/attempt-timeout?fail=1&code=503&stall=5s", status: 200, answer: "attempt 2", attempts: 2, slowest: 2 * time.Second},
		{name: "attempt timeout of a POST not retried", method: "POST", target: "/attempt-timeout?fail=1&code=503&stall=5s", status: 504, attempts: 1, slowest: 2 * time.Second},
		// 1.2s to the first 503, then the second attempt runs into the
		// request's deadline (2s): margins wide enough for a loaded
		// machine either way.
		{name: "request timeout ends the retries", target: "/request-timeout?fail=9&code=503&stall=1200ms", status: 504, attempts: 2, slowest: 4 * time.Second},
	}
	for _, engine := range []Engine{EngineNative, EngineStdlib} {
		opts := testOptions()
		opts.HTTP1Engine = engine
		// A refused connect is left to the retry policy, and the
		// refusing endpoint stays in rotation.
		opts.ConnectAttempts = 1
		opts.FailureThreshold = 1000
		s := startServer(t, opts)
		s.UpdateEndpoints(map[string][]Endpoint{"flaky": {{Address: live}}, "mixed": {{Address: dead}, {Address: live}}})
		addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: routes})[0]
		retries := func(route string) float64 {
			got, _ := metric(t, s, "hostgate_http_retries_total", "route", "HTTPRoute ns/"+route)
			return got
		}
		h2c := &http.Transport{Protocols: new(http.Protocols)}
		h2c.Protocols.SetUnencryptedHTTP2(true)
		for proto, client := range map[string]*http.Client{"HTTP/1.1": {Timeout: 10 * time.Second}, "h2c": {Transport: h2c, Timeout: 10 * time.Second}} {
			for _, tt := range tests {
				t.Run(fmt.Sprintf("%s/%s/%s", engine, proto, tt.name), func(t *testing.T) {
					route, _, _ := strings.Cut(strings.TrimPrefix(tt.target, "/"), "?")
					before := retries(route)
					start := time.Now()
					status, answer := send(t, client, tt.method, "http://"+addr+tt.target+"&id="+url.QueryEscape(t.Name()), tt.body)
					if took := time.Since(start); tt.slowest > 0 && took > tt.slowest {
						t.Errorf("took %v, want at most %v", took, tt.slowest)
					}
					if status != tt.status || tt.answer != "" && answer != tt.answer {
						t.Errorf("answer %d %q, want %d %q", status, answer, tt.status, tt.answer)
					}
					if got := backend.attempts(t.Name()); got != tt.attempts {
						t.Errorf("backend saw %d attempts, want %d", got, tt.attempts)
					}
					if got := retries(route) - before; got != float64(tt.attempts-1) {
						t.Errorf("hostgate_http_retries_total grew by %v, want %d", got, tt.attempts-1)
					}
				})
			}
			t.Run(fmt.Sprintf("%s/%s/refused connect retried to another endpoint", engine, proto), func(t *testing.T) {
				before := retries("refused")
				// Round robin: a request that does not meet the refusing
				// endpoint makes the next one start there.
				for i, method := range []string{"GET", "POST", "GET", "POST"} {
					body := ""
					if method == "POST" {
						body = "unread when the connect failed"
					}
					if status, answer := send(t, client, method, fmt.Sprintf("http://%s/refused?id=%s-%d", addr, url.QueryEscape(t.Name()), i), body); status != 200 || answer != "attempt 1" {
						t.Errorf("%s %d: %d %q, want 200 %q", method, i, status, answer, "attempt 1")
					}
				}
				if got := retries("refused") - before; got < 3 {
					t.Errorf("hostgate_http_retries_total grew by %v, want at least 3", got)
				}
			})
		}
		if _, ok := metric(t, s, "hostgate_http_retries_total", "route", "HTTPRoute ns/plain"); ok {
			t.Errorf("%s: a route without a retry policy has a retries series", engine)
		}
	}
}

// send makes a request (GET when method is empty) and returns the status
// and body of the answer.
func send(t *testing.T, c *http.Client, method, target, body string) (int, string) {
	t.Helper()
	var reader io.Reader
	if body != "" {
		reader = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, target, reader)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, target, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, target, err)
	}
	return resp.StatusCode, string(answer)
}

// TestRetryBudget: a policy's budget (proxy-next-upstream-timeout) stops
// the retries once it has passed, though attempts are left, and stops the
// move to another endpoint after a refused connect, which a rule without
// a budget makes; on every engine.
func TestRetryBudget(t *testing.T) {
	backend := &flaky{seen: map[string]int{}}
	live := startBackend(t, backend)
	dead := deadAddr(t)
	rule := func(path, backend string, retry *router.Retry) router.Route {
		return route(strings.TrimPrefix(path, "/"), nil, router.Rule{Matches: prefix(path), Backends: backends(backend), Retry: retry})
	}
	routes := compile(t,
		rule("/budget", "flaky", &router.Retry{Codes: []int{503}, Attempts: 5, Backoff: time.Millisecond, Budget: 1900 * time.Millisecond}),
		// A budget spent before any connect fails: no move.
		rule("/spent", "mixed", &router.Retry{Budget: time.Nanosecond}),
		rule("/free", "mixed", nil),
	)
	for _, engine := range []Engine{EngineNative, EngineStdlib} {
		opts := testOptions()
		opts.HTTP1Engine = engine
		opts.FailureThreshold = 1000
		s := startServer(t, opts)
		s.UpdateEndpoints(map[string][]Endpoint{"flaky": {{Address: live}}, "mixed": {{Address: dead}, {Address: live}}})
		addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: routes})[0]
		h2c := &http.Transport{Protocols: new(http.Protocols)}
		h2c.Protocols.SetUnencryptedHTTP2(true)
		for proto, client := range map[string]*http.Client{"HTTP/1.1": {Timeout: 10 * time.Second}, "h2c": {Transport: h2c, Timeout: 10 * time.Second}} {
			t.Run(fmt.Sprintf("%s/%s", engine, proto), func(t *testing.T) {
				// 1s to each 503: the second ends past the 1.9s
				// budget, so no third is made. The first must end
				// within it, which a loaded machine running the race
				// detector missed by 400ms once, when each took 600ms
				// of a 1s budget.
				id := url.QueryEscape(t.Name())
				status, answer := send(t, client, "GET", "http://"+addr+"/budget?fail=9&code=503&stall=1s&failbody&id="+id, "")
				if status != 503 || answer != "attempt 2" || backend.attempts(t.Name()) != 2 {
					t.Errorf("past the budget: %d %q after %d attempts, want 503 %q after 2", status, answer, backend.attempts(t.Name()), "attempt 2")
				}
				// Round robin over a refusing and a live endpoint: of two
				// requests, one starts at the refusing one.
				failed := map[string]int{}
				for _, path := range []string{"spent", "free"} {
					for i := range 4 {
						if status, _ := send(t, client, "GET", fmt.Sprintf("http://%s/%s?id=%s-%s-%d", addr, path, id, path, i), ""); status != 200 {
							failed[path]++
						}
					}
				}
				if failed["spent"] < 1 || failed["free"] != 0 {
					t.Errorf("requests failed on a refused connect: %v, want some with the budget spent and none without a budget", failed)
				}
			})
		}
	}
}
