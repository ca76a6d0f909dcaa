//go:build linux

package h1loop

// A worker's connections to backends: non-blocking, in the worker's own
// epoll set, registered once as client sockets are, and kept alive
// between requests in the worker's own pool, where no other thread takes
// them and no lock is needed. As upstream.Pool's: the most recently used
// idle connection is taken first, so that those a burst opened age out
// (UpstreamIdleTimeout) while the rest stay warm; and a connection the
// backend closed, or sent bytes on, while idle is closed as soon as the
// loop sees it, since its end of stream or the bytes are an edge like any
// other, and before a request of the same wait may take it (dropStale).

import (
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// upBufferSize holds a backend's response head, and the pieces of its
// body relayed on. A longer head grows the buffer, up to upMaxHeadBytes,
// the bound net/http's Transport has on the other engines (pipeline).
const (
	upBufferSize   = 16 << 10
	upMaxHeadBytes = 1 << 20
)

// upConn is a connection to a backend.
type upConn struct {
	fd   int
	tag  int32
	addr string
	// buf holds what was read of the response and not yet relayed,
	// buf[start:n].
	buf      []byte
	start, n int
	// out is what the backend has yet to take of the request.
	out []byte
	// c is the client connection whose request it carries; nil while
	// idle.
	c *conn
	// connecting says the connect is under way; reused that it served
	// before; answered that bytes of a response came.
	connecting, reused, answered bool
	// mayRead says a read was held back while the client had the
	// response's last piece unread; hup that an edge said the backend
	// sends no more, so that reads go on to the end of the stream, which
	// no later edge announces; full that the latest read filled the room
	// it had, so that the socket may hold more, which no later edge
	// announces either.
	mayRead, hup, full bool
	idleSince          time.Time
}

func (w *worker) up(fd int) *upConn {
	if fd < len(w.ups) {
		return w.ups[fd]
	}
	return nil
}

// takeIdle takes the most recently used idle connection to addr that is
// still of use, nil when there is none. With check, one the backend may
// have closed since the loop last looked is not taken, for a request
// that cannot be sent again (as upstream.Conn's Stale); others are sent
// again on a fresh connection should it be. Without, it takes one that
// holds bytes no request asked for only if they came after the wait whose
// batch is handled (dropStale).
func (w *worker) takeIdle(addr string, check bool) *upConn {
	stack := w.idle[addr]
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if w.now.Sub(u.idleSince) < w.s.cfg.UpstreamIdleTimeout && !(check && stale(u.fd)) {
			w.idle[addr] = stack
			return u
		}
		w.closeUp(u)
	}
	w.idle[addr] = stack
	return nil
}

// stale reports whether an idle connection is of no use: the backend
// closed it or sent bytes no request asked for, which the loop may not
// have been told yet: they came after the wait, or were in the socket
// past a read that filled its buffer, or a read in the batch took the
// bytes its event was for.
func stale(fd int) bool {
	var b [1]byte
	n, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return err != unix.EAGAIN || n > 0
}

// putIdle keeps u for the next request to its address, or closes it when
// the address has as many idle connections as it may.
func (w *worker) putIdle(u *upConn) {
	u.c = nil
	// An idle connection holds no buffer.
	w.putUpBuffer(u)
	u.start, u.n = 0, 0
	u.out = nil
	u.reused, u.answered, u.mayRead = true, false, false
	stack := w.idle[u.addr]
	if len(stack) >= w.s.cfg.MaxIdleConnsPerEndpoint {
		w.closeUp(u)
		return
	}
	u.idleSince = w.now
	w.idle[u.addr] = append(stack, u)
}

// dropIdle closes an idle connection the backend closed, or sent
// unasked-for bytes on.
func (w *worker) dropIdle(u *upConn) {
	stack := w.idle[u.addr]
	for i, v := range stack {
		if v == u {
			w.idle[u.addr] = append(stack[:i], stack[i+1:]...)
			break
		}
	}
	w.closeUp(u)
}

// sweepIdle closes the connections idle longer than UpstreamIdleTimeout:
// the oldest are at the bottom of each stack.
func (w *worker) sweepIdle() {
	for addr, stack := range w.idle {
		old := 0
		for old < len(stack) && w.now.Sub(stack[old].idleSince) >= w.s.cfg.UpstreamIdleTimeout {
			w.closeUp(stack[old])
			old++
		}
		if old == len(stack) {
			delete(w.idle, addr)
		} else if old > 0 {
			w.idle[addr] = append(stack[:0], stack[old:]...)
		}
	}
}

// dial starts a non-blocking connect to addr, an IP and port.
func (w *worker) dial(addr string) (*upConn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	tag := w.tag()
	fd, connecting, err := w.poll.Connect(ap, tag)
	if err != nil {
		return nil, dialError(err)
	}
	u := &upConn{fd: fd, tag: tag, addr: addr, connecting: connecting}
	for fd >= len(w.ups) {
		w.ups = append(w.ups, nil)
	}
	w.ups[fd] = u
	return u, nil
}

// dialError is a failed connect as Go's dialer reports it, which the
// request path tells from other failures (another endpoint is tried).
func dialError(err error) error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: err}
}

// connected reports how the connect under way ended.
func connected(fd int) error {
	errno, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	switch {
	case err != nil:
		return dialError(err)
	case errno != 0:
		return dialError(unix.Errno(errno))
	}
	return nil
}

func (w *worker) closeUp(u *upConn) {
	if w.up(u.fd) != u {
		return
	}
	w.ups[u.fd] = nil
	w.putUpBuffer(u)
	unix.Close(u.fd)
}
