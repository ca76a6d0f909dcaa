package watch

import (
	"maps"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTrimKeepsAllowedHeaders: the cache keeps of a ConfigMap ca.crt and,
// with --ingress-allowed-response-headers, the allowed headers' values and
// the other header names without theirs; every other value stays out of
// memory.
func TestTrimKeepsAllowedHeaders(t *testing.T) {
	data := map[string]string{
		caCertKey: "PEM", "X-Frame-Options": "DENY", "X-Secret": "a secret value",
		"nginx.conf": "a large file", "BIG": "a large value",
	}
	for _, tc := range []struct {
		allowed []string
		want    map[string]string
	}{
		{nil, map[string]string{caCertKey: "PEM"}},
		{[]string{"x-frame-options"}, map[string]string{caCertKey: "PEM", "X-Frame-Options": "DENY", "X-Secret": "", "BIG": ""}},
	} {
		in := newInterner()
		in.allowedHeaders = tc.allowed
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "headers", Namespace: "default"}, Data: maps.Clone(data), BinaryData: map[string][]byte{"blob": {1}}}
		got, err := in.trimObject(cm)
		if err != nil {
			t.Fatal(err)
		}
		if kept := got.(*corev1.ConfigMap); !reflect.DeepEqual(kept.Data, tc.want) || kept.BinaryData != nil {
			t.Errorf("allowed %v: kept %v and binary %v, want %v and none", tc.allowed, kept.Data, kept.BinaryData, tc.want)
		}
	}
}

// TestCheckAllowedResponseHeader: the allow list takes header names, not
// those that frame the response.
func TestCheckAllowedResponseHeader(t *testing.T) {
	for name, ok := range map[string]bool{
		"X-Frame-Options": true, "x_custom": true, "Content-Length": false, "transfer-encoding": false,
		"Connection": false, "X Frame": false, "X.Frame": false, "": false,
	} {
		if err := CheckAllowedResponseHeader(name); (err == nil) != ok {
			t.Errorf("CheckAllowedResponseHeader(%q) = %v, want ok %t", name, err, ok)
		}
	}
}
