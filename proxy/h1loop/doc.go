// Package h1loop owns hostgate's readiness loop for plain HTTP/1.1 on
// Linux: client connections served by worker loops of their own rather
// than a goroutine each on Go's netpoller, running the same request path
// (proxy/pipeline) as every engine.
//
// Workers. One per GOMAXPROCS, each a goroutine with its own epoll set,
// its own connections and its own timer wheel (evloop.Wheel), so that a
// connection is only ever touched by one goroutine and takes no lock.
// The goroutine is not locked to its OS thread: its yield at each busy
// turn (loop.go) would then hand its P to another thread and take it
// back, two futex wake-ups, where an unlocked goroutine with nothing
// else runnable just goes on. A worker waits with a zero timeout first and blocks
// only when nothing is ready. Sockets are non-blocking and registered
// once, edge-triggered for reading and writing: a read that fills less
// than the room it had drained the socket (no read that finds nothing),
// and a write that would block leaves the rest for the next writable
// edge, with no epoll_ctl per request. Reads and writes are raw system
// calls, as they never block. The answers to one read's requests
// (pipelined ones included) leave in one write.
//
// Sockets. The listener's accept loop, the caps (guard.Tracker) and a
// PROXY header's read stay in Go; Listen wraps the raw listener so that
// each connection is a Socket, which ServeConn puts on a worker: it
// takes the descriptor off Go's netpoller (socket.go). The caps close a
// connection from any goroutine through the guard.TrackedConn above the
// Socket: on a loop that only shuts the socket down, and the worker sees
// the end of the stream and releases the descriptor itself.
//
// Hand-off. What the loop does not serve it hands, for the rest of the
// connection, to the netpoll engine (proxy/h1, which hands on to
// net/http what it does not serve): the descriptor leaves the epoll set
// and goes back to Go, and the engine reads the bytes the loop read and
// did not serve first (guard.BufferedConn), through a fresh guard, so
// that the smuggling refusals hold as they always did. The loop's parser
// is h1wire's, which declines every head it does not fully understand:
// such heads, heads past its 8 KiB buffer, Upgrades (WebSocket, h2c), the
// HTTP/2 preface, requests with bodies not yet whole (chunked ones
// among them) and whatever Decide leaves to net/http all go over.
//
// Forwarding. Requests to backends go over the worker's own keep-alive
// connections to them, in its epoll set, with the request path's tries,
// statuses, timeouts and health (forward.go, backend.go); what the loop
// does not forward yet (a rule with a retry policy, Expect: 100-continue
// with a body, an endpoint named rather than an IP) goes over before
// anything is sent.
//
// Timeouts. ReadHeaderTimeout from the accept for the first head and
// from its first bytes for the next ones, IdleTimeout between requests
// and for a client that leaves an answer unread, as the netpoll engine
// and the guard bound them. Drain (CloseIdle) closes the connections
// waiting for a request, and every answer after it closes its own.
//
// It never opens a listening socket, knows no listener beyond its
// Config, and does not import package proxy.
package h1loop
