package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/informers/internalinterfaces"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
	gatewayv1informers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"
	gatewayinternal "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/internalinterfaces"
	"sigs.k8s.io/gateway-api/pkg/consts"
)

// How often cluster mode asks discovery whether Gateway API kinds are
// installed: often while some are missing, so that installing the CRDs
// takes effect quickly, rarely afterwards (to follow CRD upgrades).
// startupQPS is the watch client's rate limit when the kubeconfig sets
// none.
const startupQPS = 50

const (
	crdPollMissing   = 10 * time.Second
	crdPollInstalled = time.Minute
)

// ListFirst has client-go's informers fill their caches with a list, then
// watch, rather than stream the first list in a watch (client-go's
// WatchListClient, on by default since 1.35), unless the environment sets
// KUBE_FEATURE_WatchListClient. With 10,000 HTTPRoutes, Services and
// EndpointSlices (hack/perf-controlplane.sh, kube-apiserver v1.36 on etcd
// 3.6), the caches were full after 0.97 s with lists and 1.83 s with
// streams. It changes a setting of the whole process, which client-go
// reads as its first client is made: call it before that.
func ListFirst() {
	listFirstOnce.Do(func() {
		if _, set := os.LookupEnv("KUBE_FEATURE_" + string(clientfeatures.WatchListClient)); set {
			return
		}
		clientfeatures.ReplaceFeatureGates(listFirstGates{clientfeatures.FeatureGates()})
	})
}

var listFirstOnce sync.Once

type listFirstGates struct{ clientfeatures.Gates }

func (g listFirstGates) Enabled(f clientfeatures.Feature) bool {
	return f != clientfeatures.WatchListClient && g.Gates.Enabled(f)
}

// NewCluster returns a Source that watches the cluster behind cfg with
// shared informers. Without the Gateway API CRDs it serves Ingresses and
// picks the Gateway API kinds up when they are installed.
func NewCluster(cfg *rest.Config, opts Options, publish Publish, log *slog.Logger) (*Source, error) {
	s, err := newSource(opts, publish, log)
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "hostgate"
	}
	if cfg.Dial == nil {
		cfg.Dial = patientDial
	}
	// Start-up makes about fifty requests: for each of twenty kinds a
	// list and a watch (ListFirst), then discovery one round trip after
	// another. client-go's default of 5 requests/s after a
	// burst of 10 held the first translation back by 0.6 to 1.5 s on an
	// empty cluster, which takes 0.16 s at 50/s. Afterwards informers ask
	// again only when a watch ends, and the API server's priority and
	// fairness still protects it from this one client.
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = startupQPS, 2*startupQPS
	}
	kube, err := kubernetes.NewForConfig(protobufConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	gw, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("gateway API client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	in := newInterner()
	in.published = opts.PublishService
	trim := in.trimObject
	transform := informers.WithTransform(trim)
	c := &clusterStore{
		log:              s.log,
		statusChanged:    s.statusChanged,
		endpointsChanged: s.endpointsChanged,
		discovery:        kube.Discovery(),
		meta:             meta,
		core:             informers.NewSharedInformerFactoryWithOptions(kube, 0, transform),
		secrets: informers.NewSharedInformerFactoryWithOptions(kube, 0, transform,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "type=" + string(corev1.SecretTypeTLS) })),
		caSecrets: informers.NewSharedInformerFactoryWithOptions(kube, 0, transform,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "type=" + string(corev1.SecretTypeOpaque) })),
		gateway: gatewayinformers.NewSharedInformerFactoryWithOptions(gw, 0, gatewayinformers.WithTransform(trim)),
		started: map[string]bool{},
		tracked: newTracked(),
	}
	s.run, s.list, s.slicesOf = c.run, c.current, c.tracked.slicesOf
	return s, nil
}

// protobufConfig asks the API server for the built-in kinds (Services,
// EndpointSlices, Secrets, Ingresses: two thirds of what a cluster of
// 10,000 HTTPRoutes lists at start-up) in protobuf, as
// kube-controller-manager does: client-go decodes a list of 10,000
// Services in 55 ms of CPU from protobuf against 309 from JSON, and one
// of 10,000 EndpointSlices in 29 against 114, from half the bytes. The Gateway API kinds are custom
// resources, which the API server serves in JSON only, so their client
// keeps cfg. A content type the kubeconfig chose is left alone.
func protobufConfig(cfg *rest.Config) *rest.Config {
	if cfg.ContentType != "" {
		return cfg
	}
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}

