package watch

// ingress-nginx's client certificate annotations (auth-tls-*) and the
// Secret of its backend TLS annotations (proxy-ssl-secret).
//
// ingress-nginx checks client certificates per server, that is per host:
// the auth-tls-* annotations of the oldest Ingress of a host that has
// auth-tls-secret apply to every path of the host, whichever Ingress
// serves it, and the others' are ignored. The handshake asks for a
// certificate and accepts any (the host's ClientValidation, Optional);
// the FilterClientCertificate on each rule of the host decides, with 400
// for a certificate missing or that does not verify, as nginx does. A
// Secret that cannot be read makes the host answer 403: serving it
// without the check would let in the clients it is meant to keep out.
//
// The Secrets are resolved once per translation, before the Ingresses'
// routes, which are memoized: what the routes read of them is part of
// their key (nginxHosts.context).

import (
	"crypto/sha256"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hostgate/hostgate/router"
)

// nginxTLSAuth are the typed values of the auth-tls-* annotations and of
// proxy-ssl-secret and proxy-ssl-verify-depth.
type nginxTLSAuth struct {
	// secret is auth-tls-secret's Secret, empty without one.
	secret    types.NamespacedName
	mode      router.ClientCertMode
	depth     int
	pass      bool
	subject   string
	errorPage string
	// proxySecret is proxy-ssl-secret's Secret, empty without one.
	proxySecret types.NamespacedName
	proxyDepth  int
}

// nginxTLSAuthAnnotations check client certificates, and choose the
// certificates of TLS backends.
var nginxTLSAuthAnnotations = map[string]nginxParse{
	"auth-tls-secret": func(v string, s *nginxSettings) (err error) {
		s.tlsAuth.secret, err = parseSecretRef(v)
		return err
	},
	"auth-tls-verify-client": func(v string, s *nginxSettings) error {
		return s.tlsAuth.mode.UnmarshalText([]byte(v))
	},
	"auth-tls-verify-depth": func(v string, s *nginxSettings) (err error) {
		s.tlsAuth.depth, err = parseVerifyDepth(v)
		return err
	},
	"auth-tls-pass-certificate-to-upstream": func(v string, s *nginxSettings) (err error) {
		s.tlsAuth.pass, err = parseNginxBool(v)
		return err
	},
	"auth-tls-error-page": func(v string, s *nginxSettings) error {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || checkHeaderValue(v) != nil {
			return fmt.Errorf("must be an http or https URL (nginx's internal redirects to a location are not done)")
		}
		s.tlsAuth.errorPage = v
		return nil
	},
	"auth-tls-match-cn": func(v string, s *nginxSettings) error {
		if !strings.HasPrefix(v, "CN=") {
			return fmt.Errorf("must start with \"CN=\"")
		}
		if _, err := regexp.Compile(v); err != nil {
			return fmt.Errorf("not a regular expression: %v", err)
		}
		s.tlsAuth.subject = v
		return nil
	},
	"proxy-ssl-secret": func(v string, s *nginxSettings) (err error) {
		s.tlsAuth.proxySecret, err = parseSecretRef(v)
		return err
	},
	"proxy-ssl-verify-depth": func(v string, s *nginxSettings) (err error) {
		s.tlsAuth.proxyDepth, err = parseVerifyDepth(v)
		return err
	},
}

