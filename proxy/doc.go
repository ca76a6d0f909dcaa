// Package proxy owns hostgate's data plane: the listening sockets, the
// protocols spoken on them (HTTP/1.1, h2, h2c, HTTP/3), the per-request path
// and the connections to backends.
//
// It is driven by data only. The control loop publishes a Config (listeners,
// each with a compiled router.Table and a tlsstore.Store) with Apply and the
// backends' endpoint sets with ChangeEndpoints (or UpdateEndpoints, all at
// once); the serving path reads both
// through atomic pointers and takes no lock. Nothing here knows Kubernetes.
//
// A request goes through the request path of package pipeline, which does
// not depend on the HTTP engine: lookup, then the filters that decide the
// outcome (redirect, rewrite), then the choice of a backend. HTTP/1.1
// connections go to hostgate's own engine (package h1), with its own
// backend connection pool (package upstream), which hands whatever it
// does not serve itself (upgrades, gRPC, mirrors, TLS or h2 backends,
// unusual requests) to net/http for the rest of the connection. With
// Options.HTTP1Engine = EngineLoop, the default on Linux, the
// connections of plain HTTP listeners are served on readiness loops of
// hostgate's own (package h1loop), which hand what they do not serve to
// that engine, and so are the connections of TCP listeners and of TLS
// listeners that pass TLS through (package l4/relay). HTTP/2 connections, recognized at the first read (ALPN h2 or the client
// preface) or after an h2c upgrade, go to hostgate's HTTP/2 engine
// (package h2), and with Options.HTTP2Engine = EngineStdlib to net/http's.
// net/http serves what the HTTP/1.1 engine hands over, and every HTTP/1.1
// connection with Options.HTTP1Engine = EngineStdlib; HTTP/3 is quic-go's
// server (package h3). The HTTP/2 and HTTP/3 servers call the same handler
// (pipeline.Listener), which forwards through httputil.ReverseProxy,
// except that with the native HTTP/1.1 engine requests for HTTP/1.1
// backends go over its pool (the bridge).
//
// Every TCP connection is read through a guard (package guard) before
// net/http sees it: it refuses ambiguous HTTP/1.1 framing (request
// smuggling) and closes HTTP/2 connections that reset streams in a flood
// (rapid reset). For it to read plaintext, TLS is terminated by the guard's
// listener. Beneath TLS, a PROXY protocol header, where one is expected, is
// read first, and the connection caps count every connection (package
// guard); who a request comes from, the real client behind trusted
// proxies, is worked out once per request (package pipeline).
//
// The folders:
//
//	proxy           Server, Options, Config: listeners, their lifecycle and
//	                the wiring of the engines (the h2c Upgrade among them)
//	proxy/h1        the HTTP/1.1 engine
//	proxy/h1loop    the readiness loops for plain HTTP/1.1 (Linux),
//	                in front of h1
//	proxy/evloop    what the readiness loops share: epoll sets, raw
//	                non-blocking reads and writes, connects (Linux)
//	proxy/pipeline  the request path of every HTTP engine: lookup,
//	                filters, backend choice, retries and timeouts,
//	                forwarding, the proxy's own answers, request metrics
//	                and access log
//	proxy/guard     client connections below every engine: caps, PROXY
//	                protocol, TLS termination and handshake counts, the
//	                smuggling and flood guard
//	proxy/h1wire    HTTP/1.1 message syntax (heads, bodies), shared by the
//	                HTTP/1.1 engine and the HTTP/1.1 backend connections
//	proxy/h2        the HTTP/2 engine, server and backend client
//	proxy/h3        the HTTP/3 engine (quic-go's server, configured)
//	proxy/upstream  endpoint sets, passive health, balancing, and the pool
//	                of HTTP/1.1 connections to endpoints
//	proxy/l4        Layer 4 listeners (TLS passthrough and terminate, TCP, UDP)
//	proxy/l4/relay  the readiness loops that carry TCP and TLS
//	                passthrough connections (Linux)
//
// Imports point down that list and never back to proxy: h1loop imports
// pipeline, guard, h1wire, upstream and evloop (and h1 in its tests); h1 imports
// pipeline, guard, h1wire and upstream; pipeline imports guard, h1wire,
// h2 (its backend client) and upstream; h3 imports nothing of hostgate
// (its handler is a pipeline.Listener); guard, h1wire and upstream import
// nothing of hostgate but guard (h1wire, for HTTP's token syntax); l4
// imports upstream and relay, relay evloop, and evloop nothing of
// hostgate.
package proxy
