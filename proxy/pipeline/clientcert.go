package pipeline

// Forwarding the identity of a client whose certificate the listener
// verified (a Gateway listener's client certificate validation), so that
// backends can authorize it: X-Forwarded-Client-Cert, in Envoy's format.
// Whatever a client sends in that field is dropped on every listener,
// TrustForwardedHeaders or not: only hostgate's own verification vouches
// for a certificate. Only a certificate that verified is forwarded; one
// that AllowInsecureFallback let through unverified is not.

import (
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"strings"

	"github.com/hostgate/hostgate/proxy/guard"
	"github.com/hostgate/hostgate/router"
)

const clientCertField = "X-Forwarded-Client-Cert"

// clientCertOf is the X-Forwarded-Client-Cert value of r's client: for
// HTTP/3 made from quic-go's TLS state (a request at a time), for the
// others the one the handshake left on the connection the guard
// terminated TLS on.
func clientCertOf(r *http.Request) string {
	if r.TLS != nil {
		return guard.ClientCertValue(r.TLS.VerifiedChains)
	}
	if c, ok := guard.ConnOf(r.Context()); ok {
		return c.ClientCert
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

// Client certificates checked per request (router.ClientCertAuth,
// ingress-nginx's auth-tls-*): the handshake of such a host asks for a
// certificate and accepts any, and the rule's filter decides, as nginx
// does, with an HTTP answer. The backend is told the outcome in the fields
// nginx sends, which replace whatever the client sent under those names.

// certCheck is the outcome of a ClientCertAuth for one chain.
type certCheck struct {
	auth *router.ClientCertAuth
	// status is the answer to the request, 0 to let it through.
	status int
	// The values of the ssl-client-* fields ("" leaves one out).
	verify, subject, issuer, cert string
}

// checkClientCert checks certs (or peer's, when given) against a.
func checkClientCert(a *router.ClientCertAuth, certs []*x509.Certificate, peer *guard.ClientPeer) *certCheck {
	if peer == nil {
		return newCertCheck(a, certs)
	}
	if c, _ := peer.Checked.Load().(*certCheck); c != nil && c.auth == a {
		return c
	}
	c := newCertCheck(a, peer.Certs)
	peer.Checked.Store(c)
	return c
}

func newCertCheck(a *router.ClientCertAuth, certs []*x509.Certificate) *certCheck {
	c := &certCheck{auth: a, verify: "NONE"}
	switch {
	case len(a.CAPEM) == 0:
		// The authorities could not be read: refusing everyone is the
		// only answer that lets no unchecked client through.
		c.status = http.StatusForbidden
		return c
	case a.Mode == router.ClientCertOff || len(certs) == 0:
		if a.Mode == router.ClientCertRequired {
			c.status = http.StatusBadRequest
		}
	default:
		leaf := certs[0]
		c.subject, c.issuer = fieldSafe(leaf.Subject.String()), fieldSafe(leaf.Issuer.String())
		if a.PassCertificate {
			c.cert = escapeComponent(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw}))
		}
		if err := verifyClientChain(a, certs); err != nil {
			c.verify = "FAILED:" + fieldSafe(err.Error())
			if a.Mode != router.ClientCertOptionalNoCA {
				c.status = http.StatusBadRequest
			}
		} else {
			c.verify = "SUCCESS"
		}
	}
	// nginx compares the subject whatever the verification said, an
	// absent certificate's empty one included.
	if c.status == 0 && !a.SubjectAllowed(c.subject) {
		c.status = http.StatusForbidden
	}
	return c
}

// verifyClientChain verifies the client's chain, leaf first, against a's
// authorities, for client authentication, no longer than a.Depth
// certificates above the leaf.
func verifyClientChain(a *router.ClientCertAuth, certs []*x509.Certificate) error {
	opts := x509.VerifyOptions{Roots: a.Roots(), Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	chains, err := certs[0].Verify(opts)
	if err != nil {
		return err
	}
	return checkChainDepth(chains, a.Depth)
}

// setFields sets the ssl-client-* fields of a request to a backend.
func (c *certCheck) setFields(h headerEditor) {
	for _, f := range [...]struct{ name, value string }{
		{"Ssl-Client-Verify", c.verify},
		{"Ssl-Client-Subject-Dn", c.subject},
		{"Ssl-Client-Issuer-Dn", c.issuer},
		{"Ssl-Client-Cert", c.cert},
	} {
		if f.value == "" {
			h.Del(f.name)
		} else {
			h.Set(f.name, f.value)
		}
	}
}

// fieldSafe replaces what would end or break a header field: names and
// errors come from the client's certificate.
func fieldSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// escapeComponent percent-encodes all but RFC 3986's unreserved
// characters, as nginx's $ssl_client_escaped_cert does.
func escapeComponent(b []byte) string {
	const hex = "0123456789ABCDEF"
	var out strings.Builder
	out.Grow(len(b) + len(b)/8)
	for _, c := range b {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			out.WriteByte(c)
			continue
		}
		out.WriteByte('%')
		out.WriteByte(hex[c>>4])
		out.WriteByte(hex[c&15])
	}
	return out.String()
}

// clientCerts are the certificates r's client presented, and the
// connection they are kept on (nil for HTTP/3, checked per request).
func clientCerts(r *http.Request) ([]*x509.Certificate, *guard.ClientPeer) {
	if r.TLS != nil {
		return r.TLS.PeerCertificates, nil
	}
	if c, ok := guard.ConnOf(r.Context()); ok {
		return nil, &c.Peer
	}
	return nil, nil
}
