package watch

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/hostgate/hostgate/internal/kubetest"
	"github.com/hostgate/hostgate/router"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// recorder keeps the last translation a Source published.
type recorder struct {
	mu      sync.Mutex
	snap    *Snapshot
	reports *Reports
	last    time.Time // of the last publish
}

func (r *recorder) publish(s *Snapshot, rep *Reports) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snap, r.reports, r.last = s, rep, time.Now()
}

// settle waits until nothing was published for quiet: the events of the
// objects made before (which a loaded machine may deliver late) are
// translated, so that what comes next is the next change's alone.
func (r *recorder) settle(t *testing.T, quiet time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		r.mu.Lock()
		since := time.Since(r.last)
		r.mu.Unlock()
		if since >= quiet {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still publishing after 30 s")
		}
		time.Sleep(quiet - since)
	}
}

// waitFor polls the last translation until cond holds.
func (r *recorder) waitFor(t *testing.T, what string, timeout time.Duration, cond func(*Snapshot, *Reports) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r.mu.Lock()
		ok := r.snap != nil && cond(r.snap, r.reports)
		r.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startCluster runs a cluster Source against cfg for the rest of the test.
func startCluster(t *testing.T, cfg *rest.Config, opts Options) *recorder {
	t.Helper()
	rec := &recorder{}
	runSource(t)(NewCluster(cfg, opts, rec.publish, slog.New(slog.NewTextHandler(io.Discard, nil))))
	return rec
}

type clients struct {
	kube kubernetes.Interface
	gw   gatewayclient.Interface
}

func newClients(t *testing.T, cfg *rest.Config) clients {
	t.Helper()
	return clients{kube: kubernetes.NewForConfigOrDie(cfg), gw: gatewayclient.NewForConfigOrDie(cfg)}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// createBackend creates a Service web (port 80 to 8080) in ns and an
// EndpointSlice with the given addresses.
func (c clients) createBackend(t *testing.T, ns string, addresses ...string) *discoveryv1.EndpointSlice {
	t.Helper()
	ctx := context.Background()
	must[*corev1.Namespace](t)(c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	must[*corev1.Service](t)(c.kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{}))
	return must[*discoveryv1.EndpointSlice](t)(c.kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: addresses}},
	}, metav1.CreateOptions{}))
}

func (c clients) createIngress(t *testing.T, ns, name, host string, tlsSecret string) {
	t.Helper()
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.IngressSpec{
			IngressClassName: new(DefaultIngressClass),
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: new(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}},
				}}},
			}}}},
		},
	}
	if tlsSecret != "" {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: tlsSecret}}
	}
	must[*networkingv1.Ingress](t)(c.kube.NetworkingV1().Ingresses(ns).Create(context.Background(), ing, metav1.CreateOptions{}))
}

// createGateway creates a GatewayClass of ours, a Gateway on address:8080
// and an HTTPRoute to web in ns.
func (c clients) createGateway(t *testing.T, ns, class, address string) {
	t.Helper()
	ctx := context.Background()
	must[*gatewayv1.GatewayClass](t)(c.gw.GatewayV1().GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: DefaultGatewayController},
	}, metav1.CreateOptions{}))
	must[*gatewayv1.Gateway](t)(c.gw.GatewayV1().Gateways(ns).Create(ctx, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "gw"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(class),
			Addresses:        []gatewayv1.GatewaySpecAddress{{Type: new(gatewayv1.IPAddressType), Value: address}},
			Listeners:        []gatewayv1.Listener{{Name: "http", Port: 8080, Protocol: gatewayv1.HTTPProtocolType}},
		},
	}, metav1.CreateOptions{}))
	must[*gatewayv1.HTTPRoute](t)(c.gw.GatewayV1().HTTPRoutes(ns).Create(ctx, &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web", Port: new(gatewayv1.PortNumber(80))},
			}}}}},
		},
	}, metav1.CreateOptions{}))
}

// listenerNamed returns the listener of s called name, or nil.
func listenerNamed(s *Snapshot, name string) *Listener {
	i := slices.IndexFunc(s.Listeners, func(l Listener) bool { return l.Name == name })
	if i < 0 {
		return nil
	}
	return &s.Listeners[i]
}

// hasHost reports whether a listener serves a route for host.
func hasHost(s *Snapshot, name, host string) bool {
	l := listenerNamed(s, name)
	return l != nil && slices.ContainsFunc(l.Routes, func(r *router.Route) bool { return slices.Contains(r.Hostnames, host) })
}

