package watch

// ingress-nginx's access annotations: who may use an Ingress by address
// (allowlist-source-range, denylist-source-range), by password (auth-type
// basic with an htpasswd Secret) and how much each client address may ask
// (limit-rps, limit-rpm, limit-connections). They become filters at the
// head of every path of the Ingress, in the order of nginx's phases: rate
// limits, then the address lists, then the password; a redirect of the
// Ingress, which nginx answers in an earlier phase, goes without them.
//
// Where ingress-nginx denies a location because its access could not be
// set up (an address list or an auth annotation that does not parse, a
// Secret that is missing or in another namespace), so does hostgate: the
// paths answer 503 rather than serve what was meant to be protected.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hostgate/hostgate/internal/htpasswd"
	"github.com/hostgate/hostgate/router"
)

// defaultBurstMultiplier is ingress-nginx's limit-burst-multiplier.
const defaultBurstMultiplier = 5

// maxLimit bounds the limit annotations' numbers, far above any limit
// that limits, so that a burst cannot overflow.
const maxLimit = 1_000_000

// nginxAccess are the values of an Ingress's access annotations.
type nginxAccess struct {
	allow, deny *router.AddressSet
	// closed says why the Ingress's access could not be set up.
	closed string
	// authType is "basic" when auth-type asks for it; authSecret and
	// authSecretType ("auth-file" or "auth-map") name its users.
	authType, authSecret, authSecretType, authRealm string
	// rps, rpm and connections are the limits, 0 for none.
	rps, rpm, connections, burstMultiplier int
	limitExempt                            *router.AddressSet
	// satisfyAny is satisfy: any, which lets either the address lists or
	// the password through.
	satisfyAny bool
	// filters are what translation made of them, for every path.
	filters []router.Filter
}

// nginxAccessAnnotations limit who reaches the backends and how often.
var nginxAccessAnnotations = map[string]nginxParse{
	"allowlist-source-range": func(v string, s *nginxSettings) error { return s.access.addresses(v, &s.access.allow) },
	"whitelist-source-range": func(v string, s *nginxSettings) error { return s.access.addresses(v, &s.access.allow) },
	"denylist-source-range":  func(v string, s *nginxSettings) error { return s.access.addresses(v, &s.access.deny) },
	"auth-type":              func(v string, s *nginxSettings) error { return s.access.setAuthType(v) },
	"satisfy": func(v string, s *nginxSettings) error {
		if v != "any" && v != "all" {
			return fmt.Errorf("must be any or all")
		}
		s.access.satisfyAny = v == "any"
		return nil
	},
	"auth-secret":            func(v string, s *nginxSettings) error { s.access.authSecret = v; return nil },
	"auth-secret-type":       func(v string, s *nginxSettings) error { return s.access.setAuthSecretType(v) },
	"auth-realm":             func(v string, s *nginxSettings) error { return s.access.setAuthRealm(v) },
	"limit-rps":              func(v string, s *nginxSettings) error { return parseLimit(v, &s.access.rps) },
	"limit-rpm":              func(v string, s *nginxSettings) error { return parseLimit(v, &s.access.rpm) },
	"limit-connections":      func(v string, s *nginxSettings) error { return parseLimit(v, &s.access.connections) },
	"limit-burst-multiplier": func(v string, s *nginxSettings) error { return parseLimit(v, &s.access.burstMultiplier) },
	"limit-allowlist":        func(v string, s *nginxSettings) error { return s.access.exempt(v) },
	"limit-whitelist":        func(v string, s *nginxSettings) error { return s.access.exempt(v) },
}

// addresses reads an address list into dst. One that does not parse
// closes the Ingress, as ingress-nginx denies its locations.
func (a *nginxAccess) addresses(v string, dst **router.AddressSet) error {
	set, err := router.ParseAddressSet(v)
	if err != nil {
		a.close(err.Error())
		return fmt.Errorf("%v; requests are answered 503", err)
	}
	*dst = set
	return nil
}

func (a *nginxAccess) close(reason string) {
	if a.closed == "" {
		a.closed = reason
	}
}