// parseSecretRef reads "namespace/name" or "name" (the Ingress's
// namespace, filled in by settleTLSAuth).
func parseSecretRef(v string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(v, "/")
	if !ok {
		ns, name = "", v
	}
	if len(validation.IsDNS1123Subdomain(name)) > 0 || ok && len(validation.IsDNS1123Label(ns)) > 0 {
		return types.NamespacedName{}, fmt.Errorf("must be a Secret's namespace/name or name")
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// parseVerifyDepth reads a verify depth; 0 is ingress-nginx's default, 1.
func parseVerifyDepth(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 100 {
		return 0, fmt.Errorf("must be a number from 0 to 100")
	}
	return max(n, 1), nil
}

// settleTLSAuth places the Secrets in the Ingress's namespace, refuses
// those of another (ingress-nginx does unless allow-cross-namespace-
// resources is on), and says which auth-tls-* annotations have no effect
// without auth-tls-secret.
func (s *nginxSettings) settleTLSAuth(namespace string, outcomes []AnnotationOutcome) {
	a := &s.tlsAuth
	for _, ref := range []struct {
		name   string
		secret *types.NamespacedName
	}{{"auth-tls-secret", &a.secret}, {"proxy-ssl-secret", &a.proxySecret}} {
		if ref.secret.Name == "" {
			continue
		}
		if ref.secret.Namespace == "" {
			ref.secret.Namespace = namespace
		}
		if ref.secret.Namespace != namespace {
			setOutcome(outcomes, ref.name, Invalid, "a Secret of another namespace: refused, as ingress-nginx does by default")
			*ref.secret = types.NamespacedName{}
		}
	}
	if a.secret.Name == "" {
		for i, o := range outcomes {
			if strings.HasPrefix(o.Annotation, NginxAnnotationPrefix+"auth-tls-") && o.Outcome == Honoured {
				outcomes[i].Outcome, outcomes[i].Reason = Ignored, "without auth-tls-secret"
			}
		}
	}
	if a.depth == 0 {
		a.depth = 1
	}
}

// hostClientAuth is the client certificate check of one host.
type hostClientAuth struct {
	// owner is the Ingress whose annotations it is.
	owner *networkingv1.Ingress
	auth  *router.ClientCertAuth
	// problem is why the Secret could not be read.
	problem string
	// key is what routes read of it, for their memo key.
	key string
}

// proxySSLSecret is what an Ingress's proxy-ssl-secret holds.
type proxySSLSecret struct {
	client  *router.ClientCertificate
	caPEM   []byte
	problem string
	key     string
}

// nginxSecrets resolves the Secrets of ingress-nginx annotations: the
// client certificate check of each host (by the oldest Ingress of ours
// among ingresses with auth-tls-secret for it) and each Ingress's
// proxy-ssl-secret.
func (t *translator) nginxSecrets(h *nginxHosts, ingresses []*networkingv1.Ingress) {
	h.clientAuth = map[string]*hostClientAuth{}
	h.proxySSL = map[*networkingv1.Ingress]*proxySSLSecret{}
	var withAuth []*networkingv1.Ingress
	for _, ing := range ingresses {
		auth, proxy := ing.Annotations[NginxAnnotationPrefix+"auth-tls-secret"] != "", ing.Annotations[NginxAnnotationPrefix+"proxy-ssl-secret"] != ""
		if !(auth || proxy) || !t.ourIngress(ing) {
			continue
		}
		if auth {
			withAuth = append(withAuth, ing)
		}
		if proxy {
			s, _ := parseNginxAnnotations(ing)
			if ref := s.tlsAuth.proxySecret; ref.Name != "" {
				h.proxySSL[ing] = t.proxySSLSecret(ref)
			}
		}
	}
	slices.SortStableFunc(withAuth, func(a, b *networkingv1.Ingress) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	for _, ing := range withAuth {
		s, _ := parseNginxAnnotations(ing)
		a := &s.tlsAuth
		if a.secret.Name == "" {
			continue
		}
		ca := &hostClientAuth{owner: ing, auth: &router.ClientCertAuth{
			Name: a.secret.String(), Mode: a.mode, Depth: a.depth, PassCertificate: a.pass,
			SubjectPattern: a.subject, ErrorPage: a.errorPage,
		}}
		var err error
		if ca.auth.CAPEM, err = t.secretCA(a.secret); err != nil {
			ca.problem = err.Error()
		}
		ca.key = fmt.Sprintf("%s/%s %s %d %t %q %q %x %q", ing.Namespace, ing.Name, a.mode, a.depth, a.pass, a.subject, a.errorPage, sha256.Sum256(ca.auth.CAPEM), ca.problem)
		hosts := ingressHosts(ing)
		for _, host := range hosts {
			if h.clientAuth[host] == nil {
				h.clientAuth[host] = ca
			}
		}
	}
}

// ingressHosts are the hosts of ing's rules, "" for rules without one
// and for its defaultBackend.
func ingressHosts(ing *networkingv1.Ingress) []string {
	var hosts []string
	for _, rule := range ing.Spec.Rules {
		hosts = append(hosts, strings.ToLower(rule.Host))
	}
	if ing.Spec.DefaultBackend != nil {
		hosts = append(hosts, "")
	}
	return hosts
}

// secretCA reads the CA certificates of a Secret's ca.crt, of any type.
func (t *translator) secretCA(ref types.NamespacedName) ([]byte, error) {
	s := t.secrets.last(ref)
	if s == nil {
		return nil, fmt.Errorf("Secret %s: not found (hostgate reads Secrets of type %s and %s)", ref, corev1.SecretTypeTLS, corev1.SecretTypeOpaque)
	}
	data, ok := s.Data[caCertKey]
	if !ok {
		return nil, fmt.Errorf("Secret %s: no key %s", ref, caCertKey)
	}
	bundle, err := checkCertificates(data)
	if err != nil {
		return nil, fmt.Errorf("Secret %s: %s: %v", ref, caCertKey, err)
	}
	return bundle, nil
}

// proxySSLSecret reads proxy-ssl-secret's Secret: a client certificate
// in tls.crt and tls.key, authorities in ca.crt, at least one of them.
func (t *translator) proxySSLSecret(ref types.NamespacedName) *proxySSLSecret {
	p := &proxySSLSecret{}
	s := t.secrets.last(ref)
	switch {
	case s == nil:
		p.problem = fmt.Sprintf("Secret %s: not found (hostgate reads Secrets of type %s and %s)", ref, corev1.SecretTypeTLS, corev1.SecretTypeOpaque)
	case s.Type != corev1.SecretTypeTLS && len(s.Data[caCertKey]) == 0:
		p.problem = fmt.Sprintf("Secret %s: no key %s (a client certificate needs a Secret of type %s)", ref, caCertKey, corev1.SecretTypeTLS)
	default:
		if s.Type == corev1.SecretTypeTLS {
			cert, err := t.memoKeyPair(s)
			if err != nil {
				p.problem = err.Error()
				break
			}
			p.client = &router.ClientCertificate{Name: cert.Name, CertPEM: cert.CertPEM, KeyPEM: router.PrivateKey(cert.KeyPEM)}
		}
		if data, ok := s.Data[caCertKey]; ok {
			bundle, err := checkCertificates(data)
			if err != nil {
				p.problem = fmt.Sprintf("Secret %s: %s: %v", ref, caCertKey, err)
				break
			}
			p.caPEM = bundle
		}
	}
	var certPEM []byte
	if p.client != nil {
		certPEM = p.client.CertPEM
	}
	p.key = fmt.Sprintf("%x %x %q", sha256.Sum256(certPEM), sha256.Sum256(p.caPEM), p.problem)
	return p
}

// tlsAuthContext is what the routes of ing read of the Secrets resolved
// for its hosts and for itself.
func (h *nginxHosts) tlsAuthContext(ing *networkingv1.Ingress) string {
	var b strings.Builder
	for _, host := range ingressHosts(ing) {
		if ca := h.clientAuth[host]; ca != nil {
			b.WriteString(ca.key + ";")
		}
	}
	if p := h.proxySSL[ing]; p != nil {
		b.WriteString(p.key)
	}
	return b.String()
}

// applyProxySSL gives the TLS backends of an Ingress proxy-ssl-secret's
// client certificate and, with proxy-ssl-verify on, its authorities.
func (s *nginxSettings) applyProxySSL(p *proxySSLSecret, annotations map[string]string, outcomes []AnnotationOutcome) {
	verify := annotations[NginxAnnotationPrefix+"proxy-ssl-verify"] == "on"
	switch {
	case s.backendTLS == nil:
		return
	case p == nil:
		if verify {
			setOutcome(outcomes, "proxy-ssl-verify", Ignored, "without proxy-ssl-secret: the backend's certificate is checked against the system's roots")
		}
		return
	case p.problem != "":
		// Backends whose client certificate or authorities are missing
		// would be reached with less than the Ingress asks for.
		setOutcome(outcomes, "proxy-ssl-secret", Invalid, p.problem)
		s.backendTLS = nil
		return
	case verify && p.caPEM == nil:
		setOutcome(outcomes, "proxy-ssl-verify", Invalid, "proxy-ssl-secret has no ca.crt to check the backend's certificate with")
		s.backendTLS = nil
		return
	}
	b := *s.backendTLS
	b.ClientCertificate = p.client
	if verify {
		b.CAPEM, b.VerifyDepth = p.caPEM, s.tlsAuth.proxyDepth
	}
	s.backendTLS = &b
}

// checkClientCerts puts the client certificate check of each route's
// host in front of every rule, and says in outcomes where ing's own
// auth-tls-* annotations gave way to an older Ingress's or failed.
func (h *nginxHosts) checkClientCerts(routes []router.Route, ing *networkingv1.Ingress, nginx *nginxSettings, outcomes []AnnotationOutcome) {
	for i := range routes {
		r := &routes[i]
		host := ""
		if len(r.Hostnames) > 0 {
			host = r.Hostnames[0]
		}
		ca := h.clientAuth[host]
		if ca == nil {
			continue
		}
		switch {
		case nginx.tlsAuth.secret.Name == "":
		case ca.owner != ing:
			setOutcome(outcomes, "auth-tls-secret", Ignored, fmt.Sprintf("for %s: the auth-tls-* annotations of Ingress %s/%s, older, apply to the host", describeHost(host), ca.owner.Namespace, ca.owner.Name))
		case ca.problem != "":
			setOutcome(outcomes, "auth-tls-secret", Invalid, ca.problem+": every request is refused with 403")
		}
		check := router.Filter{Type: router.FilterClientCertificate, ClientCert: ca.auth}
		for j := range r.Rules {
			r.Rules[j].Filters = append([]router.Filter{check}, r.Rules[j].Filters...)
		}
	}
}

func describeHost(host string) string {
	if host == "" {
		return "rules without host"
	}
	return host
}

// clientValidations asks the handshakes of every host with a client
// certificate check on s, an HTTPS socket, for a certificate, where no
// Gateway listener of the hostname validates them already.
func (h *nginxHosts) clientValidations(s *socket) {
	for host, ca := range h.clientAuth {
		if ca.auth.Mode == router.ClientCertOff || len(ca.auth.CAPEM) == 0 || s.validations[host] != nil {
			continue
		}
		s.validations[host] = &ClientValidation{
			Name:     fmt.Sprintf("Ingress %s/%s", ca.owner.Namespace, ca.owner.Name),
			Hostname: host,
			CAPEM:    ca.auth.CAPEM,
			Optional: true,
		}
	}
}
