package watch

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

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

// addPassthrough adds routes, TLS passthrough routes of an Ingress, to s,
// the Ingress HTTPS socket, as the routes of a TLS listener of their host
// there: the ClientHello's server name chooses them over the HTTPS
// listener without hostname (proxy/l4's Divert). A host that an HTTPS
// listener of that hostname (a Gateway's) serves on the socket stays
// its, and is reported.
func (s *socket) addPassthrough(routes []router.Route) (problems []string) {
	for _, r := range routes {
		if p, ok := s.protocols[r.Listener]; ok && p != ProtocolTLS {
			problems = append(problems, fmt.Sprintf("ssl-passthrough for host %s: %s serves it with protocol %s", r.Listener, socketName(s.address, s.port), p))
			continue
		}
		s.protocols[r.Listener] = ProtocolTLS
		s.add(r)
	}
	return problems
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

// ourIngress reports whether ing belongs to one of our classes: by
// spec.ingressClassName (or the legacy annotation) naming one of
// --ingress-class or an IngressClass of our controller, or, without a
// class, by an IngressClass of our controller marked default.
func (t *translator) ourIngress(ing *networkingv1.Ingress) bool {
	name := ingressClass(ing)
	if name == "" {
		return slices.ContainsFunc(t.objs.ingressClasses, func(c *networkingv1.IngressClass) bool {
			return c.Spec.Controller == IngressController && c.Annotations[annotationDefaultClass] == "true"
		})
	}
	if slices.Contains(t.opts.IngressClasses, name) {
		return true
	}
	return slices.ContainsFunc(t.objs.ingressClasses, func(c *networkingv1.IngressClass) bool {
		return c.Name == name && c.Spec.Controller == IngressController
	})
}

func (t *translator) ingresses() {
	sockets := t.ingressSockets()
	if t.splice != nil && t.splice.ingresses != nil {
		t.spliceIngresses(sockets)
	} else {
		t.translateIngresses(sockets)
	}
	if def := t.ingressDefaultCert(); def != nil {
		for _, s := range sockets {
			if s.protocol == ProtocolHTTPS && !slices.ContainsFunc(s.certs, func(c Cert) bool { return len(c.Hostnames) == 0 }) {
				s.certs = append(s.certs, *def)
			}
		}
	}
}

// translateIngresses translates every Ingress of ours onto sockets and,
// with a memo, records what the next translation needs to splice
// Ingress changes (ingressState), unless something of them keeps it from
// splicing.
func (t *translator) translateIngresses(sockets []*socket) {
	var st *ingressState
	spliceable := t.next != nil
	if spliceable {
		st = newIngressState(t.prev.ingresses, len(t.objs.ingresses))
	}
	hosts := t.nginxHosts(t.objs.ingresses)
	loadBalancer := t.ingressStatus
	for _, ing := range t.objs.ingresses {
		if !t.ourIngress(ing) {
			continue
		}
		if isNginxCanary(ing) {
			// Its report reads the lookups of other Ingresses' paths,
			// and its backends register endpoint sets unmemoized.
			spliceable = false
			report := t.canaryReport(ing, hosts)
			report.LoadBalancer = loadBalancer
			t.reports.Ingresses = append(t.reports.Ingresses, report)
			continue
		}
		report, certs, splices := t.ingress(ing, hosts, sockets, st, func(s *socket, r router.Route) { s.add(r) })
		spliceable = spliceable && splices
		report.LoadBalancer = loadBalancer
		for _, s := range sockets {
			if s.protocol == ProtocolHTTPS {
				s.certs = append(s.certs, certs...)
			}
		}
		if st != nil {
			st.certs = appendCerts(st.certs, ing, certs)
		}
		t.reports.Ingresses = append(t.reports.Ingresses, report)
	}
	for _, s := range sockets {
		if s.protocol == ProtocolHTTPS {
			hosts.clientValidations(s)
		}
	}
	if spliceable {
		slices.Sort(st.hosts)
		st.clientAuth = hosts.clientAuth
		t.next.ingresses = st
	}
}

// ingressLoadBalancer is the status every Ingress gets: the same
// addresses for all, which reports only read. Those of the published
// Service are looked up as a dependency of the whole translation
// (t.early), so that a change of them is never spliced past.
func (t *translator) ingressLoadBalancer() networkingv1.IngressLoadBalancerStatus {
	var loadBalancer networkingv1.IngressLoadBalancerStatus
	if key := t.opts.PublishService; key.Name != "" && len(t.opts.StatusAddresses) == 0 {
		svc := t.services.last(key)
		t.dependOnService(key)
		var problem string
		loadBalancer.Ingress, problem = publishedAddresses(svc)
		switch {
		case svc == nil:
			t.reports.IngressAddressesUnknown = true
			t.reports.Read = append(t.reports.Read, fmt.Sprintf("--publish-service %s: no such Service; Ingress status is left as it is", key))
		case problem != "":
			t.reports.Read = append(t.reports.Read, fmt.Sprintf("--publish-service %s: %s; Ingress status lists no address", key, problem))
		}
		return loadBalancer
	}
	for _, a := range t.nodeAddresses {
		loadBalancer.Ingress = append(loadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: a})
	}
	return loadBalancer
}

