package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"

	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/internal/kubetest"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
)

// TestClusterTrustBundles: what hostgate trusts follows ClusterTrustBundles
// as the API server (v1beta1, as Kubernetes 1.36 serves it) changes them,
// over real sockets. A TLS backend whose certificate CA A signed is
// reachable only while the bundle its BackendTLSPolicy names holds A; a
// client certificate of CA C gets through the HTTPS listener only once the
// bundle of the Gateway's frontend validation holds C, and the listener
// reports the bundle while it is missing.
func TestClusterTrustBundles(t *testing.T) {
	env := kubetest.Shared(t)
	c := newCluster(t, env, "trust-bundles")
	caA, caB, clientCA, serverCA := tlstest.NewCA(t), tlstest.NewCA(t), tlstest.NewCA(t), tlstest.NewCA(t)

	backend := serveTLS(t, podAddress(t), caA, "backend.example.com", answer("from the TLS backend"))
	c.backend("secure", backend)
	// Cluster-scoped, so named after the test on the shared control plane.
	backendBundle, clientBundle := c.ns+"-backends", c.ns+"-clients"
	bundles := c.kube.CertificatesV1beta1().ClusterTrustBundles()
	setBundle := func(name string, ca *tlstest.CA) {
		t.Helper()
		bundle, err := bundles.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			c.must(bundles.Create(t.Context(), &certificatesv1beta1.ClusterTrustBundle{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       certificatesv1beta1.ClusterTrustBundleSpec{TrustBundle: string(ca.PEM)},
			}, metav1.CreateOptions{}))
			t.Cleanup(func() { _ = bundles.Delete(context.Background(), name, metav1.DeleteOptions{}) })
			return
		}
		bundle.Spec.TrustBundle = string(ca.PEM)
		c.must(bundles.Update(t.Context(), bundle, metav1.UpdateOptions{}))
	}
	setBundle(backendBundle, caB)
	c.must(c.gw.GatewayV1().BackendTLSPolicies(c.ns).Create(t.Context(), &gatewayv1.BackendTLSPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "secure"},
		Spec: gatewayv1.BackendTLSPolicySpec{
			TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: "secure"}}},
			Validation: gatewayv1.BackendTLSPolicyValidation{
				Hostname:          "backend.example.com",
				CACertificateRefs: []gatewayv1.LocalObjectReference{{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle", Name: gatewayv1.ObjectName(backendBundle)}},
			},
		},
	}, metav1.CreateOptions{}))

	serverCert, serverKey := serverCA.Issue(t, "secure.example.com")
	c.tlsSecret("server", serverCert, serverKey)
	httpPort, httpsPort := freePort(t), freePort(t)
	c.gateway(httpPort, httpsPort, "server")
	c.must(c.gw.GatewayV1().Gateways(c.ns).Patch(t.Context(), "gw", types.MergePatchType, c.mergePatch(map[string]any{"spec": map[string]any{"tls": map[string]any{
		"frontend": map[string]any{"default": map[string]any{"validation": map[string]any{"caCertificateRefs": []any{
			map[string]any{"group": "certificates.k8s.io", "kind": "ClusterTrustBundle", "name": clientBundle},
		}}}},
	}}}), metav1.PatchOptions{}))
	c.route("web", "secure.example.com", "/", "secure")
	c.hostgate(env, "--ingress-class", "trust-bundles", "--http-addr=", "--https-addr=")

	// The backend: CA B is no use, A is, and then B again is not.
	plain := fmt.Sprintf("http://127.0.0.1:%d/", httpPort)
	eventuallyWithin(t, time.Minute, "the policy accepted", func() string {
		p, err := c.gw.GatewayV1().BackendTLSPolicies(c.ns).Get(t.Context(), "secure", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		for _, a := range p.Status.Ancestors {
			if meta.IsStatusConditionTrue(a.Conditions, string(gatewayv1.PolicyConditionAccepted)) &&
				meta.IsStatusConditionTrue(a.Conditions, string(gatewayv1.BackendTLSPolicyConditionResolvedRefs)) {
				return ""
			}
		}
		return fmt.Sprintf("policy status %+v, want Accepted and ResolvedRefs", p.Status.Ancestors)
	})
	untrusted := func() string {
		if code, body := get(plain, "secure.example.com"); code < 500 {
			return fmt.Sprintf("GET = %d %q, want 5xx: the bundle does not hold the backend's CA", code, body)
		}
		return ""
	}
	eventuallyWithin(t, time.Minute, "the backend untrusted", untrusted)
	setBundle(backendBundle, caA)
	eventuallyWithin(t, time.Minute, "the backend trusted", expect(plain, "secure.example.com", 200, "from the TLS backend"))
	setBundle(backendBundle, caB)
	eventuallyWithin(t, time.Minute, "the backend untrusted again", untrusted)
	setBundle(backendBundle, caA)

	// The clients: no bundle, one without their CA, one with it.
	listener := func(wantReason string) func() string {
		return func() string {
			gw, err := c.gw.GatewayV1().Gateways(c.ns).Get(t.Context(), "gw", metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			for _, l := range gw.Status.Listeners {
				if l.Name == "https" {
					if got := meta.FindStatusCondition(l.Conditions, string(gatewayv1.ListenerConditionResolvedRefs)); got != nil && got.Reason == wantReason {
						return ""
					}
					return fmt.Sprintf("listener conditions %+v, want ResolvedRefs %s", l.Conditions, wantReason)
				}
			}
			return fmt.Sprintf("listeners %+v, want https", gw.Status.Listeners)
		}
	}
	eventuallyWithin(t, time.Minute, "the missing bundle reported", listener(string(gatewayv1.ListenerReasonInvalidCACertificateRef)))
	certPEM, keyPEM := clientCA.Issue(t, "client.example.com")
	clientCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	secure := fmt.Sprintf("127.0.0.1:%d", httpsPort)
	mutual := func(wantOK bool) func() string {
		return func() string {
			code, body, err := getMutualTLS(secure, "secure.example.com", serverCA.Pool, clientCert)
			switch {
			case wantOK && (err != nil || code != 200 || body != "from the TLS backend"):
				return fmt.Sprintf("GET over mutual TLS = %d %q, %v; want 200 from the backend", code, body, err)
			case !wantOK && err == nil:
				return fmt.Sprintf("GET over mutual TLS = %d %q; want the client certificate refused", code, body)
			}
			return ""
		}
	}
	setBundle(clientBundle, caB)
	eventuallyWithin(t, time.Minute, "the bundle resolved", listener(string(gatewayv1.ListenerReasonResolvedRefs)))
	eventuallyWithin(t, time.Minute, "the client refused", mutual(false))
	setBundle(clientBundle, clientCA)
	eventuallyWithin(t, time.Minute, "the client let in", mutual(true))
}

// serveTLS serves h over TLS on host at a free port until the test ends,
// with a certificate of ca for name.
func serveTLS(t *testing.T, host string, ca *tlstest.CA, name string, h http.Handler) string {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, name)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort(host, "0"), &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	// Refused handshakes are what the test expects some of: not worth a
	// line of the test's output each.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// getMutualTLS sends GET / to addr for host over a new TLS connection that
// presents cert; an error says the request got no answer.
func getMutualTLS(addr, host string, roots *x509.CertPool, cert tls.Certificate) (int, string, error) {
	transport := &http.Transport{
		TLSClientConfig: &tls.Config{ServerName: host, RootCAs: roots, Certificates: []tls.Certificate{cert}},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	resp, err := client.Get("https://" + host + "/")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
