package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hostgate/hostgate/internal/shardmap"
	"github.com/hostgate/hostgate/router"
)

// stateSnapshot is a Snapshot with every kind of listener, route field and
// endpoint, and a real certificate and key.
func stateSnapshot(certPEM, keyPEM []byte) *Snapshot {
	web := router.BackendRef{Name: "default/web:80", Weight: 3, Protocol: "h2c"}
	return &Snapshot{
		Listeners: []Listener{{
			Name: ":80", Port: 80, Protocol: ProtocolHTTP,
			Routes: []*router.Route{{
				ID: router.RouteID{Kind: router.KindIngress, Namespace: "default", Name: "web"}, Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
				Hostnames: []string{"web.example.com", "*.example.com"},
				Rules:     []router.Rule{{Matches: []router.Match{{Path: router.PathMatch{Type: router.PathRegularExpression, Value: "/x[0-9]+"}}}, Backends: []router.BackendRef{web}}},
			}},
		}, {
			Name: "192.0.2.7:443", Address: "192.0.2.7", Port: 443, Protocol: ProtocolHTTPS,
			Hostnames: []string{"golden.example.com"}, ListenerHostnames: []string{"", "golden.example.com"},
			Routes: []*router.Route{{
				ID: router.RouteID{Kind: router.KindHTTPRoute, Namespace: "apps", Name: "all"}, Listener: "golden.example.com",
				Hostnames: []string{"golden.example.com"},
				Rules: []router.Rule{{
					Name: "first",
					Matches: []router.Match{{
						Path:    router.PathMatch{Type: router.PathPrefix, Value: "/v1"},
						Method:  "POST",
						Headers: []router.ValueMatch{{Type: router.MatchRegularExpression, Name: "x-a", Value: "b.*"}},
						Query:   []router.ValueMatch{{Name: "q", Value: "1"}},
					}},
					Filters: []router.Filter{
						{Type: router.FilterRequestHeaderModifier, RequestHeaders: &router.HeaderModifier{Set: []router.Header{{Name: "x-s", Value: "1"}}, Add: []router.Header{{Name: "x-a", Value: "2"}}, Remove: []string{"x-r"}}},
						{Type: router.FilterResponseHeaderModifier, ResponseHeaders: &router.HeaderModifier{Remove: []string{"server"}}},
						{Type: router.FilterURLRewrite, Rewrite: &router.Rewrite{Hostname: "internal", Path: &router.PathModifier{Type: router.ReplacePrefixMatch, Value: "/"}}},
						{Type: router.FilterRequestMirror, Mirror: &router.Mirror{Backend: router.BackendRef{Name: "apps/shadow:80", Weight: 1}, Numerator: 1, Denominator: 10}},
						{Type: router.FilterCORS, CORS: &router.CORS{
							AllowOrigins: []router.Origin{{Scheme: "https", Host: "*.example.com", Port: 8443}}, AllowMethods: []string{"*"},
							ExposeHeaders: []string{"x-e"}, AllowCredentials: true, MaxAge: 5 * time.Second,
						}},
					},
					Backends: []router.BackendRef{web, {Name: "apps/gone:80", Weight: 1, Invalid: true, Filters: []router.Filter{
						{Type: router.FilterRequestHeaderModifier, RequestHeaders: &router.HeaderModifier{Set: []router.Header{{Name: "x-b", Value: "3"}}}},
					}}},
					Timeouts: router.Timeouts{Request: 5 * time.Second, BackendRequest: time.Second},
					Retry:    &router.Retry{Codes: []int{502, 503}, Attempts: 2, Backoff: 25 * time.Millisecond},
				}, {
					Filters: []router.Filter{{Type: router.FilterRequestRedirect, Redirect: &router.Redirect{Scheme: "https", Hostname: "elsewhere", Port: 8443, Path: &router.PathModifier{Type: router.ReplaceFullPath, Value: "/moved"}, StatusCode: 301}}},
				}},
			}, {
				ID:    router.RouteID{Kind: router.KindGRPCRoute, Namespace: "apps", Name: "grpc"},
				Rules: []router.Rule{{Matches: []router.Match{{GRPC: &router.GRPCMatch{Type: router.MatchExact, Service: "pkg.Svc", Method: "Get"}}}, Backends: []router.BackendRef{web}}},
			}},
			Certs: []Cert{{Name: "apps/golden", Hostnames: []string{"golden.example.com"}, CertPEM: certPEM, KeyPEM: keyPEM}},
		}},
		Endpoints: NewEndpointSets(map[string][]Endpoint{
			"default/web:80": {{Address: "10.0.0.1:8080", Ready: true, Weight: 1}, {Address: "[2001:db8::1]:8080", Weight: 2}},
			"apps/shadow:80": {},
		}),
	}
}

