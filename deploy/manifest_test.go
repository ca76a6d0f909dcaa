// Package deploy holds hostgate's install manifest, which is YAML, not Go.
// Its tests check that hostgate.yaml is exactly what generate.sh makes, that
// a real API server accepts every object in it without an error or a
// warning, and the properties a user would notice when they are wrong.
package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/hostgate/hostgate/internal/kubetest"
	"github.com/hostgate/hostgate/watch"
)

// TestGenerated fails when hostgate.yaml is not what generate.sh writes
// from hostgate.in.yaml and the CRDs of the Gateway API version go.mod
// requires: after editing the input or bumping the module, run the script.
func TestGenerated(t *testing.T) {
	out := filepath.Join(t.TempDir(), "hostgate.yaml")
	cmd := exec.Command("bash", "generate.sh", out)
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generate.sh: %v\n%s", err, output)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("hostgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("deploy/hostgate.yaml is out of date (%d bytes, generate.sh makes %d): run deploy/generate.sh", len(got), len(want))
	}
}

// TestAppliesToAPIServer installs the manifest's prerequisites (the CRDs
// and the namespace) on a cluster that has no Gateway API, and then
// server-side applies every other object as a dry run: the API server runs
// its whole validation and admission on each, and any error or warning
// fails the test. The hostNetwork variant of the DaemonSet goes through the
// same check.
func TestAppliesToAPIServer(t *testing.T) {
	env := kubetest.Start(t, kubetest.WithoutGatewayAPI())
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	warnings := &warningRecorder{}
	config := rest.CopyConfig(env.Config)
	config.WarningHandlerWithContext = warnings
	client, err := dynamic.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))

	objects := readManifest(t, "hostgate.yaml")
	var prerequisites, others []*unstructured.Unstructured
	for _, obj := range objects {
		switch obj.GetKind() {
		case "CustomResourceDefinition", "Namespace":
			prerequisites = append(prerequisites, obj)
		default:
			others = append(others, obj)
		}
	}
	variant := hostNetworkDaemonSet(t, objects)
	others = append(others, variant)

	apply := func(obj *unstructured.Unstructured, dryRun bool) {
		t.Helper()
		what := fmt.Sprintf("%s %s", obj.GetKind(), obj.GetName())
		if obj == variant {
			what += " (hostNetwork variant)"
		}
		if err := applyObject(ctx, client, mapper, obj, dryRun); err != nil {
			t.Errorf("%s: %v", what, err)
		}
		for _, w := range warnings.take() {
			t.Errorf("%s: API warning: %s", what, w)
		}
	}

	for _, obj := range prerequisites {
		apply(obj, false)
	}
	for _, obj := range prerequisites {
		if obj.GetKind() == "CustomResourceDefinition" {
			waitEstablished(ctx, t, client, obj.GetName())
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// The mapper learned the API before the CRDs existed.
	mapper.Reset()
	for _, obj := range others {
		apply(obj, true)
	}
	// The standard channel's CRDs take ClusterTrustBundle references (an
	// experimental feature) as they are: README says they work with the
	// manifest as it is, and a CRD of a later release that refused them
	// would make that untrue.
	for _, obj := range decodeObjects(t, "ClusterTrustBundle referrers", []byte(trustBundleReferrers)) {
		apply(obj, true)
	}
	for _, w := range warnings.take() {
		t.Errorf("API warning: %s", w)
	}
}

// trustBundleReferrers are a Gateway and a BackendTLSPolicy whose CA
// references name a ClusterTrustBundle.
const trustBundleReferrers = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: mtls, namespace: default}
spec:
  gatewayClassName: hostgate
  tls:
    frontend:
      default:
        validation:
          caCertificateRefs: [{group: certificates.k8s.io, kind: ClusterTrustBundle, name: clients}]
  listeners:
  - {name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: server}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: backends, namespace: default}
spec:
  targetRefs: [{group: "", kind: Service, name: backend}]
  validation:
    hostname: backend.example.com
    caCertificateRefs: [{group: certificates.k8s.io, kind: ClusterTrustBundle, name: backends}]
