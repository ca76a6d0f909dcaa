// Package relay carries the bytes of TCP connections (TCPRoute, and TLS
// passed through by TLSRoute) on readiness loops of its own, Linux only: a short connection through
// goroutines on Go's netpoller cost hostgate about 26 system calls where
// nginx's stream module makes 16 (strace -c), in the netpoller's
// registrations, the dialer's address look-ups, splice through a pipe
// each way, and the two goroutines' wake-ups; here it makes 18.
//
// Sockets. Listen accepts with accept4 on Go's listening socket, so that
// a connection is a bare non-blocking descriptor (Socket) that never
// enters the netpoller; the caps (guard.Tracker) wrap it as any other.
// Loop.Relay puts it on a worker, which connects to the backend without
// blocking and relays both ways. Loop.Serve has the first worker accept
// itself, the listening socket in its epoll set: the accept, the caps'
// admission, the ClientHello's read and the connect then happen on one
// thread, with no accept goroutine to wake and no hand-off for the
// connections that stay on that worker (all of them with one worker).
//
// Workers. One per GOMAXPROCS, each a goroutine with its own epoll set and
// its own connections, as proxy/h1loop's: nothing is shared between them
// and no lock is taken on the relay's path. A worker with nothing ready
// waits on Go's netpoller, its epoll set a file there: not in
// epoll_wait, where the runtime would hand its P to another thread and
// the two would trade it back and forth with every connection.
// Both descriptors of a connection are registered once (package evloop),
// edge-triggered for reading and writing.
// Bytes go through one buffer per worker, read then written at once; what
// a peer does not take waits in a buffer of the connection's own, and its
// other side is not read meanwhile, so a slow reader slows its writer, as
// a full socket buffer does. A half-close is passed on with shutdown, but
// not by the direction that ends second: both descriptors close then.
//
// Peeking. A connection routed by what the client sends first (a
// ClientHello's server name) has a Peeker for a Handler: the worker reads
// the client's bytes into a buffer of the connection's, without a
// goroutine, and gives them all to Peek after each read until it decides:
// more, connect (the bytes read then go to the backend first, after what
// Peek adds, a PROXY header), or refuse (after what Peek has the client
// told, an alert). The peek's deadline and the connects' are on the
// worker's timer wheel (evloop.Wheel), which its wait on the netpoller
// wakes up for.
//
// What the loop needs of its owner comes through a Handler: the endpoint
// to connect to (and the next after a failed connect, for passive health
// and retries), the news that it connected, and the end with the bytes
// carried, for metrics and the access log. Anything may close a Socket
// (the caps, a drain): on the loop that asks its worker to end the
// connection, and only the worker ever closes its descriptors, so none is
// closed under it or reused while it may still use the number.
//
// It knows nothing of routes, listeners or Kubernetes, and imports no
// other package of hostgate's.
package relay
