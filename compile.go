package main

import (
	"log/slog"
	"net"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/hostgate/hostgate/proxy"
	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore"
	"github.com/hostgate/hostgate/watch"
)

// generation is one translated and compiled configuration: what the proxy
// serves and what /debug/routes shows.
type generation struct {
	Number    uint64          `json:"generation"`
	Built     time.Time       `json:"built"`
	Listeners []listenerState `json:"listeners"`
	// LeftOut names routes and certificates that could not be compiled,
	// with the reason; the rest is served.
	LeftOut []string `json:"leftOut,omitempty"`
	// Problems are what translation left out or could not serve as
	// written, one line per object and condition (as in their status).
	Problems []string `json:"problems,omitempty"`
	// Annotations are the outcomes of the ingress-nginx annotations of
	// each Ingress that has some.
	Annotations []watch.IngressAnnotations `json:"ingressAnnotations,omitempty"`

	config proxy.Config
}

type listenerState struct {
	Address  string `json:"address"`
	Protocol string `json:"protocol"`
	// Hosts is filled in only when /debug/routes is asked for JSON:
	// describing 10,000 routes takes longer than compiling them.
	Hosts []router.HostDescription `json:"hosts"`
	table *router.Table
	// l4 is the table of a TLS or TCP listener, or of the TLS listeners
	// sharing an HTTPS one's socket, whose L4Routes are filled in as
	// Hosts are; l4Errs what it left out.
	l4       *router.L4Table
	l4Errs   []error
	L4Routes []router.L4Description `json:"l4Routes,omitempty"`
	// served is table with the listener filters, what the proxy serves.
	served *router.Table

	// What the listener was compiled from and what that left out, so that
	// the next generation can reuse the table or the certificate store
	// when their input is the same.
	spec                watch.Listener
	tls                 *tlsstore.Store
	routeErrs, certErrs []error
}

// compileSnapshot turns a translated Snapshot into the proxy's listener set.
// Routes and certificates that fail to compile are left out and listed; the
// translator already validated them, so this is a second line of defence.
// The routing tables and certificate stores of prev (nil for the first
// generation) are reused where their routes or certificates did not
// change: a route change at one listener leaves the others' alone and
// rebuilds only the host tables of its own hostnames there, and 1,000
// certificates are not parsed again for it. Listeners with the same
// routes (the HTTP and HTTPS listeners of Ingresses) share one table.
func compileSnapshot(snap *watch.Snapshot, number uint64, prev *generation, log *slog.Logger) *generation {
	gen := &generation{Number: number, Built: time.Now()}
	previous := map[string]*listenerState{}
	if prev != nil {
		for i := range prev.Listeners {
			previous[prev.Listeners[i].spec.Name] = &prev.Listeners[i]
		}
	}
	for _, l := range snap.Listeners {
		address := net.JoinHostPort(l.Address, strconv.Itoa(l.Port))
		if l.Protocol.L4() {
			gen.addL4(address, l, previous[l.Name])
			continue
		}
		// Changes are read here, and would keep the last snapshot's
		// routes with the generation.
		state := listenerState{Address: address, spec: l}
		state.spec.Changes = nil
		p := previous[l.Name]
		routes, tlsRoutes := l.SplitTLS()
		sameInput := func(s *listenerState) bool {
			return s != nil && slices.Equal(s.spec.ListenerHostnames, l.ListenerHostnames) && sameRoutes(s.spec.Routes, l.Routes)
		}
		if i := slices.IndexFunc(gen.Listeners, func(s listenerState) bool { return sameInput(&s) }); i >= 0 {
			state.table, state.routeErrs = gen.Listeners[i].table, gen.Listeners[i].routeErrs
		} else if sameInput(p) {
			state.table, state.routeErrs = p.table, p.routeErrs
		} else {
			state.table, state.routeErrs = recompile(p, l, routes)
		}
		pl := proxy.Listener{Address: address, Routes: state.table}
		if len(l.TLSHostnames) > 0 {
			if sameInput(p) && sameL4Listeners(p.spec, l) {
				state.l4, state.l4Errs = p.l4, p.l4Errs
			} else {
				state.l4, state.l4Errs = router.CompileL4Socket(tlsRoutes, l.L4Listeners())
			}
			pl.L4 = state.l4
		}
		if len(l.ListenerFilters) > 0 && state.table != nil {
			filtered, err := state.table.WithListenerFilters(l.ListenerFilters)
			if err != nil {
				// Not served without its filters: requests it would
				// guard must not pass unasked.
				state.routeErrs = append(slices.Clip(state.routeErrs), err)
				filtered = nil
			}
			pl.Routes = filtered
		}
		state.served = pl.Routes
		if l.Protocol == watch.ProtocolHTTPS {
			pl.Protocol = proxy.HTTPS
			state.buildTLS(p)
			pl.TLS = state.tls
		}
		state.Protocol = pl.Protocol.String()
		gen.LeftOut = append(gen.LeftOut, describeErrors(address, state.routeErrs)...)
		gen.LeftOut = append(gen.LeftOut, describeErrors(address, state.l4Errs)...)
		gen.LeftOut = append(gen.LeftOut, describeErrors(address, state.certErrs)...)
		gen.config.Listeners = append(gen.config.Listeners, pl)
		gen.Listeners = append(gen.Listeners, state)
	}
	for _, msg := range gen.LeftOut {
		log.Warn("left out of the configuration", "problem", msg)
	}
	return gen
}