func selfSigned(t *testing.T, host string) (certPEM, keyPEM []byte) {
	t.Helper()
	key := must[*ecdsa.PrivateKey](t)(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	serial := must[*big.Int](t)(rand.Int(rand.Reader, big.NewInt(1<<62)))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der := must[[]byte](t)(x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key))
	keyDER := must[[]byte](t)(x509.MarshalPKCS8PrivateKey(key))
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

func tlsSecret(name string, certPEM, keyPEM []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	}
}

// TestClusterServesChanges creates, changes and deletes objects and checks
// that every change reaches the published Snapshot and Reports.
func TestClusterServesChanges(t *testing.T) {
	env := kubetest.Shared(t)
	c := newClients(t, env.Config)
	ctx := context.Background()
	const ns = "serves-changes"
	rec := startCluster(t, env.Config, Options{IngressHTTPAddr: ":80", IngressHTTPSAddr: ":443", StatusAddresses: []string{"192.0.2.1"}})

	slice := c.createBackend(t, ns, "10.244.1.5")
	certA, keyA := selfSigned(t, "web.example.com")
	must[*corev1.Secret](t)(c.kube.CoreV1().Secrets(ns).Create(ctx, tlsSecret("web-tls", certA, keyA), metav1.CreateOptions{}))
	c.createIngress(t, ns, "web", "web.example.com", "web-tls")
	rec.waitFor(t, "the Ingress route and its endpoint", 30*time.Second, func(s *Snapshot, _ *Reports) bool {
		eps := setNamed(s, ns+"/web:80")
		return hasHost(s, ":80", "web.example.com") && len(eps) == 1 && eps[0].Address == "10.244.1.5:8080"
	})

	t.Run("endpoints", func(t *testing.T) {
		// Endpoints change without a translation: the Reports published
		// with them are the last translation's.
		rec.settle(t, 500*time.Millisecond)
		rec.mu.Lock()
		translated := rec.reports
		rec.mu.Unlock()
		retranslated := false
		sameReports := func(r *Reports) bool {
			retranslated = retranslated || r != translated
			return true
		}
		defer func() {
			if retranslated {
				t.Error("an EndpointSlice change was translated")
			}
		}()
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.1.6"}})
		must[*discoveryv1.EndpointSlice](t)(c.kube.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{}))
		rec.waitFor(t, "two endpoints", 30*time.Second, func(s *Snapshot, r *Reports) bool {
			return len(setNamed(s, ns+"/web:80")) == 2 && sameReports(r)
		})
		second := slice.DeepCopy()
		second.Name, second.ResourceVersion = "web-2", ""
		second.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.7"}, Conditions: discoveryv1.EndpointConditions{Ready: new(false), Serving: new(true)}}}
		must[*discoveryv1.EndpointSlice](t)(c.kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, second, metav1.CreateOptions{}))
		rec.waitFor(t, "a terminating endpoint of a second slice", 30*time.Second, func(s *Snapshot, r *Reports) bool {
			eps := setNamed(s, ns+"/web:80")
			return len(eps) == 3 && eps[2] == Endpoint{Address: "10.244.1.7:8080", Ready: false, Weight: 1} && sameReports(r)
		})
		if err := c.kube.DiscoveryV1().EndpointSlices(ns).Delete(ctx, second.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, "the second slice gone", 30*time.Second, func(s *Snapshot, r *Reports) bool {
			return len(setNamed(s, ns+"/web:80")) == 2 && sameReports(r)
		})
	})

	t.Run("secret rotation", func(t *testing.T) {
		rec.waitFor(t, "the first certificate", 30*time.Second, func(s *Snapshot, _ *Reports) bool {
			l := listenerNamed(s, ":443")
			return l != nil && len(l.Certs) == 1 && bytes.Equal(l.Certs[0].CertPEM, certA)
		})
		certB, keyB := selfSigned(t, "web.example.com")
		must[*corev1.Secret](t)(c.kube.CoreV1().Secrets(ns).Update(ctx, tlsSecret("web-tls", certB, keyB), metav1.UpdateOptions{}))
		rec.waitFor(t, "the rotated certificate", 30*time.Second, func(s *Snapshot, _ *Reports) bool {
			l := listenerNamed(s, ":443")
			return l != nil && len(l.Certs) == 1 && bytes.Equal(l.Certs[0].CertPEM, certB)
		})
	})

	t.Run("gateway", func(t *testing.T) {
		c.createGateway(t, ns, "serves-changes", "127.0.0.50")
		rec.waitFor(t, "the Gateway listener and a Programmed Gateway", 30*time.Second, func(s *Snapshot, r *Reports) bool {
			l := listenerNamed(s, "127.0.0.50:8080")
			if l == nil || len(l.Routes) != 1 {
				return false
			}
			i := slices.IndexFunc(r.Gateways, func(g GatewayReport) bool { return g.Object.Namespace == ns })
			return i >= 0 && conditionTrue(r.Gateways[i].Status.Conditions, "Programmed")
		})
	})

	t.Run("tcproute", func(t *testing.T) {
		// The informers watch TCPRoutes: one attaches to a TCP listener
		// and its report says so.
		must[*gatewayv1.Gateway](t)(c.gw.GatewayV1().Gateways(ns).Create(ctx, &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: "l4"},
			Spec: gatewayv1.GatewaySpec{
				GatewayClassName: "serves-changes",
				Addresses:        []gatewayv1.GatewaySpecAddress{{Type: new(gatewayv1.IPAddressType), Value: "127.0.0.52"}},
				Listeners:        []gatewayv1.Listener{{Name: "db", Port: 5432, Protocol: gatewayv1.TCPProtocolType}},
			},
		}, metav1.CreateOptions{}))
		must[*gatewayv1.TCPRoute](t)(c.gw.GatewayV1().TCPRoutes(ns).Create(ctx, &gatewayv1.TCPRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: gatewayv1.TCPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "l4"}}},
				Rules: []gatewayv1.TCPRouteRule{{BackendRefs: []gatewayv1.BackendRef{{
					BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web", Port: new(gatewayv1.PortNumber(80))},
				}}}},
			},
		}, metav1.CreateOptions{}))
		rec.waitFor(t, "the TCP listener with the TCPRoute, accepted", 30*time.Second, func(s *Snapshot, r *Reports) bool {
			l := listenerNamed(s, "127.0.0.52:5432")
			if l == nil || l.Protocol != ProtocolTCP || len(l.Routes) != 1 || l.Routes[0].ID.Kind != router.KindTCPRoute {
				return false
			}
			i := slices.IndexFunc(r.TCPRoutes, func(rr *RouteReport[*gatewayv1.TCPRoute]) bool { return rr.Object.Namespace == ns })
			return i >= 0 && len(r.TCPRoutes[i].Parents) == 1 && conditionTrue(r.TCPRoutes[i].Parents[0].Conditions, "Accepted")
		})
	})

	t.Run("client CA rotation", func(t *testing.T) {
		caA, _ := selfSigned(t, "client CA A")
		caB, _ := selfSigned(t, "client CA B")
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "client-ca"}, Data: map[string]string{"ca.crt": string(caA)}}
		cm = must[*corev1.ConfigMap](t)(c.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}))
		must[*gatewayv1.Gateway](t)(c.gw.GatewayV1().Gateways(ns).Create(ctx, &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: "mtls"},
			Spec: gatewayv1.GatewaySpec{
				GatewayClassName: "serves-changes",
				Addresses:        []gatewayv1.GatewaySpecAddress{{Type: new(gatewayv1.IPAddressType), Value: "127.0.0.51"}},
				TLS: &gatewayv1.GatewayTLSConfig{Frontend: &gatewayv1.FrontendTLSConfig{Default: gatewayv1.TLSConfig{
					Validation: &gatewayv1.FrontendTLSValidation{CACertificateRefs: []gatewayv1.ObjectReference{{Kind: "ConfigMap", Name: "client-ca"}}},
				}}},
				Listeners: []gatewayv1.Listener{{Name: "https", Port: 8443, Protocol: gatewayv1.HTTPSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{
					CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "web-tls"}},
				}}},
			},
		}, metav1.CreateOptions{}))
		validates := func(ca []byte) func(*Snapshot, *Reports) bool {
			return func(s *Snapshot, _ *Reports) bool {
				l := listenerNamed(s, "127.0.0.51:8443")
				return l != nil && len(l.ClientValidations) == 1 && bytes.Equal(l.ClientValidations[0].CAPEM, ca)
			}
		}
		rec.waitFor(t, "the listener validating clients with the first CA", 30*time.Second, validates(caA))
		cm.Data["ca.crt"] = string(caB)
		must[*corev1.ConfigMap](t)(c.kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}))
		rec.waitFor(t, "the rotated CA", 30*time.Second, validates(caB))
	})

	t.Run("delete", func(t *testing.T) {
		if err := c.kube.NetworkingV1().Ingresses(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		rec.waitFor(t, "the Ingress gone", 30*time.Second, func(s *Snapshot, _ *Reports) bool { return !hasHost(s, ":80", "web.example.com") })
	})
}

