package watch

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostgate/hostgate/router"
)

// TestNginxAnnotationValues checks each value ingress-nginx users write,
// good and bad: the outcome, and for good ones the typed value.
func TestNginxAnnotationValues(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        Outcome
		check       func(s nginxSettings) bool
	}{
		{"use-regex", "true", Honoured, func(s nginxSettings) bool { return s.useRegex }},
		{"use-regex", "True", Honoured, func(s nginxSettings) bool { return s.useRegex }},
		{"use-regex", "on", Invalid, nil},
		{"rewrite-target", "/$1", Honoured, func(s nginxSettings) bool { return s.rewriteTarget == "/$1" }},
		{"rewrite-target", "$1", Honoured, func(s nginxSettings) bool { return s.rewriteTarget == "$1" }},
		{"rewrite-target", "api/$2", Honoured, func(s nginxSettings) bool { return s.rewriteTarget == "/api/$2" }},
		{"rewrite-target", "/$request_uri", Invalid, nil},
		{"rewrite-target", "/index.php?q=$1", Honoured, func(s nginxSettings) bool { return s.rewriteTarget == "/index.php?q=$1" }},
		{"rewrite-target", "/x/$1?", Honoured, func(s nginxSettings) bool { return s.rewriteTarget == "/x/$1?" }},
		{"rewrite-target", "/x?a=b#c", Invalid, nil},
		{"rewrite-target", "/x?a=b c", Invalid, nil},
		{"rewrite-target", "/x?a=\x01", Invalid, nil},
		{"rewrite-target", "/x?a=é", Invalid, nil},
		{"rewrite-target", "/x#y", Invalid, nil},
		{"rewrite-target", "/$", Invalid, nil},
		{"app-root", "/app1", Honoured, func(s nginxSettings) bool { return s.appRoot == "/app1" }},
		{"app-root", "app1", Invalid, nil},
		{"app-root", "/a\nb", Invalid, nil},
		{"permanent-redirect", "https://example.com/x?y=1", Honoured, func(s nginxSettings) bool {
			return s.redirect.Location == "https://example.com/x?y=1" && s.redirect.StatusCode == 301
		}},
		{"permanent-redirect", "https://example.com$request_uri", Invalid, nil},
		{"permanent-redirect", "/relative", Invalid, nil},
		{"temporal-redirect", "http://example.com", Honoured, func(s nginxSettings) bool { return s.redirect.StatusCode == 302 }},
		{"x-forwarded-prefix", "/api", Honoured, func(s nginxSettings) bool { return s.forwardedPrefix == "/api" }},
		{"x-forwarded-prefix", "/a\r\nX-Evil: 1", Invalid, nil},
		{"ssl-redirect", "false", Honoured, func(s nginxSettings) bool { return !s.sslRedirect }},
		{"force-ssl-redirect", "true", Honoured, func(s nginxSettings) bool { return s.forceSSLRedirect }},
		{"from-to-www-redirect", "true", Honoured, func(s nginxSettings) bool { return s.fromToWWW }},
		{"server-snippet", "return 200;", Refused, nil},
		{"enable-modsecurity", "true", Refused, nil},
		{"limit-rps", "10", Honoured, func(s nginxSettings) bool { return s.access.rps == 10 }},
		{"limit-rps", "-1", Invalid, nil},
		{"limit-rps", "ten", Invalid, nil},
		{"limit-rpm", "600", Honoured, func(s nginxSettings) bool { return s.access.rpm == 600 }},
		{"limit-connections", "3", Honoured, func(s nginxSettings) bool { return s.access.connections == 3 }},
		{"limit-burst-multiplier", "2", Honoured, func(s nginxSettings) bool { return s.access.burstMultiplier == 2 }},
		{"limit-allowlist", "10.0.0.0/8", Honoured, func(s nginxSettings) bool { return s.access.limitExempt.String() == "10.0.0.0/8" }},
		{"limit-whitelist", "10.0.0.0/8,x", Invalid, func(s nginxSettings) bool { return s.access.limitExempt == nil && s.access.closed == "" }},
		{"allowlist-source-range", "10.0.0.0/8, 192.168.0.1", Honoured, func(s nginxSettings) bool { return s.access.allow.String() == "10.0.0.0/8,192.168.0.1/32" }},
		{"whitelist-source-range", "10.0.0.0/8", Honoured, func(s nginxSettings) bool { return s.access.allow != nil }},
		{"denylist-source-range", "2001:db8::/32", Honoured, func(s nginxSettings) bool { return s.access.deny.String() == "2001:db8::/32" }},
		{"allowlist-source-range", "10.0.0.0/8,10.0.0.300", Invalid, func(s nginxSettings) bool { return strings.Contains(s.access.closed, `"10.0.0.300"`) }},
		{"denylist-source-range", "", Invalid, func(s nginxSettings) bool { return s.access.closed != "" }},
		{"auth-type", "basic", Honoured, func(s nginxSettings) bool { return s.access.authType == "basic" }},
		{"auth-type", "digest", Invalid, func(s nginxSettings) bool { return s.access.closed != "" }},
		{"auth-secret-type", "auth-map", Honoured, func(s nginxSettings) bool { return s.access.authSecretType == "auth-map" }},
		{"auth-secret-type", "ldap", Invalid, func(s nginxSettings) bool { return s.access.closed != "" }},
		{"auth-realm", "Authentication Required - foo", Honoured, func(s nginxSettings) bool { return s.access.authRealm == "Authentication Required - foo" }},
		{"auth-realm", `a"b`, Invalid, func(s nginxSettings) bool { return s.access.closed != "" }},
		{"no-such-annotation", "x", Ignored, nil},
	} {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{NginxAnnotationPrefix + tc.name: tc.value}}}
		s, outcomes := parseNginxAnnotations(ing)
		if len(outcomes) != 1 || outcomes[0].Outcome != tc.want {
			t.Errorf("%s=%q: outcomes %v, want one %s", tc.name, tc.value, outcomes, tc.want)
			continue
		}
		if tc.want != Honoured && outcomes[0].Reason == "" {
			t.Errorf("%s=%q: %s without a reason", tc.name, tc.value, tc.want)
		}
		if tc.check != nil && !tc.check(s) {
			t.Errorf("%s=%q: parsed as %+v", tc.name, tc.value, s)
		}
	}
}

