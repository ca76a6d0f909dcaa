//go:build linux

package h1loop

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/pipeline"
)

// driven is a Server of one worker that the test runs wait by wait, so
// that what one wait's events are, and their order, is the test's to
// arrange: the kernel gives them in the order they came, and a test that
// writes and then waits for each socket to be readable has them come in
// its order.
type driven struct {
	t       *testing.T
	s       *Server
	w       *worker
	addr    string
	tracker net.Listener
	evs     [events]unix.EpollEvent
}

func newDriven(t *testing.T, backend string) *driven {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := guard.NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &driven{t: t, addr: raw.Addr().String()}
	d.tracker = guard.NewTracker(Listen(raw), guard.NewRegistry(0, 0, m), m)
	d.s = &Server{cfg: Config{
		Path: testPath(t, backend, stackOpts{}, func(*pipeline.AccessRecord) {}),
		HandOff: func(c net.Conn) {
			t.Errorf("connection handed off")
			c.Close()
		},
		ReadHeaderTimeout:       5 * time.Second,
		IdleTimeout:             5 * time.Second,
		MaxHeaderBytes:          16 << 10,
		UpstreamIdleTimeout:     time.Minute,
		MaxIdleConnsPerEndpoint: 16,
	}}
	if d.w, err = newWorker(d.s); err != nil {
		t.Fatal(err)
	}
	d.s.workers = []*worker{d.w}
	t.Cleanup(func() {
		d.tracker.Close()
		// Stopped, run closes what the worker holds and returns.
		d.s.stopped.Store(true)
		d.w.run()
	})
	return d
}

// client connects to the server and hands the connection to the worker,
// which takes it at its next wait.
func (d *driven) client() (net.Conn, *bufio.Reader) {
	d.t.Helper()
	nc, br := dial(d.t, d.addr)
	tc, err := d.tracker.Accept()
	if err != nil {
		d.t.Fatal(err)
	}
	d.s.ServeConn(tc)
	return nc, br
}

// adopted is the worker's connection of the client nc, nil if none.
func (d *driven) adopted(nc net.Conn) *conn {
	for _, c := range d.w.conns {
		if c != nil && c.remote == nc.LocalAddr().String() {
			return c
		}
	}
	return nil
}

// handle handles the events of one wait as run does.
func (d *driven) handle(evs []unix.EpollEvent) {
	d.w.now = time.Now()
	d.w.dispatch(evs)
	d.w.wheel.Advance(d.w.now, d.w.expire)
}

// turn waits up to 10 ms for events and handles them; it returns how
// many came.
func (d *driven) turn() int {
	n := d.w.poll.Wait(d.evs[:], 10)
	d.handle(d.evs[:n])
	return n
}

// until turns until cond holds.
func (d *driven) until(what string, cond func() bool) {
	d.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			d.t.Fatalf("no %s after 10 s", what)
		}
		d.turn()
	}
}

// quiet turns until a wait finds nothing.
func (d *driven) quiet() {
	d.t.Helper()
	for i := 0; d.turn() > 0; i++ {
		if i == 1000 {
			d.t.Fatal("the worker never went quiet")
		}
	}
}

// answer turns until the answer to a request of method is read from br.
func (d *driven) answer(br *bufio.Reader, method string) answer {
	d.t.Helper()
	type result struct {
		a   answer
		err error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			done <- result{err: err}
			return
		}
		body, err := io.ReadAll(resp.Body)
		done <- result{answer{resp.StatusCode, string(body), resp.Header, resp.Close}, err}
	}()
	var r result
	d.until("answer", func() bool {
		select {
		case r = <-done:
			return true
		default:
			return false
		}
	})
	if r.err != nil {
		d.t.Fatalf("reading an answer: %v", r.err)
	}
	return r.a
}

