package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/router"
)

// TestSlowRequestBody sends request bodies that trickle in, a byte every
// 100ms, below a minimum rate of 1 KB/s after a grace of 300ms, on every
// protocol: each is answered 408 soon after the grace (an HTTP/1.1
// connection then closes), and the backend's connection is let go. A body
// that keeps the rate is served.
func TestSlowRequestBody(t *testing.T) {
	opts := testOptions()
	opts.MinRequestBodyRate = 1000
	opts.RequestBodyGrace = 300 * time.Millisecond
	s := startServer(t, opts)
	f := newTLSFixture(t)
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: startBackend(t, echo("web"))}}})
	routes := compile(t, route("web", nil, router.Rule{Backends: backends("web")}))
	plain, secure := freeAddr(t), freeAddr(t)
	apply(t, s,
		Listener{Address: plain, Routes: routes},
		Listener{Address: secure, Protocol: HTTPS, Routes: routes, TLS: f.store(t, "app.test")})

	// The answer must come soon after the grace: well before the body,
	// 100 bytes at 10 bytes/s, could have been sent whole.
	const within = 3 * time.Second

	t.Run("HTTP/1.1", func(t *testing.T) {
		conn, err := net.Dial("tcp", plain)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		fmt.Fprint(conn, "POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 100\r\n\r\n")
		go func() {
			for range 100 {
				if _, err := conn.Write([]byte{'x'}); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
			t.Errorf("status %d, close %t, body %q; want 408 and the connection closed", resp.StatusCode, resp.Close, body)
		}
		if took := time.Since(start); took > within {
			t.Errorf("answered after %v; want within %v", took, within)
		}
		if _, err := br.ReadByte(); err == nil {
			t.Error("the connection stayed open after the 408")
		}
	})

	h2c := h2cTransport()
	h3 := f.h3Transport(t, secure)
	for _, c := range []struct {
		name   string
		client *http.Client
		url    string
		// length is the declared body length, -1 for none.
		length int64
	}{
		{"h2c", &http.Client{Transport: h2c}, "http://" + plain + "/", 100},
		{"h2", f.client(secure, true), "https://app.test/", 100},
		{"HTTP/3", &http.Client{Transport: h3}, "https://app.test/", 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			go func() {
				for range 100 {
					if _, err := pw.Write([]byte{'x'}); err != nil {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
				pw.Close()
			}()
			req, err := http.NewRequest(http.MethodPost, c.url, pr)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = c.length
			start := time.Now()
			resp, err := c.client.Do(req)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Errorf("status %d; want 408", resp.StatusCode)
			}
			if took := time.Since(start); took > within {
				t.Errorf("answered after %v; want within %v", took, within)
			}
		})
	}

	// A body without a declared length is a stream (a gRPC client
	// stream waits for its next message as long as it likes): it may
	// trickle. On HTTP/2 it goes through ReverseProxy.
	t.Run("h2c stream without a length", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			for range 10 { // a second, past the grace, at 10 bytes/s
				if _, err := pw.Write([]byte{'x'}); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			pw.Close()
		}()
		req, err := http.NewRequest(http.MethodPost, "http://"+plain+"/", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = -1
		resp, err := (&http.Client{Transport: h2c}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "body=xxxxxxxxxx\n") {
			t.Errorf("status %d, body %q; want 200 with the whole stream echoed", resp.StatusCode, body)
		}
	})

	t.Run("a body that keeps the rate", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			// 2 KB/s for a second, twice the minimum.
			for range 20 {
				if _, err := pw.Write([]byte(strings.Repeat("x", 100))); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			pw.Close()
		}()
		req, err := http.NewRequest(http.MethodPost, "http://"+plain+"/", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = 2000
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "body="+strings.Repeat("x", 2000)) {
			t.Errorf("status %d, body of %d bytes; want 200 with the whole body echoed", resp.StatusCode, len(body))
		}
	})
	wantMetric(t, s, 4, "hostgate_request_body_timeouts_total", "reason", "rate")
}

// TestSlowReader: a client that sends a request and then reads nothing
// of a large answer loses its connection (on HTTP/1.1) or its stream (on
// HTTP/2, whose connection stays busy) once a write to it has waited for
// the idle timeout, and the backend's connection is let go with it.
func TestSlowReader(t *testing.T) {
	opts := testOptions()
	opts.IdleTimeout = time.Second
	s := startServer(t, opts)
	released := make(chan time.Duration, 1)
	s.UpdateEndpoints(map[string][]Endpoint{"big": {{Address: startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		chunk := make([]byte, 1<<20)
		for range 1 << 10 { // 1 GiB: far more than any buffer between the two
			if _, err := w.Write(chunk); err != nil {
				released <- time.Since(start)
				return
			}
		}
		released <- -1
	}))}}})
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, route("big", nil, router.Rule{Backends: backends("big")}))})[0]
	h2c := h2cTransport()
	t.Cleanup(h2c.CloseIdleConnections)
	for name, ask := range map[string]func(t *testing.T){
		"HTTP/1.1": func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			fmt.Fprint(conn, "GET / HTTP/1.1\r\nHost: app.test\r\n\r\n")
		},
		// The client's transport reads the connection on, but grants the
		// stream no window once its buffer is full.
		"h2c": func(t *testing.T) {
			resp, err := (&http.Client{Transport: h2c}).Get("http://" + addr + "/")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { resp.Body.Close() })
		},
	} {
		t.Run(name, func(t *testing.T) {
			ask(t)
			select {
			case took := <-released:
				if took < 0 {
					t.Fatal("the backend wrote 1 GiB to a client that reads nothing")
				}
				t.Logf("backend released after %v", took)
			case <-time.After(20 * time.Second):
				t.Fatal("the backend is still writing to a client that reads nothing after 20s")
			}
		})
	}
}
