package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostgate/hostgate/internal/kubetest"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
	"github.com/hostgate/hostgate/watch"
)

// nginxIngresses are Ingresses of class nginx as a cluster moved from
// ingress-nginx carries them, without their Services.
const nginxIngresses = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: rewrite
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/rewrite-target: /$2
    nginx.ingress.kubernetes.io/x-forwarded-prefix: /something
    nginx.ingress.kubernetes.io/configuration-snippet: 'more_set_headers "X-Evil: 1";'
    nginx.ingress.kubernetes.io/enable-cors: "true"
spec:
  ingressClassName: nginx
  tls: [{hosts: [app.example.com], secretName: app-tls}]
  rules:
  - host: app.example.com
    http:
      paths:
      - {path: /something(/|$)(.*), pathType: ImplementationSpecific, backend: {service: {name: web, port: {number: 80}}}}
---
# cert-manager's solver: an Ingress of its own on the same host, whose path
# is a regex too there (the host has a rewrite).
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: acme-solver, namespace: default}
spec:
  ingressClassName: nginx
  rules:
  - host: app.example.com
    http:
      paths:
      - {path: /.well-known/acme-challenge/token, pathType: Exact, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: moved
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/permanent-redirect: https://new.example.com/landing
    nginx.ingress.kubernetes.io/from-to-www-redirect: "true"
spec:
  ingressClassName: nginx
  rules:
  - host: old.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: root
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/app-root: /app1
spec:
  ingressClassName: nginx
  rules:
  - host: root.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: secure-backend
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/backend-protocol: HTTPS
    nginx.ingress.kubernetes.io/upstream-vhost: internal.example.com
    nginx.ingress.kubernetes.io/enable-cors: "true"
    nginx.ingress.kubernetes.io/cors-allow-origin: https://ui.example.com
spec:
  ingressClassName: nginx
  rules:
  - host: api.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: tls-web, port: {number: 443}}}}