func (a *nginxAccess) setAuthType(v string) error {
	switch v {
	case "basic":
		a.authType = v
		return nil
	case "digest":
		a.close("auth-type digest is not supported")
		return fmt.Errorf("digest authentication is not supported by hostgate; requests are answered 503")
	}
	a.close("auth-type: not basic or digest")
	return fmt.Errorf("must be basic or digest; requests are answered 503")
}

func (a *nginxAccess) setAuthSecretType(v string) error {
	if v != "auth-file" && v != "auth-map" {
		a.close("auth-secret-type: not auth-file or auth-map")
		return fmt.Errorf("must be auth-file or auth-map; requests are answered 503")
	}
	a.authSecretType = v
	return nil
}

func (a *nginxAccess) setAuthRealm(v string) error {
	if len(v) > 256 || strings.ContainsFunc(v, func(r rune) bool { return isControl(r) || r == '"' || r == '\\' }) {
		a.close("auth-realm: not a realm")
		return fmt.Errorf("must be at most 256 characters without control characters, '\"' or '\\'; requests are answered 503")
	}
	a.authRealm = v
	return nil
}

// exempt reads limit-allowlist. One that does not parse exempts no one.
func (a *nginxAccess) exempt(v string) error {
	set, err := router.ParseAddressSet(v)
	if err != nil {
		return fmt.Errorf("%v; no client is exempt", err)
	}
	a.limitExempt = set
	return nil
}

// parseLimit reads a limit annotation's number.
func parseLimit(v string, dst *int) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxLimit {
		return fmt.Errorf("must be a whole number from 0 to %d", maxLimit)
	}
	*dst = n
	return nil
}

// nginxOutcome is the outcome of the annotation short in outcomes, nil
// when the Ingress does not have it.
func nginxOutcome(outcomes []AnnotationOutcome, short string) *AnnotationOutcome {
	i := slices.IndexFunc(outcomes, func(o AnnotationOutcome) bool { return o.Annotation == NginxAnnotationPrefix+short })
	if i < 0 {
		return nil
	}
	return &outcomes[i]
}

// accessFilters makes the filters of ing's access annotations into
// a.filters, and returns the problems found reading its password Secret.
func (t *translator) accessFilters(ing *networkingv1.Ingress, a *nginxAccess, outcomes []AnnotationOutcome) []string {
	auth, problems := t.basicAuth(ing, a, outcomes)
	if a.closed != "" {
		a.filters = []router.Filter{{Type: router.FilterAccess, Access: &router.Access{Closed: a.closed}}}
		return problems
	}
	for _, l := range []struct {
		kind  string
		limit int
		per   time.Duration
	}{{"rps", a.rps, time.Second}, {"rpm", a.rpm, time.Minute}, {"connections", a.connections, 0}} {
		if l.limit == 0 {
			continue
		}
		rl := &router.RateLimit{
			Key:        fmt.Sprintf("Ingress %s/%s %s", ing.Namespace, ing.Name, l.kind),
			Exempt:     a.limitExempt,
			StatusCode: t.opts.IngressLimitStatus,
		}
		if l.per == 0 {
			rl.Concurrent = l.limit
		} else {
			rl.Rate, rl.Per, rl.Burst = l.limit, l.per, l.limit*a.burstMultiplier
		}
		a.filters = append(a.filters, router.Filter{Type: router.FilterRateLimit, RateLimit: rl})
	}
	lists := a.allow != nil || a.deny != nil
	if lists {
		a.filters = append(a.filters, router.Filter{Type: router.FilterAccess, Access: &router.Access{Allow: a.allow, Deny: a.deny, SatisfyAny: a.satisfyAny && auth != nil}})
	}
	if a.satisfyAny && (!lists || auth == nil) {
		// With one way in there is nothing to choose from; auth-url is
		// always asked, whatever satisfy says.
		setOutcome(outcomes, "satisfy", Ignored, "without both an address list and auth-type basic")
	}
	if auth != nil {
		// As ingress-nginx, the backend does not get the password.
		a.filters = append(a.filters,
			router.Filter{Type: router.FilterBasicAuth, BasicAuth: auth},
			router.Filter{Type: router.FilterRequestHeaderModifier, RequestHeaders: &router.HeaderModifier{Remove: []string{"Authorization"}}})
	}
	if o := nginxOutcome(outcomes, "limit-burst-multiplier"); o != nil && o.Outcome == Honoured && a.rps == 0 && a.rpm == 0 {
		o.Outcome, o.Reason = Ignored, "without limit-rps or limit-rpm"
	}
	return problems
}

