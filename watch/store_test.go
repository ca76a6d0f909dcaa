package watch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestOrderMatchesSort checks that an order kept between translations
// sorts every list as sortObjects does, through additions, removals,
// replacements (an informer's update) and objects whose keys tie, which
// only the position in the list orders; and where keys never tie, which
// is where changes are merged into the last order. Most sorts are not
// read, as in a translation that splices, and what came and went waits.
func TestOrderMatchesSort(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names int
		// size is how many objects the list starts with; relist
		// replaces them all in some rounds, more than an order lets
		// wait to be merged.
		size   int
		relist bool
	}{{"ties", 40, 30, false}, {"no ties", 1 << 30, 30, false}, {"relists", 1 << 30, 200, true}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			newRoute := func() *gatewayv1.HTTPRoute {
				return &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{
					Namespace:         fmt.Sprintf("ns%d", rng.IntN(3)),
					Name:              fmt.Sprintf("r%d", rng.IntN(tc.names)),
					CreationTimestamp: metav1.NewTime(time.Unix(int64(rng.IntN(5)), 0)),
				}}
			}
			var o order[*gatewayv1.HTTPRoute]
			var list []*gatewayv1.HTTPRoute
			for range tc.size {
				list = append(list, newRoute())
			}
			for round := range 2000 {
				switch rng.IntN(4) {
				case 0:
					list = append(list, newRoute())
				case 1:
					if len(list) > 0 {
						i := rng.IntN(len(list))
						list = slices.Delete(list, i, i+1)
					}
				case 2:
					if len(list) > 0 {
						i := rng.IntN(len(list))
						list[i] = list[i].DeepCopy()
					}
				case 3:
					if tc.relist {
						for i := range list {
							list[i] = list[i].DeepCopy()
						}
					}
				}
				rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
				o.update(list, nil)
				if rng.IntN(3) > 0 {
					continue // a translation that splices reads no order
				}
				want := slices.Clone(list)
				sortObjects(want)
				if got := o.list(); !slices.Equal(got, want) {
					t.Fatalf("round %d: order differs from sortObjects:\n got %v\nwant %v", round, names(got), names(want))
				}
			}
		})
	}
}

func names(list []*gatewayv1.HTTPRoute) []string {
	var out []string
	for _, r := range list {
		out = append(out, fmt.Sprintf("%s/%s@%d(%p)", r.Namespace, r.Name, r.CreationTimestamp.Unix(), r))
	}
	return out
}
