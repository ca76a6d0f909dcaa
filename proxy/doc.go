// Package proxy owns hostgate's data plane: the listening sockets, the
// protocols spoken on them (HTTP/1.1, h2, h2c, HTTP/3), the per-request path
// and the connections to backends.
//
// It is driven by data only. The control loop publishes a Config (listeners,
// each with a compiled router.Table and a tlsstore.Store) with Apply and the
// backends' endpoint sets with UpdateEndpoints; the serving path reads both
// through atomic pointers and takes no lock. Nothing here knows Kubernetes.
//
// A request goes through a pipeline that does not depend on the HTTP engine
// (pipeline.go): lookup, then the filters that decide the outcome
// (redirect, rewrite), then the choice of a backend. Only the execution of
// that plan (forward.go) is tied to net/http and httputil.ReverseProxy, so
// that a purpose-built HTTP/1.1 engine can later run the same pipeline.
//
// Every TCP connection is read through a guard (guard.go) before net/http
// sees it: it refuses ambiguous HTTP/1.1 framing (request smuggling) and
// closes HTTP/2 connections that reset streams in a flood (rapid reset).
// For it to read plaintext, TLS is terminated by the guard's listener.
package proxy
