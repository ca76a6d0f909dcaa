package pipeline

import (
	"fmt"
	"testing"

	"github.com/hostgate/hostgate/router"
)

// TestBackendTransportsByIdentity: identities of equal content share
// transports across Applies, identities that differ in anything, the
// client certificate included, have transports of their own, and those
// no table uses any more are dropped.
func TestBackendTransportsByIdentity(t *testing.T) {
	s := newShared(t)
	l := s.NewListener("test", "http", 80, nil, nil)
	cert := func(name string) *router.ClientCertificate {
		return &router.ClientCertificate{Name: name, CertPEM: []byte(name), KeyPEM: router.PrivateKey(name)}
	}
	// Each call makes copies, as a new translation does.
	identities := func() []*router.BackendTLS {
		return []*router.BackendTLS{
			{ServerName: "backend.example.com"},
			{ServerName: "other.example.com"},
			{ServerName: "backend.example.com", SkipVerify: true},
			{ServerName: "backend.example.com", ClientCertificate: cert("infra/a")},
			{ServerName: "backend.example.com", ClientCertificate: cert("infra/b")},
		}
	}
	table := func(ids []*router.BackendTLS) *router.Table {
		routes := []router.Route{{ID: router.RouteID{Kind: router.KindHTTPRoute, Namespace: "ns", Name: "plain"}, Rules: []router.Rule{{Backends: []router.BackendRef{{Name: "tls", Weight: 1}}}}}}
		for i, id := range ids {
			routes = append(routes, router.Route{ID: router.RouteID{Kind: router.KindHTTPRoute, Namespace: "ns", Name: fmt.Sprint(i)}, Hostnames: []string{fmt.Sprintf("h%d.example.com", i)},
				Rules: []router.Rule{{Backends: []router.BackendRef{{Name: "tls", Weight: 1, Protocol: "https", TLS: id}}}}})
		}
		tbl, errs := router.Compile(routes)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return tbl
	}
	apply := func(tbl *router.Table) {
		l.Publish(tbl, nil)
		s.EndApply()
	}
	ids := identities()
	apply(table(ids))
	if n := len(s.fwd.byIdentity); n != len(ids) {
		t.Fatalf("%d identities, want %d", n, len(ids))
	}
	transports := s.fwd.byIdentity[tlsIdentity(ids[0])]
	apply(table(identities()))
	if len(s.fwd.byIdentity) != len(ids) || s.fwd.byIdentity[tlsIdentity(ids[0])] != transports {
		t.Errorf("after an Apply of equal identities: %d of them, the first's transports kept: %t", len(s.fwd.byIdentity), s.fwd.byIdentity[tlsIdentity(ids[0])] == transports)
	}
	apply(table(nil))
	if n := len(s.fwd.byIdentity); n != 0 {
		t.Errorf("%d identities kept though no table uses them", n)
	}
}
