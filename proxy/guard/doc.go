// Package guard owns hostgate's client connections below the protocol
// engines: it accepts them, caps them per node and per client address
// (connlimit.go), reads a PROXY protocol header where one is expected
// (proxyproto.go), terminates TLS and counts handshakes (conns.go), and
// reads every byte a client sends before an engine does, to refuse request
// smuggling and HTTP/2 floods that the engines would accept (guard.go).
//
// A TrackedConn is what the engines and the request path learn of a
// connection: whether it waits for a request (the caps close such
// connections first to make room), the TLS server name and client
// certificate of its handshake. Engines hand connections to one another
// through a Handoff, with what was read ahead in a BufferedConn.
//
// It never looks at routes, backends or requests past their framing, and
// imports no other part of hostgate.
package guard