// publishedAddresses are the addresses of svc that ingress-nginx's
// --publish-service writes to Ingress status, by the Service's type: for
// a load balancer, its IPs (or hostnames, where it has no IP) and then
// the external IPs; for NodePort, the external IPs or else the
// ClusterIP; for ClusterIP, the ClusterIP; for ExternalName, the name.
// problem says why there are none.
func publishedAddresses(svc *service) (addrs []networkingv1.IngressLoadBalancerIngress, problem string) {
	if svc == nil {
		return nil, "no such Service"
	}
	// nil only where the cache was told of no published Service: then it
	// has no address to publish.
	var a serviceAddresses
	if svc.Addresses != nil {
		a = *svc.Addresses
	}
	ips := func(list ...string) {
		for _, ip := range list {
			if ip != "" && ip != corev1.ClusterIPNone {
				addrs = append(addrs, networkingv1.IngressLoadBalancerIngress{IP: ip})
			}
		}
	}
	switch svc.Type {
	case corev1.ServiceTypeLoadBalancer:
		for _, lb := range a.LoadBalancer {
			if lb.IP != "" {
				ips(lb.IP)
			} else if lb.Hostname != "" {
				addrs = append(addrs, networkingv1.IngressLoadBalancerIngress{Hostname: lb.Hostname})
			}
		}
		ips(a.ExternalIPs...)
		if len(addrs) == 0 {
			return nil, "its load balancer has no address yet"
		}
	case corev1.ServiceTypeNodePort:
		if len(a.ExternalIPs) > 0 {
			ips(a.ExternalIPs...)
		} else {
			ips(a.ClusterIP)
		}
	case corev1.ServiceTypeExternalName:
		addrs = append(addrs, networkingv1.IngressLoadBalancerIngress{Hostname: a.ExternalName})
	default:
		ips(a.ClusterIP)
	}
	if len(addrs) == 0 {
		return nil, "the Service has no address"
	}
	return addrs, ""
}