// While the API server refuses connections, a dial is retried every
// redialInterval for up to redialFor before it fails.
const (
	redialInterval = 500 * time.Millisecond
	redialFor      = 30 * time.Second
)

// patientDial connects to the API server, waiting for it while it refuses
// connections. client-go's reflectors back off after each failed attempt,
// exponentially to between 30 and 60 s, and informer factories cannot
// change that (kubernetes/kubernetes#136943): after an outage of a minute
// watches would resume up to a minute after the API server is back. An
// attempt that waits keeps their count of failures, and so their backoff,
// small, and connects within redialInterval of the API server's return.
func patientDial(ctx context.Context, network, address string) (net.Conn, error) {
	d := net.Dialer{Timeout: redialFor, KeepAlive: 30 * time.Second}
	giveUp := time.Now().Add(redialFor)
	for {
		conn, err := d.DialContext(ctx, network, address)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(giveUp) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(redialInterval):
		}
	}
}

// keptConfigMapData is what trimObject keeps of a ConfigMap's data, nil
// for nothing: ca.crt, and the keys that can be header names with their
// values, which custom-headers and auth-proxy-set-headers read. A value
// no header could have (longer than 4096 bytes, or with control
// characters) is kept as tooLongForAHeader, so that a ConfigMap of
// configuration files costs its key names only.
func keptConfigMapData(data map[string]string) map[string]string {
	var kept map[string]string
	for key, value := range data {
		if key != caCertKey && !nginxHeaderName.MatchString(key) {
			continue
		}
		if key != caCertKey && checkHeaderValue(value) != nil {
			value = tooLongForAHeader
		}
		if kept == nil {
			kept = map[string]string{}
		}
		kept[key] = value
	}
	return kept
}

// tooLongForAHeader stands for a ConfigMap value that no header may
// have: it fails checkHeaderValue as the value did.
const tooLongForAHeader = "\x00"

// trimObject drops what hostgate never reads before an object enters the
// cache, and interns the rest (see interner). Dropped: managed fields on
// everything; the annotations of every kind but Ingress and IngressClass;
// a Service becomes a service, with its name, type, ports and
// AnnotationProxyProtocol (and the addresses of those hostgate keeps for
// Gateways and of the published one), and without the rest, such as a
// kubectl last-applied copy of itself; an EndpointSlice becomes an
// endpointSlice, with its name, Service, ports and its endpoints'
// addresses and conditions, and without the rest, such as where its
// endpoints run (targetRef, nodeName, zone, hints); the image list on
// Nodes; of a ConfigMap its labels, owners and every key but ca.crt and
// those that can be header names, the ones translation reads
// (keptConfigMapData); of a ClusterTrustBundle all but its name and
// spec.trustBundle (and it becomes v1 whatever its version).
// `kubectl apply` without --server-side keeps a copy of the whole object
// in an annotation, which doubled the cache of such objects, each endpoint's
// targetRef took more than its address and conditions, and hostgate
// watches every ConfigMap of the cluster to find the few CA bundles that
// Gateways name. Status writes start from the cached copies: the API
// server takes nothing but the status from those of custom resources, but
// an Ingress's metadata as sent, so its annotations stay, as translation
// reads two of them (TestStatusWritesKeepAnnotations). Services,
// EndpointSlices, ConfigMaps and ClusterTrustBundles are never written.
func (in *interner) trimObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *endpointSlice, *service:
		// One transformed before: client-go may transform an object
		// twice (see interner.pointer).
		return o, nil
	case *discoveryv1.EndpointSlice:
		s := newEndpointSlice(o)
		in.intern(s)
		return s, nil
	case *corev1.Service:
		s := newService(o, types.NamespacedName{Namespace: o.Namespace, Name: o.Name} == in.published)
		in.intern(s)
		return s, nil
	}
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
		switch obj.(type) {
		case *networkingv1.Ingress, *networkingv1.IngressClass:
		default:
			m.SetAnnotations(nil)
		}
	}
	// What is kept is what translation reads (cabundle.go: a ConfigMap's
	// ca.crt, a ClusterTrustBundle's spec.trustBundle; service.go and
	// endpointslice.go: a Service's and an EndpointSlice's); a field read
	// later must be kept here too (TestTrimmedObjectsTranslateAlike).
	switch o := obj.(type) {
	case *corev1.Node:
		o.Status.Images = nil
	case *corev1.ConfigMap:
		o.Labels = nil
		unowned(&o.ObjectMeta)
		o.Data, o.BinaryData = keptConfigMapData(o.Data), nil
	case *certificatesv1.ClusterTrustBundle:
		obj = trustBundle(o.ObjectMeta, o.Spec.TrustBundle)
	case *certificatesv1beta1.ClusterTrustBundle:
		obj = trustBundle(o.ObjectMeta, o.Spec.TrustBundle)
	case *corev1.Secret:
		if o.Type == corev1.SecretTypeOpaque {
			// Opaque Secrets are watched for the CA bundles that
			// auth-tls-secret and proxy-ssl-secret name and the htpasswd
			// files of auth-secret: what else they hold (most of a
			// cluster's credentials) never enters the cache. So an
			// auth-map Secret, whose keys are its users, reads as empty.
			o.Labels = nil
			unowned(&o.ObjectMeta)
			kept := map[string][]byte{}
			for _, key := range []string{caCertKey, htpasswdKey} {
				if v, ok := o.Data[key]; ok {
					kept[key] = v
				}
			}
			o.Data, o.StringData = nil, nil
			if len(kept) > 0 {
				o.Data = kept
			}
		}
	}
	in.intern(obj)
	return obj, nil
}