`

func applyObject(ctx context.Context, client dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var resource dynamic.ResourceInterface = client.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		// kubectl would put an object without a namespace into the
		// user's current one, wherever that is.
		if obj.GetNamespace() == "" {
			return errors.New("namespaced object without metadata.namespace")
		}
		resource = client.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	options := metav1.ApplyOptions{FieldManager: "hostgate-deploy-test"}
	if dryRun {
		options.DryRun = []string{metav1.DryRunAll}
	}
	_, err = resource.Apply(ctx, obj.GetName(), obj, options)
	return err
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func waitEstablished(ctx context.Context, t *testing.T, client dynamic.Interface, name string) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		crd, err := client.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conditions {
			if c, ok := c.(map[string]any); ok && c["type"] == "Established" && c["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("CRD %s: wait until Established: %v", name, err)
	}
}

// warningRecorder collects the API server's warnings (deprecated fields or
// APIs, ignored values, unknown fields dropped, ...) so that the test can
// fail on them instead of letting client-go log them.
type warningRecorder struct {
	mu       sync.Mutex
	messages []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, message string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.messages = append(w.messages, message)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	messages := w.messages
	w.messages = nil
	return messages
}

// TestDaemonSet checks what decides whether the pods run, serve and drain.
func TestDaemonSet(t *testing.T) {
	ds := daemonSet(t, readManifest(t, "hostgate.yaml"))
	pod := ds.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	args := flagValues(t, c.Args)

	if c.Image != "ghcr.io/hostgate/hostgate:VERSION" {
		t.Errorf("image %q: the README's install command replaces the placeholder ghcr.io/hostgate/hostgate:VERSION", c.Image)
	}

	type port struct {
		name     string
		port     int32
		protocol corev1.Protocol
	}
	var ports []port
	for _, p := range c.Ports {
		if p.HostPort != p.ContainerPort {
			t.Errorf("port %s: hostPort %d differs from containerPort %d (the hostNetwork variant needs them equal)", p.Name, p.HostPort, p.ContainerPort)
		}
		ports = append(ports, port{p.Name, p.ContainerPort, p.Protocol})
	}
	wantPorts := []port{{"http", 80, "TCP"}, {"https", 443, "TCP"}, {"http3", 443, "UDP"}, {"admin", 10254, "TCP"}}
	if !slices.Equal(ports, wantPorts) {
		t.Errorf("ports %v, want %v", ports, wantPorts)
	}
	for flag, name := range map[string]string{"--http-addr": "http", "--https-addr": "https", "--admin-addr": "admin"} {
		if got, want := args[flag], ":"+strconv.Itoa(int(namedPort(c, name))); got != want {
			t.Errorf("%s=%q, but port %s is %s", flag, got, name, want)
		}
	}

	for _, probe := range []struct {
		name, path string
		probe      *corev1.Probe
	}{{"liveness", "/healthz", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}} {
		if probe.probe == nil || probe.probe.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", probe.name)
			continue
		}
		get := probe.probe.HTTPGet
		if get.Path != probe.path || get.Port != intstr.FromString("admin") {
			t.Errorf("%s probe GET %s on port %s, want %s on the admin port", probe.name, get.Path, get.Port.String(), probe.path)
		}
	}

	// The container's settings win over the pod's; either may carry one.
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("container has no securityContext")
	}
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("runAsNonRoot is not true")
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Error("runAsUser is not 65532 (the image's nonroot user)")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_BIND_SERVICE"}) {
		t.Errorf("capabilities %+v, want drop ALL, add NET_BIND_SERVICE", sc.Capabilities)
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil && pod.SecurityContext != nil {
		seccomp = pod.SecurityContext.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile %+v, want RuntimeDefault", seccomp)
	}

	// The kubelet's SIGKILL must not cut the drain short.
	drain := duration(t, args["--shutdown-delay"]) + duration(t, args["--shutdown-grace"])
	if pod.TerminationGracePeriodSeconds == nil {
		t.Error("no terminationGracePeriodSeconds (the default 30s is shorter than the drain)")
	} else if grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second; grace < drain || grace < 35*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v, shorter than the drain (%v) or 35s", grace, drain)
	}

	for name, path := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "NODE_NAME": "spec.nodeName", "NODE_IP": "status.hostIP", "HOST_IP": "status.hostIP"} {
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
		if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != path {
			t.Errorf("env %s does not come from the downward API's %s", name, path)
		}
	}

	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want cpu and memory requests and a memory limit", c.Resources)
	}

	u := ds.Spec.UpdateStrategy
	if u.Type != appsv1.RollingUpdateDaemonSetStrategyType || u.RollingUpdate == nil || u.RollingUpdate.MaxUnavailable == nil || *u.RollingUpdate.MaxUnavailable != intstr.FromInt32(1) {
		t.Errorf("updateStrategy %+v, want RollingUpdate with maxUnavailable 1", u)
	}
}

// TestHostNetworkVariant checks the DaemonSet that the documented patch
// makes: on the node's network, with the cluster's DNS, and otherwise the
// same. Neither field may appear in hostgate.yaml: applying it again for an
// upgrade would then undo the variant.
func TestHostNetworkVariant(t *testing.T) {
	objects := readManifest(t, "hostgate.yaml")
	base := daemonSet(t, objects)
	var ds appsv1.DaemonSet
	fromUnstructured(t, hostNetworkDaemonSet(t, objects), &ds)
	pod := &ds.Spec.Template.Spec
	if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v, dnsPolicy %q; want true and ClusterFirstWithHostNet", pod.HostNetwork, pod.DNSPolicy)
	}
	if base.Spec.Template.Spec.HostNetwork || base.Spec.Template.Spec.DNSPolicy != "" {
		t.Error("hostgate.yaml sets hostNetwork or dnsPolicy: an upgrade would undo the hostNetwork variant")
	}
	pod.HostNetwork, pod.DNSPolicy = false, ""
	if !equality.Semantic.DeepEqual(&ds, base) {
		t.Error("hostnetwork-patch.yaml changes more than hostNetwork and dnsPolicy")
	}
}

// TestRBAC checks the least-privilege promise: outside status subresources,
// nothing but Leases is ever written, GatewayClasses and Events only
// created, Services and EndpointSlices only by the role of
// --gateway-services, which can be left out, and no rule uses a wildcard.
func TestRBAC(t *testing.T) {
	writable := []string{"leases"}
	gatewayServices := []string{"services", "endpointslices"}
	readOnly := []string{"get", "list", "watch"}
	roles := 0
	// Without it hostgate runs, and ClusterTrustBundle references never
	// resolve: nothing else would notice.
	readsTrustBundles := false
	for _, obj := range readManifest(t, "hostgate.yaml") {
		var rules []rbacv1.PolicyRule
		switch obj.GetKind() {
		case "ClusterRole":
			var role rbacv1.ClusterRole
			fromUnstructured(t, obj, &role)
			rules = role.Rules
		case "Role":
			var role rbacv1.Role
			fromUnstructured(t, obj, &role)
			rules = role.Rules
		default:
			continue
		}
		roles++
		for _, rule := range rules {
			if obj.GetName() == "hostgate" && slices.Contains(rule.APIGroups, "certificates.k8s.io") && slices.Contains(rule.Resources, "clustertrustbundles") &&
				!slices.ContainsFunc(readOnly, func(verb string) bool { return !slices.Contains(rule.Verbs, verb) }) {
				readsTrustBundles = true
			}
			if slices.Contains(rule.Verbs, "*") || slices.Contains(rule.Resources, "*") || slices.Contains(rule.APIGroups, "*") || len(rule.NonResourceURLs) > 0 {
				t.Errorf("%s %s: rule %+v: wildcards or non-resource URLs", obj.GetKind(), obj.GetName(), rule)
			}
			for _, resource := range rule.Resources {
				if strings.HasSuffix(resource, "/status") {
					continue
				}
				for _, verb := range rule.Verbs {
					createOnly := (resource == "gatewayclasses" || resource == "events") && verb == "create"
					keepsGatewayServices := obj.GetName() == "hostgate-gateway-services" && slices.Contains(gatewayServices, resource)
					if !slices.Contains(readOnly, verb) && !slices.Contains(writable, resource) && !createOnly && !keepsGatewayServices {
						t.Errorf("%s %s: %s on %s: only %v may be written, other than status", obj.GetKind(), obj.GetName(), verb, resource, writable)
					}
				}
			}
		}
	}
	if roles != 3 {
		t.Errorf("%d ClusterRoles and Roles, want 3", roles)
	}
	if !readsTrustBundles {
		t.Errorf("ClusterRole hostgate: no rule lets it get, list and watch clustertrustbundles.certificates.k8s.io")
	}
}

// TestClasses checks that the IngressClass names the controller the code
// serves, and that the manifest holds no GatewayClass: one apply could not
// create it together with its CRD, so hostgate creates it (--gateway-class).
func TestClasses(t *testing.T) {
	found := 0
	for _, obj := range readManifest(t, "hostgate.yaml") {
		switch obj.GetKind() {
		case "IngressClass":
			found++
			var class networkingv1.IngressClass
			fromUnstructured(t, obj, &class)
			if class.Name != "hostgate" || class.Spec.Controller != watch.IngressController {
				t.Errorf("IngressClass %s with controller %q, want hostgate with %q", class.Name, class.Spec.Controller, watch.IngressController)
			}
		case "GatewayClass":
			t.Errorf("GatewayClass %s in the manifest: a first apply on a cluster without the CRDs would fail", obj.GetName())
		}
	}
	if found != 1 {
		t.Errorf("found %d IngressClasses, want 1", found)
	}
}

// readManifest decodes every object of a multi-document YAML file.
func readManifest(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decodeObjects(t, path, data)
}

// decodeObjects decodes the YAML documents of data, read from source.
func decodeObjects(t *testing.T, source string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objects []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		err := decoder.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objects
		}
		if err != nil {
			t.Fatalf("decode %s: %v", source, err)
		}
		if len(obj.Object) > 0 { // a document of comments only
			objects = append(objects, obj)
		}
	}
}

func daemonSet(t *testing.T, objects []*unstructured.Unstructured) *appsv1.DaemonSet {
	t.Helper()
	for _, obj := range objects {
		if obj.GetKind() == "DaemonSet" {
			var ds appsv1.DaemonSet
			fromUnstructured(t, obj, &ds)
			return &ds
		}
	}
	t.Fatal("no DaemonSet")
	return nil
}

// hostNetworkDaemonSet applies hostnetwork-patch.yaml to the manifest's
// DaemonSet the way kubectl patch does (strategic merge).
func hostNetworkDaemonSet(t *testing.T, objects []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	i := slices.IndexFunc(objects, func(obj *unstructured.Unstructured) bool { return obj.GetKind() == "DaemonSet" })
	if i < 0 {
		t.Fatal("no DaemonSet")
	}
	original, err := objects[i].MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	patchYAML, err := os.ReadFile("hostnetwork-patch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	patch, err := yaml.YAMLToJSONStrict(patchYAML)
	if err != nil {
		t.Fatalf("hostnetwork-patch.yaml: %v", err)
	}
	patched, err := strategicpatch.StrategicMergePatch(original, patch, appsv1.DaemonSet{})
	if err != nil {
		t.Fatalf("apply hostnetwork-patch.yaml: %v", err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(patched); err != nil {
		t.Fatal(err)
	}
	return obj
}

// fromUnstructured converts strictly: a misspelled field is an error here
// rather than something the API server silently drops.
func fromUnstructured(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}

// flagValues reads --name=value arguments; the manifest writes no other
// form.
func flagValues(t *testing.T, args []string) map[string]string {
	t.Helper()
	values := make(map[string]string)
	for _, arg := range args {
		name, value, ok := strings.Cut(arg, "=")
		if !ok || !strings.HasPrefix(name, "--") {
			t.Fatalf("argument %q: want --name=value", arg)
		}
		values[name] = value
	}
	return values
}

func namedPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func duration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return d
}
