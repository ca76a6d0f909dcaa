//go:build !linux

package relay

import (
	"errors"
	"net"
	"time"
)

// The loop is built on epoll: elsewhere New refuses, and TCP and TLS
// listeners keep their goroutines on Go's netpoller.

// Supported says whether the loop runs on this system.
const Supported = false

// Loop is never made: New refuses.
type Loop struct{}

func New() (*Loop, error) { return nil, errors.New("relay: the loop needs Linux (epoll)") }

func (*Loop) Relay(s *Socket, h Handler, first []byte, dialTimeout time.Duration)     {}
func (*Loop) RelayPeeked(s *Socket, h Peeker, readTimeout, dialTimeout time.Duration) {}
func (*Loop) Close()                                                                  {}
func (*Loop) Serve(net.Listener, func() error) error                                  { return errors.ErrUnsupported }

// ErrNoneWaiting is never returned: no worker accepts.
var ErrNoneWaiting = errors.New("relay: no connection waiting")

// Socket is never made: Listen returns its listener as it is.
type Socket struct{ net.Conn }

func (*Socket) Go() error                      { return nil }
func (*Socket) Control(func(fd uintptr)) error { return errors.ErrUnsupported }

func Listen(ln net.Listener) net.Listener { return ln }
