package watch

// Gateway spec.tls.backend.clientCertificateRef: the client certificate
// hostgate presents to the backends that a BackendTLSPolicy puts behind
// TLS, for the routes attached to that Gateway.
//
// The certificate is part of a backend's TLS identity
// (router.BackendTLS.ClientCertificate). A route is translated once, with
// the identities its policies give; where it is placed on the sockets of
// a Gateway with a client certificate, it is placed with a copy of its
// rules whose TLS backends present that certificate. One Service reached
// through two Gateways is thus two identities, and proxy/ keeps their
// connections apart. A reference that cannot be used (missing Secret,
// wrong type or kind, a cross-namespace reference no ReferenceGrant
// allows) sets the Gateway's ResolvedRefs to False and leaves it Accepted;
// its routes' TLS backends are then reached without a client certificate,
// and a backend that requires one refuses them (502).
//
// A request cannot tell two Gateways apart that share a socket (both
// without addresses, on one port) and a listener hostname: a route
// attached to both is placed there once, through the one its parentRefs
// name first, and presents that one's certificate.

import (
	"fmt"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/router"
)

// backendClientCert resolves g's spec.tls.backend.clientCertificateRef.
func (t *translator) backendClientCert(g *gateway) {
	tls := g.obj.Spec.TLS
	if tls == nil || tls.Backend == nil || tls.Backend.ClientCertificateRef == nil {
		return
	}
	g.hasBackendTLS = true
	cert, reason, err := t.certificateRef(refFrom{kind: "Gateway", namespace: g.obj.Namespace}, *tls.Backend.ClientCertificateRef)
	if err != nil {
		gwReason := gatewayv1.GatewayReasonInvalidClientCertificateRef
		if reason == gatewayv1.ListenerReasonRefNotPermitted {
			gwReason = gatewayv1.GatewayReasonRefNotPermitted
		}
		g.resolvedRefs.first(string(gwReason), fmt.Sprintf("spec.tls.backend.clientCertificateRef: %v", err))
		return
	}
	g.clientCert = &router.ClientCertificate{Name: cert.Name, CertPEM: cert.CertPEM, KeyPEM: router.PrivateKey(cert.KeyPEM)}
	g.clientCertKey = cert.Name + "\x00" + string(cert.CertPEM) + "\x00" + string(cert.KeyPEM)
}

// certRules are the rules of a route as placed on the Gateways that
// present one client certificate, key.
type certRules struct {
	key   string
	rules []router.Rule
}

// maxCertRules bounds the copies a route keeps: one per client
// certificate it is served with, and a few that certificates rotated
// from.
const maxCertRules = 4

// rulesOn returns the rules of r as served through g.
func (t *translator) rulesOn(r *route, g *gateway) []router.Rule {
	if g.clientCert == nil || !rulesUseTLS(r.rules) {
		return r.rules
	}
	// Kept with the route, so that a translation that changes neither
	// places the same rules and the socket's routes are shared.
	tls := r.backendTLSState()
	for _, c := range tls.certRules {
		if c.key == g.clientCertKey {
			return c.rules
		}
	}
	rules := make([]router.Rule, len(r.rules))
	for i, rule := range r.rules {
		rule.Filters = g.filtersWithCert(rule.Filters)
		if slicesAny(rule.Backends, func(b *router.BackendRef) bool { return refUsesTLS(b) }) {
			backends := make([]router.BackendRef, len(rule.Backends))
			for j, b := range rule.Backends {
				backends[j] = g.refWithCert(b)
			}
			rule.Backends = backends
		}
		rules[i] = rule
	}
	if len(tls.certRules) >= maxCertRules {
		tls.certRules = tls.certRules[1:]
	}
	tls.certRules = append(tls.certRules, certRules{g.clientCertKey, rules})
	return rules
}

// refWithCert is b presenting g's client certificate where it speaks TLS.
func (g *gateway) refWithCert(b router.BackendRef) router.BackendRef {
	if b.TLS != nil {
		tls := g.withCert[b.TLS]
		if tls == nil {
			c := *b.TLS
			c.ClientCertificate = g.clientCert
			tls = &c
			if g.withCert == nil {
				g.withCert = map[*router.BackendTLS]*router.BackendTLS{}
			}
			g.withCert[b.TLS] = tls
		}
		b.TLS = tls
	}
	b.Filters = g.filtersWithCert(b.Filters)
	return b
}

// filtersWithCert are filters whose mirrors present g's client
// certificate to TLS backends; filters itself when none mirrors to one.
func (g *gateway) filtersWithCert(filters []router.Filter) []router.Filter {
	if !slicesAny(filters, func(f *router.Filter) bool { return f.Mirror != nil && refUsesTLS(&f.Mirror.Backend) }) {
		return filters
	}
	out := make([]router.Filter, len(filters))
	for i, f := range filters {
		if f.Mirror != nil {
			m := *f.Mirror
			m.Backend = g.refWithCert(m.Backend)
			f.Mirror = &m
		}
		out[i] = f
	}
	return out
}

// rulesUseTLS reports whether some backend of rules, mirrors included,
// speaks TLS with an identity of its own.
func rulesUseTLS(rules []router.Rule) bool {
	return slicesAny(rules, func(r *router.Rule) bool {
		return slicesAny(r.Backends, func(b *router.BackendRef) bool { return refUsesTLS(b) }) ||
			slicesAny(r.Filters, func(f *router.Filter) bool { return f.Mirror != nil && refUsesTLS(&f.Mirror.Backend) })
	})
}

func refUsesTLS(b *router.BackendRef) bool {
	return b.TLS != nil || slicesAny(b.Filters, func(f *router.Filter) bool { return f.Mirror != nil && refUsesTLS(&f.Mirror.Backend) })
}

// slicesAny reports whether f holds for some element of s, without
// copying elements.
func slicesAny[T any](s []T, f func(*T) bool) bool {
	for i := range s {
		if f(&s[i]) {
			return true
		}
	}
	return false
}