// TestNginxRedirectCodes: the -code annotations change their redirect's
// status within ingress-nginx's bounds, and temporal-redirect wins.
func TestNginxRedirectCodes(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		code        int
		outcomes    string
	}{
		{map[string]string{"permanent-redirect": "https://a.example", "permanent-redirect-code": "308"}, 308, "honoured honoured"},
		{map[string]string{"permanent-redirect": "https://a.example", "permanent-redirect-code": "200"}, 301, "honoured invalid"},
		{map[string]string{"temporal-redirect": "https://a.example", "temporal-redirect-code": "307"}, 307, "honoured honoured"},
		{map[string]string{"temporal-redirect": "https://a.example", "temporal-redirect-code": "308"}, 302, "honoured invalid"},
		{map[string]string{"permanent-redirect": "https://a.example", "temporal-redirect": "https://b.example"}, 302, "ignored honoured"},
		{map[string]string{"permanent-redirect-code": "308"}, 0, "ignored"},
	} {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		for k, v := range tc.annotations {
			ing.Annotations[NginxAnnotationPrefix+k] = v
		}
		s, outcomes := parseNginxAnnotations(ing)
		var got []string
		for _, o := range outcomes {
			got = append(got, string(o.Outcome))
		}
		code := 0
		if s.redirect != nil {
			code = s.redirect.StatusCode
		}
		if code != tc.code || strings.Join(got, " ") != tc.outcomes {
			t.Errorf("%v: code %d, outcomes %v; want %d, %s", tc.annotations, code, outcomes, tc.code, tc.outcomes)
		}
	}
}