`

// TestIngressNginxAnnotations serves Ingresses of class nginx with their
// ingress-nginx annotations over real sockets: rewrites with captures on
// case-insensitive regex paths, an HTTPS backend whose certificate is not
// checked (ingress-nginx's default) with its own Host, CORS, the HTTPS redirect (308, to the HTTPS
// port) of a host with TLS but not of ACME challenges, HSTS, permanent
// redirects, from-to-www and app-root; the snippet is refused, reported in
// /debug/routes and the metric, and the rest of its Ingress serves.
func TestIngressNginxAnnotations(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "path=%s prefix=%s evil=%s", r.URL.Path, r.Header.Get("X-Forwarded-Prefix"), r.Header.Get("X-Evil"))
	}))
	defer backend.Close()
	// A backend with a certificate no one can check, as ingress-nginx
	// users' HTTPS backends often have.
	tlsBackend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls backend saw %s %s", r.Host, r.URL.Path)
	}))
	defer tlsBackend.Close()
	ca := tlstest.NewCA(t)
	httpPort, httpsPort := freePort(t), freePort(t)
	dir := t.TempDir()
	config := nginxIngresses + loopbackService("default", "web", 80, backend.Listener.Addr().(*net.TCPAddr).Port) +
		loopbackService("default", "tls-web", 443, tlsBackend.Listener.Addr().(*net.TCPAddr).Port) +
		tlsSecret(t, ca, "default", "app-tls", "app.example.com")
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHostgate(t, "--config", dir, "--ingress-class", "hostgate,nginx",
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort), "--https-addr", fmt.Sprintf("127.0.0.1:%d", httpsPort))
	plain := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	secure := fmt.Sprintf("https://127.0.0.1:%d", httpsPort)
	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, ServerName: "app.example.com"}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	// do sends a GET for host and says what came back.
	do := func(url, host string) (code int, location, hsts, body string) {
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", "", err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("Strict-Transport-Security"), string(b)
	}
	eventually(t, "rewrite with captures", func() string {
		// Case-insensitive, like nginx's ~*; $2 is what follows.
		if code, _, hsts, body := do(secure+"/SomeThing/new/x", "app.example.com"); code != 200 || body != "path=/new/x prefix=/something evil=" || hsts != watch.DefaultHSTS {
			return fmt.Sprintf("rewritten request: %d %q HSTS %q", code, body, hsts)
		}
		return ""
	})
	if code, _, _, body := do(secure+"/something", "app.example.com"); code != 200 || body != "path=/ prefix=/something evil=" {
		t.Errorf("/something: %d %q, want the backend to see /", code, body)
	}
	want := fmt.Sprintf("https://app.example.com:%d/something/x?q=1", httpsPort)
	if code, location, hsts, _ := do(plain+"/something/x?q=1", "app.example.com"); code != 308 || location != want || hsts != "" {
		t.Errorf("plain HTTP for a TLS host: %d Location %q HSTS %q, want 308 to %s without HSTS", code, location, hsts, want)
	}
	if code, _, _, body := do(plain+"/.well-known/acme-challenge/token", "app.example.com"); code != 200 || !strings.HasPrefix(body, "path=/.well-known/acme-challenge/token") {
		t.Errorf("ACME challenge over plain HTTP: %d %q, want it served, not redirected", code, body)
	}
	if code, location, _, _ := do(plain+"/any/path?x=1", "old.example.com"); code != 301 || location != "https://new.example.com/landing" {
		t.Errorf("permanent-redirect: %d %q, want 301 to exactly the annotation's URL", code, location)
	}
	if code, location, _, _ := do(plain+"/a?b=c", "www.old.example.com"); code != 308 || location != fmt.Sprintf("http://old.example.com:%d/a?b=c", httpPort) {
		t.Errorf("from-to-www-redirect: %d %q", code, location)
	}
	// ingress-nginx drops a trailing slash (ngx_srv_redirect.lua; e2e
	// "should redirect from www HTTPS to HTTPS": "/" goes to
	// "https://<host>:443").
	for path, want := range map[string]string{"/a/": "/a", "/": ""} {
		if code, location, _, _ := do(plain+path, "www.old.example.com"); code != 308 || location != fmt.Sprintf("http://old.example.com:%d%s", httpPort, want) {
			t.Errorf("from-to-www-redirect of %s: %d %q, want 308 to %q", path, code, location, want)
		}
	}
	// ingress-nginx's "return 302 $scheme://$http_host/app1": the Host
	// as the client sent it, with or without a port, and no query.
	for host, want := range map[string]string{
		"root.example.com":                           "http://root.example.com/app1",
		fmt.Sprintf("root.example.com:%d", httpPort): fmt.Sprintf("http://root.example.com:%d/app1", httpPort),
	} {
		if code, location, _, _ := do(plain+"/?utm=mail", host); code != 302 || location != want {
			t.Errorf("app-root with Host %s: %d %q, want 302 to %s", host, code, location, want)
		}
	}
	if code, _, _, body := do(plain+"/other", "root.example.com"); code != 200 || body != "path=/other prefix= evil=" {
		t.Errorf("app-root leaves other paths: %d %q", code, body)
	}

	if code, _, _, body := do(plain+"/v1", "api.example.com"); code != 200 || body != "tls backend saw internal.example.com /v1" {
		t.Errorf("backend-protocol HTTPS with upstream-vhost: %d %q", code, body)
	}
	preflight, err := http.NewRequest("OPTIONS", plain+"/v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	preflight.Host = "api.example.com"
	preflight.Header.Set("Origin", "https://ui.example.com")
	preflight.Header.Set("Access-Control-Request-Method", "PUT")
	if resp, err := client.Do(preflight); err != nil {
		t.Error(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "https://ui.example.com" || !strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "PUT") {
			t.Errorf("enable-cors preflight: %d %v", resp.StatusCode, resp.Header)
		}
	}
	// enable-cors alone allows every origin, as ingress-nginx's default
	// cors-allow-origin "*" does, and says "*" as it does, credentials or
	// not: browsers then refuse to give a page an answer to a request with
	// cookies, which echoing the page's origin would allow from anywhere.
	cors, err := http.NewRequest("GET", secure+"/something/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	cors.Host = "app.example.com"
	cors.Header.Set("Origin", "https://anywhere.example")
	if resp, err := client.Do(cors); err != nil {
		t.Error(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Access-Control-Allow-Credentials") != "true" {
			t.Errorf("enable-cors without cors-allow-origin: %d %v, want Access-Control-Allow-Origin * and Access-Control-Allow-Credentials true", resp.StatusCode, resp.Header)
		}
	}
	// A name no Ingress serves gets the self-signed default certificate,
	// as ingress-nginx's fake one: the handshake completes.
	if conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", httpsPort), &tls.Config{ServerName: "unknown.example.com", InsecureSkipVerify: true}); err != nil {
		t.Errorf("TLS for a name no Ingress serves: %v, want the default certificate", err)
	} else {
		if cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "hostgate default certificate" {
			t.Errorf("TLS for a name no Ingress serves: certificate %q, want hostgate's self-signed default", cn)
		}
		conn.Close()
	}
	eventually(t, "refusal in debug routes", expect(h.admin+"/debug/routes", "", 200,
		`Ingress default/rewrite: annotation nginx.ingress.kubernetes.io/configuration-snippet="more_set_headers \"X-Evil: 1\";": refused`))
	eventually(t, "metric", expect(h.admin+"/metrics", "", 200,
		`hostgate_ingress_annotations{annotation="nginx.ingress.kubernetes.io/rewrite-target",outcome="honoured"} 1`))
	resp, err := http.Get(h.admin + "/debug/routes?format=json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var gen generation
	if err := json.NewDecoder(resp.Body).Decode(&gen); err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]watch.Outcome{}
	for _, ing := range gen.Annotations {
		for _, o := range ing.Annotations {
			outcomes[ing.Ingress+" "+strings.TrimPrefix(o.Annotation, watch.NginxAnnotationPrefix)] = o.Outcome
		}
	}
	for key, want := range map[string]watch.Outcome{
		"default/rewrite rewrite-target":        watch.Honoured,
		"default/rewrite configuration-snippet": watch.Refused,
		"default/moved permanent-redirect":      watch.Honoured,
		"default/root app-root":                 watch.Honoured,
	} {
		if outcomes[key] != want {
			t.Errorf("/debug/routes JSON: %s is %q, want %q (all: %v)", key, outcomes[key], want, outcomes)
		}
	}
}

// TestIngressNginxMigration runs hostgate on a cluster beside an
// ingress-nginx that still owns the Ingress status: with --ingress-class
// hostgate,nginx and --ingress-status=false it serves the class nginx
// Ingress, leaves its status alone, and says with a Warning Event on the
// Ingress which annotations it does not honour.
func TestIngressNginxMigration(t *testing.T) {
	env := kubetest.Shared(t)
	c := newCluster(t, env, "nginx-migration")
	_, backend := serveHTTP(t, podAddress(t), answer("migrated"))
	c.backend("web", backend)
	c.must(c.kube.NetworkingV1().IngressClasses().Create(t.Context(), &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx"},
		Spec:       networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"},
	}, metav1.CreateOptions{}))
	t.Cleanup(func() {
		_ = c.kube.NetworkingV1().IngressClasses().Delete(context.Background(), "nginx", metav1.DeleteOptions{})
	})
	ingress := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
			watch.NginxAnnotationPrefix + "server-snippet": "return 200;",
			watch.NginxAnnotationPrefix + "use-regex":      "true",
		}},
		Spec: networkingv1.IngressSpec{
			IngressClassName: new("nginx"),
			DefaultBackend:   &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
		},
	}
	c.must(c.kube.NetworkingV1().Ingresses(c.ns).Create(t.Context(), ingress, metav1.CreateOptions{}))
	port := freePort(t)
	c.hostgate(env, "--ingress-class", "hostgate,nginx", "--ingress-status=false", "--http-addr", fmt.Sprintf("127.0.0.1:%d", port), "--https-addr=", "--status-addresses", "127.0.0.1")
	eventuallyWithin(t, time.Minute, "the Ingress of class nginx", expect(fmt.Sprintf("http://127.0.0.1:%d/", port), "any.example.com", 200, "migrated"))
	eventuallyWithin(t, time.Minute, "an Event on the Ingress", func() string {
		events, err := c.kube.CoreV1().Events(c.ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Ingress,involvedObject.name=web"})
		if err != nil {
			return err.Error()
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == "AnnotationsNotHonoured" && strings.Contains(e.Message, "server-snippet refused") && !strings.Contains(e.Message, "use-regex") {
				return ""
			}
		}
		return fmt.Sprintf("no Warning naming the refused snippet alone among %d events", len(events.Items))
	})
	ing, err := c.kube.NetworkingV1().Ingresses(c.ns).Get(t.Context(), "web", metav1.GetOptions{})
	c.must(ing, err)
	if len(ing.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("with --ingress-status=false hostgate wrote the Ingress status: %v", ing.Status.LoadBalancer.Ingress)
	}
}

// ingressList is what `kubectl get ingress -A -o yaml` prints: a List of
// an Ingress of class nginx with a rewrite and a snippet, one of another
// class, and one without a class and annotations.
const ingressList = `
apiVersion: v1
kind: List
items:
- apiVersion: networking.k8s.io/v1
  kind: Ingress
  metadata:
    name: shop
    namespace: web
    annotations:
      nginx.ingress.kubernetes.io/rewrite-target: /$1
      nginx.ingress.kubernetes.io/server-snippet: "return 200;"
  spec:
    ingressClassName: nginx
    rules:
    - host: shop.example.com
      http:
        paths:
        - {path: /shop/(.*), pathType: ImplementationSpecific, backend: {service: {name: shop, port: {number: 80}}}}
