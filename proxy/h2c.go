package proxy

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"time"

	"golang.org/x/net/http2"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/proxy/h1wire"
	"github.com/hostgate/hostgate/proxy/h2"
	"github.com/hostgate/hostgate/proxy/pipeline"
)

// net/http serves h2c with prior knowledge itself but not the HTTP/1.1
// Upgrade to h2c (RFC 7540 section 3.2, which RFC 9113 deprecated yet
// clients such as curl --http2 still send). An upgrade is served here:
// switch protocols, then hand the connection to an HTTP/2 server with the
// upgrade request as its stream 1.

// isH2CUpgrade reports whether h asks for an upgrade to h2c.
func isH2CUpgrade(h http.Header) bool {
	return h1wire.HasToken(h["Upgrade"], "h2c") && h1wire.HasToken(h["Connection"], "http2-settings") && len(h["Http2-Settings"]) == 1
}

// upgradeH2C serves r if it asks for an upgrade to h2c, and reports
// whether it did.
func (l *listener) upgradeH2C(w http.ResponseWriter, r *http.Request) bool {
	if !isH2CUpgrade(r.Header) {
		return false
	}
	l.serveH2CUpgrade(w, r)
	return true
}

func (l *listener) serveH2CUpgrade(w http.ResponseWriter, r *http.Request) {
	settings, err := base64.RawURLEncoding.DecodeString(r.Header.Get("Http2-Settings"))
	if err != nil {
		pipeline.WriteError(w, r, http.StatusBadRequest)
		return
	}
	// The upgrade request is answered over HTTP/2 after the switch, so its
	// body has to be read now; it is bounded like a header.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(l.srv.opts.MaxHeaderBytes)))
	if err != nil {
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status = http.StatusRequestEntityTooLarge
		}
		pipeline.WriteError(w, r, status)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	// The request comes back to ServeHTTP as stream 1, still reading as
	// HTTP/1.1; without these it would ask for the upgrade again.
	for _, h := range []string{"Upgrade", "Connection", "Http2-Settings"} {
		delete(r.Header, h)
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		pipeline.WriteError(w, r, http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	// The HTTP/2 server keeps its own idle and write timeouts; the header
	// deadline net/http set must not cut the connection later.
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return
	}
	if _, err := rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"); err != nil {
		return
	}
	if err := rw.Flush(); err != nil {
		return
	}
	upgraded := &guard.BufferedConn{Conn: conn, Reader: rw.Reader}
	if l.h2 != nil {
		if gc, ok := guard.Beneath[*guard.Conn](conn); ok {
			gc.LeaveFrames()
		}
		l.h2.ServeConn(upgraded, h2.ConnOpts{Context: r.Context(), Upgrade: r, Settings: settings})
		return
	}
	l.h2c.ServeConn(upgraded, &http2.ServeConnOpts{
		Context:        r.Context(),
		BaseConfig:     l.http,
		Handler:        l.path,
		UpgradeRequest: r,
		Settings:       settings,
	})
}
