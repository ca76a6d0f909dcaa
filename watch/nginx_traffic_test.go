package watch

import (
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
	"time"

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
		{map[string]string{"canary": "true", "affinity": "cookie"}, "affinity", Ignored, nil},
		{map[string]string{"canary": "true", "affinity-canary-behavior": "sticky"}, "affinity-canary-behavior", Honoured,
			func(t *nginxTraffic) bool { return !t.canaryLegacy }},
		{map[string]string{"canary": "true", "affinity-canary-behavior": "Legacy"}, "affinity-canary-behavior", Invalid, nil},
		{map[string]string{"affinity-canary-behavior": "legacy"}, "affinity-canary-behavior", Ignored, nil},
		{map[string]string{"canary": "true", "affinity": "cookie", "affinity-canary-behavior": "legacy"}, "affinity", Honoured,
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
		{map[string]string{"proxy-next-upstream": "http_503", "proxy-next-upstream-timeout": "3"}, "proxy-next-upstream-timeout", Honoured,
			func(t *nginxTraffic) bool { return t.retry.Attempts == 2 && t.retry.Budget == 3*time.Second }},
		{map[string]string{"proxy-next-upstream-timeout": "2"}, "proxy-next-upstream-timeout", Honoured,
			func(t *nginxTraffic) bool { return t.retry.Attempts == 0 && t.retry.Budget == 2*time.Second }},
		{map[string]string{"proxy-next-upstream-timeout": "0"}, "proxy-next-upstream-timeout", Honoured,
			func(t *nginxTraffic) bool { return t.retry == nil }},
		{map[string]string{"proxy-next-upstream": "off", "proxy-next-upstream-timeout": "2"}, "proxy-next-upstream-timeout", Ignored,
			func(t *nginxTraffic) bool { return t.retry == nil }},
		{map[string]string{"proxy-next-upstream-timeout": "-1"}, "proxy-next-upstream-timeout", Invalid, nil},
		{map[string]string{"proxy-next-upstream-timeout": "5s"}, "proxy-next-upstream-timeout", Invalid, nil},
		{map[string]string{"proxy-next-upstream-timeout": "86401"}, "proxy-next-upstream-timeout", Invalid, nil},
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

// TestStateFileTraffic: a rule's canary and a backend's balance come back
// from the state file as they were written.
func TestStateFileTraffic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snapshot.json")
	certPEM, keyPEM := selfSigned(t, "golden.example.com")
	want := stateSnapshot(certPEM, keyPEM)
	secure := true
	rule := &want.Listeners[0].Routes[0].Rules[0]
	rule.Canary = &router.Canary{Header: "X-Canary", HeaderPattern: regexp.MustCompile("v[2-9]"), Cookie: "c"}
	rule.NoAccessLog = true
	rule.Backends = []router.BackendRef{
		{Name: "default/web:80", Weight: 80, Balance: &router.Balance{Hash: []router.HashPart{{Source: router.HashHeader, Name: "X-User"}, {Source: router.HashText, Name: "-"}}}},
		{Name: "default/web-canary:80", Weight: 20, Canary: true, Balance: &router.Balance{Policy: router.BalanceLeastRequest,
			Affinity: &router.Affinity{Cookie: "route", Path: "/", SameSite: "Lax", MaxAge: time.Hour, Secure: &secure, Persistent: true}}},
	}
	if err := writeStateFile(path, want, time.Now()); err != nil {
		t.Fatal(err)
	}
	got, _, err := NewStateFile(path, quietLog(), nil).Load()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back\n%#v\nwant\n%#v", got.Listeners[0].Routes[0].Rules[0], *rule)
	}
}

// TestCheckCanary: the check says which paths of a canary Ingress join no
// main Ingress.
func TestCheckCanary(t *testing.T) {
	ingress := func(name, path, service string, canary bool) *networkingv1.Ingress {
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{}},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "a.example", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: path, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: service, Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
			}}}}},
		}
		if canary {
			ing.Annotations[NginxAnnotationPrefix+"canary"] = "true"
		}
		return ing
	}
	checks := CheckIngresses([]*networkingv1.Ingress{
		ingress("main", "/", "web", false), ingress("joins", "/", "web-canary", true), ingress("orphan", "/other", "web-canary", true),
	}, nil, false)
	paths := map[string][]string{}
	for _, c := range checks {
		paths[c.Ingress] = c.Paths
	}
	if len(paths["default/main"]) != 0 || len(paths["default/joins"]) != 0 || len(paths["default/orphan"]) != 1 {
		t.Errorf("paths not served: %q", paths)
	}
}
