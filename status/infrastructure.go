package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostgate/hostgate/watch"
)

// ownedKeysAnnotation records the label and annotation keys hostgate set
// on an object it keeps for a Gateway. A key dropped from the Gateway's
// spec.infrastructure is removed from the object, and keys that others
// set (a load balancer's own annotations) are left alone.
const ownedKeysAnnotation = "hostgate.dev/owned-metadata"

type ownedKeys struct {
	Labels      []string `json:"labels,omitempty"`
	Annotations []string `json:"annotations,omitempty"`
}

// infrastructure keeps the Services and EndpointSlices that stand for
// Gateways (watch.Infrastructure) as the Reports describe them. Its
// informers see only objects labelled as hostgate's.
type infrastructure struct {
	factory   informers.SharedInformerFactory
	services  keeper[*corev1.Service]
	endpoints keeper[*discoveryv1.EndpointSlice]
}

func newInfrastructure(kube kubernetes.Interface) *infrastructure {
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = watch.ManagedByLabel + "=" + watch.ManagedBy
	}))
	services := factory.Core().V1().Services()
	endpointSlices := factory.Discovery().V1().EndpointSlices()
	return &infrastructure{
		factory: factory,
		services: keeper[*corev1.Service]{
			kind:   "Service",
			fresh:  func() *corev1.Service { return &corev1.Service{} },
			cached: func(ns, name string) (*corev1.Service, error) { return services.Lister().Services(ns).Get(name) },
			all:    func() ([]*corev1.Service, error) { return services.Lister().List(labels.Everything()) },
			client: func(ns string) client[*corev1.Service] { return kube.CoreV1().Services(ns) },
			synced: services.Informer().HasSynced,
			set: func(next, wanted *corev1.Service) {
				next.Spec.Type = wanted.Spec.Type
				// The node ports the API server allocated stay, so that
				// a load balancer that sends to them need not follow.
				ports := slices.Clone(wanted.Spec.Ports)
				for i := range ports {
					for _, p := range next.Spec.Ports {
						if p.Port == ports[i].Port && p.Protocol == ports[i].Protocol {
							ports[i].NodePort = p.NodePort
						}
					}
				}
				next.Spec.Ports = ports
			},
		},
		endpoints: keeper[*discoveryv1.EndpointSlice]{
			kind:  "EndpointSlice",
			fresh: func() *discoveryv1.EndpointSlice { return &discoveryv1.EndpointSlice{} },
			cached: func(ns, name string) (*discoveryv1.EndpointSlice, error) {
				return endpointSlices.Lister().EndpointSlices(ns).Get(name)
			},
			all:    func() ([]*discoveryv1.EndpointSlice, error) { return endpointSlices.Lister().List(labels.Everything()) },
			client: func(ns string) client[*discoveryv1.EndpointSlice] { return kube.DiscoveryV1().EndpointSlices(ns) },
			synced: endpointSlices.Informer().HasSynced,
			set: func(next, wanted *discoveryv1.EndpointSlice) {
				next.AddressType, next.Endpoints, next.Ports = wanted.AddressType, wanted.Endpoints, wanted.Ports
			},
		},
	}
}

// start fills the caches until ctx is done.
func (in *infrastructure) start(ctx context.Context) {
	in.factory.Start(ctx.Done())
}

// syncWait bounds how long a new leader waits for the caches before its
// first pass. It does not wait for ever: without the rights to list these
// kinds (the hostgate-gateway-services role not bound) the caches never
// fill, and every other status must still be written.
const syncWait = 10 * time.Second

// waitSynced waits up to syncWait for the caches to fill.
func (in *infrastructure) waitSynced(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	cache.WaitForCacheSync(ctx.Done(), in.services.synced, in.endpoints.synced)
}

// write brings the objects of every Gateway of r to what r describes,
// and deletes those hostgate keeps for a Gateway of one of our classes
// that r describes no more (a Gateway deleted, moved to another class, or
// left without ports). Objects of classes that are not ours may belong to
// another hostgate; the Gateway's deletion removes them anyway, as they
// are owned by it.
func (in *infrastructure) write(ctx context.Context, p *pass, r *watch.Reports) {
	// Before the caches are full every object would look missing.
	if !in.services.synced() || !in.endpoints.synced() {
		p.count(false, errors.New("the caches of the Services and EndpointSlices kept for Gateways have not filled yet (is the hostgate-gateway-services role bound?): they are not written"))
		return
	}
	services := map[types.NamespacedName]bool{}
	endpoints := map[types.NamespacedName]bool{}
	for _, g := range r.Gateways {
		infra := g.Infrastructure
		if infra == nil {
			continue
		}
		services[key(infra.Service)] = true
		wrote, err := in.services.apply(ctx, infra.Service)
		p.count(wrote, err)
		for _, s := range infra.EndpointSlices {
			endpoints[key(s)] = true
			// The slices would add endpoints to a Service that is not
			// hostgate's.
			if err == nil {
				p.count(in.endpoints.apply(ctx, s))
			}
		}
	}
	ours := map[string]bool{}
	for _, c := range r.GatewayClasses {
		ours[c.Object.Name] = true
	}
	in.services.sweep(ctx, p, services, ours)
	in.endpoints.sweep(ctx, p, endpoints, ours)
}

