// Package status writes hostgate's Reports back to the cluster: conditions
// on GatewayClasses, Gateways, ListenerSets, HTTPRoutes, GRPCRoutes and
// BackendTLSPolicies, addresses on Gateways and Ingresses.
//
// Every hostgate instance serves traffic, but only one writes status: the
// holder of a Lease (client-go leader election). The writer compares what
// it wants with what each object has and writes only differences, retries
// conflicts with a fresh copy, and touches only objects (and route parent
// entries) of our classes and controller. It never reads the router or
// the data plane.
package status

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"weak"

	"github.com/prometheus/client_golang/prometheus"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/hostgate/hostgate/watch"
)

// Options say which Lease elects the writer and whose status it writes.
type Options struct {
	// LeaseNamespace and LeaseName name the Lease (default "hostgate"
	// for the name; the namespace is required).
	LeaseNamespace string
	LeaseName      string
	// Identity names this instance in the Lease, usually the pod name.
	Identity string
	// GatewayController is the controllerName of our route parent
	// statuses (watch.DefaultGatewayController when empty).
	GatewayController string
	// WriteErrors, when set, counts status writes that failed; the
	// Warn log says which object and why.
	WriteErrors prometheus.Counter
	// GatewayClassName, when set, is a GatewayClass of GatewayController
	// that the writer creates if no object of that name exists. It lets
	// one `kubectl apply` install hostgate: kubectl cannot create a
	// GatewayClass in the same run as the CRD that defines the kind. An
	// existing class of that name is never changed.
	GatewayClassName string
	// NoIngressStatus leaves the status of Ingresses to another controller
	// (ingress-nginx during a migration); Events are still posted.
	NoIngressStatus bool
	// GatewayServices makes the writer keep the Service and EndpointSlices
	// that stand for each Gateway (watch.Options.GatewayServices): created,
	// updated and deleted to match the Reports.
	GatewayServices bool
}

// Leader election timing, client-go's usual values: a new writer takes
// over within LeaseDuration of the old one vanishing, at once when it
// steps down cleanly.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
	// resync rewrites what failed to be written, even without a change.
	resync = 30 * time.Second
	// statusQPS is the least rate of status writes.
	statusQPS = 100
)

// Writer writes Reports while it holds the Lease.
type Writer struct {
	opts Options
	log  *slog.Logger
	kube kubernetes.Interface
	gw   gatewayclient.Interface
	// infra is nil without Options.GatewayServices.
	infra *infrastructure

	mu      sync.Mutex
	reports *watch.Reports
	changed chan struct{}

	// settled holds, for each object that the last pass found with the
	// status it wants, or weak pointer to an object it wrote, that wanted
	// status. Only lead uses it.
	settled map[any]wantedStatus
	// spare is the emptied map of the pass before last, which the next
	// pass fills: a new map of 10,000 routes on every pass was a good part
	// of the garbage a route change made.
	spare map[any]wantedStatus
	// The objects a pass has still to bring to their wanted status (see
	// drain). Only lead uses them.
	httpRoutes []*watch.RouteReport[*gatewayv1.HTTPRoute]
	grpcRoutes []*watch.RouteReport[*gatewayv1.GRPCRoute]
	tlsRoutes  []*watch.RouteReport[*gatewayv1.TLSRoute]
	tcpRoutes  []*watch.RouteReport[*gatewayv1.TCPRoute]
	udpRoutes  []*watch.RouteReport[*gatewayv1.UDPRoute]
	policies   []watch.PolicyReport
	ingresses  []watch.IngressReport
	// annotationEvents is the message of the last annotation Event
	// posted per Ingress (events.go). Only lead uses it.
	annotationEvents map[types.UID]string
}

// New returns a Writer for the cluster behind cfg.
func New(cfg *rest.Config, opts Options, log *slog.Logger) (*Writer, error) {
	if opts.LeaseNamespace == "" || opts.Identity == "" {
		return nil, errors.New("status: the Lease namespace and the identity are required")
	}
	if opts.LeaseName == "" {
		opts.LeaseName = "hostgate"
	}
	if opts.GatewayController == "" {
		opts.GatewayController = watch.DefaultGatewayController
	}
	if log == nil {
		log = slog.Default()
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "hostgate-status"
	// client-go's default of 5 requests/s would take over half an hour to
	// write the status of 10,000 routes, and every write is followed by a
	// translation; the API server's priority and fairness still protects
	// it from this one client.
	if cfg.QPS < statusQPS {
		cfg.QPS, cfg.Burst = statusQPS, 2*statusQPS
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("status: kubernetes client: %w", err)
	}
	gw, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("status: gateway API client: %w", err)
	}
	w := &Writer{opts: opts, log: log, kube: kube, gw: gw, changed: make(chan struct{}, 1)}
	if opts.GatewayServices {
		w.infra = newInfrastructure(kube)
	}
	return w, nil
}

