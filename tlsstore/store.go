// Package tlsstore owns hostgate's certificate index: which certificate a TLS
// handshake gets for the server name (SNI) the client sent, and whether and
// how the handshake checks the client's certificate.
//
// A Store is built once from PEM data and never changes; callers publish a
// new Store behind an atomic pointer to swap certificates, which leaves
// established connections alone since they already hold the certificate they
// negotiated. The package knows nothing of Secrets or listeners: watch/
// decides which certificates serve which hosts, proxy/ decides which Store a
// listener reads.
package tlsstore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
)

// Certificate is one certificate chain and the hosts it serves.
type Certificate struct {
	// Name identifies the certificate in errors, e.g. the Secret
	// "default/web-tls" it came from.
	Name string
	// Hosts are exact names or "*." wildcards. Empty means the DNS names the
	// certificate itself lists.
	Hosts []string
	// Default makes this the certificate for handshakes without SNI and for
	// names no other certificate serves.
	Default bool
	// CertPEM is the chain, leaf first.
	CertPEM []byte
	KeyPEM  PrivateKey
	// CipherSuites, when set, are the TLS 1.2 suites offered in the
	// handshakes this certificate serves instead of ServerConfig's.
	CipherSuites []uint16
}

// PrivateKey is PEM key material. It prints as a placeholder so that a
// Certificate can be logged or wrapped in an error without leaking it.
type PrivateKey []byte

const redacted = "[REDACTED]"

func (PrivateKey) String() string { return redacted }

// Format covers every fmt verb, %x and %#v included.
func (PrivateKey) Format(f fmt.State, _ rune) { fmt.Fprint(f, redacted) }

// MarshalText keeps encoding/json and log/slog handlers from printing the
// bytes (as base64) when a Certificate is logged.
func (PrivateKey) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// ClientValidation is how handshakes for one listener hostname check the
// client's certificate.
type ClientValidation struct {
	// Name identifies the validation in errors, e.g. the Gateway listener
	// "infra/gw/https" it came from.
	Name string
	// Host is an exact name, a "*." wildcard, or "" for handshakes without
	// SNI and names that no other validation of the Store covers. It is
	// looked up as certificates are, so a connection is checked as the
	// listener its server name selects requires.
	Host string
	// CAPEM holds the certificates of the authorities whose client
	// certificates are valid.
	CAPEM []byte
	// Optional asks for a certificate but also accepts a client without
	// one, or with one the authorities did not issue (Gateway API's
	// AllowInsecureFallback): the backend is left to decide.
	Optional bool
}

// Store is an immutable certificate index. The zero Store and a nil *Store
// serve no certificate and check no client.
type Store struct {
	certs   hostIndex[*served]
	clients hostIndex[*clientAuth]
}

// served is a certificate as handshakes present it.
type served struct {
	cert   *tls.Certificate
	suites []uint16
}

// clientAuth is a ClientValidation as crypto/tls applies it.
type clientAuth struct {
	mode tls.ClientAuthType
	cas  *x509.CertPool
}

// Build indexes certs and the client validations. A certificate that does
// not parse is left out, and a host or default already claimed by an
// earlier certificate or validation stays with it; each case is reported
// as an error naming the certificate or validation, and the rest of the
// Store is built as usual. A validation whose authorities do not parse
// stays in, with no authority: it then fails every client certificate
// rather than let clients through unchecked.
func Build(certs []Certificate, clients ...ClientValidation) (*Store, []error) {
	s := &Store{}
	var errs []error
	for _, c := range certs {
		pair, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
		if err != nil {
			errs = append(errs, fmt.Errorf("load certificate %s: %w", c.Name, err))
			continue
		}
		hosts := c.Hosts
		if len(hosts) == 0 {
			hosts = pair.Leaf.DNSNames
		}
		entry := &served{cert: &pair, suites: c.CipherSuites}
		for _, h := range hosts {
			if err := s.certs.claim(normalize(h), c.Name, entry); err != nil {
				errs = append(errs, fmt.Errorf("index certificate %s: %w", c.Name, err))
			}
		}
		if c.Default {
			if err := s.certs.claim("", c.Name, entry); err != nil {
				errs = append(errs, fmt.Errorf("index certificate %s: %w", c.Name, err))
			}
		}
	}
	for _, v := range clients {
		auth := &clientAuth{mode: tls.RequireAndVerifyClientCert, cas: x509.NewCertPool()}
		if v.Optional {
			auth.mode = tls.RequestClientCert
		}
		if !auth.cas.AppendCertsFromPEM(v.CAPEM) {
			errs = append(errs, fmt.Errorf("load client validation %s: no certificate authority in the PEM data", v.Name))
		}
		if err := s.clients.claim(normalize(v.Host), v.Name, auth); err != nil {
			errs = append(errs, fmt.Errorf("index client validation %s: %w", v.Name, err))
		}
	}
	return s, errs
}

// Lookup returns the certificate for serverName: the exact name first, then
// the wildcard with the longest suffix (a wildcard stands for one or more
// labels, as Gateway API listener hostnames do), then the default. It
// returns nil when nothing serves the name.
func (s *Store) Lookup(serverName string) *tls.Certificate {
	if entry := s.entry(serverName); entry != nil {
		return entry.cert
	}
	return nil
}