// ingress translates ing, an Ingress of ours that is no canary, handing
// its routes for each of sockets to add, and returns its report (without
// addresses), the certificates of its spec.tls and whether a later
// change may splice with it in place: not while it yields (its routes
// sort by a creation time that is not its own) or has TLS passthrough
// routes (they change the HTTPS socket's protocols). st, when not nil,
// records it (ingressState).
func (t *translator) ingress(ing *networkingv1.Ingress, hosts nginxHosts, sockets []*socket, st *ingressState, add func(*socket, router.Route)) (IngressReport, []Cert, bool) {
	report := IngressReport{Object: ing}
	// The key holds what the routes read of other Ingresses.
	key := ingressKey{ing, hosts.context(ing), t.yields(ing)}
	translated, e := memoizedEntry(t, key, func() ingressRoutes { return t.ingressRoutes(ing, hosts, key.yields) })
	if t.splice == nil || t.splice.ingresses != nil {
		// A splice that walks every Ingress keeps the last counts.
		t.countPorts(e, 1)
	}
	certs, certProblems := t.ingressCerts(ing)
	for i := range certs {
		certs[i].CipherSuites = translated.sslCiphers
	}
	if st != nil {
		st.add(ing, key)
	}
	// A new slice: the memoized one is shared with other translations.
	report.Problems = slices.Concat(translated.problems, certProblems)
	report.Annotations = translated.annotations
	for _, s := range sockets {
		routes := translated.plain
		if s.protocol == ProtocolHTTPS {
			routes = translated.secure
			report.Problems = append(report.Problems, s.addPassthrough(translated.passthrough)...)
		}
		for _, r := range routes {
			add(s, r)
		}
	}
	return report, certs, !key.yields && len(translated.passthrough) == 0
}

// ingressDefaultCert is the certificate of the Ingress HTTPS listener for
// names no Ingress serves: --ingress-default-certificate's Secret, else
// the self-signed one. A Secret that cannot be used is said among the
// problems, and the self-signed certificate stands in.
func (t *translator) ingressDefaultCert() *Cert {
	if name := t.opts.IngressDefaultSecret; name.Name != "" {
		cert, err := t.secretCert(name.Namespace, name.Name)
		if err == nil {
			cert.Hostnames = nil
			return &cert
		}
		t.reports.Read = append(t.reports.Read, fmt.Sprintf("--ingress-default-certificate: %v", err))
	}
	return t.opts.IngressDefaultCert
}

// ingressKey is what an Ingress's routes are memoized under.
type ingressKey struct {
	ing    *networkingv1.Ingress
	hosts  string
	yields bool
}

// yields reports whether ing is on its way out: being deleted, or in a
// namespace being deleted. Its backends may be gone already, so it gives
// way to every other Ingress of its host and path, however old
// (Kubernetes ingress-controller-conformance).
func (t *translator) yields(ing *networkingv1.Ingress) bool {
	if ing.DeletionTimestamp != nil {
		return true
	}
	ns := t.namespaces.last(ing.Namespace)
	return ns != nil && (ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating)
}

// yieldingCreated stands for the creation time of an Ingress that
// yields: later than any other, so it loses every tie.
var yieldingCreated = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// ingressRoutes are the routes of one Ingress, for plain HTTP and for
// HTTPS, the problems found making them and the outcome of each
// ingress-nginx annotation.
type ingressRoutes struct {
	plain, secure []router.Route
	// passthrough are the TLS passthrough routes of its hosts
	// (ssl-passthrough), for the HTTPS socket.
	passthrough []router.Route
	// sslCiphers go with the certificates of the Ingress's spec.tls.
	sslCiphers  []uint16
	problems    []string
	annotations []AnnotationOutcome
}

// acmeChallengePath is never redirected to HTTPS: certificate authorities
// ask for it over plain HTTP (ingress-nginx's no-tls-redirect-locations).
const acmeChallengePath = "/.well-known/acme-challenge"