// trustBundle is a ClusterTrustBundle of either version as the store keeps
// it: one type, v1, for translation to read, with the name and
// certificates it reads. Its signer name is dropped: references name the
// object, and hostgate signs nothing.
func trustBundle(meta metav1.ObjectMeta, bundle string) *certificatesv1.ClusterTrustBundle {
	meta.Labels = nil
	unowned(&meta)
	return &certificatesv1.ClusterTrustBundle{ObjectMeta: meta, Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: bundle}}
}

// unowned drops who made an object and what it is known by beyond its
// name (UID, generated name, owners, finalizers), for the kinds hostgate
// never writes.
func unowned(m *metav1.ObjectMeta) {
	m.UID, m.GenerateName, m.OwnerReferences, m.Finalizers = "", "", nil, nil
}

type clusterStore struct {
	log *slog.Logger
	// statusChanged is called instead of run's changed for updates of
	// status only, endpointsChanged for those of EndpointSlices.
	statusChanged    func()
	endpointsChanged func(types.NamespacedName)
	discovery        discovery.DiscoveryInterface
	meta             metadata.Interface
	core             informers.SharedInformerFactory
	secrets          informers.SharedInformerFactory
	// caSecrets watches Opaque Secrets, trimmed to their ca.crt.
	caSecrets informers.SharedInformerFactory
	gateway   gatewayinformers.SharedInformerFactory
	// ready gates event handlers until the first full sync, so that no
	// translation sees a half-listed cluster.
	ready atomic.Bool
	// started are the Gateway API resources watched; only run uses it.
	started map[string]bool
	// trustBundles is the version of ClusterTrustBundle watched, "" while
	// none is; trustBundlesForbidden is set once a missing permission to
	// list them was logged. Only run uses them.
	trustBundles          string
	trustBundlesForbidden bool

	// tracked keeps the objects of the informers for translation.
	tracked *tracked

	mu            sync.Mutex
	bundleVersion string
	crdChannel    string
}

func (c *clusterStore) current() *objects {
	c.mu.Lock()
	objs := &objects{crdBundleVersion: c.bundleVersion, crdChannel: c.crdChannel}
	c.mu.Unlock()
	c.tracked.list(objs)
	return objs
}

// watching is an informer whose objects are tracked.
type watching struct {
	registration cache.ResourceEventHandlerRegistration
	objects      *trackedInformer
}

// watch adds the handler that tracks inf's objects and then calls next.
// byService indexes EndpointSlices by Service.
func (c *clusterStore) watch(inf cache.SharedIndexInformer, next cache.ResourceEventHandler, byService bool) (watching, error) {
	objs := c.tracked.informer(byService)
	reg, err := inf.AddEventHandler(c.tracked.handler(objs, next))
	return watching{reg, objs}, err
}