// Update hands the Writer the latest Reports. It never blocks: a Writer
// that is not leading keeps only the last ones. The Reports it has
// already (published again with changed endpoints) start no pass.
func (w *Writer) Update(r *watch.Reports) {
	w.mu.Lock()
	same := w.reports == r
	w.reports = r
	w.mu.Unlock()
	if same {
		return
	}
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// Start campaigns for the Lease until ctx is done, and writes status
// while it leads. A lost Lease is campaigned for again.
func (w *Writer) Start(ctx context.Context) error {
	if w.infra != nil {
		// Every instance fills these caches, so that a new leader need
		// not wait for them.
		w.infra.start(ctx)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: w.opts.LeaseNamespace, Name: w.opts.LeaseName},
		Client:     w.kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: w.opts.Identity},
	}
	// The elector runs OnStartedLeading in a goroutine it does not wait
	// for. Start does, so that no write outlives it or overlaps the next
	// lead: leading holds a token while lead runs, and a lead that takes
	// the token after Run returned finds its context already done.
	leading := make(chan struct{}, 1)
	for ctx.Err() == nil {
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   leaseDuration,
			RenewDeadline:   renewDeadline,
			RetryPeriod:     retryPeriod,
			ReleaseOnCancel: true,
			Name:            w.opts.LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					leading <- struct{}{}
					defer func() { <-leading }()
					if ctx.Err() == nil {
						w.lead(ctx)
					}
				},
				OnStoppedLeading: func() { w.log.Info("status writer stopped leading", "identity", w.opts.Identity) },
			},
		})
		if err != nil {
			return fmt.Errorf("status: leader election: %w", err)
		}
		elector.Run(ctx)
		leading <- struct{}{}
		<-leading
	}
	return nil
}

// lead writes status until ctx (the leadership) ends.
func (w *Writer) lead(ctx context.Context) {
	w.log.Info("status writer leading", "identity", w.opts.Identity, "lease", w.opts.LeaseNamespace+"/"+w.opts.LeaseName)
	ticker := time.NewTicker(resync)
	defer ticker.Stop()
	w.settled, w.spare = nil, nil
	classReady := w.opts.GatewayClassName == ""
	if w.infra != nil {
		w.infra.waitSynced(ctx)
	}
	for {
		if !classReady {
			classReady = w.ensureGatewayClass(ctx)
		}
		w.mu.Lock()
		reports := w.reports
		w.mu.Unlock()
		if reports != nil {
			w.write(ctx, reports)
		}
		select {
		case <-ctx.Done():
			return
		case <-w.changed:
		case <-ticker.C:
		}
	}
}

// ensureGatewayClass creates the GatewayClass named by the options when
// it is missing. It reports whether nothing is left to do; while the
// Gateway API CRDs are not installed it is tried again at each resync.
func (w *Writer) ensureGatewayClass(ctx context.Context) bool {
	class := &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:   w.opts.GatewayClassName,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "hostgate"},
		},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: gatewayv1.GatewayController(w.opts.GatewayController)},
	}
	_, err := w.gw.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{})
	switch {
	case err == nil:
		w.log.Info("created GatewayClass", "name", class.Name, "controller_name", class.Spec.ControllerName)
		return true
	case apierrors.IsAlreadyExists(err):
		return true
	case ctx.Err() == nil:
		w.log.Info("GatewayClass not created yet", "name", class.Name, "error", err)
	}
	return false
}

