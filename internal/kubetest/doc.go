// Package kubetest is test support only: it runs a real control plane (etcd,
// kube-apiserver and, on request, kube-controller-manager) as local processes
// on loopback for the tests of other packages. It must never be imported by
// non-test code.
//
// The binaries come from hack/kube-env.sh, which builds them from source and
// prints the directory that HOSTGATE_KUBE_BIN should name (when it is unset,
// the script's default cache directory is used; etcd may also come from
// PATH). The Gateway API CRDs come from the sigs.k8s.io/gateway-api module
// that go.mod requires, found through the go command. Without binaries the
// tests that need a control plane are skipped, except when the environment
// variable CI is set: there a missing control plane fails the test, so that CI
// never passes by skipping.
//
// One Env per test (Start) suits tests that stop the API server or need their
// own cluster; a package whose tests can share one cluster calls Main from
// TestMain and Shared from each test.
package kubetest
