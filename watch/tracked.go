package watch

import (
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// tracked is the cluster's objects as the informers' event handlers were
// told of them, kept for translation.
//
// Translation used to list every informer's cache and find what had
// changed by comparing the lists with the last ones: at 10,000 HTTPRoutes,
// Services and EndpointSlices, listing and comparing took about a fifth
// of a route change, for the one object that changed. The handlers now
// keep each informer's objects in a list and note what comes and goes, so
// that a listing copies pointers and hands translation the changes
// (storeChanges), which bring its memberships up to date one object each.
type tracked struct {
	mu sync.Mutex
	// informers are in the order they were added; only those synced
	// are listed.
	informers []*trackedInformer
	// added and removed are the objects of listed informers that came and
	// went since the last listing; an object that came and went in
	// between is in neither. complete is false when they do not tell all
	// of it: an informer was listed for the first time.
	added, removed map[any]struct{}
	complete       bool
	// listings counts the listings made; 0 is none.
	listings uint64
}

// trackedInformer is one informer's objects, by key.
type trackedInformer struct {
	items []any
	// at is the index in items of each object, by namespace and name,
	// which the objects hold already: keys of "namespace/name" would
	// be 30,000 strings more at 10,000 routes.
	at map[types.NamespacedName]int
	// listed is set once the informer synced: its objects are then in
	// every listing and their changes in added and removed.
	listed bool
	// byService holds the keys of EndpointSlices by Service, in no
	// order, for an informer of them. Nearly every Service has one
	// EndpointSlice: with a set of keys (a map) per Service the index
	// took 479 bytes a Service, with a slice 137
	// (BenchmarkTrackedSliceIndex).
	byService map[types.NamespacedName][]types.NamespacedName
	// listing is items as the last listing typed them, until they
	// change: a route change lists 10,000 Services and EndpointSlices
	// that did not change, and typing every one again cost a tenth of
	// the change's CPU. spare is the listing before, which a listing
	// after a change brings up to date at the places written since
	// (written, and before them writtenBefore) and hands out instead:
	// typing 50,000 routes again for one that changed was 400 KB and
	// half the CPU of the change. The listing handed out last is left as
	// it is for whoever still reads it, and translation reorders neither
	// (objects.sort). Both are nil while there is none to bring up to
	// date, or too much changed for it to pay.
	listing, spare         *objects
	written, writtenBefore []int
}

func newTracked() *tracked {
	return &tracked{added: map[any]struct{}{}, removed: map[any]struct{}{}}
}

// informer adds an informer's entry; byService indexes EndpointSlices by
// Service.
func (t *tracked) informer(byService bool) *trackedInformer {
	inf := &trackedInformer{at: map[types.NamespacedName]int{}}
	if byService {
		inf.byService = map[types.NamespacedName][]types.NamespacedName{}
	}
	t.mu.Lock()
	t.informers = append(t.informers, inf)
	t.mu.Unlock()
	return inf
}

// handler is the event handler that keeps inf's objects and then calls
// next.
func (t *tracked) handler(inf *trackedInformer, next cache.ResourceEventHandler) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			t.put(inf, obj)
			next.OnAdd(obj, false)
		},
		UpdateFunc: func(old, obj any) {
			t.put(inf, obj)
			next.OnUpdate(old, obj)
		},
		DeleteFunc: func(obj any) {
			t.remove(inf, obj)
			next.OnDelete(obj)
		},
	}
}

