package watch

// ingress-nginx's custom-headers annotation: response headers from the
// data of a ConfigMap.
//
// ingress-nginx sends only the header names its ConfigMap's
// global-allowed-response-headers lists; hostgate's list is
// --ingress-allowed-response-headers, and the outcome says which keys of
// the ConfigMap were left out. The cluster's cache keeps of ConfigMaps
// only the keys that can be header names (keptConfigMapData).

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/hostgate/hostgate/router"
)

// nginxHeaders are custom-headers' ConfigMap (empty without one) and
// the response headers read from it.
type nginxHeaders struct {
	configMap types.NamespacedName
	response  *router.HeaderModifier
}

// nginxHeaderAnnotations add response headers.
var nginxHeaderAnnotations = map[string]nginxParse{
	"custom-headers": func(v string, s *nginxSettings) error {
		ref, err := parseSecretRef(v)
		if err != nil {
			return fmt.Errorf("must be a ConfigMap's namespace/name or name")
		}
		s.headers.configMap = ref
		return nil
	},
}

// filters set the response headers on every path.
func (h *nginxHeaders) filters() []router.Filter {
	if h.response == nil {
		return nil
	}
	return []router.Filter{{Type: router.FilterResponseHeaderModifier, ResponseHeaders: h.response}}
}

// nginxHeaderName is what ingress-nginx accepts as a custom header's name
// (and a ConfigMap key without '.'); other keys are never headers.
var nginxHeaderName = regexp.MustCompile(`^[a-zA-Z\d\-_]+$`)

// allowsResponseHeader reports whether allowed lists name, in any case.
func allowsResponseHeader(allowed []string, name string) bool {
	return slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(a, name) })
}

// CheckAllowedResponseHeader refuses a name --ingress-allowed-response-
// headers may not list: one that is no header, or one that frames the
// response, which a ConfigMap must not change.
func CheckAllowedResponseHeader(name string) error {
	if !nginxHeaderName.MatchString(name) {
		return fmt.Errorf("%q: not a header name (letters, digits, '-' and '_')", name)
	}
	for _, framing := range []string{"Connection", "Content-Length", "Transfer-Encoding", "Keep-Alive", "Upgrade", "Trailer", "TE"} {
		if strings.EqualFold(name, framing) {
			return fmt.Errorf("%q: frames the response and may not be set", name)
		}
	}
	return nil
}

// customHeaders resolves custom-headers' ConfigMap into the response
// headers of every path of the Ingress in namespace, and says in outcomes
// which of its keys were left out.
func (t *translator) customHeaders(namespace string, s *nginxSettings, outcomes []AnnotationOutcome) {
	ref := s.headers.configMap
	if ref.Name == "" {
		return
	}
	allowed := t.opts.IngressAllowedResponseHeaders
	if ref.Namespace == "" {
		ref.Namespace = namespace
	}
	switch {
	case len(allowed) == 0:
		setOutcome(outcomes, "custom-headers", Refused, "--ingress-allowed-response-headers is empty: no response header may be set (ingress-nginx's global-allowed-response-headers)")
		return
	case ref.Namespace != namespace:
		setOutcome(outcomes, "custom-headers", Invalid, "a ConfigMap of another namespace: refused, as ingress-nginx does")
		return
	}
	t.dependOnConfigMap(ref)
	cm := t.configMaps.last(ref)
	if cm == nil {
		setOutcome(outcomes, "custom-headers", Invalid, fmt.Sprintf("ConfigMap %s: not found", ref))
		return
	}
	var set []router.Header
	var dropped []string
	for _, key := range slices.Sorted(maps.Keys(cm.Data)) {
		switch value := cm.Data[key]; {
		case !nginxHeaderName.MatchString(key):
		case !allowsResponseHeader(allowed, key):
			dropped = append(dropped, key+" (not in --ingress-allowed-response-headers)")
		case checkHeaderValue(value) != nil:
			dropped = append(dropped, key+" (its value has control characters or is longer than 4096)")
		default:
			set = append(set, router.Header{Name: key, Value: value})
		}
	}
	switch {
	case len(set) == 0 && len(dropped) == 0:
		setOutcome(outcomes, "custom-headers", Invalid, fmt.Sprintf("ConfigMap %s: no header", ref))
		return
	case len(set) == 0:
		setOutcome(outcomes, "custom-headers", Invalid, fmt.Sprintf("ConfigMap %s: no header may be sent: %s", ref, strings.Join(dropped, ", ")))
		return
	case len(dropped) > 0:
		setOutcome(outcomes, "custom-headers", Honoured, "left out: "+strings.Join(dropped, ", "))
	}
	s.headers.response = &router.HeaderModifier{Set: set}
}
