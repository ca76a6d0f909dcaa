package main

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostgate/hostgate/proxy"
	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
	"github.com/hostgate/hostgate/watch"
)

// startController is a controller publishing to a proxy server of its
// own, which stops with the test, and the generation it serves.
func startController(t *testing.T) (*proxy.Server, *controller, *atomic.Pointer[generation]) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := proxy.New(proxy.Options{Logger: quiet, ShutdownDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	current := new(atomic.Pointer[generation])
	return srv, newController(srv, current, quiet, prometheus.NewRegistry()), current
}

// TestEndpointChurnDoesNotRecompile: a snapshot that differs only in its
// endpoints swaps the endpoint sets and keeps the compiled generation, so
// pod churn never recompiles routes; a route change makes a new one.
func TestEndpointChurnDoesNotRecompile(t *testing.T) {
	srv, ctrl, current := startController(t)
	listener := func(path string) []watch.Listener {
		return []watch.Listener{{Name: "127.0.0.1:0", Address: "127.0.0.1", Port: 0, Protocol: watch.ProtocolHTTP, Routes: []*router.Route{{
			ID:    router.RouteID{Kind: router.KindHTTPRoute, Namespace: "default", Name: "web"},
			Rules: []router.Rule{{Matches: []router.Match{{Path: router.PathMatch{Value: path}}}, Backends: []router.BackendRef{{Name: "default/web:80", Weight: 1}}}},
		}}}}
	}
	sets := map[string][]watch.Endpoint{}
	endpoints := func(addr string) *watch.EndpointSets {
		sets["default/web:80"] = []watch.Endpoint{{Address: addr, Ready: true}}
		return watch.NewEndpointSets(sets)
	}

	ctrl.publish(&watch.Snapshot{Listeners: listener("/"), Endpoints: endpoints("10.0.0.1:8080")}, nil)
	first := current.Load()
	// The generation served may be another copy, of the same number and
	// the same compiled table.
	recompiled := func() bool {
		gen := current.Load()
		return gen.Number != first.Number || gen.Listeners[0].table != first.Listeners[0].table
	}
	ctrl.publish(&watch.Snapshot{Listeners: listener("/"), Endpoints: endpoints("10.0.0.2:8080")}, nil)
	if recompiled() {
		t.Error("an endpoint-only change compiled a new generation")
	}
	if got := srv.Endpoints()["default/web:80"]; len(got) != 1 || got[0].Address != "10.0.0.2:8080" {
		t.Errorf("endpoints after the change = %+v, want 10.0.0.2:8080", got)
	}
	// Only the sets that changed go to the proxy: a new one comes, a gone
	// one goes, the others stay.
	sets["default/api:80"] = []watch.Endpoint{{Address: "10.0.0.3:8080", Ready: true}}
	ctrl.publish(&watch.Snapshot{Listeners: listener("/"), Endpoints: endpoints("10.0.0.2:8080")}, nil)
	delete(sets, "default/api:80")
	if got := srv.Endpoints(); len(got) != 2 || len(got["default/api:80"]) != 1 || got["default/web:80"][0].Address != "10.0.0.2:8080" {
		t.Errorf("endpoints after a set was added = %+v", got)
	}
	removed := time.Now()
	ctrl.publish(&watch.Snapshot{Listeners: listener("/"), Endpoints: endpoints("10.0.0.2:8080")}, nil)
	// A set no longer listed stays a while, for requests that chose a
	// route of the generation before; then it goes.
	if got := srv.Endpoints(); len(got) != 2 && time.Since(removed) < retireAfter {
		t.Errorf("endpoints right after a set was removed = %+v; want api's kept", got)
	}
	eventually(t, "the removed set to go", func() string {
		if got := srv.Endpoints(); len(got) != 1 || len(got["default/web:80"]) != 1 {
			return fmt.Sprintf("endpoints after a set was removed = %+v; want web's only", got)
		}
		return ""
	})
	if recompiled() {
		t.Error("an endpoint-only change compiled a new generation")
	}
	ctrl.publish(&watch.Snapshot{Listeners: listener("/api"), Endpoints: endpoints("10.0.0.2:8080")}, nil)
	if gen := current.Load(); gen == first || gen.Number != 2 {
		t.Errorf("a route change did not make generation 2 (got %d)", gen.Number)
	}
	// The problems /debug/routes shows follow every snapshot, whether it
	// compiles a generation or only changes endpoints.
	problems := func(list ...string) findings { return problemList(list) }
	ctrl.publish(&watch.Snapshot{Listeners: listener("/api"), Endpoints: endpoints("10.0.0.3:8080")}, problems("HTTPRoute default/web: Accepted=False"))
	if got := current.Load().Problems; !reflect.DeepEqual(got, []string{"HTTPRoute default/web: Accepted=False"}) || current.Load().Number != 2 {
		t.Errorf("after an endpoint change with a problem: generation %d, problems %q", current.Load().Number, got)
	}
	ctrl.publish(&watch.Snapshot{Listeners: listener("/"), Endpoints: endpoints("10.0.0.3:8080")}, problems("Ingress default/old: no rules"))
	if got := current.Load().Problems; !reflect.DeepEqual(got, []string{"Ingress default/old: no rules"}) || current.Load().Number != 3 {
		t.Errorf("after a route change with another problem: generation %d, problems %q", current.Load().Number, got)
	}
}

// TestUnchangedListenersKeepTheirCompilation: a route change at one
// listener leaves the routing table and certificates of another as they
// were, a certificate change still reaches the TLS handshake, and
// listeners with the same routes share a table.
func TestUnchangedListenersKeepTheirCompilation(t *testing.T) {
	_, ctrl, current := startController(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "backend") }))
	defer backend.Close()
	httpPort, httpsPort := freePort(t), freePort(t)
	route := func(path string) []*router.Route {
		return []*router.Route{{
			ID:    router.RouteID{Kind: router.KindHTTPRoute, Namespace: "default", Name: "web"},
			Rules: []router.Rule{{Matches: []router.Match{{Path: router.PathMatch{Type: router.PathPrefix, Value: path}}}, Backends: []router.BackendRef{{Name: "default/web:80", Weight: 1}}}},
		}}
	}
	ca := tlstest.NewCA(t)
	cert := func() []watch.Cert {
		certPEM, keyPEM := ca.Issue(t, "secure.example.com")
		return []watch.Cert{{Name: "default/tls", CertPEM: certPEM, KeyPEM: keyPEM}}
	}
	snapshot := func(path string, certs []watch.Cert) *watch.Snapshot {
		return &watch.Snapshot{
			Listeners: []watch.Listener{
				{Name: "http", Address: "127.0.0.1", Port: httpPort, Protocol: watch.ProtocolHTTP, Routes: route(path)},
				{Name: "https", Address: "127.0.0.1", Port: httpsPort, Protocol: watch.ProtocolHTTPS, Routes: route("/"), Certs: certs},
			},
			Endpoints: watch.NewEndpointSets(map[string][]watch.Endpoint{"default/web:80": {{Address: backend.Listener.Addr().String(), Ready: true, Weight: 1}}}),
		}
	}
	served := func() string {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", httpsPort), &tls.Config{ServerName: "secure.example.com", InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return string(conn.ConnectionState().PeerCertificates[0].Raw)
	}
	pemDER := func(c []watch.Cert) string {
		block, _ := pem.Decode(c[0].CertPEM)
		return string(block.Bytes)
	}

	first := cert()
	ctrl.publish(snapshot("/a", first), nil)
	before := current.Load()
	if served() != pemDER(first) {
		t.Fatal("the HTTPS listener does not present its certificate")
	}
	ctrl.publish(snapshot("/b", first), nil)
	after := current.Load()
	eventually(t, "changed route", expect(fmt.Sprintf("http://127.0.0.1:%d/b", httpPort), "", 200, "backend"))
	eventually(t, "changed route", expect(fmt.Sprintf("http://127.0.0.1:%d/a", httpPort), "", 404, ""))
	if after.Listeners[1].table != before.Listeners[1].table || after.Listeners[1].tls != before.Listeners[1].tls {
		t.Error("a route change at one listener compiled the other again")
	}
	if after.Listeners[0].table == before.Listeners[0].table {
		t.Error("the changed listener kept its old table")
	}

	second := cert()
	ctrl.publish(snapshot("/b", second), nil)
	if served() != pemDER(second) {
		t.Error("a new certificate of an unchanged route set is not served")
	}

	// The same routes at both listeners, as Ingresses have: one table.
	ctrl.publish(snapshot("/", second), nil)
	if shared := current.Load(); shared.Listeners[0].table != shared.Listeners[1].table {
		t.Error("listeners with the same routes have a table each")
	}
	eventually(t, "shared table", expect(fmt.Sprintf("http://127.0.0.1:%d/a", httpPort), "", 200, "backend"))

	// The same certificates with a client validation: a new store.
	plain := current.Load().Listeners[1].tls
	validating := snapshot("/", second)
	validating.Listeners[1].ClientValidations = []watch.ClientValidation{{Name: "default/gw/https", CAPEM: ca.PEM}}
	ctrl.publish(validating, nil)
	if current.Load().Listeners[1].tls == plain {
		t.Error("a client validation added to unchanged certificates is not served")
	}
}