// batch takes the events ready now, which are to hold one of first, the
// wake-up's if wake and one of last, and puts them in that order, any
// others between the wake-up's and last's.
func (d *driven) batch(first int, wake bool, last int) []unix.EpollEvent {
	d.t.Helper()
	n := d.w.poll.WaitNow(d.evs[:])
	var head, woken, rest, tail []unix.EpollEvent
	for _, ev := range d.evs[:n] {
		switch fd := int(ev.Fd); {
		case fd == first:
			head = append(head, ev)
		case fd == d.w.poll.Wake && wake:
			woken = append(woken, ev)
		case fd == last:
			tail = append(tail, ev)
		default:
			rest = append(rest, ev)
		}
	}
	if len(head) != 1 || len(tail) != 1 || wake && len(woken) != 1 {
		d.t.Fatalf("one wait: %+v, want events of %d, the wake-up (%v) and %d", d.evs[:n], first, wake, last)
	}
	return append(append(append(head, woken...), rest...), tail...)
}

// waitReadable waits until fd holds bytes to read, or its end.
func waitReadable(t *testing.T, fd int) {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
	for {
		n, err := unix.Poll(fds, 5000)
		if err == unix.EINTR {
			continue
		}
		if n != 1 {
			t.Fatalf("descriptor %d not readable after 5 s: %v", fd, err)
		}
		return
	}
}

// rawBackend answers each request it reads with serve, which writes the
// response, or anything else, itself.
func rawBackend(t *testing.T, serve func(c net.Conn, path string)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go func() {
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, r.Body)
					serve(c, r.URL.Path)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// answerPath is the response naming path that rawBackend's tests give.
func answerPath(c net.Conn, path string) {
	fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(path), path)
}

// A response of its own (response splitting), past the end of another.
const strayResponse = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret"

// TestStrayBytesInTheWaitOfTheNextRequest: bytes a backend sends on a
// pooled connection past the end of a response (a body to a HEAD, past
// Content-Length), which come in the same wait as a client's request and
// after it, are not the answer to that request. The request is a GET,
// which takes a pooled connection without a look at its socket: with the
// events handled in order, the request took the connection and was sent
// on it before the stray bytes' event, which was then read as its answer,
// another client's.
func TestStrayBytesInTheWaitOfTheNextRequest(t *testing.T) {
	pooled := make(chan net.Conn, 1)
	backend := rawBackend(t, func(c net.Conn, path string) {
		answerPath(c, path)
		if path == "/first" {
			pooled <- c
		}
	})
	d := newDriven(t, backend)
	a, abr := d.client()
	io.WriteString(a, "GET /first HTTP/1.1\r\nHost: app.test\r\n\r\n")
	if got := d.answer(abr, "GET"); got.status != 200 || got.body != "/first" {
		t.Fatalf("first answer: %d %q", got.status, got.body)
	}
	if n := len(d.w.idle[backend]); n != 1 {
		t.Fatalf("%d pooled backend connections, want 1", n)
	}
	u := d.w.idle[backend][0]
	b, bbr := d.client()
	d.until("second client", func() bool { return d.adopted(b) != nil })
	d.quiet()

	// The request, then the stray bytes, both there before the wait.
	io.WriteString(b, "GET /mine HTTP/1.1\r\nHost: app.test\r\n\r\n")
	bfd := d.adopted(b).fd
	waitReadable(t, bfd)
	io.WriteString(<-pooled, strayResponse)
	waitReadable(t, u.fd)
	d.handle(d.batch(bfd, false, u.fd))

	if got := d.answer(bbr, "GET"); got.status != 200 || got.body != "/mine" {
		t.Errorf("the next client: %d %q, want 200 %q", got.status, got.body, "/mine")
	}
}

