// Package pipeline owns the request path every HTTP engine runs, from a
// parsed request to the answer: route lookup, the filters (redirects,
// rewrites, CORS, access, rate limits, external authorization, client
// certificates, header modifiers, response rewrites), the choice of a
// backend and an endpoint (canary, balance, affinity), retries and
// timeouts, the bounds on request bodies, forwarding, the answers the
// proxy makes itself, who a request comes from (client.go), and the
// request metrics and access log.
//
// Engines meet it in two ways. net/http's servers (HTTP/1.1, h2, h2c),
// proxy/h2's and HTTP/3's call Listener.ServeHTTP, which forwards through
// httputil.ReverseProxy (forward.go), or over the pool of HTTP/1.1
// connections for HTTP/1.1 backends (bridge.go). An engine that parses
// and answers requests itself (proxy/h1) drives an Exchange (engine.go):
// Decide runs the pipeline up to the choice of an endpoint set without
// any I/O (pipeline.go), so that an engine that must never block can call
// it too, then the engine answers or sends over the pool (send.go).
//
// Shared holds what outlives a configuration: the endpoint sets, the
// state of access filters, the transports to backends; a Listener holds a
// listener's published table and certificates. The serving path reads
// both through atomic pointers and takes no lock.
//
// It never touches a socket of its own: the listeners, the connections
// to clients and the protocols spoken on them belong to proxy, the guard
// and the engines, and it knows nothing of Kubernetes.
package pipeline
