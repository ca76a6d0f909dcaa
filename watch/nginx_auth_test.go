package watch

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostgate/hostgate/router"
)

// TestNginxAuthCacheValues reads auth-cache-duration and auth-cache-key
// values as ingress-nginx (and nginx's proxy_cache_valid) takes them, and
// refuses the others.
func TestNginxAuthCacheValues(t *testing.T) {
	ttl := func(d time.Duration, codes ...int) router.AuthCacheTTL {
		return router.AuthCacheTTL{Codes: codes, TTL: d}
	}
	checkValues(t, "auth-cache-duration", parseAuthCacheDurations, map[string][]router.AuthCacheTTL{
		"200 202 401 5m":       {ttl(5*time.Minute, 200, 202, 401)},
		"5m":                   {ttl(5*time.Minute, 200, 301, 302)},
		"any 1h":               {ttl(time.Hour)},
		"200 1h 30m":           {ttl(90*time.Minute, 200)},
		"200 202 10m, 401 30s": {ttl(10*time.Minute, 200, 202), ttl(30*time.Second, 401)},
		" 200 1d ,, 404 500ms": {ttl(24*time.Hour, 200), ttl(500*time.Millisecond, 404)},
		"":                     nil,
		"200":                  nil,
		"5m 200":               nil,
		"abc 5m":               nil,
		"2000 5m":              nil,
		"099 5m":               nil,
		"200 2y":               nil,
		"200 5x":               nil,
		"200 999999999y":       nil,
		"200 52w 2d":           nil,
	})
	authorization := router.HashPart{Source: router.HashHeader, Name: "Authorization"}
	checkValues(t, "auth-cache-key", parseAuthCacheKey, map[string][]router.HashPart{
		"$remote_user$http_authorization": {authorization},
		"${remote_user}":                  {authorization},
		"$cookie_session-$host":           {{Source: router.HashCookie, Name: "session"}, {Source: router.HashText, Name: "-"}, {Source: router.HashHost}},
		"$remote_username":                nil,
		"$request_body":                   nil,
		"a b":                             nil,
		"$http_x;":                        nil,
		"":                                nil,
	})
}

// checkValues reads each value of cases with parse: a nil want is an
// error, any other the list read.
func checkValues[T any](t *testing.T, annotation string, parse func(string) ([]T, error), cases map[string][]T) {
	t.Helper()
	for v, want := range cases {
		got, err := parse(v)
		switch {
		case want == nil && err == nil:
			t.Errorf("%s %q: read as %v, want an error", annotation, v, got)
		case want != nil && (err != nil || !reflect.DeepEqual(got, want)):
			t.Errorf("%s %q: %v, %v; want %v", annotation, v, got, err, want)
		}
	}
}

// TestNginxAuthCacheOutcomes: the cache needs auth-url and a key, each
// path gets a cache of its own under the Ingress's identity, and a bad
// duration keeps none (it denies the filter: TestNginxAuthFailsClosed);
// auth-always-set-cookie needs auth-url too.
func TestNginxAuthOutcomes(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		name        string
		want        Outcome
		cache       bool
	}{
		{map[string]string{"auth-url": "http://auth.sec.svc/check", "auth-cache-key": "$http_authorization"}, "auth-cache-key", Honoured, true},
		{map[string]string{"auth-url": "http://auth.sec.svc/check", "auth-cache-key": "$http_authorization", "auth-cache-duration": "200 1m"}, "auth-cache-duration", Honoured, true},
		{map[string]string{"auth-url": "http://auth.sec.svc/check", "auth-cache-key": "$http_authorization", "auth-cache-duration": "1m 200"}, "auth-cache-duration", Invalid, false},
		{map[string]string{"auth-url": "http://auth.sec.svc/check", "auth-cache-duration": "200 1m"}, "auth-cache-duration", Ignored, false},
		{map[string]string{"auth-url": "http://auth.sec.svc/check", "auth-cache-key": "$request_body"}, "auth-cache-key", Invalid, false},
		{map[string]string{"auth-cache-key": "$http_authorization"}, "auth-cache-key", Ignored, false},
		{map[string]string{"auth-url": "http://auth.sec.svc/check", "auth-always-set-cookie": "true"}, "auth-always-set-cookie", Honoured, false},
		{map[string]string{"auth-url": "http://auth.sec.svc/check", "auth-always-set-cookie": "yes"}, "auth-always-set-cookie", Invalid, false},
		{map[string]string{"auth-always-set-cookie": "true"}, "auth-always-set-cookie", Ignored, false},
	} {
		s, outcomes := parseNginxAnnotations(nginxTestIngress(tc.annotations))
		o := nginxOutcome(outcomes, tc.name)
		if o == nil || o.Outcome != tc.want || tc.want != Honoured && o.Reason == "" {
			t.Errorf("%v: %s is %v, want %s with a reason unless honoured", tc.annotations, tc.name, o, tc.want)
		}
		if got := s.auth != nil && s.auth.filter.Cache != nil; got != tc.cache {
			t.Errorf("%v: cache %t, want %t", tc.annotations, got, tc.cache)
		}
		if always := s.auth != nil && s.auth.filter.AlwaysSetCookie; always != (tc.name == "auth-always-set-cookie" && tc.want == Honoured) {
			t.Errorf("%v: AlwaysSetCookie %t", tc.annotations, always)
		}
		if !tc.cache {
			continue
		}
		a, b := s.pathFilters("/a"), s.pathFilters("/b")
		ca, cb := a[0].ExternalAuth.Cache, b[0].ExternalAuth.Cache
		if ca.ID != "Ingress default/web auth-cache /a" || cb.ID != "Ingress default/web auth-cache /b" {
			t.Errorf("%v: cache IDs %q and %q, want one per path of the Ingress", tc.annotations, ca.ID, cb.ID)
		}
	}
}

