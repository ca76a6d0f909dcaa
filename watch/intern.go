package watch

import (
	"reflect"
	"sync"
	"unsafe"

	"k8s.io/apimachinery/pkg/types"
)

// An interner makes the objects of the informers' caches share their equal
// strings and the equal values their pointer fields point to. Objects are
// decoded one by one, so each holds its own copy of the namespace, of
// "gateway.networking.k8s.io", of every condition's type, reason and
// message, and its own *Kind pointing to "Service": with 10,000 routes
// these copies were a large part of the caches (BenchmarkCachedObjects).
// Cached objects are never changed (client-go's rule for informers, which
// the status writer keeps by writing from deep copies), so sharing is safe.
//
// Strings unique to one object (names, UIDs, resource versions) would
// fill a plain map for good as objects come and go. The interner keeps two
// generations instead: a value found in the older one moves to the newer,
// and when the newer holds internLimit values it becomes the older and the
// older is dropped. Values that many objects hold are met in every
// generation and stay; the others leave after two. Strings already handed
// out stay valid, being ordinary strings.
type interner struct {
	mu      sync.Mutex
	strings generations[string, string]
	// pointers maps a pointed-to value to the pointer handed out for it.
	pointers generations[pointerKey, reflect.Value]
	// fields are the exported fields of each struct type met: looking
	// them up again for every value took a third of interning.
	fields map[reflect.Type][]int
	// published is Options.PublishService, whose addresses trimObject
	// keeps.
	published types.NamespacedName
}

// pointerKey is a pointed-to string, bool or integer; its type tells
// Kind("x") from Group("x").
type pointerKey struct {
	t reflect.Type
	s string
	n int64
}

// internLimit is the number of values of a generation: well above the
// values many objects share (namespaces, kinds, condition reasons and
// messages), small enough not to matter beside 10,000 objects.
const internLimit = 4096

func newInterner() *interner {
	return &interner{fields: map[reflect.Type][]int{}}
}

// intern makes obj, which must be a pointer to a newly decoded object that
// nothing else holds yet, share what it can with objects interned before.
func (in *interner) intern(obj any) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.walk(v.Elem())
}

func (in *interner) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.Len() > 0 {
			v.SetString(in.string(v.String()))
		}
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		switch v.Elem().Kind() {
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64:
			v.Set(in.pointer(v))
		default:
			in.walk(v.Elem())
		}
	case reflect.Struct:
		for _, i := range in.exportedFields(v.Type()) {
			in.walk(v.Field(i))
		}
	case reflect.Slice, reflect.Array:
		if holdsNothingShared(v.Type().Elem().Kind()) {
			return
		}
		for i := range v.Len() {
			in.walk(v.Index(i))
		}
	}
	// Maps (labels, annotations) are few and small, and their keys cannot
	// be replaced in place; interfaces hold nothing of the kinds cached.
}

// exportedFields returns the indexes of t's exported fields. Unexported
// ones (time.Time's, say) cannot be set, and hold nothing of the object's.
func (in *interner) exportedFields(t reflect.Type) []int {
	fields, ok := in.fields[t]
	if !ok {
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				fields = append(fields, i)
			}
		}
		in.fields[t] = fields
	}
	return fields
}

// holdsNothingShared reports whether values of kind k hold no string or
// pointer: a slice of them (a Secret's bytes) is not walked.
func holdsNothingShared(k reflect.Kind) bool {
	return k >= reflect.Bool && k <= reflect.Complex128
}

func (in *interner) string(s string) string {
	return in.strings.share(s, s)
}

// pointer returns the pointer to hand out for the value p points to: p
// itself the first time, unless its string is a copy of one shared.
// Nothing is written through p: client-go may transform an object twice
// (its watch-list, in v0.37, transforms each object into a temporary store
// and hands the store's objects to the informer's queue, which transforms
// them again), and p is then a pointer handed out before, which cached
// objects share while translation reads them.
func (in *interner) pointer(p reflect.Value) reflect.Value {
	elem := p.Elem()
	key := pointerKey{t: elem.Type()}
	switch elem.Kind() {
	case reflect.String:
		key.s = elem.String()
	case reflect.Bool:
		if elem.Bool() {
			key.n = 1
		}
	default:
		key.n = elem.Int()
	}
	if shared, ok := in.pointers.find(key); ok {
		return in.pointers.share(key, shared)
	}
	if elem.Kind() == reflect.String {
		if s := in.string(key.s); unsafe.StringData(s) != unsafe.StringData(key.s) {
			p = reflect.New(elem.Type())
			p.Elem().SetString(s)
			key.s = s
		}
	}
	return in.pointers.share(key, p)
}

// generations maps keys to the values shared for them, in two
// generations of at most internLimit keys each.
type generations[K comparable, V any] struct {
	current, old map[K]V
}

// find returns the value shared for k, if there is one.
func (g *generations[K, V]) find(k K) (V, bool) {
	if shared, ok := g.current[k]; ok {
		return shared, true
	}
	shared, ok := g.old[k]
	return shared, ok
}

// share returns the value shared for k, which is v if there is none yet.
func (g *generations[K, V]) share(k K, v V) V {
	if shared, ok := g.current[k]; ok {
		return shared
	}
	if shared, ok := g.old[k]; ok {
		v = shared
	}
	switch {
	case g.current == nil:
		g.current = make(map[K]V, internLimit)
	case len(g.current) >= internLimit:
		// The older generation's map, emptied, takes the new one's
		// values: a start-up with 10,000 routes turns over dozens of
		// generations, each a map of hundreds of kilobytes made anew.
		g.old, g.current = g.current, g.old
		if g.current == nil {
			g.current = make(map[K]V, internLimit)
		} else {
			clear(g.current)
		}
	}
	g.current[k] = v
	return v
}

func (g *generations[K, V]) len() int { return len(g.current) + len(g.old) }