// ingressRoutes makes one route per host of ing (rules without a host and
// the defaultBackend share the route without hostnames), each of its rules
// one path, with the filters its ingress-nginx annotations ask for. A
// route that the router would refuse is left out whole.
func (t *translator) ingressRoutes(ing *networkingv1.Ingress, hosts nginxHosts, yields bool) ingressRoutes {
	var problems []string
	nginx, outcomes := parseNginxAnnotations(ing)
	problems = append(problems, t.accessFilters(ing, &nginx.access, outcomes)...)
	t.resolveDefaultBackend(ing, &nginx, outcomes)
	t.resolveNginxAuth(ing.Namespace, &nginx, outcomes)
	t.resolveNginxMirror(&nginx, outcomes)
	nginx.applyProxySSL(hosts.proxySSL[ing], ing.Annotations, outcomes)
	t.customHeaders(ing.Namespace, &nginx, outcomes)
	id := router.RouteID{Kind: router.KindIngress, Namespace: ing.Namespace, Name: ing.Name}
	created := ing.CreationTimestamp.Time
	if yields {
		created = yieldingCreated
	}
	var routes []router.Route
	routeFor := func(host string) *router.Route {
		for i := range routes {
			if len(routes[i].Hostnames) == 0 && host == "" || slices.Equal(routes[i].Hostnames, []string{host}) {
				return &routes[i]
			}
		}
		r := router.Route{ID: id, Created: created}
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
		nginx.applyBackendProtocol(&ref)
		return []router.BackendRef{ref}
	}
	for i, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		host := strings.ToLower(rule.Host)
		r := routeFor(host)
		for j, p := range rule.HTTP.Paths {
			field := fmt.Sprintf("spec.rules[%d].http.paths[%d]", i, j)
			match, err := ingressPath(p, hosts.facts[host].regex)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", field, err))
				continue
			}
			rr := nginx.proxyRule(router.Rule{
				Name:     fmt.Sprintf("rules[%d].paths[%d]", i, j),
				Matches:  []router.Match{match},
				Filters:  nginx.pathFilters(p.Path),
				Backends: backend(field+".backend", &p.Backend),
			}, &p.Backend, &t.opts)
			cookiePath := cmp.Or(p.Path, "/")
			if hosts.facts[host].regex {
				cookiePath = "/"
			}
			nginx.trafficRule(&rr, cookiePath)
			if c := hosts.facts[host].canaries[pathOf(p)]; c != nil {
				t.mergeCanary(&rr, c, &nginx, cookiePath)
			}
			r.Rules = append(r.Rules, rr)
		}
	}
	if db := ing.Spec.DefaultBackend; db != nil {
		r := routeFor("")
		rr := nginx.proxyRule(router.Rule{Name: "defaultBackend", Filters: nginx.pathFilters(""), Backends: backend("spec.defaultBackend", db)}, db, &t.opts)
		nginx.trafficRule(&rr, "/")
		r.Rules = append(r.Rules, rr)
	}
	routes = t.nginxHostRoutes(routes, &nginx, hosts, outcomes)
	nginx.addAliases(routes, hosts, outcomes)
	hosts.checkClientCerts(routes, ing, &nginx, outcomes)
	var out ingressRoutes
	out.passthrough, problems = t.ingressPassthrough(ing, &nginx, outcomes, problems)
	for _, r := range routes {
		if err := router.Validate(&r); err != nil {
			problems = append(problems, err.Error())
			continue
		}
		out.plain = append(out.plain, t.plainIngressRoute(r, &nginx, hosts))
		if len(r.Hostnames) == 1 && slices.ContainsFunc(out.passthrough, func(p router.Route) bool { return p.Listener == r.Hostnames[0] }) {
			// Its TLS connections go to the backend whole: no
			// request of the host is read over HTTPS.
			continue
		}
		out.secure = append(out.secure, t.secureIngressRoute(r))
	}
	for _, o := range outcomes {
		if o.Outcome != Honoured {
			problems = append(problems, o.String())
		}
	}
	out.sslCiphers = sslCiphers(ing, &nginx, outcomes)
	out.problems, out.annotations = problems, outcomes
	return out
}