func conditionTrue(conds []metav1.Condition, typ string) bool {
	i := slices.IndexFunc(conds, func(c metav1.Condition) bool { return c.Type == typ })
	return i >= 0 && conds[i].Status == metav1.ConditionTrue
}

// TestClusterGatewayAPIInstalledLater starts without the CRDs: Ingresses
// are served, and Gateways once the CRDs are installed.
func TestClusterGatewayAPIInstalledLater(t *testing.T) {
	env := kubetest.Start(t, kubetest.WithoutGatewayAPI())
	c := newClients(t, env.Config)
	const ns = "later"
	rec := startCluster(t, env.Config, Options{IngressHTTPAddr: ":80"})
	c.createBackend(t, ns, "10.244.2.5")
	c.createIngress(t, ns, "web", "later.example.com", "")
	rec.waitFor(t, "the Ingress served without the CRDs", 30*time.Second, func(s *Snapshot, _ *Reports) bool { return hasHost(s, ":80", "later.example.com") })

	if err := env.InstallGatewayAPI(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.createGateway(t, ns, "later", "127.0.0.51")
	rec.waitFor(t, "the Gateway after the CRDs were installed", crdPollMissing+30*time.Second, func(s *Snapshot, _ *Reports) bool {
		l := listenerNamed(s, "127.0.0.51:8080")
		return l != nil && len(l.Routes) == 1 && hasHost(s, ":80", "later.example.com")
	})
}

// TestClusterAPIServerRestart stops the API server: the last translation
// stays, and changes made after the restart arrive as watches resume.
func TestClusterAPIServerRestart(t *testing.T) {
	env := kubetest.Start(t)
	c := newClients(t, env.Config)
	const ns = "restart"
	rec := startCluster(t, env.Config, Options{IngressHTTPAddr: ":80"})
	c.createBackend(t, ns, "10.244.3.5")
	c.createIngress(t, ns, "before", "before.example.com", "")
	rec.waitFor(t, "the first Ingress", 30*time.Second, func(s *Snapshot, _ *Reports) bool { return hasHost(s, ":80", "before.example.com") })

	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	rec.waitFor(t, "the Ingress still served while the API server is down", time.Second, func(s *Snapshot, _ *Reports) bool {
		return hasHost(s, ":80", "before.example.com")
	})
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	c.createIngress(t, ns, "after", "after.example.com", "")
	rec.waitFor(t, "the Ingress created after the restart", 90*time.Second, func(s *Snapshot, _ *Reports) bool {
		return hasHost(s, ":80", "after.example.com") && hasHost(s, ":80", "before.example.com")
	})
}

// TestClusterStartDuringOutage: a Source that starts while the API server
// is down, so that discovery fails, publishes as its first translation
// once the API server is back one with the Gateway API objects. That
// translation replaces what --state-file restored: one without them would
// close the Gateways' listeners until discovery is asked again.
func TestClusterStartDuringOutage(t *testing.T) {
	env := kubetest.Start(t)
	c := newClients(t, env.Config)
	const ns = "start-during-outage"
	c.createBackend(t, ns, "10.244.4.5")
	c.createGateway(t, ns, ns, "127.0.0.52")
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	// A dialer that fails at once, as the default one does once the API
	// server has been down for longer than redialFor.
	cfg := rest.CopyConfig(env.Config)
	cfg.Dial = (&net.Dialer{}).DialContext
	first := make(chan *Snapshot, 1)
	runSource(t)(NewCluster(cfg, Options{}, func(s *Snapshot, _ *Reports) {
		select {
		case first <- s:
		default:
		}
	}, slog.New(slog.NewTextHandler(io.Discard, nil))))
	time.Sleep(time.Second) // for discovery to fail
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-first:
		if l := listenerNamed(s, "127.0.0.52:8080"); l == nil || len(l.Routes) != 1 {
			t.Errorf("the first translation after the API server came back lacks the Gateway and its route: %+v", s.Listeners)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("no translation within 90s of the API server's return")
	}
}

// TestListFirst: once ListFirst ran, informers list before they watch
// (client-go's WatchListClient off), and client-go's other settings stay
// as they were.
func TestListFirst(t *testing.T) {
	if _, set := os.LookupEnv("KUBE_FEATURE_" + string(clientfeatures.WatchListClient)); set {
		t.Skip("the environment sets WatchListClient, which ListFirst leaves as it says")
	}
	gates := clientfeatures.FeatureGates()
	others := map[clientfeatures.Feature]bool{}
	for _, f := range []clientfeatures.Feature{clientfeatures.ClientsAllowCBOR, clientfeatures.InformerResourceVersion} {
		others[f] = gates.Enabled(f)
	}
	ListFirst()
	gates = clientfeatures.FeatureGates()
	if gates.Enabled(clientfeatures.WatchListClient) {
		t.Error("WatchListClient still on after ListFirst")
	}
	for f, was := range others {
		if gates.Enabled(f) != was {
			t.Errorf("%s changed from %v", f, was)
		}
	}
}
