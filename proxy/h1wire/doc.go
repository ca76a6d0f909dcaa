// Package h1wire owns HTTP/1.1 message syntax as hostgate's own HTTP/1.1
// engine and its backend connections speak it: heads parsed without
// allocating beyond one string per head (parse.go), and bodies read and
// relayed, chunked or not, through a caller's buffer (body.go). The engine
// reads client requests and writes their answers with it; the backend side
// writes requests and reads responses with it, for the engine and for the
// bridge from HTTP/2 and HTTP/3.
//
// It decides nothing about a request: no routes, no backends, no sockets.
// The one policy in it is which request fields the proxy replaces
// (X-Forwarded-*, X-Real-Ip, X-Request-Id, X-Forwarded-Client-Cert) or
// drops (Forwarded), marked hop-by-hop as they are parsed so that the
// engine's forwarding skips them at no cost.
package h1wire