- apiVersion: networking.k8s.io/v1
  kind: Ingress
  metadata: {name: traefik-owned, namespace: web}
  spec:
    ingressClassName: traefik
    defaultBackend: {service: {name: shop, port: {number: 80}}}
- apiVersion: networking.k8s.io/v1
  kind: Ingress
  metadata: {name: plain, namespace: web}
  spec:
    defaultBackend: {service: {name: shop, port: {number: 80}}}
`

// TestCheckSSLPassthrough: the check reports ssl-passthrough as hostgate
// would serve it: ignored without --enable-ssl-passthrough (as
// ingress-nginx ignores it without its flag of that name); with it,
// honoured, and a rule it cannot pass through (no host to choose the
// connection by) named as not served.
func TestCheckSSLPassthrough(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ingresses.yaml")
	const passthrough = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: vault
  namespace: infra
  annotations: {nginx.ingress.kubernetes.io/ssl-passthrough: "true"}
spec:
  ingressClassName: nginx
  rules:
  - host: vault.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: vault, port: {number: 8200}}}}]}
  - http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: vault, port: {number: 8200}}}}]}
`
	if err := os.WriteFile(file, []byte(passthrough), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, enabled := range []bool{false, true} {
		args := []string{"ingress-nginx", "-f", file}
		want := []string{`ignored ssl-passthrough="true" needs --enable-ssl-passthrough`}
		if enabled {
			args = append(args, "--enable-ssl-passthrough")
			want = []string{`honoured ssl-passthrough="true"`, "not served spec.rules[1]: ssl-passthrough needs an exact host"}
		}
		var text strings.Builder
		if err := runCheck(t.Context(), args, &text); !errors.Is(err, errLossy) {
			t.Errorf("%v: %v, want errLossy", args, err)
		}
		// Columns aside: the tab writer pads them to the widest.
		words := strings.Join(strings.Fields(text.String()), " ")
		for _, w := range want {
			if !strings.Contains(words, w) {
				t.Errorf("%v: report lacks %q:\n%s", args, w, text.String())
			}
		}
	}
}

