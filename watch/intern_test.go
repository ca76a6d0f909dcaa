package watch

import (
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func internedRoute(name string) *gatewayv1.HTTPRoute {
	created := metav1.NewTime(time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC))
	// Each string built anew, as a decoder makes it.
	fresh := func(s string) string { return string([]byte(s)) }
	r := benchCachedRoute(metav1.ObjectMeta{Name: fresh(name), Namespace: fresh("shop"), CreationTimestamp: created}, created)
	r.Status.Parents[0].Conditions[0].Message = fresh("Route is accepted")
	return r
}

func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// TestInternSharesWhatObjectsHoldAlike checks that objects trimmed for the
// caches share equal strings and pointed-to values, and that interning
// changes no value.
func TestInternSharesWhatObjectsHoldAlike(t *testing.T) {
	in := newInterner()
	a, b := internedRoute("a"), internedRoute("b")
	wantB := b.DeepCopy()
	for _, obj := range []*gatewayv1.HTTPRoute{a, b} {
		if _, err := in.trimObject(obj); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(b, wantB) {
		t.Fatalf("interning changed the object:\n got %+v\nwant %+v", b, wantB)
	}
	if !sameString(a.Namespace, b.Namespace) {
		t.Error("the namespaces of two routes are two copies")
	}
	if !sameString(a.Status.Parents[0].Conditions[0].Message, b.Status.Parents[0].Conditions[0].Message) {
		t.Error("the condition messages of two routes are two copies")
	}
	if a.Spec.Rules[0].BackendRefs[0].Kind != b.Spec.Rules[0].BackendRefs[0].Kind {
		t.Error("the backendRefs' kinds of two routes are two pointers")
	}
	// Equal values of different types are not one pointer.
	group, kind := a.Spec.ParentRefs[0].Group, a.Spec.ParentRefs[0].Kind
	if *group != gatewayv1.GroupName || *kind != "Gateway" {
		t.Errorf("parentRef group %q, kind %q", *group, *kind)
	}
	if sameString(a.Name, b.Name) {
		t.Error("different names share storage")
	}
	if &a.Status.Parents[0] != &b.Status.Parents[0] {
		t.Error("two routes' equal status entries are two copies")
	}
	if &a.Spec.ParentRefs[0] != &b.Spec.ParentRefs[0] {
		t.Error("two routes' equal parentRefs are two copies")
	}
	if cap(a.Status.Parents) != len(a.Status.Parents) {
		t.Error("a shared slice has room for an append to write into")
	}
	c := internedRoute("c")
	c.Status.Parents[0].Conditions[1].LastTransitionTime = metav1.NewTime(c.Status.Parents[0].Conditions[1].LastTransitionTime.Add(time.Second))
	wantC := c.DeepCopy()
	if _, err := in.trimObject(c); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, wantC) {
		t.Fatalf("interning changed the object:\n got %+v\nwant %+v", c, wantC)
	}
	if &c.Status.Parents[0] == &a.Status.Parents[0] {
		t.Error("status entries with conditions of different times are one")
	}
	if &c.Status.Parents[0].Conditions[0] == &a.Status.Parents[0].Conditions[0] {
		t.Error("conditions of different times are one")
	}
}

// TestSharedSlicesHoldNothingWritten checks that the elements of every
// type of slice the interner shares hold nothing that interning another
// object writes to: no pointer to a struct, and no slice of a type that
// is walked but not shared.
func TestSharedSlicesHoldNothingWritten(t *testing.T) {
	var check func(path string, typ reflect.Type)
	check = func(path string, typ reflect.Type) {
		switch typ.Kind() {
		case reflect.Pointer:
			if typ.Elem().Kind() == reflect.Struct {
				t.Errorf("%s: a pointer to a struct", path)
			}
		case reflect.Slice:
			if !holdsNothingShared(typ.Elem().Kind()) && !sharedSlices[typ] {
				t.Errorf("%s: a slice of %v, which is walked but not shared", path, typ.Elem())
			}
		case reflect.Struct:
			if typ == timeType {
				return
			}
			for i := range typ.NumField() {
				if f := typ.Field(i); f.IsExported() {
					check(path+"."+f.Name, f.Type)
				}
			}
		case reflect.Map, reflect.Interface:
			t.Errorf("%s: a %v, which slice cannot tell equal", path, typ.Kind())
		}
	}
	for typ := range sharedSlices {
		check(typ.String(), typ.Elem())
	}
}

// TestInternForgetsWhatOneObjectHolds checks that strings held by one
// object each do not pile up in the interner, while those held by every
// object stay shared across its generations.
func TestInternForgetsWhatOneObjectHolds(t *testing.T) {
	in := newInterner()
	first := internedRoute("route-0")
	if _, err := in.trimObject(first); err != nil {
		t.Fatal(err)
	}
	for i := range 5 * internLimit {
		r := internedRoute(fmt.Sprintf("route-%d", i+1))
		if _, err := in.trimObject(r); err != nil {
			t.Fatal(err)
		}
		if !sameString(r.Namespace, first.Namespace) {
			t.Fatalf("route %d: its namespace is no longer the first route's", i+1)
		}
	}
	if n := in.strings.len(); n > 2*internLimit {
		t.Errorf("the interner holds %d strings, more than two generations of %d", n, internLimit)
	}
	if n := in.pointers.len(); n > 2*internLimit {
		t.Errorf("the interner holds %d pointers, more than two generations of %d", n, internLimit)
	}
}