// basicAuth reads the users of auth-type basic from the Secret auth-secret
// names. Anything that keeps it from being set up closes the Ingress.
func (t *translator) basicAuth(ing *networkingv1.Ingress, a *nginxAccess, outcomes []AnnotationOutcome) (*router.BasicAuth, []string) {
	if a.authType == "" {
		for _, name := range []string{"auth-secret", "auth-secret-type", "auth-realm"} {
			if o := nginxOutcome(outcomes, name); o != nil && o.Outcome == Honoured {
				o.Outcome, o.Reason = Ignored, "without auth-type"
			}
		}
		return nil, nil
	}
	fail := func(reason string) (*router.BasicAuth, []string) {
		a.close("auth-secret: " + reason)
		if o := nginxOutcome(outcomes, "auth-secret"); o != nil {
			o.Outcome, o.Reason = Invalid, reason+"; requests are answered 503"
		} else if o := nginxOutcome(outcomes, "auth-type"); o != nil {
			o.Outcome, o.Reason = Invalid, reason+"; requests are answered 503"
		}
		return nil, nil
	}
	if a.authSecret == "" {
		return fail("auth-type basic needs auth-secret")
	}
	namespace, name, found := strings.Cut(a.authSecret, "/")
	if !found {
		namespace, name = ing.Namespace, a.authSecret
	}
	if namespace != ing.Namespace {
		return fail(fmt.Sprintf("Secret %s: in another namespace than the Ingress, which ingress-nginx refuses too", a.authSecret))
	}
	key := types.NamespacedName{Namespace: namespace, Name: name}
	s := t.secrets.last(key)
	t.dependOnSecret(key)
	if s == nil {
		return fail(fmt.Sprintf("Secret %s: not found", key))
	}
	var entries []htpasswd.Entry
	var problems []string
	if a.authSecretType == "auth-map" {
		entries, problems = authMap(s)
		if len(entries) == 0 {
			// In cluster mode the users' keys never reach the cache
			// (trimObject): say so rather than refuse every password.
			return fail(fmt.Sprintf("Secret %s: no users (from a cluster, hostgate reads only the key %q of Opaque Secrets: use auth-secret-type auth-file)", key, htpasswdKey))
		}
	} else {
		data, ok := s.Data[htpasswdKey]
		if !ok {
			return fail(fmt.Sprintf("Secret %s: no key %q", key, htpasswdKey))
		}
		entries, problems = htpasswd.Parse(data)
	}
	for i, p := range problems {
		problems[i] = fmt.Sprintf("annotation %sauth-secret: Secret %s: %s", NginxAnnotationPrefix, key, p)
	}
	slices.SortFunc(entries, func(x, y htpasswd.Entry) int { return strings.Compare(x.User, y.User) })
	return &router.BasicAuth{Source: "Secret " + key.String(), Realm: a.authRealm, Users: entries}, problems
}

// authMap reads a Secret whose keys are users and values their hashes.
// htpasswdKey is the key of an auth-secret's htpasswd file.
const htpasswdKey = "auth"

func authMap(s *corev1.Secret) ([]htpasswd.Entry, []string) {
	var entries []htpasswd.Entry
	var problems []string
	for user, hash := range s.Data {
		if err := htpasswd.Check(string(hash)); err != nil {
			problems = append(problems, fmt.Sprintf("user %q: %v", user, err))
			continue
		}
		entries = append(entries, htpasswd.Entry{User: user, Hash: string(hash)})
	}
	slices.Sort(problems)
	return entries, problems
}
