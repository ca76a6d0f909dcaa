package h1loop

import (
	"net"
	"time"

	"github.com/hostgate/hostgate/proxy/pipeline"
)

// Config is what a Server serves a listener's connections with.
type Config struct {
	// Path is the listener's request path.
	Path *pipeline.Listener
	// HandOff serves, for the rest of its life, a connection the loop
	// does not serve (the netpoll engine, which may hand it on to
	// net/http): a guard.BufferedConn over the guard.TrackedConn whose
	// Reader starts with what the loop read of it. It is called on a
	// goroutine of its own.
	HandOff func(net.Conn)
	// ReadHeaderTimeout, IdleTimeout and MaxHeaderBytes are as in
	// proxy.Options. IdleTimeout also bounds how long a client may leave
	// an answer unread, as the guard's write bound does.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	// UpstreamIdleTimeout and MaxIdleConnsPerEndpoint are as in
	// proxy.Options, for each worker's connections to backends.
	UpstreamIdleTimeout     time.Duration
	MaxIdleConnsPerEndpoint int
	// ServerField has the loop's own answers carry a Server field.
	ServerField bool
	// Workers is the number of loops, GOMAXPROCS when 0.
	Workers int
}
