// Package h1 owns hostgate's own HTTP/1.1 engine: the client connections
// of a listener that net/http does not serve, read through the guard,
// their requests parsed (proxy/h1wire) and answered, or forwarded over the
// pool of HTTP/1.1 connections to endpoints (upstream.Pool) with bodies
// streamed both ways, and the hand-over of what it does not serve itself:
// to net/http (an Upgrade, gRPC, anything the request path says the
// engine does not forward, a head it does not fully understand) or to
// the HTTP/2 engine (ALPN h2, the client preface).
//
// Every decision about a request is the request path's (proxy/pipeline):
// the engine runs pipeline.Listener.Decide and executes the Exchange it
// gets. It never opens or accepts a socket, knows no listener beyond the
// Config it is given, and does not import package proxy.
package h1
