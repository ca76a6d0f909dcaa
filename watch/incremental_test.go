package watch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestSpliceMatchesTranslation makes random sequences of HTTPRoute and
// GRPCRoute changes in every golden case (a route removed, put back,
// copied under a new name, recreated at another time, its generation,
// hostnames, rules or first parentRef's section changed), each followed by
// a translation with the memo, which splices them, and checks its Snapshot
// and Reports against a translation of the same store without memo. One
// step in eight also replaces another object with a copy of a new
// generation, which must make a full translation: whatever a splice does
// not follow would otherwise go unnoticed. Another one in eight writes a
// Gateway's status, as hostgate does when its attached routes change,
// which a splice may pass over.
func TestSpliceMatchesTranslation(t *testing.T) {
	spliced, afterStatus := 0, 0
	eachCase(t, func(t *testing.T, _ string, objs *objects, opts Options) {
		var original []any
		for _, r := range objs.httpRoutes {
			original = append(original, r)
		}
		for _, r := range objs.grpcRoutes {
			original = append(original, r)
		}
		if len(original) == 0 {
			return
		}
		rng := rand.New(rand.NewPCG(29, uint64(len(original))))
		current := slices.Clone(original) // nil where removed
		others := slices.DeleteFunc(objs.all(), func(o any) bool {
			switch o.(type) {
			case *gatewayv1.HTTPRoute, *gatewayv1.GRPCRoute:
				return true
			}
			return false
		})
		var gateways []int // in others
		for j, o := range others {
			if meta := o.(metav1.Object); meta.GetGeneration() == 0 {
				// A status write is told apart from a change of
				// spec by the generation, which the API server sets.
				meta.SetGeneration(1)
			}
			if _, ok := o.(*gatewayv1.Gateway); ok {
				gateways = append(gateways, j)
			}
		}
		list := func() []any { return present(others, current) }
		m := newMemo()
		m.translate(store(objs, list()), opts)
		for step := range 200 {
			i := rng.IntN(len(current))
			v := spliceVariants[rng.IntN(len(spliceVariants))]
			base := current[i]
			if base == nil {
				base = original[i]
			}
			what := fmt.Sprintf("step %d: %s %s", step, describeObject(base), v.name)
			switch v.name {
			case "removed":
				current[i] = nil
			case "back":
				current[i] = original[i]
			case "copied":
				c := copyObject(base)
				meta := c.(metav1.Object)
				meta.SetName(fmt.Sprintf("%s-copy-%d", meta.GetName(), step))
				current, original = append(current, c), append(original, c)
			default:
				c := copyObject(base)
				v.change(rng, c)
				current[i] = c
			}
			full, status := false, false
			switch rng.IntN(8) {
			case 0:
				full = true
				j := rng.IntN(len(others))
				what += ", " + describeObject(others[j]) + " changed"
				c := copyObject(others[j])
				meta := c.(metav1.Object)
				meta.SetGeneration(meta.GetGeneration() + 1)
				others[j] = c
			case 1:
				if len(gateways) == 0 {
					break
				}
				j := gateways[rng.IntN(len(gateways))]
				what += ", " + describeObject(others[j]) + " status written"
				g := copyObject(others[j]).(*gatewayv1.Gateway)
				for l := range g.Status.Listeners {
					g.Status.Listeners[l].AttachedRoutes = int32(rng.IntN(5))
				}
				g.Status.Conditions = append(g.Status.Conditions, metav1.Condition{Type: "Spliced", Status: metav1.ConditionTrue, ObservedGeneration: int64(step)})
				others[j] = g
				status = true
			}
			snap, reports := m.translate(store(objs, list()), opts)
			if full && m.spliced {
				t.Fatalf("%s: spliced, where another object changed", what)
			}
			if m.spliced {
				spliced++
				if status {
					afterStatus++
				}
			}
			checkServed(t, fmt.Sprintf("%s (spliced: %v)", what, m.spliced), objs, list(), opts, snap, reports)
		}
	})
	if spliced == 0 || afterStatus == 0 {
		t.Errorf("%d translations spliced, %d of them after a Gateway's status was written: the test checked too little", spliced, afterStatus)
	}
}

// spliceVariants are the changes TestSpliceMatchesTranslation makes to a
// route; removed, back and copied are made by the test itself.
var spliceVariants = []struct {
	name   string
	change func(*rand.Rand, any)
}{
	{"removed", nil},
	{"back", nil},
	{"copied", nil},
	{"recreated", func(rng *rand.Rand, obj any) {
		meta := obj.(metav1.Object)
		at := meta.GetCreationTimestamp().Add(time.Duration(rng.IntN(7200)-3600) * time.Second)
		meta.SetCreationTimestamp(metav1.NewTime(at))
	}},
	{"generation", func(_ *rand.Rand, obj any) {
		meta := obj.(metav1.Object)
		meta.SetGeneration(meta.GetGeneration() + 1)
	}},
	{"hostname added", func(rng *rand.Rand, obj any) {
		h := gatewayv1.Hostname(fmt.Sprintf("spliced-%d.example.com", rng.IntN(3)))
		switch r := obj.(type) {
		case *gatewayv1.HTTPRoute:
			r.Spec.Hostnames = append(r.Spec.Hostnames, h)
		case *gatewayv1.GRPCRoute:
			r.Spec.Hostnames = append(r.Spec.Hostnames, h)
		}
	}},
	{"hostnames dropped", func(_ *rand.Rand, obj any) {
		switch r := obj.(type) {
		case *gatewayv1.HTTPRoute:
			r.Spec.Hostnames = nil
		case *gatewayv1.GRPCRoute:
			r.Spec.Hostnames = nil
		}
	}},
	{"last rule dropped", func(_ *rand.Rand, obj any) {
		switch r := obj.(type) {
		case *gatewayv1.HTTPRoute:
			if len(r.Spec.Rules) > 0 {
				r.Spec.Rules = r.Spec.Rules[:len(r.Spec.Rules)-1]
			}
		case *gatewayv1.GRPCRoute:
			if len(r.Spec.Rules) > 0 {
				r.Spec.Rules = r.Spec.Rules[:len(r.Spec.Rules)-1]
			}
		}
	}},
	{"section changed", func(_ *rand.Rand, obj any) {
		var refs []gatewayv1.ParentReference
		switch r := obj.(type) {
		case *gatewayv1.HTTPRoute:
			refs = r.Spec.ParentRefs
		case *gatewayv1.GRPCRoute:
			refs = r.Spec.ParentRefs
		}
		if len(refs) == 0 {
			return
		}
		if refs[0].SectionName != nil {
			refs[0].SectionName = nil
		} else {
			refs[0].SectionName = new(gatewayv1.SectionName("spliced"))
		}
	}},
}

// copyObject is a deep copy of obj, a new object as an informer hands out
// for a changed one.
func copyObject(obj any) any {
	return obj.(runtime.Object).DeepCopyObject()
}