// write brings every object of reports to its wanted status.
func (w *Writer) write(ctx context.Context, r *watch.Reports) {
	start := time.Now()
	now := nowTime()
	controller := gatewayv1.GatewayController(w.opts.GatewayController)
	classes := w.gw.GatewayV1().GatewayClasses()
	p := &pass{w: w, ctx: ctx, settled: w.spare}
	if p.settled == nil {
		p.settled = make(map[any]wantedStatus, len(w.settled))
	}
	defer func() {
		// Emptied now, so that it holds no replaced objects until the
		// next pass.
		clear(w.settled)
		w.settled, w.spare = p.settled, w.settled
	}()
	wantedRoute := func(parents []gatewayv1.RouteParentStatus) func(gatewayv1.RouteStatus) (gatewayv1.RouteStatus, bool) {
		return func(current gatewayv1.RouteStatus) (gatewayv1.RouteStatus, bool) {
			return routeStatus(current, controller, parents, now)
		}
	}
	// Copied before the first write, so that the pass holds no more of r
	// than it has still to write.
	w.httpRoutes = append(w.httpRoutes[:0], r.HTTPRoutes...)
	w.grpcRoutes = append(w.grpcRoutes[:0], r.GRPCRoutes...)
	w.tlsRoutes = append(w.tlsRoutes[:0], r.TLSRoutes...)
	w.tcpRoutes = append(w.tcpRoutes[:0], r.TCPRoutes...)
	w.udpRoutes = append(w.udpRoutes[:0], r.UDPRoutes...)
	w.policies = append(w.policies[:0], r.BackendTLSPolicies...)
	w.ingresses = w.ingresses[:0]
	if !w.opts.NoIngressStatus && !r.IngressAddressesUnknown {
		w.ingresses = append(w.ingresses, r.Ingresses...)
	}
	// Before the writes, which must not keep r alive.
	w.emitAnnotationEvents(ctx, r.Ingresses)
	for _, c := range r.GatewayClasses {
		writeWanted(p, "GatewayClass", c.Object, classes, func(o *gatewayv1.GatewayClass) *gatewayv1.GatewayClassStatus { return &o.Status },
			gatewayClassStatus, c.Status, now)
	}
	for _, g := range r.Gateways {
		writeWanted(p, "Gateway", g.Object, w.gw.GatewayV1().Gateways(g.Object.Namespace), func(o *gatewayv1.Gateway) *gatewayv1.GatewayStatus { return &o.Status },
			gatewayStatus, g.Status, now)
	}
	for _, s := range r.ListenerSets {
		writeWanted(p, "ListenerSet", s.Object, w.gw.GatewayV1().ListenerSets(s.Object.Namespace), func(o *gatewayv1.ListenerSet) *gatewayv1.ListenerSetStatus { return &o.Status },
			listenerSetStatus, s.Status, now)
	}
	if w.infra != nil {
		w.infra.write(ctx, p, r)
	}
	v1 := w.gw.GatewayV1()
	drainRoutes(p, w.httpRoutes, "HTTPRoute", func(ns string) statusClient[*gatewayv1.HTTPRoute] { return v1.HTTPRoutes(ns) },
		func(o *gatewayv1.HTTPRoute) *gatewayv1.RouteStatus { return &o.Status.RouteStatus }, wantedRoute)
	drainRoutes(p, w.grpcRoutes, "GRPCRoute", func(ns string) statusClient[*gatewayv1.GRPCRoute] { return v1.GRPCRoutes(ns) },
		func(o *gatewayv1.GRPCRoute) *gatewayv1.RouteStatus { return &o.Status.RouteStatus }, wantedRoute)
	drainRoutes(p, w.tlsRoutes, "TLSRoute", func(ns string) statusClient[*gatewayv1.TLSRoute] { return v1.TLSRoutes(ns) },
		func(o *gatewayv1.TLSRoute) *gatewayv1.RouteStatus { return &o.Status.RouteStatus }, wantedRoute)
	drainRoutes(p, w.tcpRoutes, "TCPRoute", func(ns string) statusClient[*gatewayv1.TCPRoute] { return v1.TCPRoutes(ns) },
		func(o *gatewayv1.TCPRoute) *gatewayv1.RouteStatus { return &o.Status.RouteStatus }, wantedRoute)
	drainRoutes(p, w.udpRoutes, "UDPRoute", func(ns string) statusClient[*gatewayv1.UDPRoute] { return v1.UDPRoutes(ns) },
		func(o *gatewayv1.UDPRoute) *gatewayv1.RouteStatus { return &o.Status.RouteStatus }, wantedRoute)
	drain(w.policies, func(pr *watch.PolicyReport) {
		want := wantedStatus{other: pr.Ancestors}
		if settled(p, pr.Object, want, sameOther) {
			return
		}
		writeSettling(p, pr.Object, want, func() (bool, error) {
			client := w.gw.GatewayV1().BackendTLSPolicies(pr.Object.Namespace)
			return update(ctx, "BackendTLSPolicy", pr.Object, client.Get, client.UpdateStatus,
				func(o *gatewayv1.BackendTLSPolicy) *gatewayv1.PolicyStatus { return &o.Status },
				func(current gatewayv1.PolicyStatus) (gatewayv1.PolicyStatus, bool) {
					return policyStatus(current, controller, pr.Ancestors, now)
				})
		})
	})
	drain(w.ingresses, func(i *watch.IngressReport) {
		want := wantedStatus{loadBalancer: i.LoadBalancer.Ingress}
		if settled(p, i.Object, want, sameLoadBalancer) {
			return
		}
		writeSettling(p, i.Object, want, func() (bool, error) {
			client := w.kube.NetworkingV1().Ingresses(i.Object.Namespace)
			return update(ctx, "Ingress", i.Object, client.Get, client.UpdateStatus,
				func(o *networkingv1.Ingress) *networkingv1.IngressStatus { return &o.Status },
				func(current networkingv1.IngressStatus) (networkingv1.IngressStatus, bool) {
					return ingressStatus(current, i.LoadBalancer)
				})
		})
	})
	if p.written > 0 || p.failed > 0 {
		w.log.Info("wrote status", "objects", p.written, "failed", p.failed, "unchanged_skipped", p.skipped, "seconds", time.Since(start).Seconds())
	}
}

