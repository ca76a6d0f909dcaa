package watch

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/hostgate/hostgate/router"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestGolden")

// goldenOptions are the options of every golden case unless its
// options.yaml says otherwise.
var goldenOptions = Options{IngressHTTPAddr: ":80", IngressHTTPSAddr: ":443"}

// TestGolden translates testdata/<case>/*.yaml (options.yaml holds
// Options, CRDBundleVersion and CRDChannel, experimental unless it says
// otherwise) and compares the served routes with snapshot.golden and the
// conditions with reports.golden. Run with -update to rewrite them.
func TestGolden(t *testing.T) {
	eachCase(t, func(t *testing.T, dir string, objs *objects, opts Options) {
		snap, reports := translate(objs, opts)
		checkGolden(t, filepath.Join(dir, "snapshot.golden"), describeSnapshot(snap))
		checkGolden(t, filepath.Join(dir, "reports.golden"), describeReports(t, reports))
	})
}

// eachCase runs check on every golden case, each in a subtest.
func eachCase(t *testing.T, check func(t *testing.T, dir string, objs *objects, opts Options)) {
	dirs, err := filepath.Glob("testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			objs, opts := loadCase(t, dir)
			check(t, dir, objs, opts)
		})
	}
}

func loadCase(t testing.TB, dir string) (*objects, Options) {
	t.Helper()
	c := struct {
		Options
		CRDBundleVersion string
		CRDChannel       string
	}{goldenOptions, "v1.7.0", channelExperimental}
	if data, err := os.ReadFile(filepath.Join(dir, "options.yaml")); err == nil {
		if err := yaml.UnmarshalStrict(data, &c); err != nil {
			t.Fatalf("options.yaml: %v", err)
		}
	}
	objs := &objects{crdBundleVersion: c.CRDBundleVersion, crdChannel: c.CRDChannel}
	decodeCase(t, dir, objs)
	return objs, c.Options
}

// decodeCase adds the objects of the files of dir to objs.
func decodeCase(t testing.TB, dir string, objs adder) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if filepath.Base(f) == "options.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if errs := decodeYAML(filepath.Base(f), bytes.NewReader(data), objs); len(errs) > 0 {
			t.Fatalf("loading %s: %v", f, errs)
		}
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// describeSnapshot prints a Snapshot as /debug/routes shows its tables,
// with the listener, certificate and endpoint facts around them.
func describeSnapshot(s *Snapshot) string {
	var b strings.Builder
	for _, l := range s.Listeners {
		fmt.Fprintf(&b, "listener %s %s", l.Name, l.Protocol)
		if len(l.Hostnames) > 0 {
			fmt.Fprintf(&b, " hostnames=%s", strings.Join(l.Hostnames, ","))
		}
		b.WriteString("\n")
		for _, c := range l.Certs {
			fmt.Fprintf(&b, "  cert %s hostnames=%s", c.Name, strings.Join(c.Hostnames, ","))
			for _, id := range c.CipherSuites {
				fmt.Fprintf(&b, " suite=%s", tls.CipherSuiteName(id))
			}
			b.WriteString("\n")
		}
		for _, v := range l.ClientValidations {
			fmt.Fprintf(&b, "  client validation %s hostname=%q optional=%t authorities=%s\n", v.Name, v.Hostname, v.Optional, subjects(v.CAPEM))
		}
		if l.Protocol.L4() {
			table, errs := router.CompileL4Socket(l.Routes, l.L4Listeners())
			writeTable(&b, errs, table.WriteText)
			continue
		}
		routes, tlsRoutes := l.SplitTLS()
		if len(l.TLSHostnames) > 0 {
			fmt.Fprintf(&b, "  TLS listeners hostnames=%q\n", l.TLSHostnames)
			table, errs := router.CompileL4Socket(tlsRoutes, l.L4Listeners())
			writeTable(&b, errs, table.WriteText)
		}
		table, errs := router.Recompile(nil, routes)
		if len(l.ListenerFilters) > 0 {
			filtered, err := table.WithListenerFilters(l.ListenerFilters)
			if err != nil {
				errs = append(errs, err)
			} else {
				table = filtered
			}
		}
		writeTable(&b, errs, table.WriteText)
	}
	for _, k := range slices.Sorted(maps.Keys(maps.Collect(s.Endpoints.All()))) {
		fmt.Fprintf(&b, "endpoints %s\n", k)
		for _, e := range setNamed(s, k) {
			fmt.Fprintf(&b, "  %s ready=%t weight=%d\n", e.Address, e.Ready, e.Weight)
		}
	}
	return b.String()
}

