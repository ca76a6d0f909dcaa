package nodeagent

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIsEchoServer(t *testing.T) {
	for image, want := range map[string]bool{
		"registry.k8s.io/gateway-api/echo-basic:v1.5.1":             true,
		"registry.k8s.io/gateway-api/echo-basic:v1.6.0-dev":         true,
		"registry.k8s.io/gateway-api/conformance/echo-basic:v0.2.0": true,
		"echo-basic": true,
		"registry.k8s.io/coredns/coredns:v1.12.2": false,
		"example.com/echo-basic-fork:v1":          false,
	} {
		if got := isEchoServer(image); got != want {
			t.Errorf("isEchoServer(%q) = %v, want %v", image, got, want)
		}
	}
}

func TestContainerEnv(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "apps", UID: "u1"}}
	c := corev1.Container{
		Name: "web",
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "TLS_SERVER_CERT", Value: "/etc/secret-volume/crt"},
			{Name: "MOUNT", Value: "/etc/secret-volume"},
			{Name: "OTHER", Value: "/etc/secret-volume-not/crt"},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "secret-volume", MountPath: "/etc/secret-volume"}},
	}
	got, err := containerEnv(p, c, netip.MustParseAddr("10.244.0.7"), map[string]string{"secret-volume": "/run/pod/volumes/secret-volume"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"POD_NAME=web-1",
		"NAMESPACE=apps",
		"POD_IP=10.244.0.7",
		"TLS_SERVER_CERT=/run/pod/volumes/secret-volume/crt",
		"MOUNT=/run/pod/volumes/secret-volume",
		"OTHER=/etc/secret-volume-not/crt",
	}
	if !slices.Equal(got, want) {
		t.Errorf("containerEnv:\ngot  %q\nwant %q", got, want)
	}

	c.Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}}}
	if _, err := containerEnv(p, c, netip.Addr{}, nil); err == nil {
		t.Error("containerEnv accepted an unsupported field reference")
	}
}

// TestContainerLogsSince checks that lines are stamped when written, even
// when a line arrives in pieces, and that sinceTime leaves out older ones.
func TestContainerLogsSince(t *testing.T) {
	path := filepath.Join(t.TempDir(), "web.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	log := &stampedLog{w: f}
	for _, s := range []string{"old one\n", "old ", "two\n"} {
		if _, err := log.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	// sinceTime has a resolution of seconds: the new lines go after the
	// next full second.
	since := time.Now().UTC().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(since) + 10*time.Millisecond)
	if _, err := log.Write([]byte("new one\nnew two\n")); err != nil {
		t.Fatal(err)
	}

	a := &Agent{pods: map[string]*pod{"apps/web-1": {logs: map[string]string{"web": path}}}}
	get := func(query string) string {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/containerLogs/apps/web-1/web"+query, nil)
		req.SetPathValue("namespace", "apps")
		req.SetPathValue("pod", "web-1")
		req.SetPathValue("container", "web")
		a.containerLogs(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", query, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	if got, want := get(""), "old one\nold two\nnew one\nnew two\n"; got != want {
		t.Errorf("all lines: got %q, want %q", got, want)
	}
	if got, want := get("?sinceTime="+since.Format(time.RFC3339)), "new one\nnew two\n"; got != want {
		t.Errorf("since %v: got %q, want %q", since, got, want)
	}
	if got := get("?timestamps=true"); !strings.HasPrefix(got, time.Now().UTC().Format("2006-")) {
		t.Errorf("timestamps=true: got %q, want lines that start with their time", got)
	}
}