// entry is the certificate entry for serverName, nil when nothing serves
// it.
func (s *Store) entry(serverName string) *served {
	if s == nil {
		return nil
	}
	return s.certs.lookup(normalize(serverName))
}

// clientAuth is the validation of handshakes for serverName, nil for none.
func (s *Store) clientAuth(serverName string) *clientAuth {
	if s == nil || s.clients.empty() {
		return nil
	}
	return s.clients.lookup(normalize(serverName))
}

// OtherClientValidation reports whether a request for host (as a client
// wrote it, port and all) is served under another client certificate
// validation than the one its connection's handshake for serverName
// applied: that request is misdirected, as a client could otherwise pass a
// listener's validation by naming another listener in the handshake, or
// none (a handshake without SNI gets the default's). The router tells
// listeners apart only by server name; this catches the connections that
// sent none.
func (s *Store) OtherClientValidation(serverName, host string) bool {
	if s == nil || s.clients.empty() {
		return false
	}
	return s.clientAuth(serverName) != s.clientAuth(hostOnly(host))
}

// GetCertificate is a tls.Config.GetCertificate. For a name nothing serves
// it returns no certificate and no error, which makes crypto/tls end the
// handshake with an unrecognized_name alert instead of presenting some
// other host's certificate.
func (s *Store) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.Lookup(hello.ServerName), nil
}

// errNoStore is returned while a listener has no Store at all.
var errNoStore = errors.New("tlsstore: no certificate store")

// ServerConfig returns a server tls.Config that asks current for the Store
// at every handshake, so a published Store takes effect on the next
// handshake without touching existing connections. Only TLS 1.2 and later
// with forward-secret AEAD suites are offered.
//
// A handshake whose server name has a client validation, or whose
// certificate has cipher suites of its own, gets a copy of the returned
// Config, made then, that asks for the client's certificate or offers
// those suites: the copy keeps what callers set on the Config after this
// returns (wrapped callbacks, counters). Other handshakes use the Config
// itself.
func ServerConfig(current func() *Store, nextProtos ...string) *tls.Config {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// TLS 1.3 suites are not configurable and all qualify; these are
		// the TLS 1.2 ones with ECDHE and an AEAD.
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
		NextProtos: nextProtos,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			s := current()
			if s == nil {
				return nil, errNoStore
			}
			return s.GetCertificate(hello)
		},
	}
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		s := current()
		auth := s.clientAuth(hello.ServerName)
		var suites []uint16
		if entry := s.entry(hello.ServerName); entry != nil {
			suites = entry.suites
		}
		if auth == nil && suites == nil {
			return nil, nil
		}
		own := cfg.Clone()
		if auth != nil {
			// Resumed sessions stay safe across validations:
			// crypto/tls resumes one only if its client certificate,
			// or the lack of one, passes the validation of the new
			// handshake.
			own.ClientAuth, own.ClientCAs = auth.mode, auth.cas
		}
		if suites != nil {
			own.CipherSuites = suites
		}
		return own, nil
	}
	return cfg
}

// normalize lower-cases a host name and drops a trailing dot. It allocates
// only when the name has upper-case letters.
func normalize(name string) string {
	name = strings.TrimSuffix(name, ".")
	for i := 0; i < len(name); i++ {
		if c := name[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(name)
		}
	}
	return name
}

// hostOnly is host without its port, if it has one; an IPv6 literal keeps
// its brackets, which no listener hostname has.
func hostOnly(host string) string {
	if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.IndexByte(host[i:], ']') < 0 {
		return host[:i]
	}
	return host
}

// hostIndex finds what serves a server name: the exact name, else the
// wildcard with the longest suffix, else the default ("").
type hostIndex[T comparable] struct {
	exact map[string]T
	// wild is keyed by the suffix after "*.", e.g. "example.com".
	wild map[string]T
	def  T
	// owners name what claimed each host, "" the default.
	owners map[string]string
}

// claim makes v serve host (normalized; "" the default) unless another
// owner claimed it first. Listeners sharing a port often name the same
// Secret or CA bundle: a second claim by the same owner is no conflict.
func (x *hostIndex[T]) claim(host, owner string, v T) error {
	if first, ok := x.owners[host]; ok {
		switch {
		case first == owner:
			return nil
		case host == "":
			return fmt.Errorf("default already set by %s", first)
		}
		return fmt.Errorf("host %q already served by %s", host, first)
	}
	if x.owners == nil {
		x.owners, x.exact, x.wild = map[string]string{}, map[string]T{}, map[string]T{}
	}
	x.owners[host] = owner
	if suffix, ok := strings.CutPrefix(host, "*."); ok {
		x.wild[suffix] = v
	} else if host == "" {
		x.def = v
	} else {
		x.exact[host] = v
	}
	return nil
}

func (x *hostIndex[T]) empty() bool { return len(x.owners) == 0 }

// lookup returns what serves name, the zero T when nothing does.
func (x *hostIndex[T]) lookup(name string) T {
	if name == "" {
		return x.def
	}
	if v, ok := x.exact[name]; ok {
		return v
	}
	for i := strings.IndexByte(name, '.'); i >= 0; {
		if v, ok := x.wild[name[i+1:]]; ok {
			return v
		}
		next := strings.IndexByte(name[i+1:], '.')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return x.def
}