// writeTable writes a listener's compile errors and table, indented.
func writeTable(b *strings.Builder, errs []error, writeText func(io.Writer) error) {
	for _, err := range errs {
		fmt.Fprintf(b, "  compile error: %v\n", err)
	}
	var tb strings.Builder
	_ = writeText(&tb)
	for line := range strings.Lines(tb.String()) {
		b.WriteString("  " + line)
	}
}

// subjects lists the common names of the PEM certificates of bundle.
func subjects(bundle []byte) string {
	var names []string
	for {
		var block *pem.Block
		if block, bundle = pem.Decode(bundle); block == nil {
			return strings.Join(names, ",")
		}
		name := "unparsable"
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			name = c.Subject.CommonName
		}
		names = append(names, name)
	}
}

// The printed form of Reports: conditions on one line each.
type (
	printedReports struct {
		GatewayClasses []printedClass   `json:"gatewayClasses,omitempty"`
		Gateways       []printedGateway `json:"gateways,omitempty"`
		ListenerSets   []printedGateway `json:"listenerSets,omitempty"`
		Routes         []printedRoute   `json:"routes,omitempty"`
		Policies       []printedRoute   `json:"policies,omitempty"`
		Ingresses      []printedIngress `json:"ingresses,omitempty"`
	}
	printedClass struct {
		Name              string   `json:"name"`
		Conditions        []string `json:"conditions"`
		SupportedFeatures int      `json:"supportedFeatures"`
	}
	printedGateway struct {
		Name                 string            `json:"name"`
		Addresses            []string          `json:"addresses,omitempty"`
		Conditions           []string          `json:"conditions"`
		AttachedListenerSets *int32            `json:"attachedListenerSets,omitempty"`
		Listeners            []printedListener `json:"listeners,omitempty"`
		// Infrastructure is one line per object that stands for it.
		Infrastructure []string `json:"infrastructure,omitempty"`
	}
	printedListener struct {
		Name           string   `json:"name"`
		AttachedRoutes int32    `json:"attachedRoutes"`
		SupportedKinds []string `json:"supportedKinds"`
		Conditions     []string `json:"conditions"`
	}
	printedRoute struct {
		Name    string          `json:"name"`
		Parents []printedParent `json:"parents"`
	}
	printedParent struct {
		ParentRef  string   `json:"parentRef"`
		Conditions []string `json:"conditions"`
	}
	printedIngress struct {
		Name        string   `json:"name"`
		Addresses   []string `json:"addresses,omitempty"`
		Problems    []string `json:"problems,omitempty"`
		Annotations []string `json:"annotations,omitempty"`
	}
)