// nginxTestIngress is Ingress default/web with the ingress-nginx
// annotations given without their prefix.
func nginxTestIngress(annotations map[string]string) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Annotations: map[string]string{}}}
	for k, v := range annotations {
		ing.Annotations[NginxAnnotationPrefix+k] = v
	}
	return ing
}

// FuzzNginxValueParsers: auth-cache-duration, auth-cache-key,
// proxy-ssl-ciphers and proxy-ssl-protocols either refuse a value or read
// it into what the router accepts.
func FuzzNginxValueParsers(f *testing.F) {
	for _, seed := range []string{"200 202 401 5m", "any 1h 30m, 404 1s", "$remote_user$http_authorization", "HIGH:!aNULL:!MD5", "TLSv1.2 TLSv1.3", "200 999999999y"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if ttls, err := parseAuthCacheDurations(v); err == nil {
			c := &router.AuthCache{ID: "fuzz", TTLs: ttls}
			if err := router.ValidateExternalAuth(&router.ExternalAuth{Backend: router.BackendRef{Name: "a", Weight: 1}, Style: router.AuthNginx, Cache: c}); err != nil {
				t.Fatalf("auth-cache-duration %q read as %v, which the router refuses: %v", v, ttls, err)
			}
		}
		if key, err := parseAuthCacheKey(v); err == nil && len(key) == 0 {
			t.Fatalf("auth-cache-key %q read as no key", v)
		}
		suites, err := parseCipherSuites(v)
		lo, hi, perr := parseTLSProtocols(v)
		tlsConfig := &router.BackendTLS{SkipVerify: true, CipherSuites: suites.ids}
		if perr == nil {
			tlsConfig.MinVersion, tlsConfig.MaxVersion = lo, hi
		}
		if err == nil || perr == nil {
			r := router.Route{ID: router.RouteID{Kind: router.KindIngress, Namespace: "default", Name: "fuzz"}, Rules: []router.Rule{{Backends: []router.BackendRef{{Name: "a", Weight: 1, Protocol: "https", TLS: tlsConfig}}}}}
			if err := router.Validate(&r); err != nil {
				t.Fatalf("%q read as %+v, which the router refuses: %v", v, tlsConfig, err)
			}
		}
	})
}

// nginxAuthTestObjects are an Ingress of two paths with annotations, its
// Service and the Service of an authorization service.
func nginxAuthTestObjects(annotations map[string]string) *objects {
	ing := nginxTestIngress(annotations)
	ing.Spec = networkingv1.IngressSpec{
		IngressClassName: new(DefaultIngressClass),
		Rules: []networkingv1.IngressRule{{Host: "a.example", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{
				{Path: "/", Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
				{Path: "/api", Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
			},
		}}}},
	}
	return &objects{services: []*service{
		{Namespace: "default", Name: "web", Ports: []corev1.ServicePort{{Port: 80}}},
		{Namespace: "auth", Name: "oauth2-proxy", Ports: []corev1.ServicePort{{Port: 80}}},
	}, ingresses: []*networkingv1.Ingress{ing}}
}

// TestNginxEmptyAuthURL: an empty auth-url, which charts render for one
// left unset, is read as not set, as ingress-nginx reads it: the paths
// are served without asking anyone, rather than answering 500, and the
// report says the group was ignored.
func TestNginxEmptyAuthURL(t *testing.T) {
	for _, empty := range []string{"", " "} {
		snap, reports := translate(nginxAuthTestObjects(map[string]string{"auth-url": empty, "auth-method": "POST", "auth-signin": ""}), goldenOptions)
		paths := 0
		for _, l := range snap.Listeners {
			for _, r := range l.Routes {
				for _, rule := range r.Rules {
					paths++
					if slices.ContainsFunc(rule.Filters, func(f router.Filter) bool { return f.ExternalAuth != nil }) {
						t.Errorf("auth-url %q: a path asks an authorization service: %+v", empty, rule.Filters)
					}
				}
			}
		}
		if paths == 0 {
			t.Errorf("auth-url %q: no path served", empty)
		}
		if len(reports.Ingresses) != 1 {
			t.Fatalf("auth-url %q: reports %+v", empty, reports.Ingresses)
		}
		for _, o := range reports.Ingresses[0].Annotations {
			if o.Outcome != Ignored {
				t.Errorf("auth-url %q: %v; want the group ignored", empty, o)
			}
		}
	}
}

