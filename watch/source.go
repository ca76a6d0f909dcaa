package watch

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Publish receives every translation. Neither the Snapshot nor the Reports
// may be changed, by anyone, afterwards: the next Snapshot may share parts
// of this one, and Reports point at the store's objects, which the
// receiver must copy before changing.
type Publish func(*Snapshot, *Reports)

// Source watches a configuration (files or a cluster) and publishes a new
// translation after every change.
type Source struct {
	opts    Options
	publish Publish
	log     *slog.Logger
	// run starts whatever fills the store and calls changed on every
	// change; it returns when ctx is done.
	run func(ctx context.Context, changed func()) error
	// list returns the current store.
	list func() *objects
	// lastProblems suppresses logging the same problems again, and
	// lastAnnotations the same annotation outcomes of an Ingress.
	lastProblems    []string
	lastAnnotations map[string][]AnnotationOutcome
	// memo keeps per-object results for the next translation.
	memo *memo
	// statusKick is statusChanged's signal to Start.
	statusKick chan struct{}
	// slicesOf lists the EndpointSlices of a Service, nil where the
	// source does not know them apart (files, which are read whole).
	slicesOf func(types.NamespacedName) []*endpointSlice
	// endpointKick is endpointsChanged's signal to Start, and
	// changedServices the Services it was given since Start took them.
	endpointKick    chan struct{}
	mu              sync.Mutex
	changedServices map[types.NamespacedName]struct{}
	// last and lastReports are what was published last; only Start's
	// goroutine uses them.
	last        *Snapshot
	lastReports *Reports
}

// debounce is the least time between the starts of two translations. A
// change after a quiet spell is translated at once; the events that come
// while a translation runs, or within debounce of its start (the rest of
// an apply of many objects, a GitOps sync, a resync), wait and share the
// next translation. Under a stream of changes, translations that take
// longer than debounce thus run back to back, each taking every event
// that came during the one before, and a change waits for at most the
// translation under way and its own. Later events never extend the wait:
// under a steady stream of them (status writes for thousands of routes) a
// change would otherwise wait for the stream to pause. It was 20 ms: a
// change that came right after another waited up to 20 ms however cheap
// translation was, at 1,000 routes (2 ms) most of hostgate's part of a
// route change.
const debounce = 5 * time.Millisecond

// statusDelay is how long a change of nothing but an object's status
// waits for a translation. Translation reads such changes (whose status
// entries are ours, and the objects that Reports carry to the status
// writer), but they change nothing served, and hostgate's own status
// writes come by the thousand: translated one by one at 10,000 routes
// they would keep a core busy and route changes waiting behind them.
const statusDelay = time.Second

// statusChanged tells Start that an object changed in its status only.
func (s *Source) statusChanged() {
	select {
	case s.statusKick <- struct{}{}:
	default:
	}
}

// endpointsChanged tells Start that EndpointSlices of the Service key
// changed, which changes endpoint sets and nothing else.
func (s *Source) endpointsChanged(key types.NamespacedName) {
	s.mu.Lock()
	s.changedServices[key] = struct{}{}
	s.mu.Unlock()
	select {
	case s.endpointKick <- struct{}{}:
	default:
	}
}

// takeChangedServices returns the Services endpointsChanged was given
// since the last call, and forgets them.
func (s *Source) takeChangedServices() []types.NamespacedName {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := slices.Collect(maps.Keys(s.changedServices))
	clear(s.changedServices)
	return keys
}

func newSource(opts Options, publish Publish, log *slog.Logger) (*Source, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &Source{
		opts: opts, publish: publish, log: log, memo: newMemo(),
		statusKick: make(chan struct{}, 1), endpointKick: make(chan struct{}, 1), changedServices: map[types.NamespacedName]struct{}{},
	}, nil
}

func (o Options) validate() error {
	for _, a := range []struct{ flag, value string }{{"ingress HTTP address", o.IngressHTTPAddr}, {"ingress HTTPS address", o.IngressHTTPSAddr}} {
		if a.value == "" {
			continue
		}
		if _, _, err := splitHostPort(a.value); err != nil {
			return fmt.Errorf("%s %q: %w", a.flag, a.value, err)
		}
	}
	for _, list := range []struct {
		name  string
		addrs []string
	}{{"address pool", o.AddressPool}, {"status addresses", o.StatusAddresses}} {
		for _, a := range list.addrs {
			if _, err := netip.ParseAddr(a); err != nil {
				return fmt.Errorf("%s: %q is not an IP address: %w", list.name, a, err)
			}
		}
	}
	return nil
}

