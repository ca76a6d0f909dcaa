package pipeline

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate/router"
)

// TestClassify covers the error kinds that sockets on loopback do not
// produce on demand.
func TestClassify(t *testing.T) {
	dial := func(err error) error {
		return fmt.Errorf("round trip: %w", &net.OpError{Op: "dial", Net: "tcp", Err: err})
	}
	read := func(err error) error { return &net.OpError{Op: "read", Net: "tcp", Err: err} }
	tests := []struct {
		err  error
		want errorKind
	}{
		{dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), errConnectRefused},
		{dial(os.ErrDeadlineExceeded), errConnectTimeout},
		{dial(errors.New("no route to host")), errOther},
		{read(os.NewSyscallError("read", syscall.ECONNRESET)), errReset},
		{io.ErrUnexpectedEOF, errReset},
		{read(os.ErrDeadlineExceeded), errTimeout},
		{fmt.Errorf("tls: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), errTLS},
		{tls.AlertError(40), errTLS},
		{errors.New("malformed HTTP response"), errOther},
	}
	for _, tt := range tests {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("classify(%v) = %s, want %s", tt.err, errorKindNames[got], errorKindNames[tt.want])
		}
	}
}

// TestPruneMetrics: a configuration change drops the series of the routes
// that went and keeps the others', whether the new table says what went
// or is walked, and a series that a request still on an older table made
// again for a route gone before goes at the next change, unless the route
// came back.
func TestPruneMetrics(t *testing.T) {
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	lm := m.listener("test")
	routes := make([]*router.Route, 4)
	for i := range routes {
		routes[i] = &router.Route{ID: router.RouteID{Kind: router.KindHTTPRoute, Namespace: "ns", Name: fmt.Sprintf("r%d", i)},
			Hostnames: []string{fmt.Sprintf("r%d.example.com", i)}, Rules: []router.Rule{{Backends: []router.BackendRef{{Name: "web", Weight: 1}}}}}
	}
	a, b, c := routes[0].ID, routes[1].ID, routes[2].ID
	compileChanged := func(prev *router.Table, base, next []*router.Route, changed ...router.RouteID) *router.Table {
		t.Helper()
		table, errs := router.RecompileChanged(prev, base, next, changed)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return table
	}
	withSeries := func(want ...router.RouteID) {
		t.Helper()
		var got []router.RouteID
		for id := range lm.routes {
			got = append(got, id)
		}
		key := func(x, y router.RouteID) int { return strings.Compare(x.String(), y.String()) }
		slices.SortFunc(got, key)
		slices.SortFunc(want, key)
		if !slices.Equal(got, want) {
			t.Fatalf("routes with series %v, want %v", got, want)
		}
	}

	first, errs := router.Recompile(nil, routes)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, id := range []router.RouteID{a, b, c} {
		lm.route(id, first.Serial())
	}
	lm.prune(first)
	withSeries(a, b, c)

	withoutB := slices.Delete(slices.Clone(routes), 1, 2)
	second := compileChanged(first, routes, withoutB, b)
	if _, told := second.GoneSince(first.Serial()); !told {
		t.Fatal("the second table cannot tell what went: this test needs it to")
	}
	lm.prune(second)
	withSeries(a, c)

	lm.route(b, first.Serial()) // a request that chose b before the change
	withoutBC := slices.Delete(slices.Clone(withoutB), 1, 2)
	third := compileChanged(second, withoutB, withoutBC, c)
	lm.prune(third)
	withSeries(a)

	lm.route(c, second.Serial()) // a request that chose c before it went
	fourth := compileChanged(third, withoutBC, withoutB, c)
	lm.prune(fourth) // c came back
	withSeries(a, c)
	lm.prune(fourth) // published again
	withSeries(a, c)

	lm.prune(nil)
	withSeries()
}

// TestPruneMetricsAfterOlderTable: a listener can be published a table
// compiled before the one it had (compileSnapshot gives a listener the
// table of another listener with the same routes, which that one may have
// kept from an earlier generation). A request still on the newer table
// that makes the series of a route the older one lacks must have it
// looked for at the next change, even when that change is told what went
// since the older table.
func TestPruneMetricsAfterOlderTable(t *testing.T) {
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	lm := m.listener("test")
	route := func(name string) router.Route {
		return router.Route{ID: router.RouteID{Kind: router.KindHTTPRoute, Namespace: "ns", Name: name},
			Hostnames: []string{name + ".example.com"}, Rules: []router.Rule{{Backends: []router.BackendRef{{Name: "web", Weight: 1}}}}}
	}
	a, x, b := route("a"), route("x"), route("b")
	onlyA := []*router.Route{&a}
	older, errs := router.Recompile(nil, onlyA)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	newer, errs := router.RecompileChanged(older, onlyA, []*router.Route{&a, &x}, []router.RouteID{x.ID})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	lm.prune(newer)
	lm.route(a.ID, newer.Serial())
	lm.prune(older) // x went: the older table is published again
	// A request that read the newer table before the publish picks x.
	lm.route(x.ID, newer.Serial())
	next, errs := router.RecompileChanged(older, onlyA, []*router.Route{&a, &b}, []router.RouteID{b.ID})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if _, told := next.GoneSince(older.Serial()); !told {
		t.Fatal("the next table cannot tell what went: this test needs it to")
	}
	lm.prune(next)
	if _, ok := lm.routes[x.ID]; ok {
		t.Error("the series of a route no table serves stays after the next change")
	}
}