// count reads a counter.
func count(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// filesIn lists the names in dir, to catch temporary files left behind.
func filesIn(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestStateFileRoundTrip writes a snapshot and reads it back: the same
// snapshot, keys included, in a file only its owner can read, with no
// temporary file left over, also when the file is replaced.
func TestStateFileRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "snapshot.json")
	certPEM, keyPEM := selfSigned(t, "golden.example.com")
	want := stateSnapshot(certPEM, keyPEM)
	// Written only where there are any, so the golden file of listeners
	// without has none: files of earlier versions read as they were.
	want.Listeners[1].ClientValidations = []ClientValidation{
		{Name: "apps/gw/https", CAPEM: certPEM},
		{Name: "apps/gw/open", Hostname: "open.example.com", CAPEM: certPEM, Optional: true},
	}
	// Likewise a backend's TLS identity (BackendTLSPolicy).
	want.Listeners[1].Routes[1].Rules[0].Backends = []router.BackendRef{
		{Name: "apps/secure:443", Weight: 1, Protocol: "h2", TLS: &router.BackendTLS{ServerName: "secure.example.com", CAPEM: certPEM,
			SubjectAltNames: []router.SubjectAltName{{Hostname: "san.example.com"}, {URI: "spiffe://cluster.local/ns/apps/sa/secure"}}}},
		{Name: "apps/public:443", Weight: 1, Protocol: "https", TLS: &router.BackendTLS{ServerName: "public.example.com"}},
		// With the client certificate of a Gateway (its key kept apart).
		{Name: "apps/mtls:443", Weight: 1, Protocol: "https", TLS: &router.BackendTLS{ServerName: "mtls.example.com",
			ClientCertificate: &router.ClientCertificate{Name: "infra/client", CertPEM: certPEM, KeyPEM: router.PrivateKey(keyPEM)}}},
	}
	for i, at := range []time.Time{time.Date(2026, 11, 22, 1, 2, 3, 4, time.UTC), time.Date(2026, 11, 22, 1, 2, 4, 0, time.UTC)} {
		if i == 1 {
			sets := shardmap.Change(want.Endpoints)
			sets.Put("default/web:80", setNamed(want, "default/web:80")[:1])
			want.Endpoints = sets.Done()
		}
		if err := writeStateFile(path, want, at); err != nil {
			t.Fatal(err)
		}
		got, written, err := NewStateFile(path, quietLog(), nil).Load()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("write %d: read back\n%#v\nwant\n%#v", i, got, want)
		}
		if !written.Equal(at) {
			t.Errorf("write %d: written at %v, want %v", i, written, at)
		}
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("write %d: mode %v, want 0600: the file holds private keys", i, info.Mode().Perm())
		}
		if names := filesIn(t, dir); len(names) != 1 || names[0] != "snapshot.json" {
			t.Errorf("write %d: directory holds %q, want only snapshot.json", i, names)
		}
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("created directory: %v %v, want mode 0700", info.Mode(), err)
	}
}

