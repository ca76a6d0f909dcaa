package watch

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTrimKeepsHeaderValues: the cache keeps of a ConfigMap ca.crt and
// the keys that can be header names with their values (custom-headers and
// auth-proxy-set-headers read them); a value no header could have is kept
// as one that fails the same check, and configuration files stay out of
// memory.
func TestTrimKeepsHeaderValues(t *testing.T) {
	long := strings.Repeat("x", 4097)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "headers", Namespace: "default"},
		Data: map[string]string{
			caCertKey: "PEM", "X-Frame-Options": "DENY", "x_realm": "internal",
			"nginx.conf": "a large file", "BIG": long, "Bell": "a\x07b",
		},
		BinaryData: map[string][]byte{"blob": {1}},
	}
	got, err := newInterner().trimObject(cm)
	if err != nil {
		t.Fatal(err)
	}
	kept := got.(*corev1.ConfigMap)
	want := map[string]string{caCertKey: "PEM", "X-Frame-Options": "DENY", "x_realm": "internal", "BIG": tooLongForAHeader, "Bell": tooLongForAHeader}
	if !reflect.DeepEqual(kept.Data, want) || kept.BinaryData != nil {
		t.Errorf("kept %q and binary %v, want %q and none", kept.Data, kept.BinaryData, want)
	}
	for _, value := range []string{long, "a\x07b"} {
		if (checkHeaderValue(value) == nil) != (checkHeaderValue(tooLongForAHeader) == nil) {
			t.Errorf("checkHeaderValue tells %q from what the cache keeps of it", value)
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
