package watch

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// startFile runs a file Source on path and returns its translations.
func startFile(t *testing.T, path string, opts Options) <-chan *Snapshot {
	t.Helper()
	got := make(chan *Snapshot, 16)
	runSource(t)(NewFile(FileConfig{Path: path}, opts, func(s *Snapshot, _ *Reports) { got <- s }, slog.New(slog.NewTextHandler(io.Discard, nil))))
	return got
}

// fileTranslation is one translation of a file Source.
type fileTranslation struct {
	snap    *Snapshot
	reports *Reports
}

// startFileConfig runs a file Source with cfg and returns its translations
// with their reports.
func startFileConfig(t *testing.T, cfg FileConfig, opts Options) <-chan fileTranslation {
	t.Helper()
	got := make(chan fileTranslation, 16)
	runSource(t)(NewFile(cfg, opts, func(s *Snapshot, r *Reports) { got <- fileTranslation{s, r} }, slog.New(slog.NewTextHandler(io.Discard, nil))))
	return got
}

func nextTranslation(t *testing.T, c <-chan fileTranslation) fileTranslation {
	t.Helper()
	select {
	case tr := <-c:
		return tr
	case <-time.After(10 * time.Second):
		t.Fatal("no translation within 10s")
		return fileTranslation{}
	}
}

// fileIngress is an Ingress for host, as a file holds it.
func fileIngress(host string) string {
	return `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  ingressClassName: hostgate
  rules: [{host: ` + host + `, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
`
}

// servedHosts lists the hostnames of the routes of s's listeners.
func servedHosts(s *Snapshot) []string {
	var out []string
	for _, l := range s.Listeners {
		for _, r := range l.Routes {
			out = append(out, r.Hostnames...)
		}
	}
	return out
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
	if eps := setNamed(snap, "default/admin:80"); len(eps) != 1 || eps[0].Address != "127.0.0.1:10254" {
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
	write("ingress.yaml", fileIngress("a.example.com"))
	write("notes.txt", "not YAML, not read")
	got := startFile(t, dir, Options{IngressHTTPAddr: ":8080"})

	if h := servedHosts(next(t, got)); len(h) != 1 || h[0] != "a.example.com" {
		t.Fatalf("hosts = %v; want [a.example.com]", h)
	}
	write("ingress.yaml", fileIngress("bb.example.com"))
	if h := servedHosts(next(t, got)); len(h) != 1 || h[0] != "bb.example.com" {
		t.Fatalf("after the change, hosts = %v; want [bb.example.com]", h)
	}
	write("broken.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {bogus: 1}\n")
	if h := servedHosts(next(t, got)); len(h) != 1 {
		t.Fatalf("a broken file next to a good one: hosts = %v; want the good Ingress still served", h)
	}
}

func TestNewFileErrors(t *testing.T) {
	if _, err := NewFile(FileConfig{Path: filepath.Join(t.TempDir(), "missing")}, Options{}, func(*Snapshot, *Reports) {}, nil); err == nil {
		t.Error("NewFile on a missing path: no error")
	}
	if _, err := NewFile(FileConfig{Path: t.TempDir()}, Options{AddressPool: []string{"not-an-ip"}}, func(*Snapshot, *Reports) {}, nil); err == nil || !strings.Contains(err.Error(), "address pool") {
		t.Errorf("NewFile with a bad pool address: err = %v", err)
	}
	if _, err := NewFile(FileConfig{Path: t.TempDir()}, Options{IngressHTTPAddr: "80"}, func(*Snapshot, *Reports) {}, nil); err == nil || !strings.Contains(err.Error(), "ingress HTTP address") {
		t.Errorf("NewFile with a bad listen address: err = %v", err)
	}
	if _, err := NewFile(FileConfig{Path: t.TempDir(), Settle: -time.Second}, Options{}, func(*Snapshot, *Reports) {}, nil); err == nil || !strings.Contains(err.Error(), "settle") {
		t.Errorf("NewFile with a negative settle time: err = %v", err)
	}
}

// TestFileWrittenInPlace writes a file the way a shell's > does, truncated
// and then written in pieces: no translation may see it half-written.
func TestFileWrittenInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ingress.yaml")
	if err := os.WriteFile(path, []byte(fileIngress("a.example.com")), 0o644); err != nil {
		t.Fatal(err)
	}
	const poll = 20 * time.Millisecond
	got := startFileConfig(t, FileConfig{Path: path, Settle: 400 * time.Millisecond, poll: poll}, Options{IngressHTTPAddr: ":8080"})
	if h := servedHosts(nextTranslation(t, got).snap); !slices.Equal(h, []string{"a.example.com"}) {
		t.Fatalf("hosts = %v; want [a.example.com]", h)
	}

	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	whole := fileIngress("b.example.com")
	// The pieces are apart by several poll intervals, so that the source
	// sees the emptied file and the first half, each for less than the
	// settle time.
	for _, piece := range []string{"", whole[:len(whole)/2], whole[len(whole)/2:]} {
		if _, err := f.WriteString(piece); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * poll)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	tr := nextTranslation(t, got)
	if h := servedHosts(tr.snap); !slices.Equal(h, []string{"b.example.com"}) {
		t.Fatalf("after the write, hosts = %v; want [b.example.com] (problems %q)", h, tr.reports.Problems())
	}
	if len(tr.reports.Read) != 0 {
		t.Errorf("read problems after a whole write: %q", tr.reports.Read)
	}
}