// TestCheckIngressNginx runs `hostgate check ingress-nginx` on a file
// saved from kubectl and on a cluster: the same report from both, naming
// the honoured rewrite and the refused snippet, leaving out another
// class's Ingress, and exiting with an error because something is lost.
func TestCheckIngressNginx(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ingresses.yaml")
	if err := os.WriteFile(file, []byte(ingressList), 0o644); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := runCheck(t.Context(), []string{"ingress-nginx", "-f", file}, &text); !errors.Is(err, errLossy) {
		t.Errorf("check of a lossy file: %v, want errLossy", err)
	}
	for _, want := range []string{
		"Ingress web/shop (class nginx)", `honoured  rewrite-target="/$1"`, `refused   server-snippet="return 200;"`,
		"Ingress web/plain (class none)", "2 Ingresses checked; 1 served as ingress-nginx serves them, 1 not.",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "traefik-owned") {
		t.Errorf("report includes an Ingress of another class:\n%s", text.String())
	}

	env := kubetest.Shared(t)
	c := newCluster(t, env, "nginx-check")
	for _, item := range []string{"shop", "plain"} {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: item},
			Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "shop", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
		if item == "shop" {
			ing.Annotations = map[string]string{watch.NginxAnnotationPrefix + "server-snippet": "return 200;"}
			ing.Spec.IngressClassName = new("nginx")
		}
		c.must(c.kube.NetworkingV1().Ingresses(c.ns).Create(t.Context(), ing, metav1.CreateOptions{}))
	}
	var out strings.Builder
	err := runCheck(t.Context(), []string{"ingress-nginx", "--kubeconfig", env.Kubeconfig, "-o", "json"}, &out)
	if !errors.Is(err, errLossy) {
		t.Errorf("check of the cluster: %v, want errLossy", err)
	}
	var checks []watch.IngressCheck
	if err := json.Unmarshal([]byte(out.String()), &checks); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, out.String())
	}
	found := map[string]watch.IngressCheck{}
	for _, ch := range checks {
		found[ch.Ingress] = ch
	}
	shop := found[c.ns+"/shop"]
	if len(shop.Annotations) != 1 || shop.Annotations[0].Outcome != watch.Refused || shop.Lossless() {
		t.Errorf("cluster check of %s/shop: %+v, want its snippet refused", c.ns, shop)
	}
	if plain, ok := found[c.ns+"/plain"]; !ok || !plain.Lossless() {
		t.Errorf("cluster check of %s/plain: %+v (found %t), want it served as is", c.ns, plain, ok)
	}
}

