package main

import (
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFileChurnUnderLoad edits the configuration of a running hostgate the
// two ways users do, by atomic rename and in place (truncated, then written
// in two pieces, as a shell's > or kubectl get ... > file does), under
// steady HTTP/1.1 and h2c load: no request may fail. Before file mode
// waited for files to settle, an in-place write served the emptied or
// half-written file and the Gateway's port stopped answering.
func TestFileChurnUnderLoad(t *testing.T) {
	backend := httptest.NewServer(answer("churn-ok"))
	defer backend.Close()
	backendPort := backend.Listener.Addr().(*net.TCPAddr).Port
	port := freePort(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "example.yaml")
	// Each version adds a route of its own, so that a version is seen
	// served by its host.
	version := func(i int) []byte {
		return fmt.Appendf(fmt.Appendf(nil, exampleTemplate, port, backendPort, "/"), `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: churn, namespace: default}
spec:
  parentRefs: [{name: web}]
  hostnames: [v%d.example.com]
  rules: [{backendRefs: [{name: app, port: 80}]}]
`, i)
	}
	if err := os.WriteFile(file, version(0), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHostgate(t, "--config", dir, "--access-log=false")
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	eventually(t, "first version served", expect(url+"/", "v0.example.com", 200, "churn-ok"))

	l := startLoad(t, "churn-ok", 2,
		loadClient{name: "h1", url: url + "/", host: "app.example.com"},
		loadClient{name: "h2c", url: url + "/", host: "app.example.com", h2: true})

	const changes = 32
	for i := 1; i <= changes; i++ {
		data := version(i)
		if i%2 == 0 {
			tmp := file + ".tmp" // not *.yaml: never read
			if err := os.WriteFile(tmp, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, file); err != nil {
				t.Fatal(err)
			}
		} else {
			writeInPieces(t, file, data, 100*time.Millisecond)
		}
		if i%8 == 0 {
			// A pause long enough for the version to settle and be served.
			eventually(t, fmt.Sprintf("version %d served", i), expect(url+"/", fmt.Sprintf("v%d.example.com", i), 200, "churn-ok"))
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	l.check(t)
	eventually(t, "no config file failing", expect(h.admin+"/metrics", "", 200, "hostgate_config_files_failing 0"))
}

// writeInPieces writes data to path in place: it truncates the file, waits
// pause, writes the first half, waits pause, then writes the rest. An
// empty file is valid YAML, and half a file may be too.
func writeInPieces(t *testing.T, path string, data []byte, pause time.Duration) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	time.Sleep(pause)
	half := len(data) / 2
	if _, err := f.Write(data[:half]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(pause)
	if _, err := f.Write(data[half:]); err != nil {
		t.Fatal(err)
	}
}
