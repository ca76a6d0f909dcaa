package proxy

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/proxy/h1loop"
	"github.com/hostgate/hostgate/router"
)

// h1DiffStep is what a client of TestHTTP1EnginesAgree does: write raw
// (a byte at a time, pause apart, when pause is set; on a goroutine of
// its own when async, for a body the server may refuse before reading
// it), then read responses answers (1xx ones count).
type h1DiffStep struct {
	raw     string
	pause   time.Duration
	async   bool
	answers int
}

// TestHTTP1EnginesAgree is a differential test of the HTTP/1.1 engines
// on a plain HTTP listener: the same bytes, written the same way, to a
// Server on EngineNative (the netpoll engine) and one on EngineLoop that
// are otherwise alike (options, routes, backends) must get the same
// answers, byte for byte but the Date field, and leave the connection
// open or closed alike. Among them every request of the smuggling set,
// which the loop hands to the netpoll engine's guard.
func TestHTTP1EnginesAgree(t *testing.T) {
	if !h1loop.Supported {
		t.Skip("the readiness loop needs Linux")
	}
	web := startBackend(t, diffBackend())
	// A backend that resets its connection halfway through a body.
	reset := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("r", 30000))
		time.Sleep(50 * time.Millisecond) // the bytes go before the reset
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}))
	// A backend that answers late, or stops halfway through a body, for
	// the rules' backend read timeout.
	stall := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stall/late" {
			time.Sleep(time.Second)
		}
		w.Header().Set("Content-Length", "20")
		io.WriteString(w, "first half")
		w.(http.Flusher).Flush()
		time.Sleep(time.Second)
		io.WriteString(w, "second one")
	}))
	hosts := []string{"diff.test"}
	tbl := compile(t,
		route("web", hosts, router.Rule{Matches: prefix("/"), Backends: backends("web")}),
		route("limited", hosts, router.Rule{Matches: prefix("/limited"), Backends: backends("web"), MaxRequestBody: 1024}),
		route("down", hosts, router.Rule{Matches: prefix("/down"), Backends: backends("down")}),
		route("reset", hosts, router.Rule{Matches: prefix("/reset"), Backends: backends("reset")}),
		route("stall", hosts, router.Rule{Matches: prefix("/stall"), Backends: backends("stall"), Timeouts: router.Timeouts{BackendRead: 300 * time.Millisecond, BackendSend: 300 * time.Millisecond}}),
		// The smuggling set's requests, for a.test.
		route("all", []string{"a.test"}, router.Rule{Backends: backends("web")}),
	)
	engines := []Engine{EngineNative, EngineLoop}
	addrs := map[Engine]string{}
	for _, engine := range engines {
		opts := testOptions()
		opts.HTTP1Engine = engine
		s := startServer(t, opts)
		s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: web}}, "down": {{Address: deadAddr(t)}}, "reset": {{Address: reset}}, "stall": {{Address: stall}}})
		addrs[engine] = apply(t, s, Listener{Address: "127.0.0.1:0", Protocol: HTTP, Routes: tbl})[0]
	}

	const host = "Host: diff.test\r\n"
	get := func(path string) string { return "GET " + path + " HTTP/1.1\r\n" + host + "\r\n" }
	post := func(path, body string) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n%s", path, host, len(body), body)
	}
	cases := []struct {
		name  string
		steps []h1DiffStep
	}{
		{"GET", []h1DiffStep{{raw: get("/small"), answers: 1}}},
		{"HEAD", []h1DiffStep{{raw: "HEAD /small HTTP/1.1\r\n" + host + "\r\n", answers: 1}}},
		{"no route", []h1DiffStep{{raw: "GET / HTTP/1.1\r\nHost: nowhere.test\r\n\r\n", answers: 1}}},
		{"POST", []h1DiffStep{{raw: post("/echo", "hello, body"), answers: 1}}},
		{"large response", []h1DiffStep{{raw: get("/large"), answers: 1}}},
		{"chunked response", []h1DiffStep{{raw: get("/large-chunked"), answers: 1}}},
		{"chunked response to HTTP/1.0", []h1DiffStep{{raw: "GET /large-chunked HTTP/1.0\r\n" + host + "Connection: keep-alive\r\n\r\n", answers: 1}}},
		{"chunked request", []h1DiffStep{{raw: "POST /echo HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n, body\r\n0\r\nX-Trailer: t\r\n\r\n", answers: 1}}},
		{"chunked request in pieces", []h1DiffStep{
			{raw: "POST /echo HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n5\r\nhel"},
			{raw: "lo\r\n0\r\n\r\n", answers: 1},
		}},
		{"pipelined", []h1DiffStep{{raw: get("/small") + post("/echo", "two") + get("/status/404") + get("/empty"), answers: 4}}},
		{"pipelined, then close", []h1DiffStep{{raw: get("/small") + "GET /small HTTP/1.1\r\n" + host + "Connection: close\r\n\r\n" + get("/small"), answers: 2}}},
		{"Expect: 100-continue", []h1DiffStep{
			{raw: "POST /echo HTTP/1.1\r\n" + host + "Expect: 100-continue\r\nContent-Length: 5\r\n\r\n", answers: 1},
			{raw: "hello", answers: 1},
		}},
		{"Expect: 100-continue, body too large", []h1DiffStep{{raw: "POST /limited HTTP/1.1\r\n" + host + "Expect: 100-continue\r\nContent-Length: 5000\r\n\r\n", answers: 1}}},
		// The 413 must reach a client that is still sending: the
		// connection lingers rather than reset under the answer.
		{"body too large, sent whole", []h1DiffStep{
			{raw: fmt.Sprintf("POST /limited HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n", host, 8<<20)},
			{raw: strings.Repeat("b", 8<<20), async: true, answers: 1},
		}},
		{"slow client", []h1DiffStep{{raw: post("/echo", "slowly"), pause: 2 * time.Millisecond, answers: 1}}},
		{"slow client, head in two", []h1DiffStep{
			{raw: "GET /small HTTP/1.1\r\nHo"},
			{raw: "st: diff.test\r\n\r\n", answers: 1},
		}},
		{"early hints", []h1DiffStep{{raw: get("/early-hints"), answers: 2}}},
		{"no content", []h1DiffStep{{raw: get("/status/204") + get("/status/304"), answers: 2}}},
		{"hop-by-hop fields", []h1DiffStep{{raw: get("/hop"), answers: 1}}},
		{"response head over 16 KiB", []h1DiffStep{{raw: get("/bigheader"), answers: 1}}},
		{"connection refused", []h1DiffStep{{raw: get("/down") + get("/small"), answers: 2}}},
		{"backend ends mid-body", []h1DiffStep{{raw: get("/truncated"), answers: 1}}},
		{"backend resets mid-body", []h1DiffStep{{raw: get("/reset"), answers: 1}}},
		{"backend read timeout before the head", []h1DiffStep{{raw: get("/stall/late") + get("/small"), answers: 2}}},
		{"backend read timeout in the body", []h1DiffStep{{raw: get("/stall/body"), answers: 1}}},
		{"backend send timeout, request taken", []h1DiffStep{{raw: post("/stall/post", "taken at once"), answers: 1}}},
		{"HTTP/1.0", []h1DiffStep{{raw: "GET /small HTTP/1.0\r\n" + host + "\r\n", answers: 1}}},
		{"Connection: close", []h1DiffStep{{raw: "GET /small HTTP/1.1\r\n" + host + "Connection: close\r\n\r\n", answers: 1}}},
	}
	for _, tt := range smugglingCases {
		// Read to the end: the connection closes after the refusal.
		cases = append(cases, struct {
			name  string
			steps []h1DiffStep
		}{"smuggling/" + tt.name, []h1DiffStep{{raw: tt.raw, answers: len(tt.want)}}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := map[Engine]string{}
			for _, engine := range engines {
				got[engine] = h1DiffExchange(t, addrs[engine], tc.steps)
			}
			if got[EngineNative] != got[EngineLoop] {
				t.Errorf("the engines differ\nnative:\n%s\nloop:\n%s", got[EngineNative], got[EngineLoop])
			}
		})
	}
}