// synced waits until the handlers of list were told of every object
// their informers listed, and then puts those objects in translation's
// listings; false if ctx ends first. cache.WaitForCacheSync polls every
// 100 ms: start-up waited in three of those polls one after another, and
// an empty cluster's first translation came after 0.16 s instead of 0.06.
func (c *clusterStore) synced(ctx context.Context, list ...watching) bool {
	checkers := make([]cache.DoneChecker, len(list))
	for i, w := range list {
		checkers[i] = w.registration.HasSyncedChecker()
	}
	if !cache.WaitFor(ctx, "", checkers...) {
		return false
	}
	for _, w := range list {
		c.tracked.synced(w.objects)
	}
	return true
}

// The informers of the kinds that clusters hold by the thousand are made
// without the namespace index that the factories' own carry: nothing
// lists them by namespace (translation groups what it looks up itself),
// and the index took 43 bytes an object, and an update on every event.
// They must be registered before the factories hand out the kind's
// informer, which they then return.

// registerUnindexedCore registers the core kinds' informers.
func (c *clusterStore) registerUnindexedCore() {
	for obj, newInformer := range map[runtime.Object]func(kubernetes.Interface, string, internalinterfaces.InformerOptions) cache.SharedIndexInformer{
		&corev1.Service{}:            coreinformers.NewServiceInformerWithOptions,
		&discoveryv1.EndpointSlice{}: discoveryinformers.NewEndpointSliceInformerWithOptions,
		&networkingv1.Ingress{}:      networkinginformers.NewIngressInformerWithOptions,
	} {
		c.core.InformerFor(obj, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return newInformer(client, metav1.NamespaceAll, internalinterfaces.InformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{}, InformerName: c.core.InformerName()})
		})
	}
}

// unindexedGateway returns the informer of a Gateway API kind, registered
// first if the factory has none: the factory starts every informer it
// has, and a kind's is made only once discovery lists the kind.
func (c *clusterStore) unindexedGateway(obj runtime.Object, newInformer func(gatewayclient.Interface, string, gatewayinternal.InformerOptions) cache.SharedIndexInformer) func() cache.SharedIndexInformer {
	return func() cache.SharedIndexInformer {
		return c.gateway.InformerFor(obj, func(client gatewayclient.Interface, resync time.Duration) cache.SharedIndexInformer {
			return newInformer(client, metav1.NamespaceAll, gatewayinternal.InformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{}, InformerName: c.gateway.InformerName()})
		})
	}
}

// gatewayKinds are the Gateway API resources hostgate watches, by
// resource name as discovery lists them.
func (c *clusterStore) gatewayKinds() map[string]func() cache.SharedIndexInformer {
	v1 := c.gateway.Gateway().V1()
	return map[string]func() cache.SharedIndexInformer{
		"gatewayclasses":     v1.GatewayClasses().Informer,
		"gateways":           v1.Gateways().Informer,
		"listenersets":       v1.ListenerSets().Informer,
		"httproutes":         c.unindexedGateway(&gatewayv1.HTTPRoute{}, gatewayv1informers.NewHTTPRouteInformerWithOptions),
		"grpcroutes":         c.unindexedGateway(&gatewayv1.GRPCRoute{}, gatewayv1informers.NewGRPCRouteInformerWithOptions),
		"tlsroutes":          v1.TLSRoutes().Informer,
		"tcproutes":          v1.TCPRoutes().Informer,
		"udproutes":          v1.UDPRoutes().Informer,
		"referencegrants":    v1.ReferenceGrants().Informer,
		"backendtlspolicies": v1.BackendTLSPolicies().Informer,
	}
}