// put adds obj, or puts it in the place of the object of its key.
func (t *tracked) put(inf *trackedInformer, obj any) {
	key, ok := keyOfObject(obj)
	if !ok {
		return // not an object: informers hand out none such
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if i, ok := inf.at[key]; ok {
		if inf.items[i] == obj {
			return
		}
		t.gone(inf, inf.items[i])
		inf.index(key, inf.items[i], false)
		inf.items[i] = obj
		inf.wrote(i)
	} else {
		inf.at[key] = len(inf.items)
		inf.items = append(inf.items, obj)
		inf.wrote(len(inf.items) - 1)
	}
	inf.index(key, obj, true)
	if inf.listed {
		t.added[obj] = struct{}{}
	}
}

// remove removes the object of obj's key; obj may be a tombstone.
func (t *tracked) remove(inf *trackedInformer, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	key, ok := keyOfObject(obj)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := inf.at[key]
	if !ok {
		return
	}
	old := inf.items[i]
	t.gone(inf, old)
	inf.index(key, old, false)
	last := len(inf.items) - 1
	if i != last {
		moved := inf.items[last]
		inf.items[i] = moved
		movedKey, _ := keyOfObject(moved)
		inf.at[movedKey] = i
	}
	inf.items[last] = nil
	inf.items = inf.items[:last]
	delete(inf.at, key)
	inf.wrote(i)
}

// wrote notes that the object at i changed, or that i is past the end
// now, for the next listing to bring the spare listing up to date.
func (inf *trackedInformer) wrote(i int) {
	if inf.listing == nil {
		return
	}
	if len(inf.written)+len(inf.writtenBefore) >= len(inf.items)/2 {
		inf.listing, inf.spare, inf.written, inf.writtenBefore = nil, nil, nil, nil
		return
	}
	inf.written = append(inf.written, i)
}

// relist makes the listing the objects of items, as they are now: the
// spare listing brought up to date or, without one, a listing typed
// anew. An informer's objects are all of one kind.
func (inf *trackedInformer) relist() {
	next := inf.spare
	var list kindList
	if next != nil && len(inf.items) > 0 {
		list = next.listOf(inf.items[0])
	}
	if list == nil {
		next = &objects{}
		for _, o := range inf.items {
			next.add(o, len(inf.items))
		}
	} else {
		list.resize(len(inf.items))
		for _, written := range [][]int{inf.writtenBefore, inf.written} {
			for _, i := range written {
				if i < len(inf.items) {
					list.set(i, inf.items[i])
				}
			}
		}
	}
	inf.spare, inf.listing = inf.listing, next
	inf.writtenBefore, inf.written = inf.written, inf.writtenBefore[:0]
}

// keyOfObject is obj's namespace and name; false for what is no object.
func keyOfObject(obj any) (types.NamespacedName, bool) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return types.NamespacedName{}, false
	}
	return namespacedName(o), true
}

// gone notes that obj, one of inf's objects, went.
func (t *tracked) gone(inf *trackedInformer, obj any) {
	if !inf.listed {
		return
	}
	if _, ok := t.added[obj]; ok {
		delete(t.added, obj)
		return
	}
	t.removed[obj] = struct{}{}
}

// index files the EndpointSlice obj of key under its Service, or takes it
// out.
func (inf *trackedInformer) index(key types.NamespacedName, obj any, in bool) {
	s, ok := obj.(*endpointSlice)
	if inf.byService == nil || !ok {
		return
	}
	svc, ok := sliceService(s)
	if !ok {
		return
	}
	// A Service of many endpoints has a few EndpointSlices of 100 each:
	// a search of its keys is short.
	keys := inf.byService[svc]
	i := slices.Index(keys, key)
	switch {
	case in && i < 0:
		inf.byService[svc] = append(keys, key)
	case !in && i >= 0 && len(keys) == 1:
		delete(inf.byService, svc)
	case !in && i >= 0:
		last := len(keys) - 1
		keys[i], keys[last] = keys[last], types.NamespacedName{}
		inf.byService[svc] = keys[:last]
	}
}

// synced puts inf's objects in the listings from the next one on.
func (t *tracked) synced(inf *trackedInformer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !inf.listed {
		inf.listed = true
		t.complete = false
	}
}

// list adds the objects of every synced informer to objs and gives it
// the changes since the last listing.
func (t *tracked) list(objs *objects) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, inf := range t.informers {
		if !inf.listed {
			continue
		}
		if inf.listing == nil || len(inf.written) > 0 {
			inf.relist()
		}
		objs.addListing(inf.listing)
	}
	t.listings++
	if t.complete {
		objs.changes = &storeChanges{since: t.listings - 1, listing: t.listings, added: keysOf(t.added), removed: keysOf(t.removed)}
	}
	t.added, t.removed = emptied(t.added), emptied(t.removed)
	t.complete = true
}

func keysOf(set map[any]struct{}) []any {
	out := make([]any, 0, len(set))
	for o := range set {
		out = append(out, o)
	}
	return out
}

// emptied returns set emptied, or a new set where set held many: a map
// keeps its room when cleared, and a walk of it takes as long as it is
// large, so after a relist of 50,000 objects, each listing's keysOf read
// 50,000 empty places, a fifth of a route change at 50,000 routes.
func emptied(set map[any]struct{}) map[any]struct{} {
	if len(set) > 64 {
		return map[any]struct{}{}
	}
	clear(set)
	return set
}

// slicesOf returns the EndpointSlices of the Service key, in no order,
// as the next listing will have them.
func (t *tracked) slicesOf(key types.NamespacedName) []*endpointSlice {
	t.mu.Lock()
	defer t.mu.Unlock()
	var list []*endpointSlice
	for _, inf := range t.informers {
		for _, k := range inf.byService[key] {
			list = append(list, inf.items[inf.at[k]].(*endpointSlice))
		}
	}
	return list
}