// TestStateFileRefused: every file that is not exactly what this version
// writes is refused with a reason, never half used.
func TestStateFileRefused(t *testing.T) {
	certPEM, keyPEM := selfSigned(t, "golden.example.com")
	otherCert, _ := selfSigned(t, "golden.example.com")
	valid, err := encodeState(stateSnapshot(certPEM, keyPEM), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// edit decodes a valid file, changes it, and encodes it again.
	edit := func(change func(f map[string]any)) []byte {
		var f map[string]any
		if err := json.Unmarshal(valid, &f); err != nil {
			t.Fatal(err)
		}
		change(f)
		out, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	listener := func(f map[string]any, i int) map[string]any { return f["listeners"].([]any)[i].(map[string]any) }
	for _, c := range []struct {
		name string
		data []byte
		mode os.FileMode
		want string
	}{
		{name: "garbage", data: []byte("\x00\x01 not json"), want: "not a state file"},
		{name: "empty", data: nil, want: "not a state file"},
		{name: "truncated", data: valid[:len(valid)/2], want: "not a state file"},
		{name: "trailing data", data: append(bytes.Clone(valid), valid...), want: "not a state file"},
		{name: "other version", data: edit(func(f map[string]any) { f["version"] = 2 }), want: "format version 2, this hostgate reads version 1"},
		{name: "no version", data: []byte(`{"listeners": []}`), want: "format version 0"},
		{name: "unknown field", data: edit(func(f map[string]any) { f["extra"] = true }), want: `unknown field "extra"`},
		{name: "no time", data: edit(func(f map[string]any) { delete(f, "written") }), want: "written: missing"},
		{name: "bad route", data: edit(func(f map[string]any) {
			listener(f, 1)["Routes"].([]any)[0].(map[string]any)["Hostnames"] = []string{"bad host"}
		}), want: `listeners[1] "192.0.2.7:443": routes[0] HTTPRoute apps/all: hostnames[0] "bad host"`},
		{name: "null route", data: edit(func(f map[string]any) {
			listener(f, 1)["Routes"] = []any{listener(f, 1)["Routes"].([]any)[0], nil}
		}), want: `listeners[1] "192.0.2.7:443": routes[1]: null`},
		{name: "bad port", data: edit(func(f map[string]any) { listener(f, 0)["Port"] = 0 }), want: `listeners[0] ":80": port 0`},
		{name: "name not address", data: edit(func(f map[string]any) { listener(f, 0)["Name"] = ":81" }), want: "name: not the address and port :80"},
		{name: "bad protocol", data: edit(func(f map[string]any) { listener(f, 0)["Protocol"] = "SCTP" }), want: `protocol "SCTP"`},
		{name: "key of another certificate", data: edit(func(f map[string]any) {
			listener(f, 1)["Certs"].([]any)[0].(map[string]any)["CertPEM"] = string(otherCert)
		}), want: "certs[0] apps/golden"},
		{name: "client validation of HTTP", data: edit(func(f map[string]any) {
			listener(f, 0)["ClientValidations"] = []any{map[string]any{"Name": "a/b/c", "CAPEM": certPEM}}
		}), want: `listeners[0] ":80": certs, clientValidations: an HTTP listener has none`},
		{name: "authority not PEM", data: edit(func(f map[string]any) {
			listener(f, 1)["ClientValidations"] = []any{map[string]any{"Name": "a/b/c", "CAPEM": []byte("nope")}}
		}), want: "clientValidations[0] a/b/c: no PEM certificate"},
		{name: "client validation twice", data: edit(func(f map[string]any) {
			v := map[string]any{"Name": "a/b/c", "CAPEM": certPEM}
			listener(f, 1)["ClientValidations"] = []any{v, v}
		}), want: `clientValidations[1] a/b/c: hostname "": not sorted or listed twice`},
		{name: "bad endpoint", data: edit(func(f map[string]any) {
			f["endpoints"].(map[string]any)["default/web:80"].([]any)[0].(map[string]any)["Address"] = "10.0.0.1"
		}), want: `endpoints "default/web:80": [0] address`},
		{name: "writable by others", data: valid, mode: 0o666, want: "writable by others"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "snapshot.json")
			if err := os.WriteFile(path, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			if c.mode != 0 {
				if err := os.Chmod(path, c.mode); err != nil {
					t.Fatal(err)
				}
			}
			snap, _, err := readStateFile(path)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one with %q", err, c.want)
			}
			if snap != nil {
				t.Errorf("a refused file gave a snapshot")
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		if _, _, err := readStateFile(filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("error %v, want os.ErrNotExist", err)
		}
	})
	t.Run("directory", func(t *testing.T) {
		if _, _, err := readStateFile(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("error %v, want not a regular file", err)
		}
	})
}

// TestStateFileClientKeys: the key of a client certificate that routes
// present to backends is kept once, apart from the routes (whose copies
// redact it), and a file whose routes need a key it lacks, or whose key
// does not match, is refused.
func TestStateFileClientKeys(t *testing.T) {
	certPEM, keyPEM := selfSigned(t, "client.example.com")
	_, otherKey := selfSigned(t, "client.example.com")
	snap := stateSnapshot(certPEM, keyPEM)
	snap.Listeners[1].Routes[1].Rules[0].Backends = []router.BackendRef{{Name: "apps/mtls:443", Weight: 1, Protocol: "https",
		TLS: &router.BackendTLS{ServerName: "mtls.example.com", ClientCertificate: &router.ClientCertificate{Name: "infra/client", CertPEM: certPEM, KeyPEM: router.PrivateKey(keyPEM)}}}}
	valid, err := encodeState(snap, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(valid, &f); err != nil {
		t.Fatal(err)
	}
	listeners, _ := json.Marshal(f["listeners"])
	if !strings.Contains(string(listeners), "[REDACTED]") || strings.Count(string(valid), strings.ReplaceAll(strings.TrimSpace(string(keyPEM)), "\n", `\n`)) != 2 {
		t.Errorf("want the key once in clientKeys (and once in the listener's certs), redacted in routes:\n%s", valid)
	}
	got, _, err := decodeState(valid)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Listeners[1].Routes[1].Rules[0].Backends[0].TLS.ClientCertificate; !bytes.Equal(c.KeyPEM, keyPEM) {
		t.Errorf("key read back %q, want the one written", []byte(c.KeyPEM))
	}
	for name, keys := range map[string]any{"no key": nil, "other key": map[string]any{"infra/client": string(otherKey)}} {
		if keys == nil {
			delete(f, "clientKeys")
		} else {
			f["clientKeys"] = keys
		}
		data, _ := json.Marshal(f)
		if _, _, err := decodeState(data); err == nil || !strings.Contains(err.Error(), "client certificate infra/client") {
			t.Errorf("%s: error %v, want one naming the client certificate", name, err)
		}
	}
}

// TestStateFileCoalesces saves a thousand changes in a burst: they cost a
// write or two, not a thousand fsyncs, and the file ends up with the last
// one. An equal snapshot is not written again, and temporary files of a
// crashed write are cleaned up.
func TestStateFileCoalesces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "snapshot.json")
	leftover := filepath.Join(dir, ".snapshot.json.tmp12345")
	if err := os.WriteFile(leftover, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := NewStateFile(path, quietLog(), prometheus.NewRegistry())
	f.interval = time.Hour // only the first write and the one on stop
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Start(ctx) }()

	snapshot := func(i int) *Snapshot {
		return &Snapshot{Endpoints: NewEndpointSets(map[string][]Endpoint{"default/web:80": {{Address: "10.0.0.1:" + string(rune('0'+i%10)) + "000", Weight: int32(i)}}})}
	}
	f.Save(snapshot(0))
	deadline := time.Now().Add(10 * time.Second)
	for count(t, f.writes) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the first snapshot was not written")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover temporary file: %v, want it removed", err)
	}
	const changes = 1000
	for i := 1; i <= changes; i++ {
		f.Save(snapshot(i))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := count(t, f.writes); n != 2 {
		t.Errorf("%d changes made %v writes, want 2 (the first, and the last on stop)", changes, n)
	}
	got, _, err := f.Load()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, snapshot(changes)) {
		t.Errorf("file holds %+v, want the last change %+v", got, snapshot(changes))
	}

	// Restarted with the same content saved again: nothing to write.
	f.interval = 0
	f.Save(snapshot(changes))
	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- f.Start(ctx) }()
	f.Save(snapshot(changes))
	time.Sleep(50 * time.Millisecond)
	cancel()
	<-done
	if n := count(t, f.writes); n != 3 {
		// The restarted writer does not know what the file holds: one write.
		t.Errorf("equal snapshots made %v writes in all, want 3", n)
	}
	if names := filesIn(t, dir); len(names) != 1 {
		t.Errorf("directory holds %q, want only the state file", names)
	}
}