func (c *clusterStore) run(ctx context.Context, changed func()) error {
	defer c.core.Shutdown()
	defer c.secrets.Shutdown()
	defer c.caSecrets.Shutdown()
	defer c.gateway.Shutdown()
	gated := func(f func()) func() {
		return func() {
			if c.ready.Load() {
				f()
			}
		}
	}
	handler := eventHandler(gated(changed), gated(c.statusChanged))
	c.registerUnindexedCore()
	sliceWatch, err := c.watch(c.core.Discovery().V1().EndpointSlices().Informer(), c.sliceHandler(), true)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	core := []watching{sliceWatch}
	for _, inf := range []cache.SharedIndexInformer{
		c.core.Networking().V1().Ingresses().Informer(),
		c.core.Networking().V1().IngressClasses().Informer(),
		c.core.Core().V1().Services().Informer(),
		c.core.Core().V1().Namespaces().Informer(),
		c.core.Core().V1().Nodes().Informer(),
		c.core.Core().V1().ConfigMaps().Informer(),
		c.secrets.Core().V1().Secrets().Informer(),
		c.caSecrets.Core().V1().Secrets().Informer(),
	} {
		w, err := c.watch(inf, handler, false)
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		core = append(core, w)
	}
	start := time.Now()
	c.core.Start(ctx.Done())
	c.secrets.Start(ctx.Done())
	c.caSecrets.Start(ctx.Done())
	c.startGatewayKinds(ctx, handler)
	if !c.synced(ctx, core...) {
		return nil // ctx is done
	}
	// Discovery fails while the API server is unreachable: asked again
	// before the first translation, which must not leave out installed
	// Gateway API kinds (it replaces what --state-file restored).
	now, known := c.startGatewayKinds(ctx, handler)
	c.startTrustBundles(ctx, handler)
	c.log.Info("caches synced", "seconds", time.Since(start).Seconds())
	c.ready.Store(true)
	changed()

	missing := []string{"none"} // forces the first log line
	for {
		poll := crdPollInstalled
		if !known {
			poll = crdPollMissing
		} else if !slices.Equal(now, missing) {
			missing = now
			if len(missing) > 0 {
				c.log.Warn("Gateway API kinds are not installed; serving without them until they are", "missing", missing)
			} else {
				c.log.Info("Gateway API kinds are installed and watched")
			}
			changed()
		}
		if len(missing) > 0 {
			poll = crdPollMissing
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
		now, known = c.startGatewayKinds(ctx, handler)
		if c.startTrustBundles(ctx, handler) {
			// Their informer's events came before current listed it.
			changed()
		}
	}
}

// trustBundleInformers are the versions of ClusterTrustBundle hostgate
// can watch, the preferred first: v1 from Kubernetes 1.37 on, v1beta1
// before, where the API server serves it only when told to.
func (c *clusterStore) trustBundleInformers() []versionInformer {
	certificates := c.core.Certificates()
	return []versionInformer{
		{"v1", certificates.V1().ClusterTrustBundles().Informer},
		{"v1beta1", certificates.V1beta1().ClusterTrustBundles().Informer},
	}
}

type versionInformer struct {
	version  string
	informer func() cache.SharedIndexInformer
}

// startTrustBundles starts watching ClusterTrustBundles in the preferred
// version that the API server serves, unless one is watched already, and
// reports whether it started. The API is optional: without it (or without
// the permission to list them) hostgate runs as before, and a reference to
// a ClusterTrustBundle finds none. A version is kept once watched: the API
// server's versions change only when it restarts with other flags or
// another release, which a restart of hostgate follows.
func (c *clusterStore) startTrustBundles(ctx context.Context, handler cache.ResourceEventHandler) bool {
	if c.trustBundles != "" {
		return false
	}
	for _, v := range c.trustBundleInformers() {
		path := "/apis/" + certificatesv1.GroupName + "/" + v.version
		list := &metav1.APIResourceList{}
		err := c.discovery.RESTClient().Get().AbsPath(path).Do(ctx).Into(list)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			c.log.Debug("discovery of ClusterTrustBundles failed", "version", v.version, "error", err)
			return false
		case !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "clustertrustbundles" }):
			continue
		}
		// An informer that may not list waits for its cache for good, and
		// translation with it: ask once first.
		err = c.discovery.RESTClient().Get().AbsPath(path, "clustertrustbundles").Param("limit", "1").Do(ctx).Error()
		switch {
		case err == nil:
		case apierrors.IsForbidden(err):
			if !c.trustBundlesForbidden {
				c.trustBundlesForbidden = true
				c.log.Warn("ClusterTrustBundles may not be listed (RBAC); references to them do not resolve until they may", "version", v.version, "error", err)
			}
			return false
		default:
			c.log.Debug("listing ClusterTrustBundles failed", "version", v.version, "error", err)
			return false
		}
		w, err := c.watch(v.informer(), handler, false)
		if err != nil {
			c.log.Error("watching ClusterTrustBundles", "version", v.version, "error", err)
			return false
		}
		c.trustBundles = v.version
		c.core.Start(ctx.Done())
		if !c.synced(ctx, w) {
			return false
		}
		c.log.Info("ClusterTrustBundles are watched", "version", v.version)
		return true
	}
	return false
}

