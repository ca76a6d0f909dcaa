package watch

// The check a user runs before moving Ingresses from ingress-nginx: for
// each Ingress of the classes to take over, what hostgate would honour,
// ignore or refuse of its annotations, and which of its paths it could
// not serve. It uses the very functions translation does.

import (
	"fmt"
	"io"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// IngressCheck is what hostgate would make of one Ingress.
type IngressCheck struct {
	// Ingress is "namespace/name".
	Ingress string `json:"ingress"`
	// Class is the Ingress's class, "" for none.
	Class       string              `json:"class"`
	Annotations []AnnotationOutcome `json:"annotations,omitempty"`
	// Paths are the paths that would not be served, and why.
	Paths []string `json:"paths,omitempty"`
}

// Lossless reports whether hostgate would serve the Ingress as
// ingress-nginx does: every annotation honoured, every path served.
func (c *IngressCheck) Lossless() bool {
	return len(c.Paths) == 0 && !slices.ContainsFunc(c.Annotations, func(o AnnotationOutcome) bool { return o.Outcome != Honoured })
}

// ReadIngresses reads the Ingresses of a YAML stream: `kubectl get
// ingress -A -o yaml` (a List) or manifests, other kinds skipped.
func ReadIngresses(name string, r io.Reader) ([]*networkingv1.Ingress, []error) {
	objs := &objects{}
	errs := decodeYAML(name, r, objs)
	return objs.ingresses, errs
}

// CheckIngresses checks the Ingresses whose class (spec.ingressClassName
// or the legacy annotation) is one of classes, and those without a class,
// which ingress-nginx serves when its class is the default, as hostgate
// would serve them with --enable-ssl-passthrough or without.
func CheckIngresses(ingresses []*networkingv1.Ingress, classes []string, sslPassthrough bool) []IngressCheck {
	checked := func(ing *networkingv1.Ingress) bool {
		class := ingressClass(ing)
		return class == "" || slices.Contains(classes, class)
	}
	hosts := collectNginxHosts(ingresses, checked)
	var out []IngressCheck
	for _, ing := range ingresses {
		if !checked(ing) {
			continue
		}
		nginx, outcomes := parseNginxAnnotations(ing)
		c := IngressCheck{Ingress: ing.Namespace + "/" + ing.Name, Class: ingressClass(ing), Annotations: outcomes}
		hosts.freeAliases(nginx.redirects.aliases, outcomes)
		if nginx.sslPassthrough && !sslPassthrough {
			setOutcome(outcomes, "ssl-passthrough", Ignored, passthroughIgnored)
		}
		for i, rule := range ing.Spec.Rules {
			if nginx.fromToWWW && rule.Host != "" {
				hosts.wwwTaken(strings.ToLower(rule.Host), outcomes)
			}
			if rule.HTTP == nil {
				continue
			}
			if nginx.sslPassthrough && sslPassthrough {
				// Served over HTTPS as before, not passed through.
				if _, problem := passthroughPath(i, rule); problem != "" {
					c.Paths = append(c.Paths, problem)
				}
			}
			for j, p := range rule.HTTP.Paths {
				if _, err := ingressPath(p, hosts.facts[strings.ToLower(rule.Host)].regex); err != nil {
					c.Paths = append(c.Paths, fmt.Sprintf("spec.rules[%d].http.paths[%d]: %v", i, j, err))
				}
				if problem := hosts.canaryProblem(ing, rule.Host, p); problem != "" && isNginxCanary(ing) {
					c.Paths = append(c.Paths, fmt.Sprintf("spec.rules[%d].http.paths[%d]: %s", i, j, problem))
				}
			}
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b IngressCheck) int { return strings.Compare(a.Ingress, b.Ingress) })
	return out
}

// ingressClass is the class ing names, "" for none.
func ingressClass(ing *networkingv1.Ingress) string {
	if ing.Spec.IngressClassName != nil {
		return *ing.Spec.IngressClassName
	}
	return ing.Annotations[annotationIngressClass]
}
