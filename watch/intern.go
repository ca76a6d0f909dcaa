package watch

import (
	"encoding/binary"
	"reflect"
	"sync"
	"time"
	"unsafe"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
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
	// slices maps the elements of a slice of sharedSlices to the slice
	// handed out for them.
	slices generations[sliceKey, reflect.Value]
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

// sliceInternLimit is the number of slices of a generation: the slices
// that many objects share are a few for each Gateway and second in which
// hostgate wrote statuses, and a generation of internLimit, made whole,
// was 460 KB.
const sliceInternLimit = 512

func newInterner() *interner {
	return &interner{fields: map[reflect.Type][]int{}, slices: generations[sliceKey, reflect.Value]{limit: sliceInternLimit}}
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
		if v.Kind() == reflect.Slice && v.Len() > 0 && sharedSlices[v.Type()] {
			if shared, ok := in.slice(v); ok {
				v.Set(shared)
				return
			}
		}
		for i := range v.Len() {
			in.walk(v.Index(i))
		}
	}
	// Maps (labels, annotations) are few and small, and their keys cannot
	// be replaced in place; interfaces hold nothing of the kinds cached.
}

// sharedSlices are the types of slices that the interner shares whole
// between the objects that hold equal ones: the status entries of routes
// (hostgate writes the same for every route of a Gateway, with the
// transition times of the second it wrote them), their conditions, the
// parentRefs of the routes of a Gateway and the load balancer status of
// Ingresses. Each was a copy of its own in every object: at 10,000
// HTTPRoutes, most of the status they held. The elements of these slices
// hold no slice of a type not shared or not walked, and no pointer to a
// struct (TestSharedSlicesHoldNothingWritten): slice never writes to
// them.
var sharedSlices = map[reflect.Type]bool{
	reflect.TypeFor[[]gatewayv1.RouteParentStatus]():             true,
	reflect.TypeFor[[]metav1.Condition]():                        true,
	reflect.TypeFor[[]gatewayv1.ParentReference]():               true,
	reflect.TypeFor[[]networkingv1.IngressLoadBalancerIngress](): true,
	reflect.TypeFor[[]networkingv1.IngressPortStatus]():          true,
}

// sliceKey is a slice's type and the encoding of its elements
// (appendValueKey).
type sliceKey struct {
	t reflect.Type
	s string
}

// slice returns the slice to hand out for s, one of sharedSlices: the one
// handed out before for equal elements, or else an interned copy of s,
// which later ones then share. ok is false for elements that cannot be
// told equal. The elements of s are never written: s may be a slice
// handed out already (client-go interns some objects twice, see pointer),
// which translation reads meanwhile. The copy has no room to append into.
func (in *interner) slice(s reflect.Value) (_ reflect.Value, ok bool) {
	encoded, ok := appendValueKey(nil, s)
	if !ok {
		return s, false
	}
	key := sliceKey{t: s.Type(), s: string(encoded)}
	if shared, found := in.slices.find(key); found {
		return in.slices.share(key, shared), true
	}
	own := reflect.MakeSlice(s.Type(), s.Len(), s.Len())
	reflect.Copy(own, s)
	for i := range own.Len() {
		in.walk(own.Index(i))
	}
	return in.slices.share(key, own), true
}

var timeType = reflect.TypeFor[time.Time]()

// appendValueKey appends to b an encoding of v that two values have alike
// if and only if they are deeply equal, as long as they hold no other
// kinds than strings, bools, integers, pointers, slices, structs and
// times; ok is false for a value that holds another kind. Times are equal
// as instants in locations of the same name.
func appendValueKey(b []byte, v reflect.Value) (_ []byte, ok bool) {
	switch v.Kind() {
	case reflect.String:
		return append(binary.AppendUvarint(b, uint64(v.Len())), v.String()...), true
	case reflect.Bool:
		if v.Bool() {
			return append(b, 1), true
		}
		return append(b, 0), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return binary.AppendVarint(b, v.Int()), true
	case reflect.Pointer:
		if v.IsNil() {
			return append(b, 0), true
		}
		return appendValueKey(append(b, 1), v.Elem())
	case reflect.Slice:
		if v.IsNil() {
			return append(b, 0), true
		}
		b = binary.AppendUvarint(append(b, 1), uint64(v.Len()))
		for i := range v.Len() {
			if b, ok = appendValueKey(b, v.Index(i)); !ok {
				return b, false
			}
		}
		return b, true
	case reflect.Struct:
		if v.Type() == timeType {
			if !v.CanInterface() {
				return b, false
			}
			t := v.Interface().(time.Time)
			b = binary.AppendVarint(binary.AppendVarint(b, t.Unix()), int64(t.Nanosecond()))
			name := t.Location().String()
			return append(binary.AppendUvarint(b, uint64(len(name))), name...), true
		}
		for i := range v.NumField() {
			if b, ok = appendValueKey(b, v.Field(i)); !ok {
				return b, false
			}
		}
		return b, true
	}
	return b, false
}

// exportedFields returns the indexes of t's exported fields, and of the
// structs it embeds (cachedMeta), whose exported fields are settable as
// t's own. Unexported ones (time.Time's, say) cannot be set, and hold
// nothing of the object's.
func (in *interner) exportedFields(t reflect.Type) []int {
	fields, ok := in.fields[t]
	if !ok {
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() || f.Anonymous && f.Type.Kind() == reflect.Struct {
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
// generations of at most limit keys each (internLimit if 0).
type generations[K comparable, V any] struct {
	current, old map[K]V
	limit        int
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
	limit := g.limit
	if limit == 0 {
		limit = internLimit
	}
	switch {
	case g.current == nil:
		g.current = make(map[K]V, limit)
	case len(g.current) >= limit:
		// The older generation's map, emptied, takes the new one's
		// values: a start-up with 10,000 routes turns over dozens of
		// generations, each a map of hundreds of kilobytes made anew.
		g.old, g.current = g.current, g.old
		if g.current == nil {
			g.current = make(map[K]V, limit)
		} else {
			clear(g.current)
		}
	}
	g.current[k] = v
	return v
}

func (g *generations[K, V]) len() int { return len(g.current) + len(g.old) }
