package watch

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startFile runs a file Source on path and returns its translations.
func startFile(t *testing.T, path string, opts Options) <-chan *Snapshot {
	t.Helper()
	got := make(chan *Snapshot, 16)
	runSource(t)(NewFile(path, opts, func(s *Snapshot, _ *Reports) { got <- s }, slog.New(slog.NewTextHandler(io.Discard, nil))))
	return got
}

// runSource returns a function that runs the Source a constructor made
// until the test ends, failing the test if it could not be made or did not
// stop cleanly.
func runSource(t *testing.T) func(*Source, error) {
	return func(src *Source, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- src.Start(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Start: %v", err)
			}
		})
	}
}

func next(t *testing.T, c <-chan *Snapshot) *Snapshot {
	t.Helper()
	select {
	case s := <-c:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no translation within 10s")
		return nil
	}
}

func TestQuickstartExample(t *testing.T) {
	snap := next(t, startFile(t, "../examples/quickstart", Options{}))
	if len(snap.Listeners) != 1 {
		t.Fatalf("listeners = %+v; want the Gateway's one", snap.Listeners)
	}
	l := snap.Listeners[0]
	if l.Name != "127.0.0.1:8080" || l.Protocol != ProtocolHTTP || len(l.Routes) != 1 {
		t.Errorf("listener = %s %s with %d routes; want 127.0.0.1:8080 HTTP with the quickstart route", l.Name, l.Protocol, len(l.Routes))
	}
	if eps := snap.Endpoints["default/admin:80"]; len(eps) != 1 || eps[0].Address != "127.0.0.1:10254" {
		t.Errorf("endpoints of default/admin:80 = %+v; want 127.0.0.1:10254", eps)
	}
}

func TestFileReload(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const ingress = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  ingressClassName: hostgate
  rules: [{host: HOST, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
`
	write("ingress.yaml", strings.Replace(ingress, "HOST", "a.example.com", 1))
	write("notes.txt", "not YAML, not read")
	got := startFile(t, dir, Options{IngressHTTPAddr: ":8080"})

	hosts := func(s *Snapshot) []string {
		var out []string
		for _, r := range s.Listeners[0].Routes {
			out = append(out, r.Hostnames...)
		}
		return out
	}
	if h := hosts(next(t, got)); len(h) != 1 || h[0] != "a.example.com" {
		t.Fatalf("hosts = %v; want [a.example.com]", h)
	}
	write("ingress.yaml", strings.Replace(ingress, "HOST", "bb.example.com", 1))
	if h := hosts(next(t, got)); len(h) != 1 || h[0] != "bb.example.com" {
		t.Fatalf("after the change, hosts = %v; want [bb.example.com]", h)
	}
	write("broken.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {bogus: 1}\n")
	if h := hosts(next(t, got)); len(h) != 1 {
		t.Fatalf("a broken file next to a good one: hosts = %v; want the good Ingress still served", h)
	}
}

func TestNewFileErrors(t *testing.T) {
	if _, err := NewFile(filepath.Join(t.TempDir(), "missing"), Options{}, func(*Snapshot, *Reports) {}, nil); err == nil {
		t.Error("NewFile on a missing path: no error")
	}
	if _, err := NewFile(t.TempDir(), Options{AddressPool: []string{"not-an-ip"}}, func(*Snapshot, *Reports) {}, nil); err == nil || !strings.Contains(err.Error(), "address pool") {
		t.Errorf("NewFile with a bad pool address: err = %v", err)
	}
	if _, err := NewFile(t.TempDir(), Options{IngressHTTPAddr: "80"}, func(*Snapshot, *Reports) {}, nil); err == nil || !strings.Contains(err.Error(), "ingress HTTP address") {
		t.Errorf("NewFile with a bad listen address: err = %v", err)
	}
}