// ingressPassthrough makes the TLS passthrough routes of ing, an Ingress
// with ssl-passthrough, as ingress-nginx with --enable-ssl-passthrough
// does: each host's TLS connections, chosen by server name on the HTTPS
// address, go unchanged to the backend of the host's "/" path (its other
// paths, and the Ingress's other annotations, cannot apply to bytes that
// are never decrypted). A host without a "/" path, and a rule without a
// host (no server name to choose it by), is reported and served over
// HTTPS as before.
func (t *translator) ingressPassthrough(ing *networkingv1.Ingress, nginx *nginxSettings, outcomes []AnnotationOutcome, problems []string) ([]router.Route, []string) {
	if !nginx.sslPassthrough {
		return nil, problems
	}
	if !t.opts.IngressSSLPassthrough {
		setOutcome(outcomes, "ssl-passthrough", Ignored, passthroughIgnored)
		return nil, problems
	}
	var routes []router.Route
	for i, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		field := fmt.Sprintf("spec.rules[%d]", i)
		host := strings.ToLower(rule.Host)
		j, problem := passthroughPath(i, rule)
		switch {
		case problem != "":
			problems = append(problems, problem)
			continue
		case slices.ContainsFunc(routes, func(r router.Route) bool { return r.Listener == host }):
			continue
		}
		backend := router.BackendRef{Invalid: true, Weight: 1}
		if b := rule.HTTP.Paths[j].Backend.Service; b != nil {
			ref, err := t.ingressServicePort(ing.Namespace, b, forStream)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s.http.paths[%d].backend: %v", field, j, err))
			} else {
				backend = ref
			}
		} else {
			problems = append(problems, fmt.Sprintf("%s.http.paths[%d].backend: ssl-passthrough needs a Service", field, j))
		}
		routes = append(routes, router.Route{
			ID:        router.RouteID{Kind: router.KindIngressPassthrough, Namespace: ing.Namespace, Name: ing.Name},
			Created:   ing.CreationTimestamp.Time,
			Listener:  host,
			Hostnames: []string{host},
			Rules:     []router.Rule{{Name: fmt.Sprintf("rules[%d].paths[%d]", i, j), Backends: []router.BackendRef{backend}}},
		})
	}
	return routes, problems
}

// passthroughPath is the index of the path of rule, the Ingress's i-th,
// whose backend takes its host's connections with ssl-passthrough, or why
// there is none.
func passthroughPath(i int, rule networkingv1.IngressRule) (int, string) {
	host := strings.ToLower(rule.Host)
	j := slices.IndexFunc(rule.HTTP.Paths, func(p networkingv1.HTTPIngressPath) bool { return p.Path == "/" })
	switch {
	case host == "" || strings.HasPrefix(host, "*"):
		return -1, fmt.Sprintf("spec.rules[%d]: ssl-passthrough needs an exact host to choose connections by server name", i)
	case j < 0:
		return -1, fmt.Sprintf("spec.rules[%d]: ssl-passthrough for host %s needs a path \"/\", whose backend takes the connections", i, host)
	}
	return j, ""
}

// passthroughIgnored is why ssl-passthrough is ignored without
// Options.IngressSSLPassthrough.
const passthroughIgnored = "needs --enable-ssl-passthrough, as in ingress-nginx"

// nginxHostRoutes adds to routes what ingress-nginx adds per host: the
// app-root redirect of "/" and the from-to-www redirect host.
func (t *translator) nginxHostRoutes(routes []router.Route, nginx *nginxSettings, hosts nginxHosts, outcomes []AnnotationOutcome) []router.Route {
	n := len(routes)
	for i := range routes[:n] {
		r := &routes[i]
		if nginx.appRoot != "" && nginx.redirect == nil {
			r.Rules = append(r.Rules, router.Rule{
				Name:    "app-root",
				Matches: []router.Match{{Path: router.PathMatch{Type: router.PathExact, Value: "/"}}},
				// ingress-nginx's "return 302 $scheme://$http_host<app-root>":
				// the Host as sent, port and all, and no query.
				Filters: []router.Filter{{Type: router.FilterRequestRedirect, Redirect: &router.Redirect{
					Path: &router.PathModifier{Type: router.ReplaceFullPath, Value: nginx.appRoot}, StatusCode: 302, RequestHost: true, DropQuery: true,
				}}},
			})
		}
		if !nginx.fromToWWW || len(r.Hostnames) == 0 || strings.HasPrefix(r.Hostnames[0], "*") {
			continue
		}
		host := r.Hostnames[0]
		alt := wwwAlternative(host)
		if hosts.wwwTaken(host, outcomes) {
			continue
		}
		routes = append(routes, router.Route{
			ID: r.ID, Created: r.Created, Hostnames: []string{alt},
			Rules: []router.Rule{{Name: "from-to-www-redirect", Filters: []router.Filter{{
				// Without a trailing slash, as ingress-nginx's
				// ngx_srv_redirect.lua sends it.
				Type: router.FilterRequestRedirect, Redirect: &router.Redirect{Hostname: host, StatusCode: 308, TrimTrailingSlash: true},
			}}}},
		})
	}
	return routes
}