// startGatewayKinds starts the informers of the Gateway API kinds that
// discovery lists and that are not watched yet, waits for their caches, and
// returns the kinds still missing. It also reads the CRDs' bundle version.
// known is false when discovery failed: then nothing changed, as an API
// server that cannot answer (one that is down) says nothing of what is
// installed.
func (c *clusterStore) startGatewayKinds(ctx context.Context, handler cache.ResourceEventHandler) (missing []string, known bool) {
	present := map[string]bool{}
	// What ServerResourcesForGroupVersion asks, but with ctx: it has none,
	// and a stop would wait for patientDial to give up on an API server
	// that is down.
	list := &metav1.APIResourceList{}
	err := c.discovery.RESTClient().Get().AbsPath("/apis/" + gatewayv1.GroupVersion.String()).Do(ctx).Into(list)
	switch {
	case err == nil:
		for _, r := range list.APIResources {
			present[r.Name] = true
		}
	case !apierrors.IsNotFound(err):
		c.log.Warn("discovery of the Gateway API failed", "error", err)
		return nil, false
	}
	var informers []watching
	for name, informer := range c.gatewayKinds() {
		switch {
		case !present[name]:
			missing = append(missing, name)
		case !c.started[name]:
			w, err := c.watch(informer(), handler, false)
			if err != nil {
				c.log.Error("watching a Gateway API kind", "kind", name, "error", err)
				continue
			}
			informers = append(informers, w)
			c.started[name] = true
		}
	}
	slices.Sort(missing)
	version, channel, versionKnown := c.readBundleVersion(ctx)
	if len(informers) > 0 {
		c.gateway.Start(ctx.Done())
		if !c.synced(ctx, informers...) {
			return missing, true
		}
	}
	c.mu.Lock()
	if versionKnown {
		c.bundleVersion, c.crdChannel = version, channel
	}
	c.mu.Unlock()
	return missing, true
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// readBundleVersion returns the bundle version and channel of the
// installed Gateway CRD, "" when there is none or it cannot be read (no
// RBAC for CRDs), and known false when the API server did not answer.
func (c *clusterStore) readBundleVersion(ctx context.Context) (version, channel string, known bool) {
	crd, err := c.meta.Resource(crdResource).Get(ctx, "gateways."+gatewayv1.GroupName, metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			c.log.Debug("reading the Gateway API bundle version", "error", err)
		}
		return "", "", apierrors.IsNotFound(err) || apierrors.IsForbidden(err)
	}
	return crd.Annotations[consts.BundleVersionAnnotation], crd.Annotations[consts.ChannelAnnotation], true
}

// sliceHandler passes the Services whose EndpointSlices changed, as the
// slices name them before and after, to endpointsChanged once the caches
// are synced: endpoints change without a translation.
func (c *clusterStore) sliceHandler() cache.ResourceEventHandler {
	changed := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		s, ok := obj.(*endpointSlice)
		if !ok || !c.ready.Load() {
			return
		}
		if key, ok := sliceService(s); ok {
			c.endpointsChanged(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: changed,
		UpdateFunc: func(old, new any) {
			changed(old)
			changed(new)
		},
		DeleteFunc: changed,
	}
}

func eventHandler(changed, statusChanged func()) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { changed() },
		UpdateFunc: func(old, new any) {
			o, okOld := old.(metav1.Object)
			n, okNew := new.(metav1.Object)
			switch {
			case okOld && okNew && o.GetResourceVersion() == n.GetResourceVersion():
			case okOld && okNew && onlyStatusChanged(old, o, n):
				statusChanged()
			default:
				changed()
			}
		},
		DeleteFunc: func(any) { changed() },
	}
}

// onlyStatusChanged reports whether an update of obj (old o, new n)
// changed its status and nothing else translation reads: for the kinds
// with a status subresource, the generation counts changes of spec.
func onlyStatusChanged(obj any, o, n metav1.Object) bool {
	switch obj.(type) {
	case *gatewayv1.HTTPRoute, *gatewayv1.GRPCRoute, *gatewayv1.TLSRoute, *gatewayv1.TCPRoute, *gatewayv1.UDPRoute, *gatewayv1.Gateway, *gatewayv1.ListenerSet, *gatewayv1.GatewayClass, *gatewayv1.BackendTLSPolicy, *networkingv1.Ingress:
	default:
		return false
	}
	return o.GetGeneration() == n.GetGeneration() && o.GetGeneration() != 0 &&
		maps.Equal(o.GetLabels(), n.GetLabels()) && maps.Equal(o.GetAnnotations(), n.GetAnnotations()) &&
		o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
}