// recompile compiles routes, those of l's routing table, from the table
// of prev, the listener of the same name in the last generation (nil for
// none). When l's Changes are from the routes prev was compiled from, only
// the routes they name are compared and compiled.
func recompile(prev *listenerState, l watch.Listener, routes []*router.Route) (*router.Table, []error) {
	if prev == nil {
		return router.Recompile(nil, routes, l.ListenerHostnames...)
	}
	if c := l.Changes; c != nil && len(c.Base) > 0 && len(c.Base) == len(prev.spec.Routes) && &c.Base[0] == &prev.spec.Routes[0] {
		// The table was compiled from the HTTP routes of the base alone:
		// on a socket with TLS passthrough (any ssl-passthrough Ingress
		// puts the Ingress HTTPS socket there), the whole base never
		// matched it, and every change paired every route again.
		based := l
		based.Routes = c.Base
		base, _ := based.SplitTLS()
		return router.RecompileChanged(prev.table, base, routes, c.IDs, l.ListenerHostnames...)
	}
	return router.Recompile(prev.table, routes, l.ListenerHostnames...)
}

// adoptRoutes takes, for each of gen's listeners, the routes of the one
// of listeners, equal to it (sameListeners), where they are another list:
// the next snapshot's Changes are against listeners, and only against the
// very routes a table was compiled from does recompile trust them. The
// routes of a route whose status alone changed are a new list, and until
// the next change of routes, recompile paired every route of the table
// again (and at 10,000 routes, rebuilt those of every status written
// since). It reports whether it took any.
func (gen *generation) adoptRoutes(listeners []watch.Listener) bool {
	adopted := false
	for i := range gen.Listeners {
		spec, l := &gen.Listeners[i].spec, listeners[i]
		if len(l.Routes) == 0 || &spec.Routes[0] == &l.Routes[0] {
			continue
		}
		if !adopted {
			// The generation served now is read by /debug/routes.
			gen.Listeners = slices.Clone(gen.Listeners)
			spec, adopted = &gen.Listeners[i].spec, true
		}
		spec.Routes = l.Routes
	}
	return adopted
}

// addL4 compiles a TLS, TCP or UDP listener. Its table is small
// (a route per hostname) and built again whenever its routes change.
func (gen *generation) addL4(address string, l watch.Listener, prev *listenerState) {
	state := listenerState{Address: address, Protocol: string(l.Protocol), spec: l}
	if prev != nil && prev.l4 != nil && sameL4Listeners(prev.spec, l) && sameRoutes(prev.spec.Routes, l.Routes) {
		state.l4, state.routeErrs = prev.l4, prev.routeErrs
	} else {
		state.l4, state.routeErrs = router.CompileL4Socket(l.Routes, l.L4Listeners())
	}
	protocol := proxy.TCP
	switch l.Protocol {
	case watch.ProtocolTLS:
		protocol = proxy.TLSPassthrough
	case watch.ProtocolUDP:
		protocol = proxy.UDP
		// Named as the proxy names it, apart from a TCP listener of
		// the same address.
		state.Address = l.Name
	}
	if len(l.Terminate) > 0 {
		state.buildTLS(prev)
	}
	gen.LeftOut = append(gen.LeftOut, describeErrors(state.Address, state.routeErrs)...)
	gen.LeftOut = append(gen.LeftOut, describeErrors(state.Address, state.certErrs)...)
	gen.config.Listeners = append(gen.config.Listeners, proxy.Listener{Address: address, Protocol: protocol, L4: state.l4, TLS: state.tls})
	gen.Listeners = append(gen.Listeners, state)
}

// buildTLS builds the certificate store of the listener, or takes prev's
// when its certificates and client validations are the same.
func (state *listenerState) buildTLS(prev *listenerState) {
	l := &state.spec
	if prev != nil && prev.tls != nil && reflect.DeepEqual(prev.spec.Certs, l.Certs) && reflect.DeepEqual(prev.spec.ClientValidations, l.ClientValidations) {
		state.tls, state.certErrs = prev.tls, prev.certErrs
		return
	}
	state.tls, state.certErrs = tlsstore.Build(certificates(l.Certs), clientValidations(l.ClientValidations)...)
}

// sameL4Listeners reports whether a and b have the same listeners for
// an L4Table.
func sameL4Listeners(a, b watch.Listener) bool {
	return slices.Equal(a.ListenerHostnames, b.ListenerHostnames) && slices.Equal(a.TLSHostnames, b.TLSHostnames) && slices.Equal(a.Terminate, b.Terminate)
}