// TestNginxAuthFailsClosed: with an auth-url the cluster serves, an
// invalid value of any annotation that shapes its request denies every
// path of the Ingress (the filter's backend is invalid: 500, and no cache
// answers in its place) instead of asking the service as the annotation
// does not say, and the report names the annotation and why; as
// ingress-nginx denies the location. Valid values ask as written.
func TestNginxAuthFailsClosed(t *testing.T) {
	const authURL = "http://oauth2-proxy.auth.svc/oauth2/auth"
	for _, tc := range []struct {
		annotations map[string]string
		// invalid is the annotation reported invalid, "" for none: the
		// filter then asks the service.
		invalid string
		method  string
	}{
		{map[string]string{"auth-method": "POST"}, "", "POST"},
		{map[string]string{"auth-method": "FOO", "auth-cache-key": "$http_authorization"}, "auth-method", ""},
		{map[string]string{"auth-method": "get"}, "auth-method", ""},
		{map[string]string{"auth-signin": "https://login.example.com/?next=$arg_next"}, "auth-signin", ""},
		{map[string]string{"auth-signin": "https://login.example.com/", "auth-signin-redirect-param": "a b"}, "auth-signin-redirect-param", ""},
		{map[string]string{"auth-signin-redirect-param": "next"}, "", "GET"},
		// Empty values, which charts render for what is left unset,
		// are read as not set, as ingress-nginx reads them.
		{map[string]string{"auth-method": "", "auth-signin": " ", "auth-cache-duration": ""}, "", "GET"},
		{map[string]string{"auth-response-headers": "X-User, X User"}, "auth-response-headers", ""},
		{map[string]string{"auth-request-redirect": "$request_uri"}, "auth-request-redirect", ""},
		{map[string]string{"auth-cache-key": "$request_body"}, "auth-cache-key", ""},
		{map[string]string{"auth-cache-key": "$http_authorization", "auth-cache-duration": "5m 200"}, "auth-cache-duration", ""},
		{map[string]string{"auth-cache-duration": "forever"}, "auth-cache-duration", ""},
		{map[string]string{"auth-always-set-cookie": "always"}, "auth-always-set-cookie", ""},
		{map[string]string{"auth-proxy-set-headers": "a/b/c"}, "auth-proxy-set-headers", ""},
		{map[string]string{"auth-proxy-set-headers": "no-such-configmap"}, "auth-proxy-set-headers", ""},
		{map[string]string{"auth-url": "http://oauth2-proxy.auth.svc:8080/oauth2/auth"}, "auth-url", ""},
	} {
		annotations := map[string]string{"auth-url": authURL}
		maps.Copy(annotations, tc.annotations)
		snap, reports := translate(nginxAuthTestObjects(annotations), goldenOptions)

		paths := 0
		for _, l := range snap.Listeners {
			for _, r := range l.Routes {
				for _, rule := range r.Rules {
					paths++
					i := slices.IndexFunc(rule.Filters, func(f router.Filter) bool { return f.ExternalAuth != nil })
					if i < 0 {
						t.Errorf("%v: a path without its ExternalAuth filter: %+v", tc.annotations, rule.Filters)
						continue
					}
					a := rule.Filters[i].ExternalAuth
					switch {
					case tc.invalid != "" && (!a.Backend.Invalid || a.Cache != nil):
						t.Errorf("%v: the path asks %+v (cache %v); want it denied, with no cache", tc.annotations, a.Backend, a.Cache)
					case tc.invalid == "" && (a.Backend.Invalid || a.Backend.Name == "" || a.Method != tc.method):
						t.Errorf("%v: the path asks %+v with %s; want oauth2-proxy with %s", tc.annotations, a.Backend, a.Method, tc.method)
					}
				}
			}
		}
		if paths == 0 {
			t.Errorf("%v: no path served", tc.annotations)
		}
		if len(reports.Ingresses) != 1 {
			t.Fatalf("%v: reports %+v", tc.annotations, reports.Ingresses)
		}
		report := reports.Ingresses[0]
		for _, o := range report.Annotations {
			name := strings.TrimPrefix(o.Annotation, NginxAnnotationPrefix)
			switch {
			case name == tc.invalid && (o.Outcome != Invalid || !strings.HasSuffix(o.Reason, "; the Ingress's paths answer 500")):
				t.Errorf("%v: %v; want it invalid, saying the paths answer 500", tc.annotations, o)
			case name != tc.invalid && o.Outcome == Invalid:
				t.Errorf("%v: %v; want only %q invalid", tc.annotations, o, tc.invalid)
			}
		}
		if tc.invalid != "" && !slices.ContainsFunc(reports.Problems(), func(p string) bool {
			return strings.HasPrefix(p, "Ingress default/web: annotation "+NginxAnnotationPrefix+tc.invalid+"=") && strings.Contains(p, "paths answer 500")
		}) {
			t.Errorf("%v: problems %q name neither the Ingress nor %s", tc.annotations, reports.Problems(), tc.invalid)
		}
	}
}
