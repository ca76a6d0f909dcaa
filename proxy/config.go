package proxy

import (
	"github.com/hostgate/hostgate/proxy/upstream"
	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore"
)

// Protocol is what a listener speaks.
type Protocol uint8

const (
	// HTTP is cleartext HTTP/1.1 and h2c (prior knowledge and Upgrade).
	HTTP Protocol = iota
	// HTTPS is TLS with HTTP/1.1 and h2 chosen by ALPN, plus HTTP/3 on the
	// same port over UDP unless Options.DisableHTTP3.
	HTTPS
	// TLSPassthrough routes a connection by its ClientHello's server name
	// and passes its bytes on unchanged, or, where the route's listener
	// is in mode Terminate (router.L4Target.Terminate), ends its TLS with
	// the listener's TLS certificates and passes the plaintext on
	// (proxy/l4).
	TLSPassthrough
	// TCP passes a connection's bytes to the listener's route (proxy/l4).
	TCP
	// UDP passes the datagrams of each client flow to the listener's
	// route (proxy/l4). Its socket is a UDP one: a UDP listener and a
	// TCP one of the same Address are two listeners (Listener.key).
	UDP
)

func (p Protocol) String() string {
	switch p {
	case HTTPS:
		return "HTTPS"
	case TLSPassthrough:
		return "TLS"
	case TCP:
		return "TCP"
	case UDP:
		return "UDP"
	}
	return "HTTP"
}

// l4 reports whether p is served by proxy/l4.
func (p Protocol) l4() bool { return p == TLSPassthrough || p == TCP || p == UDP }

// key identifies l among the listeners: its Address, with "/udp" for a
// UDP listener, whose socket is apart from the TCP one of the same
// address and port.
func (l *Listener) key() string {
	if l.Protocol == UDP {
		return l.Address + "/udp"
	}
	return l.Address
}

// Config is the whole listener set. Apply makes it current.
type Config struct {
	Listeners []Listener
}

// Listener is one socket and what it serves. Listeners are identified by
// Address (and UDP or not: key): a listener whose Address stays keeps its socket and connections
// across Apply calls, and only its routes and certificates are swapped.
type Listener struct {
	// Address is host:port; an empty host listens on every address.
	Address  string
	Protocol Protocol
	// Routes serves the listener's requests; nil answers 404 to all. The
	// hostnames a listener accepts are already folded into its table.
	Routes *router.Table
	// TLS holds the certificates of an HTTPS listener, the listener's
	// default included, and those of TLS listeners in mode Terminate.
	TLS *tlsstore.Store
	// L4 serves a TLSPassthrough or TCP listener; nil refuses every
	// connection. On an HTTPS listener it holds the routes of the TLS
	// listeners that share the socket (router.L4Listeners.HTTPS):
	// connections whose server name it claims go to them, the others to
	// the HTTP engines; nil diverts none.
	L4 *router.L4Table
}

// Endpoint is one backend address of an endpoint set; sets are keyed by
// router.BackendRef.Name.
type Endpoint = upstream.Endpoint
