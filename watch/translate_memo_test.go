package watch

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMemoMatchesFreshTranslation translates every golden case with a
// memo while taking each object out and putting it back, one at a time,
// and checks every result against a translation without memo: a reused
// result whose Service, EndpointSlices, ReferenceGrants or Secret changed
// would show up as a difference.
func TestMemoMatchesFreshTranslation(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			objs, opts := loadCase(t, dir)
			all := objs.all()
			m := newMemo()
			check := func(what string, list []any) {
				t.Helper()
				gotSnap, gotReports := m.translate(store(objs, list), opts)
				wantSnap, wantReports := translate(store(objs, list), opts)
				if !reflect.DeepEqual(gotSnap, wantSnap) {
					t.Errorf("%s: snapshot with memo differs:\n--- with memo\n%s\n--- without\n%s", what, describeSnapshot(gotSnap), describeSnapshot(wantSnap))
				}
				if !reflect.DeepEqual(gotReports, wantReports) {
					t.Errorf("%s: reports with memo differ:\n--- with memo\n%s\n--- without\n%s", what, describeReports(t, gotReports), describeReports(t, wantReports))
				}
			}
			check("first translation", all)
			check("nothing changed", all)
			kept += len(m.objects) + len(m.endpoints) + len(m.certs)
			for i, obj := range all {
				without := append(append([]any{}, all[:i]...), all[i+1:]...)
				check(describeObject(obj)+" removed", without)
				check(describeObject(obj)+" back", all)
			}
		})
	}
	if kept == 0 {
		t.Error("the memo kept nothing: the test checked nothing")
	}
}

// all lists every object of o.
func (o *objects) all() []any {
	var out []any
	for _, list := range []any{o.ingressClasses, o.ingresses, o.gatewayClasses, o.gateways, o.httpRoutes, o.grpcRoutes,
		o.referenceGrants, o.services, o.endpointSlices, o.secrets, o.namespaces, o.nodes} {
		v := reflect.ValueOf(list)
		for i := range v.Len() {
			out = append(out, v.Index(i).Interface())
		}
	}
	return out
}

// store is a store of like's kind holding list.
func store(like *objects, list []any) *objects {
	o := &objects{crdBundleVersion: like.crdBundleVersion}
	for _, obj := range list {
		o.add(obj)
	}
	return o
}

func describeObject(obj any) string {
	m := obj.(metav1.Object)
	return fmt.Sprintf("%T %s/%s", obj, m.GetNamespace(), m.GetName())
}
