package main

import (
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/tlsstore/tlstest"
)

// nginxTLSAuthIngresses: app.example.com checks client certificates of
// the Opaque Secret client-ca (verify on, the certificate to the
// backend); optional.example.com lets clients without one through;
// cn.example.com wants a subject CN of "allowed"; errors.example.com
// redirects failures; backend.example.com reaches a TLS backend that
// demands a client certificate, with proxy-ssl-secret's, verified with
// its ca.crt.
const nginxTLSAuthIngresses = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: mtls
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/auth-tls-secret: default/client-ca
    nginx.ingress.kubernetes.io/auth-tls-verify-client: "on"
    nginx.ingress.kubernetes.io/auth-tls-pass-certificate-to-upstream: "true"
spec:
  ingressClassName: nginx
  tls:
  - hosts: [app.example.com, optional.example.com, cn.example.com, errors.example.com, backend.example.com]
    secretName: server-tls
  rules:
  - host: app.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: optional
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/auth-tls-secret: client-ca
    nginx.ingress.kubernetes.io/auth-tls-verify-client: optional
spec:
  ingressClassName: nginx
  rules:
  - host: optional.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: cn
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/auth-tls-secret: client-ca
    nginx.ingress.kubernetes.io/auth-tls-match-cn: "CN=allowed"
spec:
  ingressClassName: nginx
  rules:
  - host: cn.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: errors
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/auth-tls-secret: client-ca
    nginx.ingress.kubernetes.io/auth-tls-error-page: https://errors.example.com/denied
spec:
  ingressClassName: nginx
  rules:
  - host: errors.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: backend
  namespace: default
  annotations:
    nginx.ingress.kubernetes.io/backend-protocol: HTTPS
    nginx.ingress.kubernetes.io/proxy-ssl-secret: default/backend-client
    nginx.ingress.kubernetes.io/proxy-ssl-verify: "on"
    nginx.ingress.kubernetes.io/proxy-ssl-name: backend.internal
    nginx.ingress.kubernetes.io/proxy-ssl-verify-depth: "1"
spec:
  ingressClassName: nginx
  rules:
  - host: backend.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: secure, port: {number: 443}}}}