// statusClient is what update needs of a typed client.
type statusClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// writeWanted brings obj, an object that holds its status in the field
// status points to, to wanted merged over its current status.
func writeWanted[T object[T], S any](p *pass, kind string, obj T, client statusClient[T], status func(T) *S,
	merge func(current, wanted S, now metav1.Time) (S, bool), wanted S, now metav1.Time) {
	p.count(update(p.ctx, kind, obj, client.Get, client.UpdateStatus, status,
		func(current S) (S, bool) { return merge(current, wanted, now) }))
}

// pass is what one run of write settles and counts.
type pass struct {
	w   *Writer
	ctx context.Context
	// settled becomes the Writer's settled map when the pass ends: an
	// object and its wanted status that are the very values of the last
	// pass need no copy and comparison, as informers keep an object until
	// it changes and translation reuses the status entries of unchanged
	// routes, so with 10,000 routes most of a pass is skipped.
	settled                  map[any]wantedStatus
	written, failed, skipped int
}

func (p *pass) count(wrote bool, err error) {
	switch {
	case err != nil && p.ctx.Err() == nil:
		p.failed++
		p.w.log.Warn("writing status", "error", err)
		if p.w.opts.WriteErrors != nil {
			p.w.opts.WriteErrors.Inc()
		}
	case wrote:
		p.written++
	}
}

// wantedStatus is the status an object was settled with: a route's
// parent entries, an Ingress's load balancer, or the wanted status of a
// BackendTLSPolicy. Those of routes and Ingresses are kept as they are,
// not in an interface, which took an allocation for each of 10,000
// objects on every pass.
type wantedStatus struct {
	parents      []gatewayv1.RouteParentStatus
	loadBalancer []networkingv1.IngressLoadBalancerIngress
	other        any
}

// unchanged reports whether the last pass settled key (an object, or a
// weak pointer to one the Writer wrote) with the same wanted status, and
// keeps it settled if so.
func (p *pass) unchanged(key any, wanted wantedStatus, same func(a, b wantedStatus) bool) bool {
	last, ok := p.w.settled[key]
	if !ok || !same(last, wanted) {
		return false
	}
	p.settled[key] = wanted
	p.skipped++
	return true
}

// settled reports whether obj, or the object it replaced, is settled with
// wanted, and keeps it settled if so. An object written is replaced in
// the informers' caches by the one the write made, but a pass may meet it
// before that: it is settled under a weak pointer, which does not keep
// the replaced object alive for as long as the pass lasts (a minute for
// 10,000 routes), and finds it if it is still there.
func settled[T any](p *pass, obj *T, wanted wantedStatus, same func(a, b wantedStatus) bool) bool {
	return p.unchanged(obj, wanted, same) || p.unchanged(weak.Make(obj), wanted, same)
}

// writeSettling brings obj, which is not settled, to its wanted status
// with write, and settles it. Callers ask settled first, before they make
// write: the closure is allocated, and all but a few of 10,000 objects are
// settled on every pass.
func writeSettling[T any](p *pass, obj *T, wanted wantedStatus, write func() (bool, error)) {
	wrote, err := write()
	switch {
	case err != nil:
	case wrote:
		p.settled[weak.Make(obj)] = wanted
	default:
		p.settled[obj] = wanted
	}
	p.count(wrote, err)
}