// h1DiffExchange takes the steps on a new connection to addr, and
// returns what came back as text: each answer's status line, fields but
// Date (ports written PORT), body (or its digest, when long) and how its
// read ended; then whether the connection stayed open.
func h1DiffExchange(t *testing.T, addr string, steps []h1DiffStep) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetNoDelay(true)
	_, port, _ := net.SplitHostPort(addr)
	br := bufio.NewReader(c)
	var out strings.Builder
	var method string
	for _, s := range steps {
		write := func() error {
			if s.pause == 0 {
				_, err := io.WriteString(c, s.raw)
				return err
			}
			for i := range len(s.raw) {
				if _, err := io.WriteString(c, s.raw[i:i+1]); err != nil {
					return err
				}
				time.Sleep(s.pause)
			}
			return nil
		}
		var written chan error
		if s.async {
			written = make(chan error, 1)
			go func() { written <- write() }()
		} else {
			write()
		}
		if m, _, ok := strings.Cut(s.raw, " "); ok && method == "" {
			method = m
		}
		for range s.answers {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			req := &http.Request{Method: method}
			resp, err := http.ReadResponse(br, req)
			if err != nil {
				fmt.Fprintf(&out, "no answer: %v\n", h1DiffError(err))
				break
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Fprintf(&out, "%s %s\n", resp.Proto, resp.Status)
			for _, k := range slices.Sorted(maps.Keys(resp.Header)) {
				if k != "Date" {
					fmt.Fprintf(&out, "%s: %q\n", k, strings.ReplaceAll(strings.Join(resp.Header[k], ", "), ":"+port, ":PORT"))
				}
			}
			fmt.Fprintf(&out, "length %d, chunked %v, close %v\n", resp.ContentLength, slices.Contains(resp.TransferEncoding, "chunked"), resp.Close)
			if len(body) > 256 {
				fmt.Fprintf(&out, "body of %d bytes, sha256 %x\n", len(body), sha256.Sum256(body))
			} else {
				fmt.Fprintf(&out, "body %q\n", body)
			}
			if len(resp.Trailer) > 0 {
				fmt.Fprintf(&out, "trailer %v\n", resp.Trailer)
			}
			fmt.Fprintf(&out, "body read: %v\n", h1DiffError(err))
		}
		if written != nil {
			// A client still sending when refused must not be reset
			// under the answer: the server reads on and drops what it
			// sends (lingering close).
			select {
			case err := <-written:
				fmt.Fprintf(&out, "request write: %v\n", h1DiffError(err))
			case <-time.After(10 * time.Second):
				out.WriteString("request write: stuck\n")
			}
		}
	}
	// Whatever else comes, then whether the connection ends.
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	rest, err := io.ReadAll(br)
	if len(rest) > 0 {
		fmt.Fprintf(&out, "then %q\n", rest)
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		out.WriteString("connection open\n")
	} else {
		out.WriteString("connection closed\n")
	}
	return out.String()
}

// h1DiffError is how a read ended, without what differs between two
// servers (addresses) or two runs: a reset and an end of stream after
// a refusal are both the connection's end.
func h1DiffError(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "cut short"
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, syscall.ECONNRESET):
		return "connection ended"
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return "timeout"
	}
	return err.Error()
}
