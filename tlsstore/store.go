// Package tlsstore owns hostgate's certificate index: which certificate a TLS
// handshake gets for the server name (SNI) the client sent.
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

// Store is an immutable certificate index. The zero Store and a nil *Store
// serve no certificate.
type Store struct {
	exact map[string]*tls.Certificate
	// wild is keyed by the suffix after "*.", e.g. "example.com".
	wild map[string]*tls.Certificate
	def  *tls.Certificate
}

// Build indexes certs. A certificate that does not parse is left out, and a
// host or default already claimed by an earlier certificate stays with it;
// each case is reported as an error naming the certificate, and the rest of
// the Store is built as usual.
func Build(certs []Certificate) (*Store, []error) {
	s := &Store{exact: map[string]*tls.Certificate{}, wild: map[string]*tls.Certificate{}}
	claimedBy := map[string]string{}
	var defaultBy string
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
		for _, h := range hosts {
			h = normalize(h)
			if owner, ok := claimedBy[h]; ok {
				// Listeners sharing a port often name the same Secret:
				// that is one certificate, not a conflict.
				if owner != c.Name {
					errs = append(errs, fmt.Errorf("index certificate %s: host %q already served by %s", c.Name, h, owner))
				}
				continue
			}
			claimedBy[h] = c.Name
			if suffix, ok := strings.CutPrefix(h, "*."); ok {
				s.wild[suffix] = &pair
			} else {
				s.exact[h] = &pair
			}
		}
		if c.Default {
			if s.def != nil {
				if defaultBy != c.Name {
					errs = append(errs, fmt.Errorf("index certificate %s: default already set by %s", c.Name, defaultBy))
				}
				continue
			}
			defaultBy = c.Name
			s.def = &pair
		}
	}
	return s, errs
}

// Lookup returns the certificate for serverName: the exact name first, then
// the wildcard with the longest suffix (a wildcard stands for one or more
// labels, as Gateway API listener hostnames do), then the default. It
// returns nil when nothing serves the name.
func (s *Store) Lookup(serverName string) *tls.Certificate {
	if s == nil {
		return nil
	}
	name := normalize(serverName)
	if name == "" {
		return s.def
	}
	if c := s.exact[name]; c != nil {
		return c
	}
	for i := strings.IndexByte(name, '.'); i >= 0; {
		if c := s.wild[name[i+1:]]; c != nil {
			return c
		}
		next := strings.IndexByte(name[i+1:], '.')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return s.def
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
func ServerConfig(current func() *Store, nextProtos ...string) *tls.Config {
	return &tls.Config{
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