// TestTrimmedObjectsTranslateAlike translates every golden case from
// objects trimmed and interned as the informers' caches hold them, and
// checks the result against the one from the objects as they were
// decoded, which the store converts as file mode does (objects.add):
// trimming must drop nothing translation reads.
func TestTrimmedObjectsTranslateAlike(t *testing.T) {
	eachCase(t, func(t *testing.T, dir string, objs *objects, opts Options) {
		in := newInterner()
		in.published = opts.PublishService
		var decoded decodedObjects
		decodeCase(t, dir, &decoded)
		var trimmed []any
		for _, obj := range decoded {
			cached, err := in.trimObject(obj)
			if err != nil {
				t.Fatal(err)
			}
			trimmed = append(trimmed, cached)
		}
		wantSnap, wantReports := translate(objs, opts)
		gotSnap, gotReports := translate(store(objs, trimmed), opts)
		if got, want := describeSnapshot(gotSnap), describeSnapshot(wantSnap); got != want {
			t.Errorf("snapshot from trimmed objects:\n%s\nwant:\n%s", got, want)
		}
		if got, want := describeReports(t, gotReports), describeReports(t, wantReports); got != want {
			t.Errorf("reports from trimmed objects:\n%s\nwant:\n%s", got, want)
		}
	})
}

// decodedObjects are objects as the file loader decodes them.
type decodedObjects []any

func (d *decodedObjects) add(obj any, _ int) bool {
	*d = append(*d, obj)
	return true
}

// TestTrimmedTrustBundlesAreV1: the cache holds ClusterTrustBundles of
// either version as v1, with what translation and the informers read.
func TestTrimmedTrustBundlesAreV1(t *testing.T) {
	meta := metav1.ObjectMeta{
		Name: "internal-ca", ResourceVersion: "7", UID: "u", Labels: map[string]string{"a": "b"},
		CreationTimestamp: metav1.Unix(1700000000, 0), Annotations: map[string]string{"c": "d"},
	}
	want := &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: "internal-ca", ResourceVersion: "7", CreationTimestamp: metav1.Unix(1700000000, 0)},
		Spec:       certificatesv1.ClusterTrustBundleSpec{TrustBundle: "PEM"},
	}
	for _, obj := range []any{
		&certificatesv1.ClusterTrustBundle{ObjectMeta: *meta.DeepCopy(), Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/ca", TrustBundle: "PEM"}},
		&certificatesv1beta1.ClusterTrustBundle{ObjectMeta: *meta.DeepCopy(), Spec: certificatesv1beta1.ClusterTrustBundleSpec{SignerName: "example.com/ca", TrustBundle: "PEM"}},
	} {
		got, err := newInterner().trimObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("trimObject(%T) = %#v, want %#v", obj, got, want)
		}
	}
}

// TestInternAgainWritesNothingShared interns an object a second time, as
// client-go's watch-list does (into its temporary store, then in the
// informer's queue): its pointers are shared with cached objects by then,
// and translation reads what they point to while the informer interns, so
// interning must not write through them. The interner's generations are
// turned over in between so that its copy of the string differs from the
// one the shared pointer holds, which is when a write would change it.
func TestInternAgainWritesNothingShared(t *testing.T) {
	type object struct {
		Kind *string
		Name string
	}
	fresh := func(s string) string { return string([]byte(s)) }
	freshPointer := func(s string) *string { s = fresh(s); return &s }
	in := newInterner()
	first, cached := &object{Kind: freshPointer("Service")}, &object{Kind: freshPointer("Service")}
	in.intern(first)
	in.intern(cached)
	if first.Kind != cached.Kind {
		t.Fatal("two objects' equal kinds are two pointers")
	}
	held := *cached.Kind
	for i := range 2*internLimit + 1 {
		in.intern(&object{Kind: freshPointer(fmt.Sprintf("kind-%d", i)), Name: fmt.Sprintf("name-%d", i)})
	}
	in.intern(&object{Name: fresh("Service")}) // the interner's copy is now this one
	reader := make(chan string)
	go func() { reader <- *cached.Kind }() // translation, reading a cached object
	in.intern(first)
	if got := <-reader; got != "Service" {
		t.Fatalf("a cached object's kind read %q while another was interned", got)
	}
	if !sameString(*cached.Kind, held) {
		t.Error("interning an object again wrote through a pointer that cached objects share")
	}
	if *first.Kind != "Service" {
		t.Errorf("the object interned again has kind %q", *first.Kind)
	}
}

// TestInternAgainWritesNoSharedSlice is TestInternAgainWritesNothingShared
// for the slices the interner shares whole: once the interner has
// forgotten a slice that cached objects share, interning one of them
// again must not write its elements.
func TestInternAgainWritesNoSharedSlice(t *testing.T) {
	in := newInterner()
	again, cached := internedRoute("a"), internedRoute("b")
	in.intern(again)
	in.intern(cached)
	shared := cached.Status.Parents
	if &again.Status.Parents[0] != &shared[0] {
		t.Fatal("two routes' equal status entries are two copies")
	}
	message := shared[0].Conditions[0].Message
	// Strings and slices turn over: each route holds a message, and so
	// slices, of its own.
	for i := range 2*internLimit + 1 {
		r := internedRoute(fmt.Sprintf("route-%d", i))
		r.Status.Parents[0].Conditions[0].Message = fmt.Sprintf("Route %d is accepted", i)
		in.intern(r)
	}
	// The interner's copy of the message is now this one.
	in.intern(&metav1.Condition{Message: string([]byte(message))})
	reader := make(chan string)
	go func() { reader <- shared[0].Conditions[0].Message }() // translation, reading a cached object
	in.intern(again)
	if got := <-reader; got != message {
		t.Fatalf("a cached route's condition message read %q while another was interned", got)
	}
	if !sameString(shared[0].Conditions[0].Message, message) {
		t.Error("interning an object again wrote to the elements of a slice that cached objects share")
	}
	if !reflect.DeepEqual(again.Status.Parents, shared) {
		t.Errorf("the route interned again has status entries %+v", again.Status.Parents)
	}
}
