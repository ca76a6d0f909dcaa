// Package h3 owns the HTTP/3 engine: quic-go's HTTP/3 server on a
// listener's UDP socket, with hostgate's bounds on handshakes, idle
// connections, streams and headers, and the Alt-Svc value that
// advertises it. Its requests go to the request path's handler
// (pipeline.Listener) as every engine's do.
//
// It opens no socket, holds no route or backend, and does not import
// package proxy.
package h3

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// Config is what the engine serves a listener's UDP socket with.
type Config struct {
	Handler http.Handler
	// TLS is the listener's TLS configuration, to which HTTP/3's ALPN is
	// added.
	TLS *tls.Config
	// ConnContext is called with each QUIC connection, for the context
	// of its requests.
	ConnContext func(context.Context, *quic.Conn) context.Context
	// MaxHeaderBytes, IdleTimeout and MaxConcurrentStreams are as in
	// proxy.Options; HandshakeTimeout bounds a QUIC handshake.
	MaxHeaderBytes       int
	IdleTimeout          time.Duration
	HandshakeTimeout     time.Duration
	MaxConcurrentStreams int
	Logger               *slog.Logger
}

// Server is the HTTP/3 server of one listener.
type Server struct {
	srv *http3.Server
}

// New returns the Server of cfg.
func New(cfg Config) *Server {
	return &Server{srv: &http3.Server{
		Handler:        cfg.Handler,
		TLSConfig:      http3.ConfigureTLSConfig(cfg.TLS),
		ConnContext:    cfg.ConnContext,
		MaxHeaderBytes: cfg.MaxHeaderBytes,
		IdleTimeout:    cfg.IdleTimeout,
		QUICConfig: &quic.Config{
			HandshakeIdleTimeout: cfg.HandshakeTimeout,
			MaxIdleTimeout:       cfg.IdleTimeout,
			MaxIncomingStreams:   int64(cfg.MaxConcurrentStreams),
		},
		Logger: cfg.Logger,
	}}
}

// Serve serves pc until Shutdown or Close, then returns nil.
func (s *Server) Serve(pc net.PacketConn) error {
	if err := s.srv.Serve(pc); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, quic.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops new requests and waits for those in flight until ctx is
// done.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// Close closes every connection at once.
func (s *Server) Close() error { return s.srv.Close() }

// AltSvc is the Alt-Svc value that advertises HTTP/3 on the UDP port of
// number port.
func AltSvc(port int) []string {
	return []string{fmt.Sprintf(`h3=":%d"; ma=86400`, port)}
}