`

// secretYAML is a Secret of type with data, as a file-mode document.
func secretYAML(t *testing.T, typ, namespace, name string, data map[string]string) string {
	b, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": typ,
		"metadata":   map[string]string{"name": name, "namespace": namespace},
		"stringData": data,
	})
	if err != nil {
		t.Fatal(err)
	}
	return "---\n" + string(b) + "\n"
}

// TestIngressNginxClientCertificates runs hostgate in file mode with
// ingress-nginx's auth-tls-* and proxy-ssl-* annotations and real
// certificates: clients without a certificate, with one of another
// authority, with a good one; the backend sees the outcome; a TLS backend
// that requires a client certificate gets proxy-ssl-secret's.
func TestIngressNginxClientCertificates(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "verify=%s subject=%s cert=%s", r.Header.Get("Ssl-Client-Verify"), r.Header.Get("Ssl-Client-Subject-Dn"), r.Header.Get("Ssl-Client-Cert"))
	}))
	defer backend.Close()

	serverCA, clientCA, otherCA, backendCA := tlstest.NewCA(t), tlstest.NewCA(t), tlstest.NewCA(t), tlstest.NewCA(t)
	// The TLS backend demands a certificate of clientCA: hostgate's,
	// from proxy-ssl-secret.
	backendCert, backendKey := backendCA.Issue(t, "backend.internal")
	pair, err := tls.X509KeyPair(backendCert, backendKey)
	if err != nil {
		t.Fatal(err)
	}
	tlsBackend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls backend saw client %s", r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	tlsBackend.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCA.Pool}
	tlsBackend.StartTLS()
	defer tlsBackend.Close()

	serverCert, serverKey := serverCA.Issue(t, "app.example.com", "optional.example.com", "cn.example.com", "errors.example.com", "backend.example.com")
	hostgateCert, hostgateKey := clientCA.Issue(t, "hostgate")
	config := nginxTLSAuthIngresses + loopbackService("default", "web", 80, backend.Listener.Addr().(*net.TCPAddr).Port) +
		loopbackService("default", "secure", 443, tlsBackend.Listener.Addr().(*net.TCPAddr).Port) +
		secretYAML(t, "kubernetes.io/tls", "default", "server-tls", map[string]string{"tls.crt": string(serverCert), "tls.key": string(serverKey)}) +
		// ingress-nginx's CA Secrets are often Opaque with ca.crt alone.
		secretYAML(t, "Opaque", "default", "client-ca", map[string]string{"ca.crt": string(clientCA.PEM)}) +
		secretYAML(t, "kubernetes.io/tls", "default", "backend-client", map[string]string{
			"tls.crt": string(hostgateCert), "tls.key": string(hostgateKey), "ca.crt": string(backendCA.PEM),
		})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	httpsPort := freePort(t)
	startHostgate(t, "--config", dir, "--ingress-class", "nginx",
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--https-addr", fmt.Sprintf("127.0.0.1:%d", httpsPort))

	keyPair := func(certPEM, keyPEM []byte) []tls.Certificate {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{pair}
	}
	good := keyPair(clientCA.Issue(t, "allowed"))
	goodOther := keyPair(clientCA.Issue(t, "someone"))
	wrong := keyPair(otherCA.Issue(t, "allowed"))
	// get sends a GET to host over a new connection presenting certs,
	// in HTTP/2 when h2 is set.
	h2 := false
	get := func(host string, certs []tls.Certificate) (code int, location, body string) {
		client := &http.Client{
			Transport: &http.Transport{ForceAttemptHTTP2: h2, TLSClientConfig: &tls.Config{
				RootCAs: serverCA.Pool, ServerName: host, Certificates: certs,
			}},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		defer client.CloseIdleConnections()
		req, err := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/x", httpsPort), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		// A client cannot pass a verification of its own off as hostgate's.
		req.Header.Set("Ssl-Client-Verify", "SUCCESS")
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err.Error()
		}
		defer resp.Body.Close()
		if h2 && resp.ProtoMajor != 2 {
			t.Errorf("%s: answered in %s, want HTTP/2", host, resp.Proto)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location"), string(b)
	}

	eventually(t, "good client certificate", func() string {
		if code, _, body := get("app.example.com", good); code != 200 || !strings.HasPrefix(body, "verify=SUCCESS subject=CN=allowed cert=-----BEGIN%20CERTIFICATE-----%0A") {
			return fmt.Sprintf("good certificate: %d %q", code, body)
		}
		return ""
	})
	_, _, body := get("app.example.com", good)
	escaped := body[strings.Index(body, "cert=")+len("cert="):]
	if pemText, err := url.PathUnescape(escaped); err != nil {
		t.Errorf("ssl-client-cert %q: %v", escaped, err)
	} else if block, _ := pem.Decode([]byte(pemText)); block == nil || block.Type != "CERTIFICATE" {
		t.Errorf("ssl-client-cert does not decode to a PEM certificate: %q", pemText)
	}
	for _, h2 = range []bool{false, true} {
		checkClientCertAnswers(t, map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], get, good, goodOther, wrong)
	}
	if code, location, _ := get("errors.example.com", wrong); code != 302 || location != "https://errors.example.com/denied" {
		t.Errorf("auth-tls-error-page: %d Location %q, want 302 to the error page", code, location)
	}
	if code, _, body := get("backend.example.com", nil); code != 200 || body != "tls backend saw client hostgate" {
		t.Errorf("proxy-ssl-secret: %d %q, want the TLS backend to see hostgate's client certificate", code, body)
	}
}

// checkClientCertAnswers checks the answers to clients with and without
// certificates of each kind.
func checkClientCertAnswers(t *testing.T, proto string, get func(host string, certs []tls.Certificate) (int, string, string), good, goodOther, wrong []tls.Certificate) {
	for _, c := range []struct {
		name  string
		host  string
		certs []tls.Certificate
		code  int
		body  string
	}{
		{"verify on, no certificate", "app.example.com", nil, 400, "bad request\n"},
		{"verify on, another authority's", "app.example.com", wrong, 400, "bad request\n"},
		{"optional, no certificate", "optional.example.com", nil, 200, "verify=NONE subject= cert="},
		{"optional, another authority's", "optional.example.com", wrong, 400, "bad request\n"},
		{"optional, good certificate", "optional.example.com", good, 200, "verify=SUCCESS subject=CN=allowed cert="},
		{"match-cn, allowed", "cn.example.com", good, 200, "verify=SUCCESS subject=CN=allowed cert="},
		{"match-cn, other subject", "cn.example.com", goodOther, 403, "forbidden\n"},
	} {
		if code, _, body := get(c.host, c.certs); code != c.code || body != c.body {
			t.Errorf("%s (%s): %d %q, want %d %q", c.name, proto, code, body, c.code, c.body)
		}
	}
}
