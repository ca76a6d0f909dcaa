package watch

// ingress-nginx's mirror, server-alias and the annotations that shape its
// redirects to HTTPS.
//
// ingress-nginx mirrors to a URL; hostgate mirrors to a backend, so the
// URL must name a Service of the cluster by its DNS name, as auth-url's
// does (nginxURLService). server-alias adds hostnames to the Ingress's
// first host, each one no Ingress serves as its host.

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/hostgate/hostgate/router"
)

// nginxRedirects are what the annotations of this file say.
type nginxRedirects struct {
	// mirrorURL is mirror-target's URL and mirrorPath the path the copies
	// are sent to ("" keeps the request's: $request_uri); mirror is the
	// filter once the URL's Service is resolved (resolveNginxMirror).
	mirrorURL  *url.URL
	mirrorPath string
	mirrorHost string
	// mirrorNoBody is mirror-request-body: off.
	mirrorNoBody bool
	mirror       *router.Mirror
	// aliases are server-alias's hostnames, sorted.
	aliases []string
	// noRedirectPort (use-port-in-redirects false) leaves the HTTPS
	// listener's port out of the redirect to HTTPS; trimSlash
	// (preserve-trailing-slash false) drops a trailing slash from it.
	noRedirectPort, trimSlash bool
}

// nginxRequestURI ends a mirror-target that keeps the request's path and
// query: nginx's $request_uri.
const nginxRequestURI = "$request_uri"

var nginxRedirectAnnotations = map[string]nginxParse{
	"mirror-target": func(v string, s *nginxSettings) error {
		raw, keepPath := strings.CutSuffix(v, nginxRequestURI)
		u, err := url.Parse(raw)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return fmt.Errorf("must be an http or https URL")
		case strings.Contains(raw, "$"):
			return fmt.Errorf("only %s, at the end, is expanded by hostgate", nginxRequestURI)
		case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			return fmt.Errorf("must not have a query, a fragment or user information")
		case keepPath && u.Path != "":
			return fmt.Errorf("%s must follow the host and port", nginxRequestURI)
		}
		if err := checkPath(u.EscapedPath()); err != nil {
			return err
		}
		s.redirects.mirrorURL, s.redirects.mirrorPath = u, u.Path
		return nil
	},
	"mirror-host": func(v string, s *nginxSettings) error {
		if err := checkHostname(v); err != nil {
			return err
		}
		s.redirects.mirrorHost = strings.ToLower(v)
		return nil
	},
	"mirror-request-body": func(v string, s *nginxSettings) error {
		s.redirects.mirrorNoBody = v == "off"
		return checkOnOff(v)
	},
	"server-alias": func(v string, s *nginxSettings) error {
		aliases, err := parseServerAliases(v)
		s.redirects.aliases = aliases
		return err
	},
	"use-port-in-redirects": func(v string, s *nginxSettings) error {
		keep, err := parseNginxBool(v)
		s.redirects.noRedirectPort = err == nil && !keep
		return err
	},
	"preserve-trailing-slash": func(v string, s *nginxSettings) error {
		keep, err := parseNginxBool(v)
		s.redirects.trimSlash = err == nil && !keep
		return err
	},
	// ingress-nginx's redirects all carry a whole URL, which nginx's
	// absolute_redirect leaves alone; so do hostgate's.
	"relative-redirects": func(v string, s *nginxSettings) error {
		_, err := parseNginxBool(v)
		return err
	},
}

// parseServerAliases reads server-alias: hostnames, or wildcards of one
// label, separated by commas.
func parseServerAliases(v string) ([]string, error) {
	var aliases []string
	for _, alias := range strings.Split(v, ",") {
		alias = strings.ToLower(strings.TrimSpace(alias))
		if alias == "" {
			continue
		}
		if checkHostname(strings.TrimPrefix(alias, "*.")) != nil {
			return nil, fmt.Errorf("%q: not a hostname (nginx regular expressions are not supported)", alias)
		}
		aliases = append(aliases, alias)
	}
	slices.Sort(aliases)
	return slices.Compact(aliases), nil
}