// TestFileKeepsLastGoodVersion: a file that no longer decodes keeps its
// previous objects served and says why; the other files are read as usual;
// fixing it serves it again.
func TestFileKeepsLastGoodVersion(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", fileIngress("a.example.com"))
	write("b.yaml", strings.Replace(fileIngress("b.example.com"), "name: web", "name: b", 1))
	reg := prometheus.NewRegistry()
	got := startFileConfig(t, FileConfig{Path: dir, Metrics: reg}, Options{IngressHTTPAddr: ":8080"})
	want := []string{"a.example.com", "b.example.com"}
	if h := servedHosts(nextTranslation(t, got).snap); !sameSet(h, want) {
		t.Fatalf("hosts = %v; want %v", h, want)
	}

	// a.yaml loses its closing bracket; b.yaml changes at the same time.
	broken := strings.Replace(fileIngress("c.example.com"), "}}}}]}}]", "}}}}]}}", 1)
	write("a.yaml", broken)
	write("b.yaml", strings.Replace(fileIngress("d.example.com"), "name: web", "name: b", 1))
	tr := nextTranslation(t, got)
	if h, want := servedHosts(tr.snap), []string{"a.example.com", "d.example.com"}; !sameSet(h, want) {
		t.Errorf("with a.yaml broken, hosts = %v; want %v (a.yaml's last good version and b.yaml's new one)", h, want)
	}
	read := tr.reports.Read
	if len(read) != 1 || !strings.Contains(read[0], filepath.Join(dir, "a.yaml")) || !strings.Contains(read[0], "last version") {
		t.Errorf("read problems = %q; want one naming a.yaml and that its last good version is served", read)
	} else if p := tr.reports.Problems(); p[0] != read[0] {
		t.Errorf("Problems() = %q; want it to start with the read problem (/debug/routes shows it)", p)
	}
	if n := gaugeValue(t, reg, "hostgate_config_files_failing"); n != 1 {
		t.Errorf("hostgate_config_files_failing = %v; want 1", n)
	}

	write("a.yaml", fileIngress("c.example.com"))
	tr = nextTranslation(t, got)
	if h, want := servedHosts(tr.snap), []string{"c.example.com", "d.example.com"}; !sameSet(h, want) {
		t.Errorf("with a.yaml fixed, hosts = %v; want %v", h, want)
	}
	if len(tr.reports.Read) != 0 {
		t.Errorf("read problems after the fix: %q", tr.reports.Read)
	}
	if n := gaugeValue(t, reg, "hostgate_config_files_failing"); n != 0 {
		t.Errorf("hostgate_config_files_failing after the fix = %v; want 0", n)
	}
}

// TestFileEmptied: a file emptied on purpose (and left empty) is read as
// empty once it settles: its objects are no longer served.
func TestFileEmptied(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ingress.yaml")
	if err := os.WriteFile(path, []byte(fileIngress("a.example.com")), 0o644); err != nil {
		t.Fatal(err)
	}
	got := startFileConfig(t, FileConfig{Path: path, Settle: 100 * time.Millisecond}, Options{IngressHTTPAddr: ":8080"})
	if h := servedHosts(nextTranslation(t, got).snap); len(h) != 1 {
		t.Fatalf("hosts = %v; want one", h)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if h := servedHosts(nextTranslation(t, got).snap); len(h) != 0 {
		t.Errorf("after emptying the file, hosts = %v; want none", h)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}

// gaugeValue reads the gauge named name from reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}
