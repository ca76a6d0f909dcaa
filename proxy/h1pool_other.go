//go:build !unix

package proxy

import "net"

// socketState cannot peek at a socket here. A closed pooled connection
// then fails the request that takes it (502), and a client that hangs up
// is noticed only when its response is written.
func socketState(net.Conn) socketStatus { return socketUnknown }