func describeReports(t testing.TB, r *Reports) string {
	var p printedReports
	for _, c := range r.GatewayClasses {
		p.GatewayClasses = append(p.GatewayClasses, printedClass{c.Object.Name, printConditions(c.Status.Conditions), len(c.Status.SupportedFeatures)})
	}
	for _, g := range r.Gateways {
		pg := printedGateway{Name: g.Object.Namespace + "/" + g.Object.Name, Conditions: printConditions(g.Status.Conditions), AttachedListenerSets: g.Status.AttachedListenerSets}
		for _, a := range g.Status.Addresses {
			if a.Routability == nil {
				pg.Addresses = append(pg.Addresses, a.Value)
			} else {
				pg.Addresses = append(pg.Addresses, fmt.Sprintf("%s routability=%q", a.Value, *a.Routability))
			}
		}
		for _, l := range g.Status.Listeners {
			pg.Listeners = append(pg.Listeners, printListener(l))
		}
		pg.Infrastructure = printInfrastructure(g.Infrastructure)
		p.Gateways = append(p.Gateways, pg)
	}
	for _, s := range r.ListenerSets {
		ps := printedGateway{Name: s.Object.Namespace + "/" + s.Object.Name, Conditions: printConditions(s.Status.Conditions)}
		for _, l := range s.Status.Listeners {
			ps.Listeners = append(ps.Listeners, printListener(gatewayv1.ListenerStatus(l)))
		}
		p.ListenerSets = append(p.ListenerSets, ps)
	}
	for _, rr := range r.HTTPRoutes {
		p.Routes = append(p.Routes, printRoute("HTTPRoute", &rr.Object.ObjectMeta, rr.Parents))
	}
	for _, rr := range r.GRPCRoutes {
		p.Routes = append(p.Routes, printRoute("GRPCRoute", &rr.Object.ObjectMeta, rr.Parents))
	}
	for _, rr := range r.TLSRoutes {
		p.Routes = append(p.Routes, printRoute("TLSRoute", &rr.Object.ObjectMeta, rr.Parents))
	}
	for _, rr := range r.TCPRoutes {
		p.Routes = append(p.Routes, printRoute("TCPRoute", &rr.Object.ObjectMeta, rr.Parents))
	}
	for _, rr := range r.UDPRoutes {
		p.Routes = append(p.Routes, printRoute("UDPRoute", &rr.Object.ObjectMeta, rr.Parents))
	}
	for _, pr := range r.BackendTLSPolicies {
		parents := make([]gatewayv1.RouteParentStatus, len(pr.Ancestors))
		for i, a := range pr.Ancestors {
			parents[i] = gatewayv1.RouteParentStatus{ParentRef: a.AncestorRef, ControllerName: a.ControllerName, Conditions: a.Conditions}
		}
		p.Policies = append(p.Policies, printRoute("BackendTLSPolicy", &pr.Object.ObjectMeta, parents))
	}
	for _, i := range r.Ingresses {
		pi := printedIngress{Name: i.Object.Namespace + "/" + i.Object.Name, Problems: i.Problems}
		for _, a := range i.Annotations {
			pi.Annotations = append(pi.Annotations, a.String())
		}
		for _, a := range i.LoadBalancer.Ingress {
			pi.Addresses = append(pi.Addresses, a.IP)
		}
		p.Ingresses = append(p.Ingresses, pi)
	}
	out, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func printInfrastructure(infra *Infrastructure) []string {
	if infra == nil {
		return nil
	}
	svc := infra.Service
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%s=%d/%s", p.Name, p.Port, p.Protocol))
	}
	owner := svc.OwnerReferences[0]
	out := []string{fmt.Sprintf("Service %s/%s %s owner=%s/%s labels=%s annotations=%s ports=%s", svc.Namespace, svc.Name, svc.Spec.Type,
		owner.Kind, owner.Name, printMap(svc.Labels), printMap(svc.Annotations), strings.Join(ports, ","))}
	for _, s := range infra.EndpointSlices {
		var addresses []string
		for _, e := range s.Endpoints {
			addresses = append(addresses, e.Addresses...)
		}
		out = append(out, fmt.Sprintf("EndpointSlice %s/%s %s labels=%s addresses=%s ports=%d", s.Namespace, s.Name, s.AddressType,
			printMap(s.Labels), strings.Join(addresses, ","), len(s.Ports)))
	}
	return out
}

func printMap(m map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kv = append(kv, k+"="+m[k])
	}
	return "{" + strings.Join(kv, ",") + "}"
}

func printListener(l gatewayv1.ListenerStatus) printedListener {
	pl := printedListener{Name: string(l.Name), AttachedRoutes: l.AttachedRoutes, SupportedKinds: []string{}, Conditions: printConditions(l.Conditions)}
	for _, k := range l.SupportedKinds {
		pl.SupportedKinds = append(pl.SupportedKinds, string(k.Kind))
	}
	return pl
}

