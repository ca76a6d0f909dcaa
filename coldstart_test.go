package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/hostgate/hostgate/internal/kubetest"
	"github.com/hostgate/hostgate/watch"
)

// TestColdStartFromStateFile: a hostgate that ran against the API server
// leaves its configuration in --state-file; a new one that starts while
// the API server is down serves it, over HTTP and, with the certificate
// from the file, over TLS; when the API server is back the live
// configuration replaces it.
//
// The route redirects instead of proxying: the API server refuses loopback
// addresses in EndpointSlices, so no backend of a test on loopback could
// be reached. That the endpoints were restored too is checked where the
// proxy shows them, in /debug/routes.
func TestColdStartFromStateFile(t *testing.T) {
	env := kubetest.Start(t)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	gw := gatewayclient.NewForConfigOrDie(env.Config)
	const ns, host = "cold", "cold.example.com"
	httpPort, httpsPort := freePort(t), freePort(t)
	certPEM, keyPEM := selfSignedCert(t, host)

	create := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("create %s: %v", what, err)
		}
	}
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	create("namespace", err)
	_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cold-tls"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	}, metav1.CreateOptions{})
	create("secret", err)
	_, err = kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	create("service", err)
	_, err = kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "app-1", Labels: map[string]string{discoveryv1.LabelServiceName: "app"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.7.7"}}},
	}, metav1.CreateOptions{})
	create("endpoint slice", err)
	_, err = gw.GatewayV1().GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "cold"},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: watch.DefaultGatewayController},
	}, metav1.CreateOptions{})
	create("gateway class", err)
	_, err = gw.GatewayV1().Gateways(ns).Create(ctx, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: "cold",
			Addresses:        []gatewayv1.GatewaySpecAddress{{Type: new(gatewayv1.IPAddressType), Value: "127.0.0.1"}},
			Listeners: []gatewayv1.Listener{
				{Name: "http", Port: gatewayv1.PortNumber(httpPort), Protocol: gatewayv1.HTTPProtocolType},
				{Name: "https", Port: gatewayv1.PortNumber(httpsPort), Protocol: gatewayv1.HTTPSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{
					CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "cold-tls"}},
				}},
			},
		},
	}, metav1.CreateOptions{})
	create("gateway", err)
	route := func(redirectTo string) *gatewayv1.HTTPRoute {
		return &gatewayv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "web"}}},
				Hostnames:       []gatewayv1.Hostname{host},
				Rules: []gatewayv1.HTTPRouteRule{{
					Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{
						Hostname: new(gatewayv1.PreciseHostname(redirectTo)), StatusCode: new(302),
					}}},
				}, {
					Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchPathPrefix), Value: new("/app")}}},
					BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
						BackendObjectReference: gatewayv1.BackendObjectReference{Name: "app", Port: new(gatewayv1.PortNumber(80))},
					}}},
				}},
			},
		}
	}
	_, err = gw.GatewayV1().HTTPRoutes(ns).Create(ctx, route("v1.example.net"), metav1.CreateOptions{})
	create("route", err)

	state := filepath.Join(t.TempDir(), "state", "snapshot.json")
	args := []string{"--kubeconfig", env.Kubeconfig, "--state-file", state, "--gateway-class", "", "--lease-namespace", "default"}
	plain := fmt.Sprintf("http://127.0.0.1:%d/page", httpPort)
	secure := fmt.Sprintf("https://127.0.0.1:%d/page", httpsPort)
	plainClient := &http.Client{CheckRedirect: noRedirects, Timeout: 5 * time.Second}
	tlsClient := trustingClient(t, certPEM, host)
	redirectsTo := func(client *http.Client, url, location string) func() string {
		return func() string {
			req, err := http.NewRequest("GET", url, nil)
			if err != nil {
				return err.Error()
			}
			req.Host = host
			resp, err := client.Do(req)
			if err != nil {
				return err.Error()
			}
			resp.Body.Close()
			if got := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.Contains(got, location) {
				return fmt.Sprintf("GET %s = %d Location %q, want 302 to %s", url, resp.StatusCode, got, location)
			}
			return ""
		}
	}

	first := startHostgate(t, args...)
	eventuallyWithin(t, time.Minute, "the route from the API server", redirectsTo(plainClient, plain, "v1.example.net"))
	eventually(t, "the state file", func() string {
		if _, err := os.Stat(state); err != nil {
			return err.Error()
		}
		return ""
	})
	first.stop(t)
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}

	second := startHostgate(t, args...)
	eventually(t, "ready from the state file", expect(second.admin+"/readyz", "", 200, "ok"))
	eventually(t, "HTTP from the state file", redirectsTo(plainClient, plain, "v1.example.net"))
	eventually(t, "TLS with the certificate from the state file", redirectsTo(tlsClient, secure, "v1.example.net"))
	eventually(t, "endpoints from the state file", expect(second.admin+"/debug/routes", "", 200, "10.244.7.7:8080 weight=1"))
	if logs := second.logs.String(); !strings.Contains(logs, "serving the state file until the API server syncs") || !strings.Contains(logs, state) {
		t.Errorf("the log does not say that the state file %s is served:\n%s", state, logs)
	}

	// From here to the switch, every request gets one configuration or
	// the other: the first live translation must be complete.
	stopPolling := make(chan struct{})
	polled := make(chan []string)
	go func() {
		var failures []string
		for {
			select {
			case <-stopPolling:
				polled <- failures
				return
			case <-time.After(5 * time.Millisecond):
			}
			if problem := redirectsTo(plainClient, plain, ".example.net")(); problem != "" {
				failures = append(failures, time.Now().Format(time.StampMilli)+" "+problem)
			}
		}
	}()
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	live, err := gw.GatewayV1().HTTPRoutes(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live.Spec = route("v2.example.net").Spec
	if _, err := gw.GatewayV1().HTTPRoutes(ns).Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Informers retry their first list with a backoff of up to 30s.
	eventuallyWithin(t, 90*time.Second, "the changed route from the API server", redirectsTo(plainClient, plain, "v2.example.net"))
	close(stopPolling)
	if failures := <-polled; len(failures) > 0 {
		t.Errorf("%d requests failed while the live configuration replaced the state file, the first: %s", len(failures), failures[0])
	}
	eventually(t, "the changed route over TLS", redirectsTo(tlsClient, secure, "v2.example.net"))
	if logs := second.logs.String(); !strings.Contains(logs, "the API server synced: serving its configuration instead of the state file") {
		t.Errorf("the log does not say that the live configuration replaced the state file:\n%s", logs)
	}
	second.stop(t)
	snap, _, err := watch.NewStateFile(state, nil, nil).Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Listeners) != 2 {
		t.Fatalf("state file after the switch holds %d listeners, want 2", len(snap.Listeners))
	}
	for _, l := range snap.Listeners {
		if redirect := l.Routes[0].Rules[0].Filters[0].Redirect; redirect.Hostname != "v2.example.net" {
			t.Errorf("state file after the switch redirects to %s on %s, want the live route to v2.example.net", redirect.Hostname, l.Name)
		}
	}
}

