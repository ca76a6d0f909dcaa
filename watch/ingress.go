package watch

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hostgate/hostgate/router"
)

// Annotations that select an Ingress class outside of spec.
const (
	annotationIngressClass = "kubernetes.io/ingress.class"
	annotationDefaultClass = "ingressclass.kubernetes.io/is-default-class"
)

// ingressListeners binds the sockets Ingresses are served on, when there
// is an Ingress to serve: a Gateway-only setup then needs no privileged
// ports. It runs before Gateways bind, so that a Gateway sharing the node
// addresses cannot take the Ingress ports with another protocol.
func (t *translator) ingressListeners() {
	if !slices.ContainsFunc(t.objs.ingresses, t.ourIngress) {
		return
	}
	for _, l := range []struct {
		addr     string
		protocol Protocol
	}{{t.opts.IngressHTTPAddr, ProtocolHTTP}, {t.opts.IngressHTTPSAddr, ProtocolHTTPS}} {
		if l.addr == "" {
			continue
		}
		if host, port, err := splitHostPort(l.addr); err == nil {
			t.bind(host, port, l.protocol, "", nil)
		}
	}
}

func (t *translator) ingressSockets() []*socket {
	var out []*socket
	for _, addr := range []string{t.opts.IngressHTTPAddr, t.opts.IngressHTTPSAddr} {
		if host, port, err := splitHostPort(addr); err == nil && t.sockets[socketName(host, port)] != nil {
			out = append(out, t.sockets[socketName(host, port)])
		}
	}
	return out
}

// ourIngress reports whether ing belongs to our class: by
// spec.ingressClassName (or the legacy annotation) naming our class or an
// IngressClass of our controller, or, without a class, by an IngressClass
// of our controller marked default.
func (t *translator) ourIngress(ing *networkingv1.Ingress) bool {
	name := ing.Annotations[annotationIngressClass]
	if ing.Spec.IngressClassName != nil {
		name = *ing.Spec.IngressClassName
	}
	if name == "" {
		return slices.ContainsFunc(t.objs.ingressClasses, func(c *networkingv1.IngressClass) bool {
			return c.Spec.Controller == IngressController && c.Annotations[annotationDefaultClass] == "true"
		})
	}
	for _, c := range t.objs.ingressClasses {
		if c.Name == name {
			return c.Spec.Controller == IngressController
		}
	}
	return name == t.opts.IngressClass
}

func (t *translator) ingresses() {
	sockets := t.ingressSockets()
	// Every Ingress gets the same addresses; reports only read them.
	var loadBalancer networkingv1.IngressLoadBalancerStatus
	for _, a := range t.nodeAddresses {
		loadBalancer.Ingress = append(loadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: a})
	}
	for _, ing := range t.objs.ingresses {
		if !t.ourIngress(ing) {
			continue
		}
		report := IngressReport{Object: ing, LoadBalancer: loadBalancer}
		translated := memoized(t, ing, func() ingressRoutes { return t.ingressRoutes(ing) })
		routes := translated.routes
		certs, certProblems := t.ingressCerts(ing)
		// A new slice: the memoized one is shared with other translations.
		report.Problems = slices.Concat(translated.problems, certProblems)
		for _, s := range sockets {
			if s.protocol == ProtocolHTTPS {
				s.certs = append(s.certs, certs...)
			}
			for _, r := range routes {
				s.add(r)
			}
		}
		t.reports.Ingresses = append(t.reports.Ingresses, report)
	}
}

// ingressRoutes are the routes of one Ingress and the problems found
// making them.
type ingressRoutes struct {
	routes   []router.Route
	problems []string
}

