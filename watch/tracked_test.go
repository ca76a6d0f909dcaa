package watch

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// lister makes the objects a translation reads from a store of like's
// kind holding list: store lists afresh each time, as file mode does;
// newFeed's tells what changed since its last list, as cluster mode does.
type lister func(like *objects, list []any) *objects

// listers are the two ways a source hands translation its objects.
var listers = []struct {
	name string
	new  func() lister
}{
	{"listed", func() lister { return store }},
	{"told", newFeed},
}

// newFeed returns a lister that hands each list to a tracked store as
// informers' event handlers would (what came, went or was replaced since
// the last list) and lists from it.
func newFeed() lister {
	store := newTrackedStore()
	last := map[string]any{}
	return func(like *objects, list []any) *objects {
		now := make(map[string]any, len(list))
		for _, obj := range list {
			key := kindKey(obj)
			now[key] = obj
			if last[key] != obj {
				store.put(obj)
			}
		}
		for key, obj := range last {
			if _, ok := now[key]; !ok {
				store.remove(obj)
			}
		}
		last = now
		return store.objects(like)
	}
}

// trackedStore is a tracked store with a synced informer for each kind,
// made as the first object of the kind comes.
type trackedStore struct {
	*tracked
	informers map[reflect.Type]*trackedInformer
}

func newTrackedStore() *trackedStore {
	return &trackedStore{tracked: newTracked(), informers: map[reflect.Type]*trackedInformer{}}
}

// trackedStoreOf returns a tracked store that was told of objs.
func trackedStoreOf(objs *objects) *trackedStore {
	store := newTrackedStore()
	for _, o := range objs.all() {
		store.put(o)
	}
	return store
}

func (s *trackedStore) informerOf(obj any) *trackedInformer {
	typ := reflect.TypeOf(obj)
	inf := s.informers[typ]
	if inf == nil {
		inf = s.informer(typ == reflect.TypeFor[*endpointSlice]())
		s.synced(inf)
		s.informers[typ] = inf
	}
	return inf
}

// put adds obj, or replaces the object of its key, as an informer's
// handler is told.
func (s *trackedStore) put(obj any) {
	s.handler(s.informerOf(obj), cache.ResourceEventHandlerFuncs{}).OnAdd(obj, false)
}

func (s *trackedStore) remove(obj any) {
	s.handler(s.informerOf(obj), cache.ResourceEventHandlerFuncs{}).OnDelete(obj)
}

// objects lists the store as of like's kind.
func (s *trackedStore) objects(like *objects) *objects {
	objs := &objects{crdBundleVersion: like.crdBundleVersion, crdChannel: like.crdChannel}
	s.list(objs)
	return objs
}

func kindKey(obj any) string {
	m := obj.(metav1.Object)
	return fmt.Sprintf("%T %s/%s", obj, m.GetNamespace(), m.GetName())
}

func setOf(objs []any) map[any]bool {
	set := make(map[any]bool, len(objs))
	for _, o := range objs {
		set[o] = true
	}
	return set
}

