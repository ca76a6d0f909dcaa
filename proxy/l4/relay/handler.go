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