// TestNginxCORSOrigins: enable-cors and cors-allow-origin allow the
// origins ingress-nginx allows, as its e2e tests assert them
// (test/e2e/annotations/cors.go): every origin without cors-allow-origin
// or with a value its validator refuses; otherwise the entries in the form
// scheme://host[:port], an entry without a scheme or an empty one left
// out, "*" anywhere allowing all.
func TestNginxCORSOrigins(t *testing.T) {
	const a, b, c = "https://origin.cors.com:8080", "https://origin2.cors.com", "https://evil.example"
	for _, tc := range []struct {
		name, value string // value "" is no cors-allow-origin
		want        Outcome
		allowed     []string
		denied      []string
	}{
		{"should enable cors (no cors-allow-origin)", "", Honoured, []string{a, b, c}, nil},
		{"should not break functionality", "*", Honoured, []string{a, b, c}, nil},
		{"should not break functionality with extra domain", "*, foo.bar.com", Invalid, []string{a, b, c}, nil},
		{"should allow - missing origins (should allow all origins)", "      ", Invalid, []string{a, b, c}, nil},
		{"an invalid value allows all origins, as ingress-nginx's default", "https://origin2.cors.com/", Invalid, []string{a, b, c}, nil},
		{"should allow - single origin for multiple cors values", "https://origin.cors.com:8080, https://origin2.cors.com", Honoured, []string{a, b}, []string{c}},
		{"should allow correct origins - single origin for multiple cors values", "origin.cors.com:8080, https://origin2.cors.com, https://origin.com", Honoured, []string{b, "https://origin.com"}, []string{a, c}},
		{"trailing comma", "https://origin-123.cors.com:8080,   ,https://origin-321.cors.com:8080,", Honoured, []string{"https://origin-123.cors.com:8080", "https://origin-321.cors.com:8080"}, []string{"https://origin-999.cors.com:8080"}},
		{"nothing left", "origin.cors.com:8080", Honoured, nil, []string{a, b, c}},
	} {
		annotations := map[string]string{NginxAnnotationPrefix + "enable-cors": "true"}
		if tc.value != "" {
			annotations[NginxAnnotationPrefix+"cors-allow-origin"] = tc.value
		}
		s, outcomes := parseNginxAnnotations(&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}})
		if o := nginxOutcome(outcomes, "cors-allow-origin"); o != nil && o.Outcome != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, o, tc.want)
		}
		for _, origin := range tc.allowed {
			if s.cors == nil || !s.cors.AllowsOrigin(origin) {
				t.Errorf("%s: %s refused (%+v)", tc.name, origin, s.cors)
			}
		}
		for _, origin := range tc.denied {
			if s.cors != nil && s.cors.AllowsOrigin(origin) {
				t.Errorf("%s: %s allowed (%+v)", tc.name, origin, s.cors)
			}
		}
	}
}