// stop stops h before the test ends and checks that it stopped cleanly.
func (h *runningHostgate) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("hostgate stopped with %v", err)
		}
		h.done <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatalf("hostgate did not stop\n%s", h.logs)
	}
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// trustingClient is an HTTP client that trusts only certPEM, for host,
// and does not follow redirects.
func trustingClient(t *testing.T, certPEM []byte, host string) *http.Client {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(certPEM) {
		t.Fatal("bad certificate")
	}
	return &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: host}},
		CheckRedirect: noRedirects,
		Timeout:       5 * time.Second,
	}
}

func selfSignedCert(t *testing.T, host string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// TestDamagedStateFileIsIgnored: a state file that cannot be used is
// skipped with a log line naming it and the reason, and hostgate keeps
// waiting for the API server instead of failing.
func TestDamagedStateFileIsIgnored(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	if err := os.WriteFile(state, []byte(`{"version": 1, "written": "2026-11-22T02:00:00Z", "listen`), 0o600); err != nil {
		t.Fatal(err)
	}
	// An API server that is not there: nothing listens on port 1.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startHostgate(t, "--kubeconfig", kubeconfig, "--state-file", state, "--gateway-class", "")
	eventually(t, "the reason in the log", func() string {
		logs := h.logs.String()
		if !strings.Contains(logs, "ignoring the state file") || !strings.Contains(logs, state) || !strings.Contains(logs, "not a state file: unexpected end of JSON input") {
			return "no log line naming the file and the reason:\n" + logs
		}
		return ""
	})
	eventually(t, "not ready without a configuration", expect(h.admin+"/readyz", "", 503, "not ready"))
	select {
	case err := <-h.done:
		t.Fatalf("hostgate stopped: %v", err)
	default:
	}
}
