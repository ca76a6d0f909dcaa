package proxy

// Forwarding the identity of a client whose certificate the listener
// verified (a Gateway listener's client certificate validation), so that
// backends can authorize it: X-Forwarded-Client-Cert, in Envoy's format.
// Whatever a client sends in that field is dropped on every listener,
// TrustForwardedHeaders or not: only hostgate's own verification vouches
// for a certificate. Only a certificate that verified is forwarded; one
// that AllowInsecureFallback let through unverified is not.

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"net/http"
	"strings"
)

const clientCertField = "X-Forwarded-Client-Cert"

// clientCertValue is the X-Forwarded-Client-Cert value for a client whose
// certificate verified with chains: the SHA-256 of the certificate and its
// subject, "" when nothing verified.
func clientCertValue(chains [][]*x509.Certificate) string {
	if len(chains) == 0 || len(chains[0]) == 0 {
		return ""
	}
	leaf := chains[0][0]
	sum := sha256.Sum256(leaf.Raw)
	return "Hash=" + hex.EncodeToString(sum[:]) + `;Subject="` + quotedValue.Replace(leaf.Subject.String()) + `"`
}

// quotedValue escapes what ends a quoted value of the field.
var quotedValue = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// clientCertOf is the X-Forwarded-Client-Cert value of r's client: for
// HTTP/3 made from quic-go's TLS state (a request at a time), for the
// others the one the handshake left on the connection the guard
// terminated TLS on.
func clientCertOf(r *http.Request) string {
	if r.TLS != nil {
		return clientCertValue(r.TLS.VerifiedChains)
	}
	if c, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
		return c.clientCert
	}
	return ""
}

// setClientCert replaces the X-Forwarded-Client-Cert of h, the header of
// a request from r going to a backend, with the identity hostgate
// verified, if any.
func setClientCert(h http.Header, r *http.Request, scheme string) {
	delete(h, clientCertField)
	if scheme != "https" {
		return
	}
	if v := clientCertOf(r); v != "" {
		h[clientCertField] = []string{v}
	}
}