// TestRouteChangesFromAnotherSnapshotAreNotTrusted: a listener's Changes
// are followed only from the routes the served table was compiled from.
// Changes from a snapshot the controller never got (the source skipped
// it) would leave a changed route out, and its old version served.
func TestRouteChangesFromAnotherSnapshotAreNotTrusted(t *testing.T) {
	_, ctrl, current := startController(t)
	routes := func(webPath, apiPath string) []*router.Route {
		route := func(name, path string) *router.Route {
			return &router.Route{
				ID:        router.RouteID{Kind: router.KindHTTPRoute, Namespace: "default", Name: name},
				Hostnames: []string{name + ".example.com"},
				Rules:     []router.Rule{{Matches: []router.Match{{Path: router.PathMatch{Type: router.PathPrefix, Value: path}}}, Backends: []router.BackendRef{{Name: "default/" + name + ":80", Weight: 1}}}},
			}
		}
		return []*router.Route{route("web", webPath), route("api", apiPath)}
	}
	listener := func(routes []*router.Route, changes *watch.RouteChanges) []watch.Listener {
		return []watch.Listener{{Name: "127.0.0.1:0", Address: "127.0.0.1", Protocol: watch.ProtocolHTTP, ListenerHostnames: []string{""}, Routes: routes, Changes: changes}}
	}
	served := func() []router.HostDescription { return current.Load().Listeners[0].table.Describe() }
	first := routes("/a", "/x")
	ctrl.publish(&watch.Snapshot{Listeners: listener(first, nil)}, nil)

	skipped := routes("/b", "/x")
	last := routes("/b", "/y")
	last[0] = skipped[0]
	ctrl.publish(&watch.Snapshot{Listeners: listener(last, &watch.RouteChanges{Base: skipped, IDs: []router.RouteID{last[1].ID}})}, nil)
	want, _ := router.Recompile(nil, last, "")
	if got := served(); !reflect.DeepEqual(got, want.Describe()) {
		t.Errorf("after changes from a skipped snapshot, serving\n%+v\nwant\n%+v", got, want.Describe())
	}

	// From the routes served, they are followed.
	next := slices.Clone(last)
	next[1] = routes("/b", "/z")[1]
	ctrl.publish(&watch.Snapshot{Listeners: listener(next, &watch.RouteChanges{Base: last, IDs: []router.RouteID{next[1].ID}})}, nil)
	want, _ = router.Recompile(nil, next, "")
	if got := served(); !reflect.DeepEqual(got, want.Describe()) {
		t.Errorf("after changes from the last snapshot, serving\n%+v\nwant\n%+v", got, want.Describe())
	}
}

