package guard

import (
	"io"
	"net"
	"sync"
)

// Handoff is a listener that Deliver feeds: the engine hands
// connections to net/http through one, and the PROXY protocol listener
// those whose header it read.
type Handoff struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func NewHandoff(addr net.Addr) *Handoff {
	return &Handoff{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (h *Handoff) Accept() (net.Conn, error) {
	select {
	case c := <-h.conns:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

func (h *Handoff) Close() error {
	h.once.Do(func() { close(h.done) })
	return nil
}

func (h *Handoff) Addr() net.Addr { return h.addr }

// Deliver hands c over, reporting false once the server stopped taking
// connections.
func (h *Handoff) Deliver(c net.Conn) bool {
	select {
	case h.conns <- c:
		return true
	case <-h.done:
		return false
	}
}

// BufferedConn reads what was read ahead of the connection's hand-over
// (past an upgrade request, or the client's connection preface) before
// reading the socket.
type BufferedConn struct {
	net.Conn
	Reader io.Reader
	// Served says requests were answered on the connection before the
	// hand-over (by a readiness loop, which has no guard): the guard
	// Listener.Guard puts over it takes what comes as a later request,
	// one that is owed a 400 when it is not HTTP/1.x.
	Served bool
}

func (c *BufferedConn) Read(p []byte) (int, error) { return c.Reader.Read(p) }