// TestIngressDefaultCertificateSecret: --ingress-default-certificate
// names a Secret (ingress-nginx's --default-ssl-certificate), presented
// for names no Ingress has a certificate for; while the Secret is missing
// the self-signed one stands in and /debug/routes says why.
func TestIngressDefaultCertificateSecret(t *testing.T) {
	ca := tlstest.NewCA(t)
	dir := t.TempDir()
	ingress := `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: default}
spec:
  ingressClassName: hostgate
  defaultBackend: {service: {name: web, port: {number: 80}}}
`
	if err := os.WriteFile(filepath.Join(dir, "ingress.yaml"), []byte(ingress), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	h := startHostgate(t, "--config", dir, "--https-addr", fmt.Sprintf("127.0.0.1:%d", port), "--ingress-default-certificate", "default/wildcard")
	served := func() string {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{ServerName: "shop.example.com", InsecureSkipVerify: true})
		if err != nil {
			return err.Error()
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	eventually(t, "the missing Secret reported", expect(h.admin+"/debug/routes", "", 200, "--ingress-default-certificate: Secret default/wildcard: not found"))
	if got := served(); got != "hostgate default certificate" {
		t.Errorf("without the Secret: %q, want the self-signed certificate", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.yaml"), []byte(tlsSecret(t, ca, "default", "wildcard", "*.example.com")), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Secret's certificate", func() string {
		if got := served(); got != "*.example.com" {
			return "served " + got
		}
		return ""
	})
}

// TestIngressNginxBasicAuthFromCluster: an htpasswd file in an Opaque
// Secret reaches hostgate from the API server (trimmed to its auth key)
// and guards the Ingress; a change of the password takes effect.
func TestIngressNginxBasicAuthFromCluster(t *testing.T) {
	env := kubetest.Shared(t)
	c := newCluster(t, env, "nginx-basic-auth")
	_, backend := serveHTTP(t, podAddress(t), answer("secret stuff"))
	c.backend("web", backend)
	// {SHA} of "s3cret" and of "changed", as htpasswd -s writes them.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "htpasswd"},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{"auth": "alice:{SHA}/vNB+F2HQ559kaLUZbmHHvZrXpg=\n", "unrelated": "kept out of hostgate's cache"},
	}
	c.must(c.kube.CoreV1().Secrets(c.ns).Create(t.Context(), secret, metav1.CreateOptions{}))
	c.must(c.kube.NetworkingV1().Ingresses(c.ns).Create(t.Context(), &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
			watch.NginxAnnotationPrefix + "auth-type":   "basic",
			watch.NginxAnnotationPrefix + "auth-secret": "htpasswd",
		}},
		Spec: networkingv1.IngressSpec{
			IngressClassName: new("basic-auth"),
			DefaultBackend:   &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
		},
	}, metav1.CreateOptions{}))
	port := freePort(t)
	c.hostgate(env, "--ingress-class", "basic-auth", "--http-addr", fmt.Sprintf("127.0.0.1:%d", port), "--https-addr=", "--status-addresses", "127.0.0.1")
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	login := func(password string) func() string {
		return func() string {
			req, err := http.NewRequest("GET", url, nil)
			if err != nil {
				return err.Error()
			}
			req.SetBasicAuth("alice", password)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err.Error()
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Sprintf("alice with %q: %d", password, resp.StatusCode)
			}
			return ""
		}
	}
	eventuallyWithin(t, time.Minute, "the password from the Secret", login("s3cret"))
	if code, _ := get(url, "any.example.com"); code != 401 {
		t.Errorf("without credentials: %d, want 401", code)
	}
	secret.StringData = map[string]string{"auth": "alice:{SHA}N8bFe+30MF70EknBeUdgtcuPrRc=\n"}
	c.must(c.kube.CoreV1().Secrets(c.ns).Update(t.Context(), secret, metav1.UpdateOptions{}))
	eventuallyWithin(t, time.Minute, "the changed password", login("changed"))
	if login("s3cret")() == "" {
		t.Error("the old password still lets alice in: a remembered credential outlived its Secret")
	}
}