// TestAnyListenerOrRouteChangeIsSeen: the controller compares snapshots
// field by field, not with reflect.DeepEqual, so a change of any field of
// a listener or of one of its routes must still count as a change (and be
// compiled), including fields added to watch.Listener or router.Route
// later. A listener's Changes say how its Routes came to be, not what it
// serves.
func TestAnyListenerOrRouteChangeIsSeen(t *testing.T) {
	base := func() []watch.Listener {
		return []watch.Listener{{
			Name: "127.0.0.1:443", Address: "127.0.0.1", Port: 443, Protocol: watch.ProtocolHTTPS,
			Hostnames: []string{"a.example.com"}, ListenerHostnames: []string{"a.example.com"},
			Routes: []*router.Route{{
				ID:      router.RouteID{Kind: router.KindHTTPRoute, Namespace: "default", Name: "web"},
				Created: time.Unix(1, 0), Hostnames: []string{"a.example.com"}, Listener: "a.example.com",
				Rules: []router.Rule{{Backends: []router.BackendRef{{Name: "default/web:80", Weight: 1}}}},
			}},
			Certs: []watch.Cert{{Name: "default/a"}},
		}}
	}
	if !sameListeners(base(), base()) {
		t.Fatal("equal listeners built apart compare different")
	}
	check := func(what string, field func(l *watch.Listener) reflect.Value) {
		t.Helper()
		v := base()
		perturb(t, field(&v[0]))
		if sameListeners(base(), v) {
			t.Errorf("a change of %s is not seen", what)
		}
	}
	listenerType := reflect.TypeFor[watch.Listener]()
	for i := range listenerType.NumField() {
		if listenerType.Field(i).Name == "Changes" {
			continue
		}
		check("Listener."+listenerType.Field(i).Name, func(l *watch.Listener) reflect.Value { return reflect.ValueOf(l).Elem().Field(i) })
	}
	routeType := reflect.TypeFor[router.Route]()
	for i := range routeType.NumField() {
		check("Route."+routeType.Field(i).Name, func(l *watch.Listener) reflect.Value { return reflect.ValueOf(l.Routes[0]).Elem().Field(i) })
	}
	check("a rule's backend", func(l *watch.Listener) reflect.Value {
		return reflect.ValueOf(&l.Routes[0].Rules[0].Backends[0].Weight).Elem()
	})
}