// pathFilters are the filters ingress-nginx's annotations put on every
// path: a redirect instead of the backend, or CORS, the access filters,
// external authentication, the mirror and a rewrite of the path and of
// the Host, in the order of nginx's phases: a CORS preflight is answered
// in the rewrite phase, limits come before the access phase, whose checks
// run allow and deny lists, then basic auth, then auth_request; mirror
// runs after them, in the precontent phase; the response rewrites and
// custom-headers edit the answer.
func (s *nginxSettings) pathFilters(path string) []router.Filter {
	if s.redirect != nil {
		return []router.Filter{{Type: router.FilterRequestRedirect, Redirect: s.redirect}}
	}
	var cors, auth []router.Filter
	if s.cors != nil {
		cors = []router.Filter{{Type: router.FilterCORS, CORS: s.cors}}
	}
	if s.auth != nil {
		a := s.auth.filter
		if a.Cache != nil {
			// Each path keeps answers of its own, as nginx's locations
			// do: the service may answer for one path and not another.
			c, cache := *a, *a.Cache
			cache.ID += " " + path
			c.Cache = &cache
			a = &c
		}
		auth = []router.Filter{{Type: router.FilterExternalAuth, ExternalAuth: a}}
	}
	return slices.Concat(cors, s.access.filters, auth, s.mirrorFilters(), s.rewriteFilters(path), s.rewrites.filters(), s.headers.filters())
}

func (s *nginxSettings) rewriteFilters(path string) []router.Filter {
	var filters []router.Filter
	rewrite := &router.Rewrite{Hostname: s.upstreamHost}
	// A rewrite to the path itself is none (ingress-nginx's needsRewrite).
	if s.rewriteTarget != "" && s.rewriteTarget != path {
		rewrite.Path = &router.PathModifier{Type: router.ReplaceRegexCaptures, Value: s.rewriteTarget}
		if s.forwardedPrefix != "" {
			filters = append(filters, router.Filter{Type: router.FilterRequestHeaderModifier, RequestHeaders: &router.HeaderModifier{
				Set: []router.Header{{Name: "X-Forwarded-Prefix", Value: s.forwardedPrefix}},
			}})
		}
	}
	if rewrite.Hostname != "" || rewrite.Path != nil {
		filters = append(filters, router.Filter{Type: router.FilterURLRewrite, Rewrite: rewrite})
	}
	return filters
}

// plainIngressRoute is r as served over plain HTTP: where its host has
// TLS (or the Ingress forces it), every rule redirects to HTTPS with 308,
// as ingress-nginx does, except ACME challenges and rules that redirect
// already.
func (t *translator) plainIngressRoute(r router.Route, nginx *nginxSettings, hosts nginxHosts) router.Route {
	tls := len(r.Hostnames) > 0 && hosts.facts[r.Hostnames[0]].tls
	if t.opts.NoIngressSSLRedirect || !(nginx.forceSSLRedirect || tls && nginx.sslRedirect) {
		return r
	}
	redirect := &router.Redirect{Scheme: "https", StatusCode: 308, TrimTrailingSlash: nginx.redirects.trimSlash}
	if _, port, err := splitHostPort(t.opts.IngressHTTPSAddr); err == nil && port != 443 && !nginx.redirects.noRedirectPort {
		redirect.Port = port
	}
	rules := slices.Clone(r.Rules)
	for i := range rules {
		rule := &rules[i]
		if redirectsAlready(rule) || slices.ContainsFunc(rule.Matches, func(m router.Match) bool {
			return strings.HasPrefix(strings.TrimPrefix(m.Path.Value, nginxRegexOpen), acmeChallengePath)
		}) {
			continue
		}
		rule.Filters = append([]router.Filter{{Type: router.FilterRequestRedirect, Redirect: redirect}}, rule.Filters...)
	}
	r.Rules = rules
	return r
}

