package pipeline

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/hostgate/hostgate/router"
)

// Backends with a TLS identity of their own (router.BackendTLS, from a
// BackendTLSPolicy, with the client certificate of the Gateway they are
// reached through) get transports of their own: a pool of connections is
// only good for the server name and authorities it was verified with.
// Transports are made when a configuration is applied, one pair per
// distinct identity, and kept by the identity's content, so that their
// pools outlive the swaps that do not change it. A listener's state maps
// its table's *router.BackendTLS values to them: the request path does one
// map lookup, for such backends only, and no backend ever reaches a
// transport of an identity other than its own.

// tlsTransports are the transports of one identity: HTTP/1.1 ("https")
// and HTTP/2 ("h2").
type tlsTransports struct {
	https *http.Transport
	h2    backendTransport
	// used is the Apply that last found the identity in a table.
	used uint64
}

// tlsIdentity is the key of an identity's transports: equal for equal
// content.
func tlsIdentity(b *router.BackendTLS) string {
	var k strings.Builder
	k.WriteString(b.ServerName)
	k.WriteByte(0)
	if b.SkipVerify {
		k.WriteString("unverified")
	} else if b.CAPEM == nil {
		k.WriteString("system")
	} else {
		k.WriteString("pem:")
		k.Write(b.CAPEM)
	}
	for _, san := range b.SubjectAltNames {
		fmt.Fprintf(&k, "\x00%q %q", san.Hostname, san.URI)
	}
	if b.VerifyDepth > 0 {
		fmt.Fprintf(&k, "\x00depth %d", b.VerifyDepth)
	}
	if b.MinVersion != 0 || b.MaxVersion != 0 || b.CipherSuites != nil {
		fmt.Fprintf(&k, "\x00versions %#x-%#x suites %x", b.MinVersion, b.MaxVersion, b.CipherSuites)
	}
	if c := b.ClientCertificate; c != nil {
		// A connection made with one client certificate must never carry
		// the requests of a backend that asks for another, or for none.
		k.WriteString("\x00client:")
		k.Write(c.CertPEM)
		k.WriteByte(0)
		k.Write(c.KeyPEM)
	}
	return k.String()
}

// backendTransports returns the transports of every identity of routes,
// made or reused. Only Apply calls it, under the server's lock.
func (f *forwarder) backendTransports(routes *router.Table) map[*router.BackendTLS]*tlsTransports {
	if routes == nil {
		return nil
	}
	var out map[*router.BackendTLS]*tlsTransports
	for b := range routes.BackendTLS() {
		if _, done := out[b]; done {
			continue
		}
		id := tlsIdentity(b)
		t := f.byIdentity[id]
		if t == nil {
			cfg, err := BackendTLSConfig(f.s.cfg.UpstreamTLS, b)
			if err != nil {
				// Translation checked the certificates: this is a bug,
				// and the backend fails closed rather than trust more.
				f.s.log.Error("backend TLS identity", "server_name", b.ServerName, "error", err)
			}
			t = &tlsTransports{https: f.newTransport(true, false, false, cfg), h2: f.newHTTP2Transport(cfg, false)}
			f.byIdentity[id] = t
		}
		t.used = f.applies
		if out == nil {
			out = map[*router.BackendTLS]*tlsTransports{}
		}
		out[b] = t
	}
	return out
}

// dropUnusedTransports closes the transports of identities that no table
// of the last Apply uses. Requests still on them finish: only idle
// connections close.
func (f *forwarder) dropUnusedTransports() {
	for id, t := range f.byIdentity {
		if t.used != f.applies {
			t.https.CloseIdleConnections()
			t.h2.CloseIdleConnections()
			delete(f.byIdentity, id)
		}
	}
	f.applies++
}

// BackendTLSConfig is the client configuration that checks a backend as b
// says, on top of base's other settings.
func BackendTLSConfig(base *tls.Config, b *router.BackendTLS) (*tls.Config, error) {
	cfg := &tls.Config{}
	if base != nil {
		cfg = base.Clone()
	}
	cfg.ServerName = b.ServerName
	if b.MinVersion != 0 {
		cfg.MinVersion = b.MinVersion
	}
	if b.MaxVersion != 0 {
		cfg.MaxVersion = b.MaxVersion
	}
	if b.CipherSuites != nil {
		cfg.CipherSuites = slices.Clone(b.CipherSuites)
	}
	cfg.InsecureSkipVerify = false
	cfg.VerifyConnection = nil
	cfg.RootCAs = nil
	var err error
	if b.CAPEM != nil {
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(b.CAPEM) {
			err = errors.New("no CA certificate parses: every certificate fails")
		}
	}
	if c := b.ClientCertificate; c != nil {
		pair, perr := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
		if perr != nil {
			// Without its certificate the connection goes out with none,
			// which a backend that asks for one refuses.
			err = errors.Join(err, fmt.Errorf("client certificate %s: %w", c.Name, perr))
		} else {
			cfg.Certificates = []tls.Certificate{pair}
		}
	} else {
		cfg.Certificates = nil
	}
	cfg.GetClientCertificate = nil
	if b.SkipVerify {
		cfg.InsecureSkipVerify = true
	} else if len(b.SubjectAltNames) > 0 {
		// The chain is verified here rather than by crypto/tls, which
		// would check it for the server name: with subjectAltNames the
		// server name is only sent, and one of them must match instead.
		roots, sans := cfg.RootCAs, slices.Clone(b.SubjectAltNames)
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { return verifySANs(cs, roots, sans, b.VerifyDepth) }
	} else if depth := b.VerifyDepth; depth > 0 {
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { return checkChainDepth(cs.VerifiedChains, depth) }
	}
	return cfg, err
}

// verifySANs checks that the backend's chain leads to roots (the system's
// when nil), within depth, and that its certificate holds one of sans.
func verifySANs(cs tls.ConnectionState, roots *x509.CertPool, sans []router.SubjectAltName, depth int) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("backend sent no certificate")
	}
	leaf := cs.PeerCertificates[0]
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	chains, err := leaf.Verify(opts)
	if err != nil {
		return err
	}
	if err := checkChainDepth(chains, depth); err != nil {
		return err
	}
	for _, san := range sans {
		if san.Hostname != "" && leaf.VerifyHostname(san.Hostname) == nil {
			return nil
		}
		if san.URI != "" && slices.ContainsFunc(leaf.URIs, func(u *url.URL) bool { return u.String() == san.URI }) {
			return nil
		}
	}
	return fmt.Errorf("backend certificate %q holds none of the subject alternative names asked for", leaf.Subject)
}

// checkChainDepth accepts chains of which one has at most depth
// certificates above the leaf; depth 0 accepts any.
func checkChainDepth(chains [][]*x509.Certificate, depth int) error {
	if depth == 0 || slices.ContainsFunc(chains, func(c []*x509.Certificate) bool { return len(c)-1 <= depth }) {
		return nil
	}
	return fmt.Errorf("certificate chain longer than the verify depth %d", depth)
}