// perturb changes v to a different value of its type.
func perturb(t *testing.T, v reflect.Value) {
	t.Helper()
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Second)))
	case v.Kind() == reflect.String:
		v.SetString(v.String() + "x")
	case v.Kind() == reflect.Int || v.Kind() == reflect.Int32:
		v.SetInt(v.Int() + 1)
	case v.Kind() == reflect.Slice:
		v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
	case v.Kind() == reflect.Struct:
		perturb(t, v.Field(0))
	case v.Kind() == reflect.Map:
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.Zero(v.Type().Key()), reflect.Zero(v.Type().Elem()))
		v.Set(m)
	default:
		t.Fatalf("perturb: %s is not handled", v.Type())
	}
}

// problemList is findings of problems alone.
type problemList []string

func (l problemList) Problems() []string                           { return l }
func (problemList) IngressAnnotations() []watch.IngressAnnotations { return nil }

// TestBackendSwitchFailsNoRequest: a route that moves to another Service,
// whose old endpoint set leaves the snapshot in the same change, serves
// every request in between from one backend or the other. Removing the
// old set before the new routes were applied left the old routes a
// moment without endpoints: 503s at every such switch (a GitOps rollout
// that renames a Service, or the first live configuration replacing the
// state file's).
func TestBackendSwitchFailsNoRequest(t *testing.T) {
	_, ctrl, _ := startController(t)
	_, blue := serveHTTP(t, "127.0.0.1", answer("blue"))
	_, green := serveHTTP(t, "127.0.0.1", answer("green"))
	// Many listeners make applying a generation take long enough for a
	// request to fall into the gap between endpoints and routes, if there
	// is one.
	ports := make([]int, 64)
	for i := range ports {
		ports[i] = freePort(t)
	}
	servedBy := func(service, addr string) *watch.Snapshot {
		backend := "default/" + service + ":80"
		routes := []*router.Route{{
			ID:    router.RouteID{Kind: router.KindHTTPRoute, Namespace: "default", Name: "web"},
			Rules: []router.Rule{{Matches: []router.Match{{Path: router.PathMatch{Value: "/"}}}, Backends: []router.BackendRef{{Name: backend, Weight: 1}}}},
		}}
		snap := &watch.Snapshot{Endpoints: watch.NewEndpointSets(map[string][]watch.Endpoint{backend: {{Address: addr, Ready: true}}})}
		for _, port := range ports {
			snap.Listeners = append(snap.Listeners, watch.Listener{Name: fmt.Sprintf("127.0.0.1:%d", port), Address: "127.0.0.1", Port: port, Protocol: watch.ProtocolHTTP, Routes: routes})
		}
		return snap
	}
	ctrl.publish(servedBy("blue", blue), nil)
	url := fmt.Sprintf("http://127.0.0.1:%d/", ports[0])
	eventually(t, "the first route", expect(url, "", 200, "blue"))

	stop := make(chan struct{})
	failures := make(chan string, 2)
	for range 2 {
		go func() {
			var first string
			for n := 0; ; n++ {
				select {
				case <-stop:
					failures <- first
					return
				default:
				}
				code, body := get(url, "")
				if (code != 200 || body != "blue" && body != "green") && first == "" {
					first = fmt.Sprintf("request %d: %d %q", n, code, body)
				}
			}
		}()
	}
	for i := range 200 {
		if i%2 == 0 {
			ctrl.publish(servedBy("green", green), nil)
		} else {
			ctrl.publish(servedBy("blue", blue), nil)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	for range 2 {
		if first := <-failures; first != "" {
			t.Errorf("a request failed while routes switched between Services: %s", first)
		}
	}
}

// TestEndpointChangesTold: the endpoint sets a Snapshot says it changed
// give what comparing every set gives, and changes told against other
// sets than the last ones are not trusted.
func TestEndpointChangesTold(t *testing.T) {
	set := func(addr string) []watch.Endpoint { return []watch.Endpoint{{Address: addr}} }
	sets := map[string][]watch.Endpoint{}
	for i := range 50 {
		sets[fmt.Sprintf("ns/svc-%d:80", i)] = set(fmt.Sprintf("10.0.0.%d:80", i))
	}
	prev := watch.NewEndpointSets(sets)
	sets["ns/svc-1:80"] = set("10.0.1.1:80")                // changed
	sets["ns/svc-2:80"] = slices.Clone(sets["ns/svc-2:80"]) // a new slice, the same endpoints
	delete(sets, "ns/svc-3:80")
	sets["ns/svc-new:80"] = set("10.0.1.2:80")
	next := watch.NewEndpointSets(sets)
	told := []string{"ns/svc-1:80", "ns/svc-2:80", "ns/svc-3:80", "ns/svc-new:80", "ns/svc-gone-before:80"}
	compared := func(changed map[string][]watch.Endpoint, removed []string) string {
		slices.Sort(removed)
		return fmt.Sprint(changed, removed)
	}
	want := compared(endpointChanges(prev, &watch.Snapshot{Endpoints: next}))
	if want != compared(map[string][]watch.Endpoint{"ns/svc-1:80": set("10.0.1.1:80"), "ns/svc-new:80": set("10.0.1.2:80")}, []string{"ns/svc-3:80"}) {
		t.Fatalf("comparing every set: %s", want)
	}
	snap := &watch.Snapshot{Endpoints: next, EndpointChanges: &watch.EndpointChanges{Base: prev, Names: told}}
	if got := compared(endpointChanges(prev, snap)); got != want {
		t.Errorf("told what changed: %s, want %s", got, want)
	}
	other := watch.NewEndpointSets(maps.Collect(prev.All()))
	snap.EndpointChanges.Base, snap.EndpointChanges.Names = other, []string{"ns/svc-1:80"}
	if got := compared(endpointChanges(prev, snap)); got != want {
		t.Errorf("told changes against another map: %s, want %s", got, want)
	}
}

// TestRouteChangesToldWithPassthrough: on a socket that also passes TLS
// through (an ssl-passthrough Ingress on the Ingress HTTPS socket), a
// route change is compiled from what changed, as on any other socket,
// and serves what a compilation of every route serves.
func TestRouteChangesToldWithPassthrough(t *testing.T) {
	route := func(kind router.Kind, name, path string) *router.Route {
		r := &router.Route{ID: router.RouteID{Kind: kind, Namespace: "default", Name: name}, Hostnames: []string{name + ".example.com"}}
		if !kind.IsL4() {
			r.Rules = []router.Rule{{Matches: []router.Match{{Path: router.PathMatch{Type: router.PathPrefix, Value: path}}}, Backends: []router.BackendRef{{Name: "default/" + name + ":80", Weight: 1}}}}
		} else {
			r.Listener = r.Hostnames[0]
			r.Rules = []router.Rule{{Backends: []router.BackendRef{{Name: "default/" + name + ":443", Weight: 1}}}}
		}
		return r
	}
	listener := func(routes []*router.Route, changes *watch.RouteChanges) *watch.Snapshot {
		return &watch.Snapshot{Listeners: []watch.Listener{{
			Name: "127.0.0.1:443", Address: "127.0.0.1", Port: 443, Protocol: watch.ProtocolHTTPS,
			ListenerHostnames: []string{""}, TLSHostnames: []string{"secure.example.com"}, Routes: routes, Changes: changes,
		}}}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	first := []*router.Route{route(router.KindIngress, "web", "/a"), route(router.KindIngressPassthrough, "secure", ""), route(router.KindIngress, "api", "/x")}
	gen := compileSnapshot(listener(first, nil), 1, nil, quiet)
	next := slices.Clone(first)
	next[2] = route(router.KindIngress, "api", "/y")
	changed := compileSnapshot(listener(next, &watch.RouteChanges{Base: first, IDs: []router.RouteID{next[2].ID}}), 2, gen, quiet)
	table := changed.Listeners[0].table
	if _, told := table.GoneSince(gen.Listeners[0].table.Serial()); !told {
		t.Error("the change was compiled by pairing every route, not from what changed")
	}
	want, _ := router.Recompile(nil, []*router.Route{next[0], next[2]}, "")
	if !reflect.DeepEqual(table.Describe(), want.Describe()) {
		t.Errorf("serving\n%+v\nwant\n%+v", table.Describe(), want.Describe())
	}
}
