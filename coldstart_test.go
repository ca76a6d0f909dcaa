package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/kubetest"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
	"github.com/hostgate/hostgate/watch"
)

// TestColdStartFromStateFile: a hostgate that ran against the API server
// leaves its configuration in --state-file; a new one that starts while
// the API server is down serves it, routes, endpoints and certificate, over
// HTTP and TLS; when the API server is back the live configuration replaces
// it without a failed request in between, and the file follows.
func TestColdStartFromStateFile(t *testing.T) {
	env := kubetest.Start(t)
	pod := podAddress(t)
	c := newCluster(t, env, "coldstart")
	const host = "cold.example.com"
	_, v1 := serveHTTP(t, pod, answer("cold v1"))
	_, v2 := serveHTTP(t, pod, answer("cold v2"))
	c.backend("v1", v1)
	c.backend("v2", v2)
	ca := tlstest.NewCA(t)
	certPEM, keyPEM := ca.Issue(t, host)
	c.tlsSecret("cold-tls", certPEM, keyPEM)
	httpPort, httpsPort := freePort(t), freePort(t)
	c.gateway(httpPort, httpsPort, "cold-tls")
	c.route("app", host, "/", "v1")

	state := filepath.Join(t.TempDir(), "state", "snapshot.json")
	plain := fmt.Sprintf("http://127.0.0.1:%d/page", httpPort)
	secure := fmt.Sprintf("https://127.0.0.1:%d/page", httpsPort)
	tlsClient := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, ServerName: host}},
		Timeout:   5 * time.Second,
	}
	defer tlsClient.CloseIdleConnections()
	overTLS := func(want string) func() string {
		return func() string {
			req, err := http.NewRequest("GET", secure, nil)
			if err != nil {
				return err.Error()
			}
			req.Host = host
			resp, err := tlsClient.Do(req)
			if err != nil {
				return err.Error()
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || string(body) != want {
				return fmt.Sprintf("GET %s = %d %q, want 200 %q", secure, resp.StatusCode, body, want)
			}
			return ""
		}
	}

	first := c.hostgate(env, "--state-file", state)
	eventuallyWithin(t, time.Minute, "the route from the API server", expect(plain, host, 200, "cold v1"))
	eventually(t, "the state file", func() string {
		if _, err := os.Stat(state); err != nil {
			return err.Error()
		}
		return ""
	})
	first.stop(t)
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}

	second := c.hostgate(env, "--state-file", state)
	eventually(t, "ready from the state file", expect(second.admin+"/readyz", "", 200, "ok"))
	eventually(t, "HTTP from the state file", expect(plain, host, 200, "cold v1"))
	eventually(t, "TLS with the certificate from the state file", overTLS("cold v1"))
	if got := metric(second.admin, "hostgate_state_file_serving"); got != "hostgate_state_file_serving 1" {
		t.Errorf("metrics while the state file is served: %q, want hostgate_state_file_serving 1", got)
	}
	if logs := second.logs.String(); !strings.Contains(logs, "serving the state file until the API server syncs") || !strings.Contains(logs, state) {
		t.Errorf("the log does not say that the state file %s is served:\n%s", state, logs)
	}

	// From here to the switch, every request gets one configuration or
	// the other: the first live translation must be complete.
	stopPolling := make(chan struct{})
	polled := make(chan []string)
	go func() {
		var failures []string
		for {
			select {
			case <-stopPolling:
				polled <- failures
				return
			case <-time.After(5 * time.Millisecond):
			}
			if problem := expect(plain, host, 200, "cold v")(); problem != "" {
				failures = append(failures, time.Now().Format(time.StampMilli)+" "+problem)
			}
		}
	}()
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := c.routePath(t.Context(), "app", "/", "v2"); err != nil {
		t.Fatal(err)
	}
	eventuallyWithin(t, resumeWithin, "the changed route from the API server", expect(plain, host, 200, "cold v2"))
	close(stopPolling)
	if failures := <-polled; len(failures) > 0 {
		t.Errorf("%d requests failed while the live configuration replaced the state file, the first: %s", len(failures), failures[0])
	}
	eventually(t, "the changed route over TLS", overTLS("cold v2"))
	if got := metric(second.admin, "hostgate_state_file_serving"); got != "hostgate_state_file_serving 0" {
		t.Errorf("metrics once the API server synced: %q, want hostgate_state_file_serving 0", got)
	}
	if logs := second.logs.String(); !strings.Contains(logs, "the API server synced: serving its configuration instead of the state file") {
		t.Errorf("the log does not say that the live configuration replaced the state file:\n%s", logs)
	}
	second.stop(t)
	snap, _, err := watch.NewStateFile(state, nil, nil).Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Listeners) != 2 {
		t.Fatalf("state file after the switch holds %d listeners, want 2", len(snap.Listeners))
	}
	for _, l := range snap.Listeners {
		if backend := l.Routes[0].Rules[0].Backends[0].Name; backend != "coldstart/v2:80" {
			t.Errorf("state file after the switch sends %s to %s, want the live route's coldstart/v2:80", l.Name, backend)
		}
	}
}

// stop stops h before the test ends and checks that it stopped cleanly.
func (h *runningHostgate) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("hostgate stopped with %v", err)
		}
		h.done <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatalf("hostgate did not stop\n%s", h.logs)
	}
}

// TestDamagedStateFileIsIgnored: a state file that cannot be used is
// skipped with a log line naming it and the reason, and hostgate keeps
// waiting for the API server instead of failing.
func TestDamagedStateFileIsIgnored(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	if err := os.WriteFile(state, []byte(`{"version": 1, "written": "2026-11-22T02:00:00Z", "listen`), 0o600); err != nil {
		t.Fatal(err)
	}
	// An API server that is not there: nothing listens on port 1.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startHostgate(t, "--kubeconfig", kubeconfig, "--state-file", state, "--gateway-class", "")
	eventually(t, "the reason in the log", func() string {
		logs := h.logs.String()
		if !strings.Contains(logs, "ignoring the state file") || !strings.Contains(logs, state) || !strings.Contains(logs, "not a state file: unexpected end of JSON input") {
			return "no log line naming the file and the reason:\n" + logs
		}
		return ""
	})
	eventually(t, "not ready without a configuration", expect(h.admin+"/readyz", "", 503, "not ready"))
	select {
	case err := <-h.done:
		t.Fatalf("hostgate stopped: %v", err)
	default:
	}
}