// FuzzNginxAnnotations: whatever an annotation holds, translation gives
// each annotation one outcome, never panics, and every route it serves
// passes the router's validation.
func FuzzNginxAnnotations(f *testing.F) {
	for _, seed := range [][3]string{
		{"rewrite-target", "/$2", "/something(/|$)(.*)"},
		{"use-regex", "true", "/a(["},
		{"permanent-redirect", "https://x.example/$1", "/"},
		{"app-root", "/app", "/"},
		{"from-to-www-redirect", "true", "/"},
		{"x-forwarded-prefix", "/p", "/"},
		{"proxy-cookie-domain", "internal.local example.com", "/"},
		{"proxy-cookie-path", "/app /", "/"},
		{"mirror-target", "http://web.default.svc/copies", "/"},
		{"server-alias", "a.example, *.b.example", "/"},
		{"proxy-next-upstream-timeout", "3", "/"},
		{"auth-cache-duration", "200 202 10m, 401 1m 30s", "/"},
		{"auth-cache-key", "$remote_user$http_authorization", "/"},
		{"limit-rate", "100", "/"},
		{"proxy-ssl-ciphers", "HIGH:!aNULL:!MD5", "/"},
		{"proxy-ssl-protocols", "TLSv1.2 TLSv1.3", "/"},
		{"affinity-canary-behavior", "legacy", "/"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, name, value, path string) {
		objs := &objects{}
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "fuzz", Namespace: "default", Annotations: map[string]string{
				NginxAnnotationPrefix + name:             value,
				NginxAnnotationPrefix + "rewrite-target": "/$1",
			}},
			Spec: networkingv1.IngressSpec{
				IngressClassName: new(DefaultIngressClass),
				TLS:              []networkingv1.IngressTLS{{Hosts: []string{"www.fuzz.example"}}},
				Rules: []networkingv1.IngressRule{{Host: "www.fuzz.example", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: path, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
				}}}},
			},
		}
		objs.ingresses = append(objs.ingresses, ing)
		snap, reports := translate(objs, goldenOptions)
		if len(reports.Ingresses) != 1 || len(reports.Ingresses[0].Annotations) != len(ing.Annotations) {
			t.Fatalf("outcomes %v for annotations %v", reports.Ingresses, ing.Annotations)
		}
		for _, l := range snap.Listeners {
			for i := range l.Routes {
				if err := router.Validate(l.Routes[i]); err != nil {
					t.Fatalf("served a route the router refuses: %v", err)
				}
			}
		}
	})
}

