//go:build linux

package evloop

import (
	"net"
	"time"
)

// GoSide is what a loop's socket is to Go: once Inner, the connection Go
// accepted it as or made of it (GoConn), is set, its reads, writes and
// deadlines; until then each fails with OnLoop. Its owner sets and clears
// Inner while no goroutine reads or writes it, so they take no lock.
type GoSide struct {
	Inner  net.Conn
	OnLoop error
}

func (g *GoSide) Read(p []byte) (int, error) {
	if g.Inner == nil {
		return 0, g.OnLoop
	}
	return g.Inner.Read(p)
}

func (g *GoSide) Write(p []byte) (int, error) {
	if g.Inner == nil {
		return 0, g.OnLoop
	}
	return g.Inner.Write(p)
}

func (g *GoSide) SetDeadline(t time.Time) error {
	if g.Inner == nil {
		return g.OnLoop
	}
	return g.Inner.SetDeadline(t)
}

func (g *GoSide) SetReadDeadline(t time.Time) error {
	if g.Inner == nil {
		return g.OnLoop
	}
	return g.Inner.SetReadDeadline(t)
}

func (g *GoSide) SetWriteDeadline(t time.Time) error {
	if g.Inner == nil {
		return g.OnLoop
	}
	return g.Inner.SetWriteDeadline(t)
}

// Attach makes *fd, a socket's descriptor that its loop took out of its
// epoll set, Inner (GoConn), and *fd -1; a descriptor Go could not take
// is closed, and *closed set. The socket's owner holds the lock that
// orders fd and closed against its Close.
func (g *GoSide) Attach(fd *int, closed *bool) error {
	if *closed {
		return net.ErrClosed
	}
	c, err := GoConn(*fd)
	*fd = -1
	if err != nil {
		*closed = true
		return err
	}
	g.Inner = c
	return nil
}

// NetConn is Inner, as tls.Conn's is the connection beneath it: what
// guard.SocketOf looks for (splice, lingering close); nil on a loop.
func (g *GoSide) NetConn() net.Conn { return g.Inner }