// TestTrackedMatchesInformer drives a tracked store as two informers'
// handlers would, through adds, updates, deletes (some as tombstones) and
// an informer that syncs late, and checks every listing: the objects of
// the synced informers, the changes since the listing before (with an
// object that came and went in between in neither), and the EndpointSlices
// of each Service. A listing must stay as it was handed out until the
// one after the next: the spare listing is brought up to date in place.
func TestTrackedMatchesInformer(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	tr := newTracked()
	services, sliceInf := tr.informer(false), tr.informer(true)
	noop := cache.ResourceEventHandlerFuncs{}
	handlers := map[*trackedInformer]cache.ResourceEventHandler{services: tr.handler(services, noop), sliceInf: tr.handler(sliceInf, noop)}
	stores := map[*trackedInformer]map[string]any{services: {}, sliceInf: {}}
	newObject := func(inf *trackedInformer) any {
		name := fmt.Sprintf("o%d", rng.IntN(30))
		if inf == services {
			return &service{Namespace: "ns", Name: name}
		}
		return &endpointSlice{Namespace: "ns", Name: name, Service: fmt.Sprintf("svc%d", rng.IntN(4))}
	}
	listed := map[*trackedInformer]bool{}
	var lastListing map[any]bool
	var handedOut *objects
	var handedOutAll []any
	listings, complete := 0, 0
	for step := range 3000 {
		inf := services
		if rng.IntN(2) == 0 {
			inf = sliceInf
		}
		store := stores[inf]
		obj := newObject(inf)
		key, _ := cache.MetaNamespaceKeyFunc(obj)
		old, exists := store[key]
		switch {
		case !exists:
			store[key] = obj
			handlers[inf].OnAdd(obj, false)
		case rng.IntN(3) > 0:
			store[key] = obj
			handlers[inf].OnUpdate(old, obj)
		default:
			delete(store, key)
			if rng.IntN(2) == 0 {
				handlers[inf].OnDelete(cache.DeletedFinalStateUnknown{Key: key, Obj: old})
			} else {
				handlers[inf].OnDelete(old)
			}
		}
		if step == 500 {
			tr.synced(services)
			listed[services] = true
		}
		if step == 1500 {
			tr.synced(sliceInf)
			listed[sliceInf] = true
		}
		if step < 500 || rng.IntN(5) > 0 {
			continue
		}
		objs := &objects{}
		tr.list(objs)
		listings++
		if handedOut != nil && !slices.Equal(handedOut.all(), handedOutAll) {
			t.Fatalf("step %d: the listing before changed", step)
		}
		handedOut, handedOutAll = objs, objs.all()
		want := map[any]bool{}
		for inf, objects := range stores {
			if listed[inf] {
				for _, o := range objects {
					want[o] = true
				}
			}
		}
		got := map[any]bool{}
		for _, o := range objs.all() {
			if got[o] {
				t.Fatalf("step %d: %s listed twice", step, kindKey(o))
			}
			got[o] = true
		}
		if !maps.Equal(got, want) {
			t.Fatalf("step %d: listed %d objects, the informers hold %d", step, len(got), len(want))
		}
		if objs.changes != nil {
			complete++
			if objs.changes.since != uint64(listings-1) || objs.changes.listing != uint64(listings) {
				t.Fatalf("step %d: changes from listing %d to %d, want %d to %d", step, objs.changes.since, objs.changes.listing, listings-1, listings)
			}
			next := maps.Clone(lastListing)
			for _, o := range objs.changes.removed {
				if !next[o] {
					t.Fatalf("step %d: %s removed, but it was not listed", step, kindKey(o))
				}
				delete(next, o)
			}
			for _, o := range objs.changes.added {
				if next[o] {
					t.Fatalf("step %d: %s added, but it was listed", step, kindKey(o))
				}
				next[o] = true
			}
			if !maps.Equal(next, want) {
				t.Fatalf("step %d: the last listing and the changes make %d objects, the informers hold %d", step, len(next), len(want))
			}
		}
		lastListing = want
		if rng.IntN(3) == 0 {
			// A listing with nothing changed since hands out the same
			// objects again.
			again := &objects{}
			tr.list(again)
			listings++
			if got := setOf(again.all()); !maps.Equal(got, want) {
				t.Fatalf("step %d: listed again with nothing changed: %d objects, the informers hold %d", step, len(got), len(want))
			}
			if c := again.changes; c != nil && (len(c.added) > 0 || len(c.removed) > 0) {
				t.Fatalf("step %d: listed again with nothing changed: %d added, %d removed", step, len(c.added), len(c.removed))
			}
		}
		for svc := range 4 {
			key := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("svc%d", svc)}
			var wantSlices []string
			for _, o := range stores[sliceInf] {
				if k, _ := sliceService(o.(*endpointSlice)); k == key {
					wantSlices = append(wantSlices, kindKey(o))
				}
			}
			var gotSlices []string
			for _, s := range tr.slicesOf(key) {
				gotSlices = append(gotSlices, kindKey(s))
			}
			slicesSorted := func(l []string) []string { return slices.Sorted(slices.Values(l)) }
			if !slices.Equal(slicesSorted(gotSlices), slicesSorted(wantSlices)) {
				t.Fatalf("step %d: EndpointSlices of %s are %v, want %v", step, key, gotSlices, wantSlices)
			}
		}
	}
	if complete < listings/2 {
		t.Errorf("%d of %d listings told their changes: the test checked too little", complete, listings)
	}
}

// TestTranslationKeepsListingsInPlace translates the listings of a
// tracked store after each of a run of route changes and checks that each
// listing holds the informers' objects: a listing is the one before last
// brought up to date place by place, which only works if translation
// left that one in the order it was handed out.
func TestTranslationKeepsListingsInPlace(t *testing.T) {
	objs := benchObjects(30)
	store := trackedStoreOf(objs)
	m := newMemo()
	for i := range 20 {
		listed := store.objects(objs)
		if got, want := setOf(listed.all()), setOf(objs.all()); !maps.Equal(got, want) {
			t.Fatalf("change %d: listed %d objects, the informers hold %d", i, len(got), len(want))
		}
		m.translate(listed, Options{})
		objs.httpRoutes[i%7] = objs.httpRoutes[i%7].DeepCopy()
		store.put(objs.httpRoutes[i%7])
	}
}