func key(o metav1.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}

// client is what a keeper needs of a typed client.
type client[T any] interface {
	Get(context.Context, string, metav1.GetOptions) (T, error)
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}

// keeper keeps the objects of one kind that stand for Gateways.
type keeper[T object[T]] struct {
	kind   string
	fresh  func() T
	cached func(namespace, name string) (T, error)
	all    func() ([]T, error)
	client func(namespace string) client[T]
	synced cache.InformerSynced
	// set gives next, a copy of the object as it is or a fresh one, the
	// fields of wanted that hostgate owns, without changing wanted.
	set func(next, wanted T)
}

// apply creates wanted, or updates the object of its name to it, unless
// that object is not hostgate's: one a user made is never taken over.
func (k *keeper[T]) apply(ctx context.Context, wanted T) (wrote bool, err error) {
	ns, name := wanted.GetNamespace(), wanted.GetName()
	current, err := k.cached(ns, name)
	if apierrors.IsNotFound(err) {
		next := k.fresh()
		next.SetNamespace(ns)
		next.SetName(name)
		k.merge(next, wanted)
		_, err = k.client(ns).Create(ctx, next, metav1.CreateOptions{})
		if err == nil {
			return true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("create %s %s/%s: %w", k.kind, ns, name, err)
		}
		// Made by someone else, or by the last pass and not cached yet.
		current, err = k.client(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return false, fmt.Errorf("get %s %s/%s: %w", k.kind, ns, name, err)
	}
	// Deleted meanwhile (writeRetrying then says nothing was written): the
	// next pass creates it.
	wrote, err = writeRetrying(ctx, current, k.client(ns).Get, func(current T) (bool, error) {
		if current.GetLabels()[watch.ManagedByLabel] != watch.ManagedBy {
			return false, fmt.Errorf("%s %s/%s exists and is not hostgate's: left alone", k.kind, ns, name)
		}
		next := current.DeepCopy()
		k.merge(next, wanted)
		if equality.Semantic.DeepEqual(current, next) {
			return false, nil
		}
		_, err := k.client(ns).Update(ctx, next, metav1.UpdateOptions{})
		return err == nil, err
	})
	if err != nil {
		return false, fmt.Errorf("update %s %s/%s: %w", k.kind, ns, name, err)
	}
	return wrote, nil
}

// merge sets on next the labels, annotations and owners of wanted, takes
// off next the keys hostgate set before and wants no more, and sets the
// rest of what hostgate owns.
func (k *keeper[T]) merge(next, wanted T) {
	var before ownedKeys
	_ = json.Unmarshal([]byte(next.GetAnnotations()[ownedKeysAnnotation]), &before) // unreadable: nothing to take off
	lbls, annotations := maps.Clone(next.GetLabels()), maps.Clone(next.GetAnnotations())
	if lbls == nil {
		lbls = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	for _, l := range before.Labels {
		delete(lbls, l)
	}
	for _, a := range before.Annotations {
		delete(annotations, a)
	}
	maps.Copy(lbls, wanted.GetLabels())
	maps.Copy(annotations, wanted.GetAnnotations())
	record, _ := json.Marshal(ownedKeys{ // a struct of strings always marshals
		Labels:      slices.Sorted(maps.Keys(wanted.GetLabels())),
		Annotations: slices.Sorted(maps.Keys(wanted.GetAnnotations())),
	})
	annotations[ownedKeysAnnotation] = string(record)
	next.SetLabels(lbls)
	next.SetAnnotations(annotations)
	next.SetOwnerReferences(wanted.GetOwnerReferences())
	k.set(next, wanted)
}

// sweep deletes the objects that are not wanted and belong to Gateways of
// the classes in ours.
func (k *keeper[T]) sweep(ctx context.Context, p *pass, wanted map[types.NamespacedName]bool, ours map[string]bool) {
	objs, err := k.all()
	if err != nil {
		p.count(false, fmt.Errorf("list %ss: %w", k.kind, err))
		return
	}
	for _, o := range objs {
		if wanted[key(o)] || !ours[o.GetLabels()[gatewayv1.GatewayClassNameLabelKey]] {
			continue
		}
		uid := o.GetUID()
		err := k.client(o.GetNamespace()).Delete(ctx, o.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Gone, or made again since it was cached.
		case err != nil:
			p.count(false, fmt.Errorf("delete %s %s/%s: %w", k.kind, o.GetNamespace(), o.GetName(), err))
		default:
			p.count(true, nil)
		}
	}
}
