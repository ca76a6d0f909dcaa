package router

import (
	"crypto/x509"
	"fmt"
	"regexp"
	"sync/atomic"
)

// ClientCertAuth checks, per request, the certificate the client presented
// in its TLS handshake (ingress-nginx's auth-tls-*): the handshake only
// asks for one, so that a client without a valid certificate gets an HTTP
// answer (400, or a redirect to ErrorPage) instead of a failed handshake,
// and the backend learns the outcome in the ssl-client-* header fields.
type ClientCertAuth struct {
	// Name is where the authorities come from, e.g. the Secret
	// "namespace/name".
	Name string
	// CAPEM holds the certificates of the authorities whose client
	// certificates are valid. Empty when they could not be read: every
	// request is then refused with 403 rather than let through unchecked.
	CAPEM []byte `json:",omitempty"`
	Mode  ClientCertMode
	// Depth is the most certificates a chain may have above the client's
	// own (nginx's ssl_verify_depth).
	Depth int
	// PassCertificate sends the client's certificate to the backend,
	// URL-encoded PEM, in ssl-client-cert.
	PassCertificate bool `json:",omitempty"`
	// SubjectPattern, when set, must match the subject of the client's
	// certificate (RFC 2253, e.g. "CN=client,O=example"); 403 otherwise.
	SubjectPattern string `json:",omitempty"`
	// ErrorPage, when set, is where a client whose certificate is missing
	// or does not verify is redirected (302) instead of answered 400.
	ErrorPage string `json:",omitempty"`

	// compiled is made from the fields above on first use: the model
	// stays plain data, as state files keep it.
	compiled atomic.Pointer[compiledCertAuth]
}

// ClientCertMode says which clients ClientCertAuth lets through.
type ClientCertMode uint8

const (
	// ClientCertRequired lets through only clients whose certificate
	// verifies.
	ClientCertRequired ClientCertMode = iota
	// ClientCertOptional also lets through clients without a certificate.
	ClientCertOptional
	// ClientCertOptionalNoCA lets every client through; the backend
	// learns whether its certificate verified.
	ClientCertOptionalNoCA
	// ClientCertOff asks for no certificate; the backend is told none
	// was presented.
	ClientCertOff
)

func (m ClientCertMode) String() string {
	switch m {
	case ClientCertOptional:
		return "optional"
	case ClientCertOptionalNoCA:
		return "optional_no_ca"
	case ClientCertOff:
		return "off"
	}
	return "on"
}

// MarshalText writes the mode as its ingress-nginx name, for dumps.
func (m ClientCertMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (m *ClientCertMode) UnmarshalText(b []byte) error {
	for _, c := range []ClientCertMode{ClientCertRequired, ClientCertOptional, ClientCertOptionalNoCA, ClientCertOff} {
		if c.String() == string(b) {
			*m = c
			return nil
		}
	}
	return fmt.Errorf("client certificate mode %q: must be on, optional, optional_no_ca or off", b)
}

type compiledCertAuth struct {
	roots   *x509.CertPool
	subject *regexp.Regexp
	// errorPage is the redirect to ErrorPage.
	errorPage *Redirect
}

// compile returns the authorities, subject pattern and error page
// redirect of a, made once. Validate checked that they compile; a pool
// without certificates verifies none.
func (a *ClientCertAuth) compile() *compiledCertAuth {
	if c := a.compiled.Load(); c != nil {
		return c
	}
	c := &compiledCertAuth{roots: x509.NewCertPool()}
	c.roots.AppendCertsFromPEM(a.CAPEM)
	if a.SubjectPattern != "" {
		c.subject, _ = regexp.Compile(a.SubjectPattern)
	}
	if a.ErrorPage != "" {
		c.errorPage = &Redirect{Location: a.ErrorPage, StatusCode: 302}
	}
	a.compiled.CompareAndSwap(nil, c)
	return a.compiled.Load()
}

// Roots are the authorities as a pool.
func (a *ClientCertAuth) Roots() *x509.CertPool { return a.compile().roots }

// SubjectAllowed reports whether a certificate of subject may pass.
func (a *ClientCertAuth) SubjectAllowed(subject string) bool {
	re := a.compile().subject
	return re == nil || re.MatchString(subject)
}

// ErrorRedirect is the redirect to ErrorPage, nil without one.
func (a *ClientCertAuth) ErrorRedirect() *Redirect { return a.compile().errorPage }

func validateClientCertAuth(a *ClientCertAuth) error {
	if a.Mode > ClientCertOff {
		return fmt.Errorf("mode: unknown mode %d", a.Mode)
	}
	if a.Depth < 0 {
		return fmt.Errorf("depth: must not be negative")
	}
	if _, err := regexp.Compile(a.SubjectPattern); err != nil {
		return fmt.Errorf("subjectPattern %s: %w", quote(a.SubjectPattern), err)
	}
	if a.ErrorPage != "" {
		if err := validateValue(a.ErrorPage); err != nil {
			return fmt.Errorf("errorPage: %w", err)
		}
	}
	return nil
}

func describeClientCertAuth(a *ClientCertAuth) string {
	s := fmt.Sprintf(" authorities=%s mode=%s depth=%d", a.Name, a.Mode, a.Depth)
	if len(a.CAPEM) == 0 {
		s += " unavailable"
	}
	if a.PassCertificate {
		s += " passCertificate"
	}
	if a.SubjectPattern != "" {
		s += " subject~" + quote(a.SubjectPattern)
	}
	if a.ErrorPage != "" {
		s += " errorPage=" + a.ErrorPage
	}
	return s
}