// ingressRoutes makes one route per host of ing (rules without a host and
// the defaultBackend share the route without hostnames), each of its rules
// one path. A route that the router would refuse is left out whole.
func (t *translator) ingressRoutes(ing *networkingv1.Ingress) ingressRoutes {
	var problems []string
	id := router.RouteID{Kind: router.KindIngress, Namespace: ing.Namespace, Name: ing.Name}
	var routes []router.Route
	routeFor := func(host string) *router.Route {
		for i := range routes {
			if len(routes[i].Hostnames) == 0 && host == "" || slices.Equal(routes[i].Hostnames, []string{host}) {
				return &routes[i]
			}
		}
		r := router.Route{ID: id, Created: ing.CreationTimestamp.Time}
		if host != "" {
			r.Hostnames = []string{host}
		}
		routes = append(routes, r)
		return &routes[len(routes)-1]
	}
	backend := func(field string, b *networkingv1.IngressBackend) []router.BackendRef {
		ref, err := t.ingressBackend(ing.Namespace, b)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", field, err))
			return []router.BackendRef{{Invalid: true, Weight: 1}}
		}
		return []router.BackendRef{ref}
	}
	for i, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		r := routeFor(strings.ToLower(rule.Host))
		for j, p := range rule.HTTP.Paths {
			field := fmt.Sprintf("spec.rules[%d].http.paths[%d]", i, j)
			match, err := ingressPath(p)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", field, err))
				continue
			}
			r.Rules = append(r.Rules, router.Rule{
				Name:     fmt.Sprintf("rules[%d].paths[%d]", i, j),
				Matches:  []router.Match{match},
				Backends: backend(field+".backend", &p.Backend),
			})
		}
	}
	if db := ing.Spec.DefaultBackend; db != nil {
		r := routeFor("")
		r.Rules = append(r.Rules, router.Rule{Name: "defaultBackend", Backends: backend("spec.defaultBackend", db)})
	}
	valid := routes[:0]
	for _, r := range routes {
		if err := router.Validate(&r); err != nil {
			problems = append(problems, err.Error())
			continue
		}
		valid = append(valid, r)
	}
	return ingressRoutes{valid, problems}
}

// ingressPath maps an Ingress path to a router match. ImplementationSpecific
// is served as Prefix, element-wise.
func ingressPath(p networkingv1.HTTPIngressPath) (router.Match, error) {
	value := p.Path
	pathType := networkingv1.PathTypeImplementationSpecific
	if p.PathType != nil {
		pathType = *p.PathType
	}
	switch pathType {
	case networkingv1.PathTypeExact:
		if value == "" {
			return router.Match{}, fmt.Errorf("path: an Exact path must not be empty")
		}
		return router.Match{Path: router.PathMatch{Type: router.PathExact, Value: value}}, nil
	case networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific:
		if value == "" {
			value = "/"
		}
		return router.Match{Path: router.PathMatch{Type: router.PathPrefix, Value: value}}, nil
	}
	return router.Match{}, fmt.Errorf("pathType %q: not supported", pathType)
}

// ingressBackend resolves an Ingress backend: a Service of the Ingress's
// namespace, by port number or port name.
func (t *translator) ingressBackend(namespace string, b *networkingv1.IngressBackend) (router.BackendRef, error) {
	if b.Service == nil {
		return router.BackendRef{}, fmt.Errorf("resource: only Service backends are supported")
	}
	key := types.NamespacedName{Namespace: namespace, Name: b.Service.Name}
	svc := t.services.last(key)
	t.dependOnService(key)
	if svc == nil {
		return router.BackendRef{}, fmt.Errorf("service %s: %w", b.Service.Name, errServiceNotFound)
	}
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
		if b.Service.Port.Name != "" {
			return p.Name == b.Service.Port.Name
		}
		return p.Port == b.Service.Port.Number
	})
	if i < 0 {
		return router.BackendRef{}, fmt.Errorf("service %s: no port %s", b.Service.Name, ingressPortString(b.Service.Port))
	}
	ref, err := t.servicePort(svc, &svc.Spec.Ports[i], false)
	if err != nil {
		return router.BackendRef{}, err
	}
	return ref, nil
}

func ingressPortString(p networkingv1.ServiceBackendPort) string {
	if p.Name != "" {
		return fmt.Sprintf("%q", p.Name)
	}
	return fmt.Sprint(p.Number)
}

// ingressCerts reads the Secrets of spec.tls. An entry without a
// secretName is served with whatever certificate the listener has.
func (t *translator) ingressCerts(ing *networkingv1.Ingress) ([]Cert, []string) {
	var certs []Cert
	var problems []string
	for i, tls := range ing.Spec.TLS {
		if tls.SecretName == "" {
			continue
		}
		cert, err := t.secretCert(ing.Namespace, tls.SecretName)
		if err != nil {
			problems = append(problems, fmt.Sprintf("spec.tls[%d].secretName: %v", i, err))
			continue
		}
		for _, h := range tls.Hosts {
			cert.Hostnames = append(cert.Hostnames, strings.ToLower(h))
		}
		certs = append(certs, cert)
	}
	return certs, problems
}