// TestNginxAccessFilters: the access annotations become filters at the
// head of every path, in nginx's phase order, with the users of the
// Secret; whatever keeps access from being set up answers 503.
func TestNginxAccessFilters(t *testing.T) {
	secret := func(name string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	sha := "{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g="
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		// filters describes the filters of each path, problems what the
		// report says (substrings).
		filters  string
		problems []string
	}{
		{"all of them", map[string]string{
			"limit-rps": "10", "limit-rpm": "100", "limit-connections": "2", "limit-burst-multiplier": "3", "limit-allowlist": "10.0.0.0/8",
			"allowlist-source-range": "10.0.0.0/8", "denylist-source-range": "10.0.0.5",
			"auth-type": "basic", "auth-secret": "htpasswd", "auth-realm": "Team",
		},
			`RateLimit key="Ingress default/web rps" rate=10/1s burst=30 exempt=10.0.0.0/8 status=503; ` +
				`RateLimit key="Ingress default/web rpm" rate=100/1m0s burst=300 exempt=10.0.0.0/8 status=503; ` +
				`RateLimit key="Ingress default/web connections" concurrent=2 exempt=10.0.0.0/8 status=503; ` +
				`Access deny=10.0.0.5/32 allow=10.0.0.0/8; ` +
				`BasicAuth source="Secret default/htpasswd" realm="Team" users=alice,bob; RequestHeaderModifier remove Authorization`,
			[]string{`line 3 (user "carol"): traditional crypt(3) (DES)`}},
		{"auth map", map[string]string{"auth-type": "basic", "auth-secret": "default/map", "auth-secret-type": "auth-map"},
			`BasicAuth source="Secret default/map" realm="" users=dave; RequestHeaderModifier remove Authorization`, nil},
		{"whitelist loses to allowlist", map[string]string{"whitelist-source-range": "1.2.3.4", "allowlist-source-range": "10.0.0.0/8"},
			`Access allow=10.0.0.0/8`, []string{"whitelist-source-range=\"1.2.3.4\": ignored: nginx.ingress.kubernetes.io/allowlist-source-range takes precedence"}},
		{"bad allow list", map[string]string{"allowlist-source-range": "10.0.0.0/8,bogus", "limit-rps": "5"},
			`Access closed="\"bogus\": not an IP address or CIDR range"`, []string{`"bogus": not an IP address or CIDR range; requests are answered 503`}},
		{"missing Secret", map[string]string{"auth-type": "basic", "auth-secret": "nope"},
			`Access closed="auth-secret: Secret default/nope: not found"`, []string{"invalid: Secret default/nope: not found; requests are answered 503"}},
		{"Secret of another namespace", map[string]string{"auth-type": "basic", "auth-secret": "other/htpasswd"},
			`Access closed="auth-secret: Secret other/htpasswd: in another namespace than the Ingress, which ingress-nginx refuses too"`, nil},
		{"no auth key", map[string]string{"auth-type": "basic", "auth-secret": "map"},
			`Access closed="auth-secret: Secret default/map: no key \"auth\""`, nil},
		{"auth-secret alone", map[string]string{"auth-secret": "htpasswd"}, ``, []string{"ignored: without auth-type"}},
		{"burst alone", map[string]string{"limit-burst-multiplier": "2"}, ``, []string{"ignored: without limit-rps or limit-rpm"}},
		{"redirect goes first", map[string]string{"limit-rps": "5", "permanent-redirect": "https://elsewhere.example"},
			`RequestRedirect location=https://elsewhere.example status=301`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := &objects{}
			ing := &networkingv1.Ingress{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: map[string]string{}},
				Spec: networkingv1.IngressSpec{
					IngressClassName: new(DefaultIngressClass),
					Rules: []networkingv1.IngressRule{{Host: "a.example", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
						Paths: []networkingv1.HTTPIngressPath{
							{Path: "/", Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
							{Path: "/api", Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
						},
					}}}},
				},
			}
			for k, v := range tc.annotations {
				ing.Annotations[NginxAnnotationPrefix+k] = v
			}
			objs.ingresses = append(objs.ingresses, ing)
			objs.secrets = append(objs.secrets,
				secret("htpasswd", map[string]string{"auth": "alice:" + sha + "\nbob:$apr1$saltsalt$LrttParrLPdxvgutaSXWJ0\ncarol:abJnggxhB/yWI\n"}),
				secret("map", map[string]string{"dave": sha, "erin": "plain-text"}))
			objs.secrets[1].Namespace = "default"
			snap, reports := translate(objs, goldenOptions)
			var plain *Listener
			for i := range snap.Listeners {
				if snap.Listeners[i].Protocol == ProtocolHTTP {
					plain = &snap.Listeners[i]
				}
			}
			if plain == nil || len(plain.Routes) != 1 {
				t.Fatalf("listeners %+v, reports %+v", snap.Listeners, reports.Ingresses)
			}
			tbl, errs := router.Recompile(nil, plain.Routes)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			matches := 0
			for _, h := range tbl.Describe() {
				for _, m := range h.Matches {
					matches++
					if got := strings.Join(m.Filters, "; "); got != tc.filters {
						t.Errorf("%s filters:\n%s\nwant\n%s", m.Path, got, tc.filters)
					}
				}
			}
			if matches != 2 {
				t.Errorf("%d paths, want 2", matches)
			}
			problems := strings.Join(reports.Ingresses[0].Problems, "\n")
			for _, p := range tc.problems {
				if !strings.Contains(problems, p) {
					t.Errorf("problems %q lack %q", problems, p)
				}
			}
			if strings.Contains(problems, "W6ph5") || strings.Contains(problems, "abJngg") {
				t.Errorf("problems show a hash: %q", problems)
			}
		})
	}
}