func redirectsAlready(rule *router.Rule) bool {
	return slices.ContainsFunc(rule.Filters, func(f router.Filter) bool { return f.Type == router.FilterRequestRedirect })
}

// secureIngressRoute is r as served over HTTPS: with HSTS on every answer
// unless --ingress-hsts turned it off.
func (t *translator) secureIngressRoute(r router.Route) router.Route {
	if t.opts.IngressHSTS == HSTSOff {
		return r
	}
	hsts := router.Filter{Type: router.FilterResponseHeaderModifier, ResponseHeaders: &router.HeaderModifier{
		Set: []router.Header{{Name: "Strict-Transport-Security", Value: t.opts.IngressHSTS}},
	}}
	rules := slices.Clone(r.Rules)
	for i := range rules {
		rules[i].Filters = append(slices.Clip(rules[i].Filters), hsts)
	}
	r.Rules = rules
	return r
}

// A path on a regex host becomes nginxRegexOpen + path + nginxRegexClose:
// case-insensitive, and free to end anywhere.
const (
	nginxRegexOpen  = "(?i:"
	nginxRegexClose = ")(?s:.*)"
)

// ingressPath maps an Ingress path to a router match. ImplementationSpecific
// is served as Prefix, element-wise. On a host ingress-nginx treats as
// regex, every path is a case-insensitive regular expression that must
// match the start of the request path (nginx's location ~* "^path").
func ingressPath(p networkingv1.HTTPIngressPath, regex bool) (router.Match, error) {
	value := p.Path
	if regex {
		if _, err := regexp.Compile("(?i)" + value); err != nil {
			return router.Match{}, fmt.Errorf("path %q: not a regular expression (use-regex or rewrite-target is set for this host): %v", value, err)
		}
		return router.Match{Path: router.PathMatch{Type: router.PathRegularExpression, Value: nginxRegexOpen + value + nginxRegexClose}}, nil
	}
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
	return t.ingressServicePort(namespace, b.Service, forHTTP)
}

// ingressServicePort resolves the Service port b names, for use.
func (t *translator) ingressServicePort(namespace string, b *networkingv1.IngressServiceBackend, use backendUse) (router.BackendRef, error) {
	key := types.NamespacedName{Namespace: namespace, Name: b.Name}
	svc := t.services.last(key)
	t.dependOnService(key)
	if svc == nil {
		return router.BackendRef{}, fmt.Errorf("service %s: %w", b.Name, errServiceNotFound)
	}
	i := slices.IndexFunc(svc.Ports, func(p corev1.ServicePort) bool {
		if b.Port.Name != "" {
			return p.Name == b.Port.Name
		}
		return p.Port == b.Port.Number
	})
	if i < 0 {
		return router.BackendRef{}, fmt.Errorf("service %s: no port %s", b.Name, ingressPortString(b.Port))
	}
	ref, err := t.servicePort(svc, &svc.Ports[i], use)
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

// sslCiphers are the suites ssl-ciphers asks for, which the handshakes of
// ing's hosts offer with its certificates: ingress-nginx sets them in the
// server block of each host the Ingress has TLS for. Without a
// certificate of its own the Ingress's hosts are served with another's,
// whose handshakes it does not decide.
func sslCiphers(ing *networkingv1.Ingress, nginx *nginxSettings, outcomes []AnnotationOutcome) []uint16 {
	o := nginxOutcome(outcomes, "ssl-ciphers")
	if o == nil || o.Outcome != Honoured {
		return nil
	}
	if !slices.ContainsFunc(ing.Spec.TLS, func(tls networkingv1.IngressTLS) bool { return tls.SecretName != "" }) {
		o.Outcome, o.Reason = Ignored, "the Ingress has no spec.tls with a secretName: its hosts' handshakes are those of the certificate that serves them"
		return nil
	}
	o.Reason = nginx.sslCiphers.note
	return nginx.sslCiphers.ids
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
