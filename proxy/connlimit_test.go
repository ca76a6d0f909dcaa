package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/router"
)

// capFixture is a server with connection caps whose backend answers "/"
// at once and holds "/slow" until release.
type capFixture struct {
	t       *testing.T
	s       *Server
	addr    string
	arrived chan struct{}
	release func()
}

func newCapFixture(t *testing.T, maxConns, maxPerAddr int) *capFixture {
	held := make(chan struct{})
	f := &capFixture{t: t, arrived: make(chan struct{}, 8), release: sync.OnceFunc(func() { close(held) })}
	backend := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			f.arrived <- struct{}{}
			<-held
		}
		io.WriteString(w, "ok")
	}))
	// Registered after startBackend's, so it runs first: the backend's
	// Close does not wait for held handlers.
	t.Cleanup(f.release)
	opts := testOptions()
	opts.MaxConnections, opts.MaxConnectionsPerAddress = maxConns, maxPerAddr
	f.s = startServer(t, opts)
	f.s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
	f.addr = apply(t, f.s, Listener{Address: "127.0.0.1:0", Routes: compile(t, route("web", nil, router.Rule{Backends: backends("web")}))})[0]
	return f
}

// capConn is a client connection for hand-written HTTP/1.1 requests.
type capConn struct {
	net.Conn
	br *bufio.Reader
}

// dial connects from the loopback address from.
func (f *capFixture) dial(from string) *capConn {
	f.t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", f.addr)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return &capConn{c, bufio.NewReader(c)}
}

func (c *capConn) send(path string) {
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", path)
}

// answered reports whether the connection got a 200 for its request; an
// error is the connection closed without an answer.
func (c *capConn) answered() error {
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return fmt.Errorf("answer %d %q, %v", resp.StatusCode, body, err)
	}
	return nil
}

// idle opens a connection from `from` that waits for its next request.
func (f *capFixture) idle(from string) *capConn {
	f.t.Helper()
	c := f.dial(from)
	c.send("/")
	if err := c.answered(); err != nil {
		f.t.Fatal(err)
	}
	return c
}

// busy has c send a request that stays in flight until the test ends.
func (f *capFixture) busy(c *capConn) {
	f.t.Helper()
	c.send("/slow")
	select {
	case <-f.arrived:
	case <-time.After(5 * time.Second):
		f.t.Fatal("request did not reach the backend")
	}
}

// wantAnswered releases the held requests and checks that those of conns
// are answered: none was cut short to make room.
func (f *capFixture) wantAnswered(conns ...*capConn) {
	f.t.Helper()
	f.release()
	for _, c := range conns {
		if err := c.answered(); err != nil {
			f.t.Errorf("request in flight: %v", err)
		}
	}
}

// wantClosed checks that c was closed without an answer.
func wantClosed(t *testing.T, c *capConn, what string) {
	t.Helper()
	if b, err := c.br.ReadByte(); err == nil {
		t.Errorf("%s: read %q, want the connection closed", what, b)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Errorf("%s: still open", what)
	}
}

// settle waits until the connections waiting for a request may be closed
// to make room.
func settle() { time.Sleep(time.Second + 50*time.Millisecond) }

// TestNodeConnectionCap fills the node's cap: a new connection closes the
// connection idle the longest (an HTTP/2 one without streams here), then,
// with every connection busy, is refused. No request in flight is cut.
func TestNodeConnectionCap(t *testing.T) {
	f := newCapFixture(t, 3, NoCap)
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	defer h2c.CloseIdleConnections()
	get(t, &http.Client{Transport: h2c}, "http://"+f.addr+"/")
	settle()
	idle := f.idle("127.0.0.1")
	inFlight := f.dial("127.0.0.1")
	f.busy(inFlight)
	settle()
	wantMetric(t, f.s, 1, "hostgate_active_connections", "protocol", "h2c")
	wantMetric(t, f.s, 2, "hostgate_active_connections", "protocol", "http1")

	fresh := f.dial("127.0.0.1")
	fresh.send("/")
	if err := fresh.answered(); err != nil {
		t.Fatalf("connection past the cap with idle ones open: %v", err)
	}
	wantMetric(t, f.s, 1, "hostgate_connections_evicted_total", "reason", "node_limit")
	eventuallyMetric(t, f.s, 0, "hostgate_active_connections", "protocol", "h2c")
	idle.send("/")
	if err := idle.answered(); err != nil {
		t.Fatalf("a younger idle connection was closed too: %v", err)
	}

	f.busy(idle)
	f.busy(fresh)
	refused := f.dial("127.0.0.1")
	refused.send("/")
	wantClosed(t, refused, "connection past the cap with every one busy")
	wantMetric(t, f.s, 1, "hostgate_connections_refused_total", "reason", "node_limit")
	wantMetric(t, f.s, 0, "hostgate_connections_refused_total", "reason", "address_limit")
	wantMetric(t, f.s, 3, "hostgate_active_connections", "protocol", "http1")
	f.wantAnswered(inFlight, idle, fresh)
}

// TestAddressConnectionCap caps one client address: its own idle
// connection makes room, then it is refused, while another address is
// served.
func TestAddressConnectionCap(t *testing.T) {
	f := newCapFixture(t, NoCap, 2)
	idle := f.idle("127.0.0.1")
	inFlight := f.dial("127.0.0.1")
	f.busy(inFlight)
	other := f.idle("127.0.0.2")
	settle()

	fresh := f.idle("127.0.0.1")
	wantClosed(t, idle, "idle connection of the address at its cap")
	wantMetric(t, f.s, 1, "hostgate_connections_evicted_total", "reason", "address_limit")
	if other.send("/"); other.answered() != nil {
		t.Error("another address's idle connection was closed")
	}

	f.busy(fresh)
	refused := f.dial("127.0.0.1")
	refused.send("/")
	wantClosed(t, refused, "connection past the address's cap")
	wantMetric(t, f.s, 1, "hostgate_connections_refused_total", "reason", "address_limit")
	f.idle("127.0.0.2")
	f.wantAnswered(inFlight, fresh)
}

// TestClosedToMakeRoomAborts has net/http read a request on a connection
// closed to make room before its claim failed: the handler aborts it
// before anything else.
func TestClosedToMakeRoomAborts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := guard.NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	tracker := guard.NewTracker(ln, guard.NewRegistry(1, NoCap, m), m)
	defer tracker.Close()
	accept := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		ac, err := tracker.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ac.Close() })
		return ac
	}
	first := accept()
	// Idle long enough to be closed for the next one.
	settle()
	accept()

	f := newCapFixture(t, NoCap, NoCap)
	r := httptest.NewRequestWithContext(guard.ConnContext(t.Context(), first), http.MethodGet, "/", nil)
	w := httptest.NewRecorder()
	defer func() {
		if p := recover(); p != http.ErrAbortHandler {
			t.Errorf("handler: %v (answered %d %q), want an abort", p, w.Code, w.Body)
		}
	}()
	f.s.listeners["127.0.0.1:0"].path.ServeHTTP(w, r)
}