// sameListeners reports whether two snapshots' listeners are equal.
// Translation hands out the very rules and endpoint sets of the objects
// that did not change, so they compare mostly by pointer: reflect.DeepEqual
// of 10,000 routes took milliseconds of every change.
func sameListeners(a, b []watch.Listener) bool {
	return slices.EqualFunc(a, b, func(x, y watch.Listener) bool {
		return x.Name == y.Name && x.Address == y.Address && x.Port == y.Port && x.Protocol == y.Protocol &&
			slices.Equal(x.Hostnames, y.Hostnames) && sameL4Listeners(x, y) &&
			sameRoutes(x.Routes, y.Routes) && reflect.DeepEqual(x.Certs, y.Certs) && reflect.DeepEqual(x.ClientValidations, y.ClientValidations) &&
			reflect.DeepEqual(x.ListenerFilters, y.ListenerFilters)
	})
}

func sameRoutes(a, b []*router.Route) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i, x := range a {
		y := b[i]
		if x == y {
			continue
		}
		if x.ID != y.ID || !x.Created.Equal(y.Created) || x.Listener != y.Listener ||
			!slices.Equal(x.Hostnames, y.Hostnames) || !sameSlice(x.Rules, y.Rules) {
			return false
		}
	}
	return true
}

// endpointChanges returns the sets of snap that prev did not have or had
// otherwise, and the names of prev that snap has not.
func endpointChanges(prev *watch.EndpointSets, snap *watch.Snapshot) (changed map[string][]watch.Endpoint, removed []string) {
	next := snap.Endpoints
	// Translation hands the last sets on when none changed: nothing to
	// compare, where comparing 10,000 sets took half a millisecond.
	if prev != nil && prev == next {
		return nil, nil
	}
	// An EndpointSlice change says which sets it changed: those are the
	// names compared, and the ones it removed are found among them.
	names := next.All()
	told := snap.EndpointChanges != nil && prev != nil && snap.EndpointChanges.Base == prev
	if told {
		names = func(yield func(string, []watch.Endpoint) bool) {
			for _, name := range snap.EndpointChanges.Names {
				eps, has := next.Get(name)
				if _, had := prev.Get(name); had && !has {
					removed = append(removed, name)
				}
				if has && !yield(name, eps) {
					return
				}
			}
		}
	}
	stayed := 0 // names of prev that next has
	for name, eps := range names {
		old, had := prev.Get(name)
		if had {
			stayed++
			if sameSlice(old, eps) {
				continue
			}
		}
		if changed == nil {
			changed = map[string][]watch.Endpoint{}
		}
		changed[name] = eps
	}
	if !told && stayed < prev.Len() {
		for name := range prev.All() {
			if _, ok := next.Get(name); !ok {
				removed = append(removed, name)
			}
		}
	}
	return changed, removed
}

// sameSlice is reflect.DeepEqual that does not look into two slices with
// the same elements in memory.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0] || reflect.DeepEqual(a, b))
}

func describeErrors(address string, errs []error) []string {
	var out []string
	for _, err := range errs {
		out = append(out, "listener "+address+": "+err.Error())
	}
	return out
}

// described is gen with the Hosts of every listener filled in.
func (gen *generation) described() *generation {
	out := *gen
	out.Listeners = slices.Clone(gen.Listeners)
	for i := range out.Listeners {
		l := &out.Listeners[i]
		if l.l4 != nil {
			l.L4Routes = l.l4.Describe()
		}
		if !l.spec.Protocol.L4() {
			l.Hosts = l.table.Describe()
		}
	}
	return &out
}

func certificates(certs []watch.Cert) []tlsstore.Certificate {
	out := make([]tlsstore.Certificate, 0, len(certs))
	for _, c := range certs {
		out = append(out, tlsstore.Certificate{
			Name:         c.Name,
			Hosts:        c.Hostnames,
			Default:      len(c.Hostnames) == 0,
			CertPEM:      c.CertPEM,
			KeyPEM:       tlsstore.PrivateKey(c.KeyPEM),
			CipherSuites: c.CipherSuites,
		})
	}
	return out
}

func clientValidations(vs []watch.ClientValidation) []tlsstore.ClientValidation {
	out := make([]tlsstore.ClientValidation, 0, len(vs))
	for _, v := range vs {
		out = append(out, tlsstore.ClientValidation{Name: v.Name, Host: v.Hostname, CAPEM: v.CAPEM, Optional: v.Optional})
	}
	return out
}

// proxyEndpoints converts endpoint sets for the proxy. Endpoints that are
// not ready serve only when a set has no ready endpoint, as a terminating
// pod still finishing its work is better than an error.
func proxyEndpoints(sets map[string][]watch.Endpoint) map[string][]proxy.Endpoint {
	out := make(map[string][]proxy.Endpoint, len(sets))
	for name, eps := range sets {
		var ready, serving []proxy.Endpoint
		for _, ep := range eps {
			pe := proxy.Endpoint{Address: ep.Address, Weight: uint32(max(ep.Weight, 0))}
			if ep.Ready {
				ready = append(ready, pe)
			} else {
				serving = append(serving, pe)
			}
		}
		if len(ready) == 0 {
			ready = serving
		}
		out[name] = ready
	}
	return out
}
