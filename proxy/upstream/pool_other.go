//go:build !unix

package upstream

import "net"

// SocketState cannot peek at a socket here. A closed pooled connection
// then fails the request that takes it (502), and a client that hangs up
// is noticed only when its response is written.
func SocketState(net.Conn) socketStatus { return socketUnknown }

func (uc *Conn) socketState() socketStatus { return socketUnknown }

// FlushAwait writes what Writer holds; the read that follows waits.
func (uc *Conn) FlushAwait() error { return uc.Writer.Flush() }