// settleMirror says what of the mirror annotations has no effect.
func (s *nginxSettings) settleMirror(outcomes []AnnotationOutcome) {
	ignore := func(name, reason string) {
		if o := nginxOutcome(outcomes, name); o != nil && o.Outcome == Honoured {
			o.Outcome, o.Reason = Ignored, reason
		}
	}
	if s.redirects.mirrorURL == nil {
		ignore("mirror-host", "without mirror-target")
		ignore("mirror-request-body", "without mirror-target")
		return
	}
	if _, err := nginxServiceKey(s.redirects.mirrorURL); err != nil {
		s.redirects.mirrorURL = nil
		ignore("mirror-target", err.Error()+"; nothing is mirrored")
		ignore("mirror-host", "without a mirror-target that hostgate serves")
		ignore("mirror-request-body", "without a mirror-target that hostgate serves")
	}
}

// resolveNginxMirror finds the Service that mirror-target names.
func (t *translator) resolveNginxMirror(s *nginxSettings, outcomes []AnnotationOutcome) {
	u := s.redirects.mirrorURL
	if u == nil {
		return
	}
	ref, err := t.nginxURLService(u)
	switch {
	case err != nil:
		setOutcome(outcomes, "mirror-target", Invalid, err.Error()+"; nothing is mirrored")
	default:
		// ingress-nginx sends the copies with the target's host unless
		// mirror-host says otherwise.
		host := s.redirects.mirrorHost
		if host == "" {
			host = strings.ToLower(u.Hostname())
		}
		s.redirects.mirror = &router.Mirror{Backend: ref, Hostname: host, Path: s.redirects.mirrorPath, NoBody: s.redirects.mirrorNoBody}
	}
}

// mirrorFilters are the filters of mirror-target on every path.
func (s *nginxSettings) mirrorFilters() []router.Filter {
	if s.redirects.mirror == nil {
		return nil
	}
	return []router.Filter{{Type: router.FilterRequestMirror, Mirror: s.redirects.mirror}}
}

// addAliases adds server-alias's hostnames to the route of the Ingress's
// first host. ingress-nginx gives them to every server of the Ingress,
// where the first to claim a name keeps it; an alias that an Ingress
// serves as its host stays that host's.
func (s *nginxSettings) addAliases(routes []router.Route, hosts nginxHosts, outcomes []AnnotationOutcome) {
	if len(s.redirects.aliases) == 0 {
		return
	}
	i := slices.IndexFunc(routes, func(r router.Route) bool { return len(r.Hostnames) > 0 })
	if i < 0 {
		setOutcome(outcomes, "server-alias", Ignored, "the Ingress has no rule with a host")
		return
	}
	routes[i].Hostnames = slices.Concat(routes[i].Hostnames, hosts.freeAliases(s.redirects.aliases, outcomes))
}

// freeAliases are the aliases no Ingress serves as its host; outcomes
// say which are left to their Ingress.
func (h *nginxHosts) freeAliases(aliases []string, outcomes []AnnotationOutcome) []string {
	var free, taken []string
	for _, alias := range aliases {
		if h.facts[alias].served {
			taken = append(taken, alias)
		} else {
			free = append(free, alias)
		}
	}
	if len(taken) == 0 {
		return free
	}
	reason := fmt.Sprintf("an Ingress serves %s as its host", strings.Join(taken, ", "))
	if len(free) == 0 {
		setOutcome(outcomes, "server-alias", Ignored, reason)
	} else {
		// The others are served: the annotation keeps its outcome.
		nginxOutcome(outcomes, "server-alias").Reason = reason
	}
	return free
}

// aliasContext appends to b what of h the aliases of ing depend on.
func (h *nginxHosts) aliasContext(b []byte, ing *networkingv1.Ingress) []byte {
	v, ok := ing.Annotations[NginxAnnotationPrefix+"server-alias"]
	if !ok {
		return b
	}
	aliases, _ := parseServerAliases(v)
	for _, alias := range aliases {
		b = append(b, '0'+btoi(h.facts[alias].served))
	}
	return b
}
