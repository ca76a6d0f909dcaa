package watch

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostgate/hostgate/router"
)

// TestNginxTrafficValues checks the traffic annotations' values, good and
// bad, alone on an Ingress or with those they shape.
func TestNginxTrafficValues(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		name        string
		want        Outcome
		check       func(t *nginxTraffic) bool
	}{
		{map[string]string{"canary": "true", "canary-by-header": "x-canary-user"}, "canary-by-header", Honoured,
			func(t *nginxTraffic) bool {
				return t.canary && t.canaryRule.Header == "X-Canary-User" && t.canaryTotal == 100
			}},
		{map[string]string{"canary": "true", "canary-by-header": "a b"}, "canary-by-header", Invalid, nil},
		{map[string]string{"canary": "true", "canary-by-cookie": "a=b"}, "canary-by-cookie", Invalid, nil},
		{map[string]string{"canary": "true", "canary-weight-total": "1000"}, "canary-weight-total", Honoured,
			func(t *nginxTraffic) bool { return t.canaryTotal == 1000 }},
		{map[string]string{"canary": "true", "canary-weight": "x"}, "canary-weight", Invalid, nil},
		{map[string]string{"canary-by-cookie": "c"}, "canary-by-cookie", Ignored, nil},
		{map[string]string{"canary": "true", "canary-by-header-value": "v2"}, "canary-by-header-value", Ignored, nil},
		{map[string]string{"canary": "true", "use-regex": "true"}, "use-regex", Ignored, nil},
		{map[string]string{"canary": "true", "affinity": "cookie"}, "affinity", Honoured,
			func(t *nginxTraffic) bool {
				return t.balance.Affinity.Cookie == "INGRESSCOOKIE" && !t.balance.Affinity.Persistent
			}},
		{map[string]string{"affinity": "cookie", "session-cookie-secure": "false"}, "session-cookie-secure", Honoured,
			func(t *nginxTraffic) bool { return t.balance.Affinity.Secure != nil && !*t.balance.Affinity.Secure }},
		{map[string]string{"affinity": "cookie", "session-cookie-samesite": "NONE"}, "session-cookie-samesite", Honoured,
			func(t *nginxTraffic) bool { return t.balance.Affinity.SameSite == "None" }},
		{map[string]string{"affinity": "cookie", "session-cookie-domain": "bad domain"}, "session-cookie-domain", Invalid, nil},
		{map[string]string{"affinity": "cookie", "session-cookie-max-age": "1h"}, "session-cookie-max-age", Invalid, nil},
		{map[string]string{"upstream-hash-by": "$request_uri"}, "upstream-hash-by", Honoured,
			func(t *nginxTraffic) bool {
				return len(t.balance.Hash) == 1 && t.balance.Hash[0].Source == router.HashRequestURI
			}},
		{map[string]string{"upstream-hash-by": "${cookie_s}x"}, "upstream-hash-by", Honoured,
			func(t *nginxTraffic) bool {
				return len(t.balance.Hash) == 2 && t.balance.Hash[0] == router.HashPart{Source: router.HashCookie, Name: "s"}
			}},
		{map[string]string{"upstream-hash-by": "${host"}, "upstream-hash-by", Invalid, nil},
		{map[string]string{"upstream-hash-by": "$http_"}, "upstream-hash-by", Invalid, nil},
		{map[string]string{"load-balance": "ewma"}, "load-balance", Honoured,
			func(t *nginxTraffic) bool { return t.balance.Policy == router.BalanceLeastRequest }},
		{map[string]string{"proxy-next-upstream": "error timeout http_502 http_502"}, "proxy-next-upstream", Honoured,
			func(t *nginxTraffic) bool { return t.retry.Attempts == 2 && len(t.retry.Codes) == 1 }},
		{map[string]string{"proxy-next-upstream": "off http_502"}, "proxy-next-upstream", Invalid, nil},
		{map[string]string{"proxy-next-upstream-tries": "1"}, "proxy-next-upstream-tries", Honoured,
			func(t *nginxTraffic) bool { return t.retry == nil }},
		{map[string]string{"proxy-next-upstream-tries": "5"}, "proxy-next-upstream-tries", Honoured,
			func(t *nginxTraffic) bool { return t.retry.Attempts == 4 && t.retry.Codes == nil }},
		{map[string]string{"enable-access-log": "false"}, "enable-access-log", Honoured,
			func(t *nginxTraffic) bool { return t.noAccessLog }},
	} {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		for k, v := range tc.annotations {
			ing.Annotations[NginxAnnotationPrefix+k] = v
		}
		s, outcomes := parseNginxAnnotations(ing)
		var got *AnnotationOutcome
		for i := range outcomes {
			if outcomes[i].Annotation == NginxAnnotationPrefix+tc.name {
				got = &outcomes[i]
			}
		}
		if got == nil || got.Outcome != tc.want || tc.want != Honoured && got.Reason == "" {
			t.Errorf("%v: %s is %v, want %s with a reason unless honoured", tc.annotations, tc.name, got, tc.want)
			continue
		}
		if tc.check != nil && !tc.check(&s.traffic) {
			t.Errorf("%v: parsed as %+v", tc.annotations, s.traffic)
		}
	}
}
