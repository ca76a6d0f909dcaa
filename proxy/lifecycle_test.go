package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/streamtest"
	"github.com/hostgate/hostgate/router"
)

// TestWebSocketSurvivesReconfiguration opens a WebSocket through the proxy,
// then changes routes and endpoints under it: the stream goes on.
func TestWebSocketSurvivesReconfiguration(t *testing.T) {
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"ws": {{Address: startBackend(t, streamtest.WebSocketEcho)}}})
	l := Listener{Address: "127.0.0.1:0", Routes: compile(t, route("ws", nil, router.Rule{Backends: backends("ws")}))}
	addr := apply(t, s, l)[0]

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	br, err := streamtest.Handshake(conn, "ws.test", "/chat")
	if err != nil {
		t.Fatal(err)
	}
	exchange := func(msg string) {
		t.Helper()
		if _, err := conn.Write(streamtest.Frame(msg, true)); err != nil {
			t.Fatal(err)
		}
		if got, err := streamtest.ReadFrame(br); err != nil || got != "echo: "+msg {
			t.Fatalf("got %q, %v", got, err)
		}
	}
	exchange("before")
	l.Routes = compile(t, route("other", nil, router.Rule{Backends: backends("other")}))
	if err := s.Apply(Config{Listeners: []Listener{l}}); err != nil {
		t.Fatal(err)
	}
	s.UpdateEndpoints(map[string][]Endpoint{})
	exchange("after")
}

// TestListenerSetChanges adds, keeps, removes and re-protocols listeners,
// and checks that a connection on a kept listener is not disturbed.
func TestListenerSetChanges(t *testing.T) {
	f := newTLSFixture(t)
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: startBackend(t, echo("web"))}}})
	routes := compile(t, route("web", nil, router.Rule{Backends: backends("web")}))
	a, b, c := freeAddr(t), freeAddr(t), freeAddr(t)
	apply(t, s, Listener{Address: a, Routes: routes}, Listener{Address: b, Routes: routes})

	kept, err := net.Dial("tcp", a)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	br := bufio.NewReader(kept)
	onKept := func() {
		t.Helper()
		fmt.Fprint(kept, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	onKept()

	apply(t, s, Listener{Address: a, Routes: routes}, Listener{Address: c, Routes: routes})
	onKept()
	if _, err := http.Get("http://" + b + "/"); err == nil {
		t.Error("removed listener still accepts")
	}
	if resp, _ := get(t, http.DefaultClient, "http://"+c+"/"); resp.StatusCode != 200 {
		t.Errorf("added listener: status %d", resp.StatusCode)
	}

	// The same address changes protocol.
	apply(t, s, Listener{Address: a, Routes: routes}, Listener{Address: c, Protocol: HTTPS, Routes: routes, TLS: f.store(t, "app.test")})
	if resp, _ := get(t, f.client(c, true), "https://app.test/"); resp.StatusCode != 200 {
		t.Errorf("listener switched to HTTPS: status %d", resp.StatusCode)
	}
}

// TestEndpointUpdate moves a backend to new endpoints without a new
// Config.
func TestEndpointUpdate(t *testing.T) {
	s := startServer(t, testOptions())
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, route("web", nil, router.Rule{Backends: backends("web")}))})[0]
	for _, name := range []string{"one", "two"} {
		s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: startBackend(t, echo(name))}}})
		if resp, _ := get(t, http.DefaultClient, "http://"+addr+"/"); resp.Header.Get("X-Backend") != name {
			t.Errorf("answered by %q, want %q", resp.Header.Get("X-Backend"), name)
		}
	}
}

// TestGracefulStop stops the server (as SIGTERM does through Start's
// context) while a request is in flight: readiness drops at once, the
// listener accepts during the delay and refuses after, and the request
// completes.
func TestGracefulStop(t *testing.T) {
	opts := testOptions()
	opts.ShutdownDelay = 300 * time.Millisecond
	opts.ShutdownGrace = 5 * time.Second
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	arrived := make(chan struct{})
	s.UpdateEndpoints(map[string][]Endpoint{"slow": {{Address: startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		time.Sleep(time.Second)
		io.WriteString(w, "finished")
	}))}}})
	if s.Ready() {
		t.Error("ready before any Config")
	}
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: compile(t, route("slow", nil, router.Rule{Backends: backends("slow")}))})[0]
	if !s.Ready() {
		t.Error("not ready with a Config")
	}
	ctx, stop := context.WithCancel(context.Background())
	started := make(chan error)
	go func() { started <- s.Start(ctx) }()

	inflight := make(chan string)
	go func() {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			inflight <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		inflight <- fmt.Sprint(resp.StatusCode, " ", string(body))
	}()
	<-arrived
	stop()
	time.Sleep(50 * time.Millisecond)
	if s.Ready() {
		t.Error("still ready after the stop began")
	}
	if c, err := net.Dial("tcp", addr); err != nil {
		t.Errorf("refused during the delay: %v", err)
	} else {
		c.Close()
	}
	time.Sleep(opts.ShutdownDelay)
	// The listener closes when the delay's timer fires: on a loaded
	// machine a little after this wakes, so the test waits for it.
	for deadline := time.Now().Add(5 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Error("still accepting 5s after the delay")
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := <-inflight; got != "200 finished" {
		t.Errorf("in-flight request got %q", got)
	}
	select {
	case err := <-started:
		if err != nil {
			t.Errorf("Start: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Start did not return")
	}
	if err := s.Apply(Config{}); err == nil || !strings.Contains(err.Error(), "shut down") {
		t.Errorf("Apply after stop: %v", err)
	}
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
	}
}

