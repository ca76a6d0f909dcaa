package relay

import "net/netip"

// Handler is what a relayed connection asks of its owner. Its methods are
// called on the connection's worker, one at a time.
type Handler interface {
	// Next is the endpoint to connect to: the first when failed is
	// nil, then another after a connect that failed with failed; ok
	// false gives up, and the connection ends.
	Next(failed error) (endpoint netip.AddrPort, ok bool)
	// Connected says the last endpoint Next gave took the connection.
	Connected()
	// Ended says the connection ended, with the bytes carried from the
	// client to the backend and back: the Socket is closed, and its
	// descriptors close before the worker waits again.
	Ended(in, out int64)
}

// Peeker is a Handler whose connection goes where the client's first
// bytes say (a ClientHello's server name): the worker reads them, without
// a goroutine, before it asks Next for an endpoint.
type Peeker interface {
	Handler
	// Peek is given every byte the client sent so far, and err once no
	// more will come: the end of the client's stream or a failed read,
	// or os.ErrDeadlineExceeded past the read timeout. It answers More
	// (only while err is nil) to wait for more; Connect to go on, with
	// send the bytes the backend gets before those read (a PROXY
	// header); or Refuse, with send the bytes the client gets before
	// the connection ends (an alert). With err set, anything but Refuse
	// is taken for it.
	Peek(read []byte, err error) (step Step, send []byte)
}

// Step is what a Peeker makes of the bytes read.
type Step uint8

const (
	More Step = iota
	Connect
	Refuse
)