// TestNginxBackendValues checks the backend annotations' values, good and
// bad: the outcome, and for good ones the typed value.
func TestNginxBackendValues(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        Outcome
		check       func(p nginxProxy) bool
	}{
		{"proxy-body-size", "1000", Honoured, func(p nginxProxy) bool { return *p.bodySize == 1000 }},
		{"proxy-body-size", "8k", Honoured, func(p nginxProxy) bool { return *p.bodySize == 8<<10 }},
		{"proxy-body-size", "8M", Honoured, func(p nginxProxy) bool { return *p.bodySize == 8<<20 }},
		{"proxy-body-size", "1g", Honoured, func(p nginxProxy) bool { return *p.bodySize == 1<<30 }},
		{"proxy-body-size", "0", Honoured, func(p nginxProxy) bool { return *p.bodySize == 0 }},
		{"proxy-body-size", "10x", Invalid, func(p nginxProxy) bool { return p.bodySize == nil }},
		{"proxy-body-size", "-1", Invalid, nil},
		{"proxy-body-size", "99999999999999999999", Invalid, nil},
		{"proxy-read-timeout", "120", Honoured, func(p nginxProxy) bool { return *p.read == 120*time.Second }},
		{"proxy-read-timeout", "60s", Invalid, nil},
		{"proxy-send-timeout", "0", Invalid, nil},
		{"proxy-connect-timeout", "3", Honoured, func(p nginxProxy) bool { return *p.connect == 3*time.Second }},
		{"custom-http-errors", "404,503", Ignored, nil}, // without default-backend
		{"custom-http-errors", "200", Invalid, nil},
		{"default-backend", "error-pages", Honoured, func(p nginxProxy) bool { return p.defaultBackend == "error-pages" }},
		{"default-backend", "other/ns", Invalid, nil},
		{"proxy-buffering", "off", Honoured, nil},
		{"proxy-buffering", "on", Ignored, nil},
		{"proxy-buffering", "yes", Invalid, nil},
		{"proxy-request-buffering", "on", Ignored, nil},
		{"proxy-buffers-number", "4", Ignored, nil},
		{"proxy-buffers-number", "four", Invalid, nil},
		{"client-body-buffer-size", "16k", Ignored, nil},
		{"proxy-max-temp-file-size", "1024m", Ignored, nil},
		{"proxy-http-version", "1.1", Honoured, nil},
		{"proxy-http-version", "1.0", Ignored, nil},
		{"service-upstream", "false", Honoured, nil},
		{"service-upstream", "true", Ignored, nil},
		{"limit-rate", "100", Honoured, func(p nginxProxy) bool { return p.rate == router.ResponseRate{BytesPerSecond: 100 << 10} }},
		{"limit-rate", "0", Honoured, func(p nginxProxy) bool { return p.rate.BytesPerSecond == 0 }},
		{"limit-rate", "-1", Invalid, nil},
		{"limit-rate", "100k", Invalid, nil},
		{"limit-rate-after", "512", Ignored, nil}, // without limit-rate
		{"limit-rate-after", "1m", Invalid, nil},
		{"auth-keepalive", "10", Ignored, nil},
		{"auth-keepalive-share-vars", "true", Ignored, nil},
		// A heading of ingress-nginx's documentation, not an annotation.
		{"x-forwarded-prefix-header", "/x", Ignored, nil},
	} {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{NginxAnnotationPrefix + tc.name: tc.value}}}
		s, outcomes := parseNginxAnnotations(ing)
		if len(outcomes) != 1 || outcomes[0].Outcome != tc.want {
			t.Errorf("%s=%q: outcomes %v, want one %s", tc.name, tc.value, outcomes, tc.want)
			continue
		}
		if tc.want != Honoured && outcomes[0].Reason == "" {
			t.Errorf("%s=%q: %s without a reason", tc.name, tc.value, tc.want)
		}
		if tc.check != nil && !tc.check(s.proxy) {
			t.Errorf("%s=%q: parsed as %+v", tc.name, tc.value, s.proxy)
		}
	}
}

// FuzzNginxSize checks that any size either parses to a byte count
// within bounds that its digits and unit account for, or is refused.
func FuzzNginxSize(f *testing.F) {
	for _, s := range []string{"0", "1000", "8k", "8m", "1g", "1G", "10b", "", "k", "-1", "1t", "99999999999g", "+1", " 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, err := ParseNginxSize(v)
		if err != nil {
			return
		}
		if n < 0 || n > maxNginxSize {
			t.Fatalf("%q: %d out of bounds", v, n)
		}
		digits := strings.TrimRight(v, "bBkKmMgG")
		if len(v)-len(digits) > 1 || digits == "" || strings.Trim(digits, "0123456789") != "" {
			t.Fatalf("%q accepted as %d", v, n)
		}
	})
}