// Start fills the store, publishes a first translation, and then one after
// every change until ctx is done.
func (s *Source) Start(ctx context.Context) error {
	kick := make(chan struct{}, 1)
	changed := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- s.run(ctx, changed) }()
	timer := time.NewTimer(0)
	timer.Stop()
	var earliest time.Time // of the next translation
	var due time.Time      // of the pending one; zero when none is
	schedule := func(at time.Time) {
		at = later(at, earliest)
		if due.IsZero() || at.Before(due) {
			due = at
			timer.Reset(time.Until(at))
		}
	}
	for {
		select {
		case <-ctx.Done():
			return <-errc
		case err := <-errc:
			return err
		case <-kick:
			schedule(time.Now())
		case <-s.statusKick:
			schedule(time.Now().Add(statusDelay))
		case <-s.endpointKick:
			// At once, whatever translation is due: changing endpoint
			// sets costs what changed, not a translation of the store.
			s.changeEndpoints()
		case <-timer.C:
			due = time.Time{}
			earliest = time.Now().Add(debounce)
			s.translate()
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (s *Source) translate() {
	start := time.Now()
	// The list below has every EndpointSlice change made so far.
	s.takeChangedServices()
	objs := s.list()
	listed := time.Now()
	snap, reports := s.memo.translate(objs, s.opts)
	done := time.Now()
	if s.opts.TranslationTime != nil {
		s.opts.TranslationTime.Observe(done.Sub(listed).Seconds())
	}
	s.publish(snap, reports)
	s.last, s.lastReports = snap, reports
	s.logAnnotations(reports)
	s.log.Info("translated",
		"list_seconds", listed.Sub(start).Seconds(),
		"translate_seconds", done.Sub(listed).Seconds(),
		"publish_seconds", time.Since(done).Seconds(), "spliced", s.memo.spliced,
		"listeners", len(snap.Listeners), "routes", snap.RouteCount(), "endpoint_sets", snap.Endpoints.Len())
	s.logProblems(reports)
}

// changeEndpoints publishes the last Snapshot with the endpoint sets of
// the Services whose EndpointSlices changed brought up to date, and the
// last Reports, which endpoints take no part in. Before the first
// translation there is nothing to change: it lists every EndpointSlice.
func (s *Source) changeEndpoints() {
	keys := s.takeChangedServices()
	if s.last == nil || s.slicesOf == nil || len(keys) == 0 {
		return
	}
	start := time.Now()
	snap := s.memo.changeEndpoints(s.last, keys, s.slicesOf)
	if snap == nil {
		return
	}
	changed := time.Now()
	s.publish(snap, s.lastReports)
	s.last = snap
	s.log.Info("endpoints changed", "services", len(keys),
		"change_seconds", changed.Sub(start).Seconds(), "publish_seconds", time.Since(changed).Seconds())
}

// logProblems logs what keeps objects from being served, when it changed:
// in file mode this is the only place a user sees it.
func (s *Source) logProblems(r *Reports) {
	problems := r.Problems()
	if slices.Equal(problems, s.lastProblems) {
		return
	}
	s.lastProblems = problems
	for _, p := range problems {
		s.log.Warn("not served as written", "problem", p)
	}
}

// logAnnotations logs, for each Ingress whose ingress-nginx annotations
// or their outcomes changed, what hostgate does with each of them.
func (s *Source) logAnnotations(r *Reports) {
	seen := make(map[string][]AnnotationOutcome, len(s.lastAnnotations))
	for _, ing := range r.IngressAnnotations() {
		seen[ing.Ingress] = ing.Annotations
		if slices.Equal(s.lastAnnotations[ing.Ingress], ing.Annotations) {
			continue
		}
		attrs := []any{"ingress", ing.Ingress}
		for _, outcome := range []Outcome{Honoured, Ignored, Refused, Invalid} {
			var names []string
			for _, o := range ing.Annotations {
				if o.Outcome == outcome {
					names = append(names, strings.TrimPrefix(o.Annotation, NginxAnnotationPrefix))
				}
			}
			if len(names) > 0 {
				attrs = append(attrs, string(outcome), names)
			}
		}
		s.log.Info("ingress-nginx annotations", attrs...)
	}
	s.lastAnnotations = seen
}

// Problems lists what keeps objects from being served as written: the
// False conditions (True for Conflicted) and Ingress problems of r, one
// line each, naming the object. /debug/routes shows them.
func (r *Reports) Problems() []string {
	r.problemsOnce.Do(func() { r.problems = r.findProblems() })
	return r.problems
}

func (r *Reports) findProblems() []string {
	out := slices.Clone(r.Read)
	// Routes accepted with every reference resolved share one list of
	// conditions per generation: the lists found without a problem are
	// remembered (the last few), and most routes are passed over without
	// reading their conditions, where reading them was a millisecond of
	// every change at 10,000 routes.
	type list struct {
		first *metav1.Condition
		len   int
	}
	var clean [4]list
	next := 0
	// The object's name is read and made only for a problem: with 10,000
	// routes, making one for every route took longer than compiling the
	// change, and reading it went to 10,000 places in memory.
	add := func(kind string, obj metav1.Object, listener string, conds []metav1.Condition) {
		if len(conds) == 0 || slices.Contains(clean[:], list{&conds[0], len(conds)}) {
			return
		}
		problems := len(out)
		for _, c := range conds {
			bad := c.Status == metav1.ConditionFalse
			switch c.Type {
			case "Conflicted":
				bad = c.Status == metav1.ConditionTrue
			case "SupportedVersion":
				bad = false
			}
			if bad {
				out = append(out, fmt.Sprintf("%s: %s=%s %s: %s", objectName(kind, obj.GetNamespace(), obj.GetName(), listener), c.Type, c.Status, c.Reason, c.Message))
			}
		}
		if len(out) == problems {
			clean[next] = list{&conds[0], len(conds)}
			next = (next + 1) % len(clean)
		}
	}
	for _, c := range r.GatewayClasses {
		add("GatewayClass", c.Object, "", c.Status.Conditions)
	}
	for _, g := range r.Gateways {
		add("Gateway", g.Object, "", g.Status.Conditions)
		for _, l := range g.Status.Listeners {
			add("Gateway", g.Object, string(l.Name), l.Conditions)
		}
	}
	for _, s := range r.ListenerSets {
		add("ListenerSet", s.Object, "", s.Status.Conditions)
		for _, l := range s.Status.Listeners {
			add("ListenerSet", s.Object, string(l.Name), l.Conditions)
		}
	}
	routeProblems(r.HTTPRoutes, "HTTPRoute", add)
	routeProblems(r.GRPCRoutes, "GRPCRoute", add)
	routeProblems(r.TLSRoutes, "TLSRoute", add)
	routeProblems(r.TCPRoutes, "TCPRoute", add)
	routeProblems(r.UDPRoutes, "UDPRoute", add)
	for _, pr := range r.BackendTLSPolicies {
		for _, a := range pr.Ancestors {
			add("BackendTLSPolicy", pr.Object, "", a.Conditions)
		}
	}
	for _, i := range r.Ingresses {
		for _, p := range i.Problems {
			out = append(out, "Ingress "+i.Object.Namespace+"/"+i.Object.Name+": "+p)
		}
	}
	return slices.Compact(out)
}

// routeProblems adds the conditions of each parent of reports, routes of
// kind.
func routeProblems[T RouteObject](reports []*RouteReport[T], kind string, add func(kind string, obj metav1.Object, listener string, conds []metav1.Condition)) {
	for _, rr := range reports {
		for _, p := range rr.Parents {
			add(kind, rr.Object, "", p.Conditions)
		}
	}
}

// objectName is how Problems names an object: "Gateway infra/web listener
// http", "GatewayClass hostgate".
func objectName(kind, namespace, name, listener string) string {
	object := kind + " " + name
	if namespace != "" {
		object = kind + " " + namespace + "/" + name
	}
	if listener != "" {
		object += " listener " + listener
	}
	return object
}