// TestPublishService runs hostgate with --publish-service: Ingress status
// lists the addresses of the load balancer in front of it, as
// ingress-nginx writes them and external-dns reads them. While the
// Service is missing the status stays what it was (a typo in the flag
// must not take every DNS record away); a load balancer without an
// address yet gives none; and a change of its addresses follows.
func TestPublishService(t *testing.T) {
	env := kubetest.Shared(t)
	c := newCluster(t, env, "publish-service")
	_, backend := serveHTTP(t, podAddress(t), answer("published"))
	c.backend("web", backend)
	ing, err := c.kube.NetworkingV1().Ingresses(c.ns).Create(t.Context(), &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: networkingv1.IngressSpec{
			IngressClassName: new("published"),
			DefaultBackend:   &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
		},
	}, metav1.CreateOptions{})
	c.must(ing, err)
	// As the controller before hostgate left it.
	before := networkingv1.IngressLoadBalancerIngress{IP: "203.0.113.9"}
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{before}
	c.must(c.kube.NetworkingV1().Ingresses(c.ns).UpdateStatus(t.Context(), ing, metav1.UpdateOptions{}))
	// The route's status tells that the status writer has made a pass.
	gatewayPort, port := freePort(t), freePort(t)
	c.gateway(gatewayPort, 0, "")
	c.route("web", "web.example.com", "/", "web")

	h := c.hostgate(env, "--gateway-class", c.ns, "--ingress-class", "published", "--http-addr", fmt.Sprintf("127.0.0.1:%d", port), "--https-addr=", "--publish-service", c.ns+"/front")
	eventuallyWithin(t, time.Minute, "the Ingress served", expect(fmt.Sprintf("http://127.0.0.1:%d/", port), "any.example.com", 200, "published"))
	eventually(t, "why Ingress status is left alone, in debug routes", expect(h.admin+"/debug/routes", "", 200,
		"--publish-service "+c.ns+"/front: no such Service; Ingress status is left as it is"))
	eventuallyWithin(t, time.Minute, "the HTTPRoute's status", func() string {
		route, err := c.gw.GatewayV1().HTTPRoutes(c.ns).Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if len(route.Status.Parents) == 0 {
			return "HTTPRoute without status"
		}
		return ""
	})
	statusIs := func(want ...networkingv1.IngressLoadBalancerIngress) func() string {
		return func() string {
			ing, err := c.kube.NetworkingV1().Ingresses(c.ns).Get(t.Context(), "web", metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			if got := ing.Status.LoadBalancer.Ingress; !slices.EqualFunc(got, want, func(a, b networkingv1.IngressLoadBalancerIngress) bool {
				return a.IP == b.IP && a.Hostname == b.Hostname
			}) {
				return fmt.Sprintf("Ingress status %+v, want %+v", got, want)
			}
			return ""
		}
	}
	for range 4 {
		if problem := statusIs(before)(); problem != "" {
			t.Fatalf("while the Service is missing: %s", problem)
		}
		time.Sleep(500 * time.Millisecond)
	}

	c.must(c.kube.CoreV1().Services(c.ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "front"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{}))
	eventuallyWithin(t, time.Minute, "no address while the load balancer has none", statusIs())
	eventually(t, "why, in debug routes", expect(h.admin+"/debug/routes", "", 200,
		"--publish-service "+c.ns+"/front: its load balancer has no address yet"))
	setLoadBalancer := func(addrs ...corev1.LoadBalancerIngress) {
		svc, err := c.kube.CoreV1().Services(c.ns).Get(t.Context(), "front", metav1.GetOptions{})
		c.must(svc, err)
		svc.Status.LoadBalancer.Ingress = addrs
		c.must(c.kube.CoreV1().Services(c.ns).UpdateStatus(t.Context(), svc, metav1.UpdateOptions{}))
	}
	setLoadBalancer(corev1.LoadBalancerIngress{IP: "192.0.2.7"}, corev1.LoadBalancerIngress{Hostname: "lb.example.net"})
	eventuallyWithin(t, time.Minute, "the load balancer's addresses in Ingress status",
		statusIs(networkingv1.IngressLoadBalancerIngress{IP: "192.0.2.7"}, networkingv1.IngressLoadBalancerIngress{Hostname: "lb.example.net"}))
	setLoadBalancer(corev1.LoadBalancerIngress{IP: "192.0.2.8"})
	eventuallyWithin(t, time.Minute, "the load balancer's new address in Ingress status", statusIs(networkingv1.IngressLoadBalancerIngress{IP: "192.0.2.8"}))
}