func printRoute(kind string, meta *metav1.ObjectMeta, parents []gatewayv1.RouteParentStatus) printedRoute {
	pr := printedRoute{Name: kind + " " + meta.Namespace + "/" + meta.Name, Parents: []printedParent{}}
	for _, ps := range parents {
		ref := ps.ParentRef
		s := string(derefOr(ref.Namespace, gatewayv1.Namespace(meta.Namespace))) + "/" + string(ref.Name)
		if ref.SectionName != nil {
			s += " section " + string(*ref.SectionName)
		}
		if ref.Port != nil {
			s += fmt.Sprintf(" port %d", *ref.Port)
		}
		pr.Parents = append(pr.Parents, printedParent{s + " by " + string(ps.ControllerName), printConditions(ps.Conditions)})
	}
	return pr
}

func printConditions(conds []metav1.Condition) []string {
	out := []string{}
	for _, c := range conds {
		out = append(out, fmt.Sprintf("%s=%s %s (gen %d): %s", c.Type, c.Status, c.Reason, c.ObservedGeneration, c.Message))
	}
	return out
}

// TestGoldenCoversReasons keeps the golden cases honest: every reason the
// translator can report appears in at least one of them.
func TestGoldenCoversReasons(t *testing.T) {
	files, err := filepath.Glob("testdata/*/reports.golden")
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(data)
	}
	for _, reason := range []string{
		// GatewayClass
		"Accepted=True Accepted", "Accepted=False InvalidParameters", "SupportedVersion=True SupportedVersion", "SupportedVersion=False UnsupportedVersion",
		// Gateway
		"Accepted=True ListenersNotValid", "Accepted=False ListenersNotValid", "Accepted=False UnsupportedAddress",
		"Programmed=True Programmed", "Programmed=False AddressNotAssigned", "Programmed=False AddressNotUsable",
		"InsecureFrontendValidationMode=True ConfigurationChanged", "ResolvedRefs=True ResolvedRefs", "ResolvedRefs=False InvalidClientCertificateRef",
		// Listener
		"Accepted=False UnsupportedProtocol", "Accepted=False PortUnavailable", "Conflicted=True ProtocolConflict", "Conflicted=True HostnameConflict",
		"Conflicted=False NoConflicts", "ResolvedRefs=False InvalidCertificateRef", "ResolvedRefs=False RefNotPermitted", "ResolvedRefs=False InvalidRouteKinds",
		"ResolvedRefs=False InvalidCACertificateRef", "ResolvedRefs=False InvalidCACertificateKind", "Accepted=False NoValidCACertificate",
		"Programmed=False Invalid", "Programmed=False HostnameConflict", "Programmed=False ProtocolConflict",
		// ListenerSet
		"Accepted=False NotAllowed", "Programmed=False NotAllowed", "Accepted=False ParentNotAccepted",
		"Accepted=False ListenersNotValid", "Programmed=False ListenersNotValid", "Programmed=False ParentNotProgrammed",
		// Route parents
		"Accepted=False NotAllowedByListeners", "Accepted=False NoMatchingListenerHostname", "Accepted=False NoMatchingParent",
		"Accepted=False UnsupportedValue", "ResolvedRefs=True ResolvedRefs", "ResolvedRefs=False RefNotPermitted", "ResolvedRefs=False BackendNotFound",
		"ResolvedRefs=False InvalidKind", "ResolvedRefs=False UnsupportedProtocol",
		// BackendTLSPolicy ancestors
		"Accepted=False Conflicted", "Accepted=False NoValidCACertificate", "Accepted=False Invalid",
		"ResolvedRefs=False InvalidCACertificateRef", "ResolvedRefs=True ResolvedRefs",
	} {
		if !strings.Contains(all.String(), reason) {
			t.Errorf("no golden case reports %q", reason)
		}
	}
}
