package watch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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
// which a splice may pass over. And one in four removes, puts back or
// changes a Service or ReferenceGrant, which a splice follows by
// translating again the routes that looked it up.
func TestSpliceMatchesTranslation(t *testing.T) {
	spliced, afterStatus, afterLookedUp := 0, 0, 0
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
		var lookedUp []any                // Services and ReferenceGrants, nil where removed
		others := slices.DeleteFunc(objs.all(), func(o any) bool {
			switch o.(type) {
			case *gatewayv1.HTTPRoute, *gatewayv1.GRPCRoute:
				return true
			case *corev1.Service, *gatewayv1.ReferenceGrant:
				lookedUp = append(lookedUp, o)
				return true
			}
			return false
		})
		lookedUpOriginal := slices.Clone(lookedUp)
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
		list := func() []any { return present(present(others, lookedUp), current) }
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
			full, status, changedLookedUp := false, false, false
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
			case 2, 3:
				if len(lookedUp) == 0 {
					break
				}
				j := rng.IntN(len(lookedUp))
				v := lookedUpVariants[rng.IntN(len(lookedUpVariants))]
				what += ", " + describeObject(lookedUpOriginal[j]) + " " + v.name
				lookedUp[j] = v.change(lookedUpOriginal[j])
				changedLookedUp = true
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
				if changedLookedUp {
					afterLookedUp++
				}
			}
			checkServed(t, fmt.Sprintf("%s (spliced: %v)", what, m.spliced), objs, list(), opts, snap, reports)
		}
	})
	if spliced == 0 || afterStatus == 0 || afterLookedUp == 0 {
		t.Errorf("%d translations spliced, %d of them after a Gateway's status was written, %d after a Service or ReferenceGrant changed: the test checked too little", spliced, afterStatus, afterLookedUp)
	}
}

// lookedUpVariants are the changes TestSpliceMatchesTranslation makes to
// a Service or ReferenceGrant: each returns what the store holds
// instead of the original, nil for nothing.
var lookedUpVariants = []struct {
	name   string
	change func(original any) any
}{
	{"removed", func(any) any { return nil }},
	{"back", func(original any) any { return original }},
	{"changed", func(original any) any {
		switch o := copyObject(original).(type) {
		case *corev1.Service:
			// Routes that name the port find none; those that name
			// the next one find it, with another protocol.
			for i := range o.Spec.Ports {
				o.Spec.Ports[i].Port++
				o.Spec.Ports[i].AppProtocol = new("kubernetes.io/h2c")
			}
			return o
		case *gatewayv1.ReferenceGrant:
			// Grants to Gateways what it granted to routes, and the
			// other way round.
			for i := range o.Spec.From {
				if o.Spec.From[i].Kind == "Gateway" {
					o.Spec.From[i].Kind = "HTTPRoute"
				} else {
					o.Spec.From[i].Kind = "Gateway"
				}
			}
			return o
		}
		panic(fmt.Sprintf("not a Service or ReferenceGrant: %T", original))
	}},
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