// TestGraceExpires closes connections whose work outlasts the grace
// period, a hijacked WebSocket connection included, and says so.
func TestGraceExpires(t *testing.T) {
	opts := testOptions()
	opts.ShutdownGrace = 200 * time.Millisecond
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	arrived := make(chan struct{})
	s.UpdateEndpoints(map[string][]Endpoint{"ws": {{Address: startBackend(t, streamtest.WebSocketEcho)}}, "hang": {{Address: startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	}))}}})
	routes := compile(t,
		route("ws", nil, router.Rule{Matches: prefix("/ws"), Backends: backends("ws")}),
		route("hang", nil, router.Rule{Backends: backends("hang")}))
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Routes: routes})[0]

	ws, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.SetDeadline(time.Now().Add(10 * time.Second))
	wsr, err := streamtest.Handshake(ws, "ws.test", "/ws")
	if err != nil {
		t.Fatal(err)
	}

	done := make(chan error)
	go func() {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-arrived
	start := time.Now()
	if err := s.Shutdown(context.Background()); err == nil {
		t.Error("Shutdown reported a clean stop")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Shutdown took %v", d)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the hanging request was not cut")
	}
	if _, err := streamtest.ReadFrame(wsr); err == nil {
		t.Error("the WebSocket connection is still open")
	}
}

// TestRemovedListenerDrains removes listeners (a Gateway deleted, a port
// dropped) while requests are in flight on every protocol: each finishes
// with its answer, none is reset, and the sockets stop accepting at once.
func TestRemovedListenerDrains(t *testing.T) {
	f := newTLSFixture(t)
	s := startServer(t, testOptions())
	const clients = 5
	var arrived sync.WaitGroup
	arrived.Add(clients)
	release := make(chan struct{})
	s.UpdateEndpoints(map[string][]Endpoint{"slow": {{Address: startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-release
		io.WriteString(w, "finished")
	}))}}})
	routes := compile(t, route("slow", nil, router.Rule{Backends: backends("slow")}))
	plain, secure := freeAddr(t), freeAddr(t)
	addrs := apply(t, s,
		Listener{Address: plain, Routes: routes},
		Listener{Address: secure, Protocol: HTTPS, Routes: routes, TLS: f.store(t, "app.test")})

	h2c := h2cTransport()
	h3 := f.h3Transport(t, secure)
	requests := map[string]func() (*http.Response, error){
		"HTTP/1.1":  func() (*http.Response, error) { return http.Get("http://" + plain + "/") },
		"h2c":       func() (*http.Response, error) { return (&http.Client{Transport: h2c}).Get("http://" + plain + "/") },
		"HTTPS/1.1": func() (*http.Response, error) { return f.client(secure, false).Get("https://app.test/") },
		"h2":        func() (*http.Response, error) { return f.client(secure, true).Get("https://app.test/") },
		"HTTP/3":    func() (*http.Response, error) { return (&http.Client{Transport: h3}).Get("https://app.test/") },
	}
	if len(requests) != clients {
		t.Fatalf("%d clients, %d requests", clients, len(requests))
	}
	type outcome struct {
		name, got string
		closes    bool
	}
	outcomes := make(chan outcome, clients)
	for name, do := range requests {
		go func() {
			resp, err := do()
			if err != nil {
				outcomes <- outcome{name: name, got: err.Error()}
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				outcomes <- outcome{name: name, got: err.Error()}
				return
			}
			outcomes <- outcome{name, fmt.Sprint(resp.StatusCode, " ", string(body)), resp.Close}
		}()
	}
	arrived.Wait()
	apply(t, s) // every listener goes
	for _, addr := range addrs {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("removed listener %s still accepts", addr)
		}
	}
	close(release)
	for range clients {
		select {
		case o := <-outcomes:
			if o.got != "200 finished" {
				t.Errorf("%s request in flight got %q; want 200 finished", o.name, o.got)
			}
			if strings.HasSuffix(o.name, "/1.1") && !o.closes {
				t.Errorf("%s answer kept its connection open on a removed listener; want Connection: close", o.name)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a request in flight did not finish")
		}
	}
}
