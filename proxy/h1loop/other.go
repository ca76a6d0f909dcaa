//go:build !linux

package h1loop

import (
	"errors"
	"net"
)

// The loop is built on epoll: elsewhere New refuses, and the listeners
// keep the netpoll engine (proxy.Options rejects the loop before this is
// reached; New's error is the last word if it is not).

// Supported says whether the loop runs on this system.
const Supported = false

var errUnsupported = errors.New("h1loop: the readiness loop needs Linux (epoll)")

// Server is never made: New refuses.
type Server struct{}

func New(Config) (*Server, error) { return nil, errUnsupported }

func Listen(ln net.Listener) net.Listener { return ln }

func (*Server) ServeConn(c net.Conn) { c.Close() }
func (*Server) CloseIdle()           {}
func (*Server) Close()               {}
