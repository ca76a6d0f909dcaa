package watch

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCheckNginxMirrorAlias: `hostgate check ingress-nginx`, which sees
// no Services, still says that a mirror-target outside the cluster and
// an alias another Ingress serves as its host are lost.
func TestCheckNginxMirrorAlias(t *testing.T) {
	ingress := func(name, host string, annotations map[string]string) *networkingv1.Ingress {
		return &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
			}}}}},
		}
	}
	checks := CheckIngresses([]*networkingv1.Ingress{
		ingress("outside", "a.example", map[string]string{NginxAnnotationPrefix + "mirror-target": "https://test.env.com$request_uri", NginxAnnotationPrefix + "mirror-host": "copies.example"}),
		ingress("inside", "b.example", map[string]string{NginxAnnotationPrefix + "mirror-target": "http://shadow.tests.svc$request_uri", NginxAnnotationPrefix + "server-alias": "a.example, c.example"}),
		ingress("taken", "c.example", map[string]string{NginxAnnotationPrefix + "server-alias": "b.example"}),
	}, nil, false)
	got := map[string]Outcome{}
	for _, c := range checks {
		for _, o := range c.Annotations {
			got[c.Ingress+" "+o.Annotation[len(NginxAnnotationPrefix):]] = o.Outcome
		}
	}
	want := map[string]Outcome{
		"default/outside mirror-target": Ignored, "default/outside mirror-host": Ignored,
		"default/inside mirror-target": Honoured, "default/inside server-alias": Ignored,
		"default/taken server-alias": Ignored,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %s, want %s", k, got[k], w)
		}
	}
}