// TestStateFileWriteError: a write that fails is counted and keeps the
// previous file.
func TestStateFileWriteError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "snapshot.json")
	good := &Snapshot{Endpoints: NewEndpointSets(map[string][]Endpoint{"a/b:1": {{Address: "10.0.0.1:1"}}})}
	if err := writeStateFile(path, good, time.Now()); err != nil {
		t.Fatal(err)
	}
	f := NewStateFile(filepath.Join(path, "below-a-file"), quietLog(), nil)
	f.Save(&Snapshot{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, f.errors); n != 1 {
		t.Errorf("write errors = %v, want 1", n)
	}
	if got, _, err := readStateFile(path); err != nil || !reflect.DeepEqual(got, good) {
		t.Errorf("previous file: %+v %v, want it unchanged", got, err)
	}
}

// FuzzStateFile decodes arbitrary files: never a panic, and what decodes
// encodes to a file that decodes to the same snapshot.
func FuzzStateFile(f *testing.F) {
	f.Add([]byte(stateFileGolden))
	f.Add([]byte(`{"version":1,"written":"2026-01-01T00:00:00Z","listeners":[{"Name":":80","Port":80,"Protocol":"HTTP","Routes":[{"ID":{"Kind":"Ingress"},"Rules":[{}]}]}],"endpoints":{"a/b:1":[{"Address":"10.0.0.1:1"}]}}`))
	f.Add([]byte(`{"version":1,"written":"2026-01-01T00:00:00Z","listeners":[{"Name":":80","Port":80,"Protocol":"HTTP","Routes":[null]}],"endpoints":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		snap, written, err := decodeState(data)
		if err != nil {
			return
		}
		again, err := encodeState(snap, written)
		if err != nil {
			t.Fatalf("a decoded snapshot does not encode: %v", err)
		}
		snap2, written2, err := decodeState(again)
		if err != nil {
			t.Fatalf("re-encoded snapshot does not decode: %v", err)
		}
		if !reflect.DeepEqual(snap, snap2) || !written.Equal(written2) {
			t.Fatalf("round trip changed the snapshot:\n%+v\n%+v", snap, snap2)
		}
	})
}

// goldenCert and goldenKey are a self-signed pair for golden.example.com,
// made for this test only.
const goldenCert = `-----BEGIN CERTIFICATE-----
MIIBsTCCAVagAwIBAgIUWL75nE8NQBpxZOdRVZyDH/gqAIcwCgYIKoZIzj0EAwIw
HTEbMBkGA1UEAwwSZ29sZGVuLmV4YW1wbGUuY29tMCAXDTI2MTEyMjAyMDAwNVoY
DzIxMjYxMDI5MDIwMDA1WjAdMRswGQYDVQQDDBJnb2xkZW4uZXhhbXBsZS5jb20w
WTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAARY9puLACCfSVYiEPqbulZ/0hJrnMhy
XxEWZ9fK9KsMcImuUrcfbYfLoJDcE3vyESOKQ6aCHDCz+mZ0asMnH9Who3IwcDAd
BgNVHQ4EFgQUDtGS2QzqnFsu3ANvjVs7hZRnwVYwHwYDVR0jBBgwFoAUDtGS2Qzq
nFsu3ANvjVs7hZRnwVYwDwYDVR0TAQH/BAUwAwEB/zAdBgNVHREEFjAUghJnb2xk
ZW4uZXhhbXBsZS5jb20wCgYIKoZIzj0EAwIDSQAwRgIhAMBUhbFz1o/DzIUnKN53
8XiJ4jk2F3Mg8JTV4LS+180cAiEAr/9Fqs2k7EGuucJJGkV6YnWFqBcaD6/YBff9
7yfuJus=
-----END CERTIFICATE-----
`

const goldenKey = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg7BI+K37R44jNKwbF
fljf35MW52qIXlaUfkOcxLN6yYOhRANCAARY9puLACCfSVYiEPqbulZ/0hJrnMhy
XxEWZ9fK9KsMcImuUrcfbYfLoJDcE3vyESOKQ6aCHDCz+mZ0asMnH9Wh
-----END PRIVATE KEY-----
`

// stateFileGolden is stateSnapshot as format version 1 writes it.
const stateFileGolden = `{
  "version": 1,
  "written": "2026-11-22T02:00:00Z",
  "listeners": [
    {
      "Name": ":80",
      "Address": "",
      "Port": 80,
      "Protocol": "HTTP",
      "Hostnames": null,
      "ListenerHostnames": null,
      "Routes": [
        {
          "ID": {
            "Kind": "Ingress",
            "Namespace": "default",
            "Name": "web"
          },
          "Created": "2026-01-02T03:04:05Z",
          "Hostnames": [
            "web.example.com",
            "*.example.com"
          ],
          "Listener": "",
          "Rules": [
            {
              "Name": "",
              "Matches": [
                {
                  "Path": {
                    "Type": 2,
                    "Value": "/x[0-9]+"
                  },
                  "Method": "",
                  "Headers": null,
                  "Query": null,
                  "GRPC": null
                }
              ],
              "Filters": null,
              "Backends": [
                {
                  "Name": "default/web:80",
                  "Weight": 3,
                  "Filters": null,
                  "Protocol": "h2c",
                  "Invalid": false
                }
              ],
              "Timeouts": {
                "Request": 0,
                "BackendRequest": 0
              },
              "Retry": null
            }
          ]
        }
      ],
      "Certs": null
    },
    {
      "Name": "192.0.2.7:443",
      "Address": "192.0.2.7",
      "Port": 443,
      "Protocol": "HTTPS",
      "Hostnames": [
        "golden.example.com"
      ],
      "ListenerHostnames": [
        "",
        "golden.example.com"
      ],
      "Routes": [
        {
          "ID": {
            "Kind": "HTTPRoute",
            "Namespace": "apps",
            "Name": "all"
          },
          "Created": "0001-01-01T00:00:00Z",
          "Hostnames": [
            "golden.example.com"
          ],
          "Listener": "golden.example.com",
          "Rules": [
            {
              "Name": "first",
              "Matches": [
                {
                  "Path": {
                    "Type": 0,
                    "Value": "/v1"
                  },
                  "Method": "POST",
                  "Headers": [
                    {
                      "Type": 1,
                      "Name": "x-a",
                      "Value": "b.*"
                    }
                  ],
                  "Query": [
                    {
                      "Type": 0,
                      "Name": "q",
                      "Value": "1"
                    }
                  ],
                  "GRPC": null
                }
              ],
              "Filters": [
                {
                  "Type": 1,
                  "RequestHeaders": {
                    "Set": [
                      {
                        "Name": "x-s",
                        "Value": "1"
                      }
                    ],
                    "Add": [
                      {
                        "Name": "x-a",
                        "Value": "2"
                      }
                    ],
                    "Remove": [
                      "x-r"
                    ]
                  },
                  "ResponseHeaders": null,
                  "Redirect": null,
                  "Rewrite": null,
                  "Mirror": null,
                  "CORS": null
                },
                {
                  "Type": 2,
                  "RequestHeaders": null,
                  "ResponseHeaders": {
                    "Set": null,
                    "Add": null,
                    "Remove": [
                      "server"
                    ]
                  },
                  "Redirect": null,
                  "Rewrite": null,
                  "Mirror": null,
                  "CORS": null
                },
                {
                  "Type": 4,
                  "RequestHeaders": null,
                  "ResponseHeaders": null,
                  "Redirect": null,
                  "Rewrite": {
                    "Hostname": "internal",
                    "Path": {
                      "Type": 2,
                      "Value": "/"
                    }
                  },
                  "Mirror": null,
                  "CORS": null
                },
                {
                  "Type": 5,
                  "RequestHeaders": null,
                  "ResponseHeaders": null,
                  "Redirect": null,
                  "Rewrite": null,
                  "Mirror": {
                    "Backend": {
                      "Name": "apps/shadow:80",
                      "Weight": 1,
                      "Filters": null,
                      "Protocol": "",
                      "Invalid": false
                    },
                    "Numerator": 1,
                    "Denominator": 10
                  },
                  "CORS": null
                },
                {
                  "Type": 6,
                  "RequestHeaders": null,
                  "ResponseHeaders": null,
                  "Redirect": null,
                  "Rewrite": null,
                  "Mirror": null,
                  "CORS": {
                    "AllowOrigins": [
                      {
                        "Scheme": "https",
                        "Host": "*.example.com",
                        "Port": 8443
                      }
                    ],
                    "AllowMethods": [
                      "*"
                    ],
                    "AllowHeaders": null,
                    "ExposeHeaders": [
                      "x-e"
                    ],
                    "AllowCredentials": true,
                    "MaxAge": 5000000000
                  }
                }
              ],
              "Backends": [
                {
                  "Name": "default/web:80",
                  "Weight": 3,
                  "Filters": null,
                  "Protocol": "h2c",
                  "Invalid": false
                },
                {
                  "Name": "apps/gone:80",
                  "Weight": 1,
                  "Filters": [
                    {
                      "Type": 1,
                      "RequestHeaders": {
                        "Set": [
                          {
                            "Name": "x-b",
                            "Value": "3"
                          }
                        ],
                        "Add": null,
                        "Remove": null
                      },
                      "ResponseHeaders": null,
                      "Redirect": null,
                      "Rewrite": null,
                      "Mirror": null,
                      "CORS": null
                    }
                  ],
                  "Protocol": "",
                  "Invalid": true
                }
              ],
              "Timeouts": {
                "Request": 5000000000,
                "BackendRequest": 1000000000
              },
              "Retry": {
                "Codes": [
                  502,
                  503
                ],
                "Attempts": 2,
                "Backoff": 25000000
              }
            },
            {
              "Name": "",
              "Matches": null,
              "Filters": [
                {
                  "Type": 3,
                  "RequestHeaders": null,
                  "ResponseHeaders": null,
                  "Redirect": {
                    "Scheme": "https",
                    "Hostname": "elsewhere",
                    "Port": 8443,
                    "Path": {
                      "Type": 1,
                      "Value": "/moved"
                    },
                    "StatusCode": 301
                  },
                  "Rewrite": null,
                  "Mirror": null,
                  "CORS": null
                }
              ],
              "Backends": null,
              "Timeouts": {
                "Request": 0,
                "BackendRequest": 0
              },
              "Retry": null
            }
          ]
        },
        {
          "ID": {
            "Kind": "GRPCRoute",
            "Namespace": "apps",
            "Name": "grpc"
          },
          "Created": "0001-01-01T00:00:00Z",
          "Hostnames": null,
          "Listener": "",
          "Rules": [
            {
              "Name": "",
              "Matches": [
                {
                  "Path": {
                    "Type": 0,
                    "Value": ""
                  },
                  "Method": "",
                  "Headers": null,
                  "Query": null,
                  "GRPC": {
                    "Type": 0,
                    "Service": "pkg.Svc",
                    "Method": "Get"
                  }
                }
              ],
              "Filters": null,
              "Backends": [
                {
                  "Name": "default/web:80",
                  "Weight": 3,
                  "Filters": null,
                  "Protocol": "h2c",
                  "Invalid": false
                }
              ],
              "Timeouts": {
                "Request": 0,
                "BackendRequest": 0
              },
              "Retry": null
            }
          ]
        }
      ],
      "Certs": [
        {
          "Name": "apps/golden",
          "Hostnames": [
            "golden.example.com"
          ],
          "CertPEM": "-----BEGIN CERTIFICATE-----\nMIIBsTCCAVagAwIBAgIUWL75nE8NQBpxZOdRVZyDH/gqAIcwCgYIKoZIzj0EAwIw\nHTEbMBkGA1UEAwwSZ29sZGVuLmV4YW1wbGUuY29tMCAXDTI2MTEyMjAyMDAwNVoY\nDzIxMjYxMDI5MDIwMDA1WjAdMRswGQYDVQQDDBJnb2xkZW4uZXhhbXBsZS5jb20w\nWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAARY9puLACCfSVYiEPqbulZ/0hJrnMhy\nXxEWZ9fK9KsMcImuUrcfbYfLoJDcE3vyESOKQ6aCHDCz+mZ0asMnH9Who3IwcDAd\nBgNVHQ4EFgQUDtGS2QzqnFsu3ANvjVs7hZRnwVYwHwYDVR0jBBgwFoAUDtGS2Qzq\nnFsu3ANvjVs7hZRnwVYwDwYDVR0TAQH/BAUwAwEB/zAdBgNVHREEFjAUghJnb2xk\nZW4uZXhhbXBsZS5jb20wCgYIKoZIzj0EAwIDSQAwRgIhAMBUhbFz1o/DzIUnKN53\n8XiJ4jk2F3Mg8JTV4LS+180cAiEAr/9Fqs2k7EGuucJJGkV6YnWFqBcaD6/YBff9\n7yfuJus=\n-----END CERTIFICATE-----\n",
          "KeyPEM": "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg7BI+K37R44jNKwbF\nfljf35MW52qIXlaUfkOcxLN6yYOhRANCAARY9puLACCfSVYiEPqbulZ/0hJrnMhy\nXxEWZ9fK9KsMcImuUrcfbYfLoJDcE3vyESOKQ6aCHDCz+mZ0asMnH9Wh\n-----END PRIVATE KEY-----\n"
        }
      ]
    }
  ],
  "endpoints": {
    "apps/shadow:80": [],
    "default/web:80": [
      {
        "Address": "10.0.0.1:8080",
        "Ready": true,
        "Weight": 1
      },
      {
        "Address": "[2001:db8::1]:8080",
        "Ready": false,
        "Weight": 2
      }
    ]
  }
}`

// TestStateFileGolden pins format version 1 both ways. When it fails
// because a field of the Snapshot or of router.Route changed, the files
// nodes already hold no longer mean what they meant: bump stateFileVersion
// and replace stateFileGolden with what the test prints.
func TestStateFileGolden(t *testing.T) {
	want := stateSnapshot([]byte(goldenCert), []byte(goldenKey))
	at := time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC)
	data, err := encodeState(want, at)
	if err != nil {
		t.Fatal(err)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, data, "", "  "); err != nil {
		t.Fatal(err)
	}
	if indented.String() != stateFileGolden {
		t.Errorf("version %d encodes differently; if that is intended, bump the version and use:\n%s", stateFileVersion, indented.String())
	}
	got, written, err := decodeState([]byte(stateFileGolden))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || !written.Equal(at) {
		t.Errorf("golden file decodes to\n%#v\nwant\n%#v", got, want)
	}
}

// largeState is a configuration of a big cluster: 1,000 routes with an
// endpoint set each and 100 certificates (the same pair under 100 names).
func largeState() *Snapshot {
	snap := &Snapshot{}
	endpoints := map[string][]Endpoint{}
	l := Listener{Name: ":443", Port: 443, Protocol: ProtocolHTTPS}
	for i := range 1000 {
		backend := fmt.Sprintf("ns%d/web:80", i)
		l.Routes = append(l.Routes, &router.Route{
			ID:        router.RouteID{Kind: router.KindHTTPRoute, Namespace: fmt.Sprintf("ns%d", i), Name: "web"},
			Hostnames: []string{fmt.Sprintf("web%d.example.com", i)},
			Rules: []router.Rule{{
				Matches:  []router.Match{{Path: router.PathMatch{Value: "/api"}, Headers: []router.ValueMatch{{Name: "x-v", Value: "1"}}}},
				Backends: []router.BackendRef{{Name: backend, Weight: 1}},
			}},
		})
		endpoints[backend] = []Endpoint{{Address: fmt.Sprintf("10.0.%d.%d:8080", i/250, i%250), Ready: true, Weight: 1}}
	}
	snap.Endpoints = NewEndpointSets(endpoints)
	for i := range 100 {
		host := fmt.Sprintf("web%d.example.com", i)
		l.Certs = append(l.Certs, Cert{Name: "ns/" + host, Hostnames: []string{host}, CertPEM: []byte(goldenCert), KeyPEM: []byte(goldenKey)})
	}
	snap.Listeners = []Listener{l}
	return snap
}

func BenchmarkStateFile(b *testing.B) {
	snap := largeState()
	path := filepath.Join(b.TempDir(), "state.json")
	b.Run("write", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := writeStateFile(path, snap, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
		info, _ := os.Stat(path)
		b.ReportMetric(float64(info.Size()), "file_bytes")
	})
	b.Run("load", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := readStateFile(path); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestStateFileLayer4: a snapshot with Layer 4 listeners (TCP, UDP, TLS
// routes on an HTTPS socket) is read back as it was written; a state
// file was refused whole once it held one.
func TestStateFileLayer4(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "snapshot.json")
	certPEM, keyPEM := selfSigned(t, "golden.example.com")
	l4 := func(kind router.Kind, listener string, hosts ...string) *router.Route {
		return &router.Route{ID: router.RouteID{Kind: kind, Namespace: "apps", Name: "r"}, Listener: listener, Hostnames: hosts,
			Rules: []router.Rule{{Backends: []router.BackendRef{{Name: "apps/db:5432", Weight: 1}}}}}
	}
	want := &Snapshot{
		Listeners: []Listener{
			{Name: "10.0.0.5:5353", Address: "10.0.0.5", Port: 5353, Protocol: ProtocolTCP, ListenerHostnames: []string{""}, Routes: []*router.Route{l4(router.KindTCPRoute, "")}},
			{Name: "10.0.0.5:5353/udp", Address: "10.0.0.5", Port: 5353, Protocol: ProtocolUDP, ListenerHostnames: []string{""}, Routes: []*router.Route{l4(router.KindUDPRoute, "")}},
			{Name: "10.0.0.5:443", Address: "10.0.0.5", Port: 443, Protocol: ProtocolHTTPS, ListenerHostnames: []string{""}, TLSHostnames: []string{"vault.example.com"},
				Routes: []*router.Route{l4(router.KindTLSRoute, "vault.example.com", "vault.example.com")},
				Certs:  []Cert{{Name: "apps/cert", CertPEM: certPEM, KeyPEM: PrivateKey(keyPEM)}}},
		},
		Endpoints: NewEndpointSets(map[string][]Endpoint{"apps/db:5432": {{Address: "10.1.0.1:5432", Ready: true, Weight: 1}}}),
	}
	if err := writeStateFile(path, want, time.Date(2026, 11, 25, 1, 2, 3, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	got, _, err := NewStateFile(path, quietLog(), nil).Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(got.Listeners) != 3 || got.Listeners[1].Protocol != ProtocolUDP || len(got.Listeners[2].Routes) != 1 {
		t.Errorf("listeners read back: %+v", got.Listeners)
	}
}