// TestStrayBytesPastAFullRead: bytes past a response that came with it,
// and that the read which took the response's end left in the socket as
// it filled the buffer, are not the answer to the next request on the
// connection. Their event was taken with that read's: no later one says
// that the pooled connection holds them.
func TestStrayBytesPastAFullRead(t *testing.T) {
	asked := make(chan net.Conn, 1)
	backend := rawBackend(t, func(c net.Conn, path string) {
		if path == "/full" {
			asked <- c
			return
		}
		answerPath(c, path)
	})
	d := newDriven(t, backend)
	a, abr := d.client()
	io.WriteString(a, "GET /full HTTP/1.1\r\nHost: app.test\r\n\r\n")
	var bc net.Conn
	d.until("request at the backend", func() bool {
		select {
		case bc = <-asked:
			return true
		default:
			return false
		}
	})
	u := d.adopted(a).up
	// The response, exactly the room of the first read, and the stray
	// bytes, all in the socket before the worker reads it.
	body := strings.Repeat("f", upBufferSize-len("HTTP/1.1 200 OK\r\nContent-Length: 16342\r\n\r\n"))
	head := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(body))
	if len(head)+len(body) != upBufferSize {
		t.Fatalf("response of %d bytes, want %d", len(head)+len(body), upBufferSize)
	}
	io.WriteString(bc, head+body+strayResponse)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := unix.IoctlGetInt(u.fd, unix.SIOCINQ)
		if err != nil {
			t.Fatal(err)
		}
		if n == upBufferSize+len(strayResponse) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes in the backend connection, want %d", n, upBufferSize+len(strayResponse))
		}
		time.Sleep(time.Millisecond)
	}
	if got := d.answer(abr, "GET"); got.status != 200 || got.body != body {
		t.Fatalf("full answer: %d, %d bytes", got.status, len(got.body))
	}

	io.WriteString(a, "GET /mine HTTP/1.1\r\nHost: app.test\r\n\r\n")
	if got := d.answer(abr, "GET"); got.status != 200 || got.body != "/mine" {
		t.Errorf("the next request: %d %q, want 200 %q", got.status, got.body, "/mine")
	}
}

// TestEventOfAClosedSocketStaysWithIt: the event of a backend connection
// that an earlier event of the same wait closed is not applied to a
// client connection that a later one adopted, and that took the closed
// socket's descriptor number. Applied to it, the backend's reset made the
// new client look hung up: the request path then dropped its connection
// unanswered where the backend failed, rather than answer 502.
func TestEventOfAClosedSocketStaysWithIt(t *testing.T) {
	big := make(chan net.Conn, 1)
	backend := rawBackend(t, func(c net.Conn, path string) {
		switch path {
		case "/big":
			big <- c
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n")
			chunk := make([]byte, 64<<10)
			for {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		case "/fail":
			c.Close()
		default:
			answerPath(c, path)
		}
	})
	d := newDriven(t, backend)
	// A backend connection, made before the client that takes it next,
	// has the lower descriptor number: the one the kernel gives the next
	// socket once both are closed.
	z, zbr := d.client()
	io.WriteString(z, "GET /warm HTTP/1.1\r\nHost: app.test\r\n\r\n")
	if got := d.answer(zbr, "GET"); got.body != "/warm" {
		t.Fatalf("first answer: %d %q", got.status, got.body)
	}
	u := d.w.idle[backend][0]
	a, _ := d.client()
	d.until("second client", func() bool { return d.adopted(a) != nil })
	ac := d.adopted(a)
	ufd, afd := u.fd, ac.fd
	if ufd > afd {
		t.Fatalf("backend connection on descriptor %d, client on %d: want the backend's lower", ufd, afd)
	}
	// A response the client does not read: the worker holds the rest in
	// the client's buffer, the backend's in its socket.
	io.WriteString(a, "GET /big HTTP/1.1\r\nHost: app.test\r\n\r\n")
	d.until("a response stuck", func() bool { return ac.up == u && len(ac.out) > 0 && u.mayRead })
	bc := <-big
	d.quiet()

	// In one wait: the client resets its connection (closing it ends its
	// request, and closes the backend connection), a new client comes,
	// and the backend resets its end.
	a.(*net.TCPConn).SetLinger(0)
	a.Close()
	waitReadable(t, afd)
	c, cbr := d.client()
	bc.(*net.TCPConn).SetLinger(0)
	bc.Close()
	waitReadable(t, ufd)
	d.handle(d.batch(afd, true, ufd))

	cc := d.adopted(c)
	if cc == nil || cc.fd != ufd {
		t.Fatalf("the new client took no descriptor, or not the backend connection's (%d): %+v", ufd, cc)
	}
	if cc.hup {
		t.Errorf("the new client is taken for hung up: the closed backend connection's event went to it")
	}
	io.WriteString(c, "GET /fail HTTP/1.1\r\nHost: app.test\r\n\r\n")
	if got := d.answer(cbr, "GET"); got.status != http.StatusBadGateway {
		t.Errorf("a request whose backend fails: %d, want 502", got.status)
	}
}