// sameOther compares the wanted statuses of BackendTLSPolicies.
func sameOther(a, b wantedStatus) bool { return equality.Semantic.DeepEqual(a.other, b.other) }

// sameLoadBalancer compares the wanted statuses of Ingresses: translation
// gives every Ingress the same one, so most are the very same slice.
func sameLoadBalancer(a, b wantedStatus) bool {
	la, lb := a.loadBalancer, b.loadBalancer
	return len(la) == len(lb) && (len(la) == 0 || &la[0] == &lb[0] || equality.Semantic.DeepEqual(la, lb))
}

// drainRoutes brings each route of pending, of kind, to its wanted
// parent statuses (see drain), through the client of its namespace.
func drainRoutes[R any, T interface {
	*R
	object[T]
}](p *pass, pending []*watch.RouteReport[T], kind string, client func(namespace string) statusClient[T], status func(T) *gatewayv1.RouteStatus,
	wanted func([]gatewayv1.RouteParentStatus) func(gatewayv1.RouteStatus) (gatewayv1.RouteStatus, bool)) {
	drain(pending, func(listed **watch.RouteReport[T]) {
		rr := *listed
		obj, want := (*R)(rr.Object), wantedStatus{parents: rr.Parents}
		if settled(p, obj, want, sameParents) {
			return
		}
		writeSettling(p, obj, want, func() (bool, error) {
			c := client(rr.Object.GetNamespace())
			return update(p.ctx, kind, rr.Object, c.Get, c.UpdateStatus, status, wanted(rr.Parents))
		})
	})
}

// drain calls write for each of pending in turn, and forgets each once
// written. At statusQPS a pass over 10,000 routes takes over a minute,
// and every object it writes is replaced in the informers' caches
// meanwhile: a pass that held its reports to the end held two copies of
// every route it wrote, 30 MB of live heap at 10,000 HTTPRoutes.
func drain[T any](pending []T, write func(*T)) {
	var done T
	for i := range pending {
		write(&pending[i])
		pending[i] = done
	}
}

// sameParents reports whether two wanted route statuses are the same
// slice, as translation hands out for a route that did not change.
func sameParents(a, b wantedStatus) bool {
	pa, pb := a.parents, b.parents
	return len(pa) == len(pb) && (len(pa) == 0 || &pa[0] == &pb[0])
}

// object is what update needs of an API object.
type object[T any] interface {
	metav1.Object
	DeepCopy() T
}

// update writes the status that wanted makes of current's (the field
// status points to) when it differs. Only then is current copied: the
// pass after the first over 10,000 routes meets every route replaced by
// its write, and copying each before comparing made 20 MB of garbage
// within one collection, which counted it as live and set the heap's
// highest goal. On a conflict it starts again from a fresh copy; an
// object deleted meanwhile is not an error. wanted gets the cached
// object's status, which the informers share (interned, too): it must make
// its result without changing that status's slices or what they point to.
func update[T object[T], S any](ctx context.Context, kind string, current T,
	get func(context.Context, string, metav1.GetOptions) (T, error),
	updateStatus func(context.Context, T, metav1.UpdateOptions) (T, error),
	status func(T) *S,
	wanted func(current S) (S, bool),
) (wrote bool, err error) {
	wrote, err = writeRetrying(ctx, current, get, func(current T) (bool, error) {
		want, changed := wanted(*status(current))
		if !changed {
			return false, nil
		}
		next := current.DeepCopy()
		*status(next) = want
		_, err := updateStatus(ctx, next, metav1.UpdateOptions{})
		return err == nil, err
	})
	if err != nil {
		return false, fmt.Errorf("status of %s %s/%s: %w", kind, current.GetNamespace(), current.GetName(), err)
	}
	return wrote, nil
}

// writeRetrying runs write on current and, on a conflict, again on a
// fresh copy that get fetches, as client-go's retry does. An object
// deleted meanwhile is not an error: nothing was written.
func writeRetrying[T metav1.Object](ctx context.Context, current T,
	get func(context.Context, string, metav1.GetOptions) (T, error),
	write func(current T) (wrote bool, err error),
) (wrote bool, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var werr error
		wrote, werr = write(current)
		if apierrors.IsConflict(werr) {
			fresh, getErr := get(ctx, current.GetName(), metav1.GetOptions{})
			if getErr != nil {
				return getErr
			}
			current = fresh
		}
		return werr
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return wrote, err
}
