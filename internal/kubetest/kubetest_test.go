package kubetest

import (
	"context"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

var httpRoutes = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}

const routeYAML = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web
  namespace: kubetest
spec:
  parentRefs:
  - name: gw
  hostnames: ["www.example.com"]
  rules:
  - matches:
    - path: {type: PathPrefix, value: /app}
    backendRefs:
    - name: web
      port: 8080
`

func clients(t *testing.T, env *Env) (*kubernetes.Clientset, *dynamic.DynamicClient) {
	t.Helper()
	typed, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return typed, dyn
}

func createRoute(ctx context.Context, t *testing.T, typed *kubernetes.Clientset, dyn *dynamic.DynamicClient) *unstructured.Unstructured {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubetest"}}
	if _, err := typed.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	route := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(routeYAML), &route.Object); err != nil {
		t.Fatal(err)
	}
	created, err := dyn.Resource(httpRoutes).Namespace("kubetest").Create(ctx, route, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create HTTPRoute: %v", err)
	}
	return created
}

// TestRestartAPIServer is the harness's reason to exist: objects written
// before an API server outage are served again after it, from the same etcd,
// on the same address, to the same client configuration.
func TestRestartAPIServer(t *testing.T) {
	t.Parallel()
	env := Start(t)
	ctx := t.Context()
	typed, dyn := clients(t, env)
	created := createRoute(ctx, t, typed, dyn)

	began := time.Now()
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Since(began)
	if _, err := typed.CoreV1().Namespaces().Get(ctx, "kubetest", metav1.GetOptions{}); err == nil {
		t.Fatal("API server answered after StopAPIServer")
	}
	began = time.Now()
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver stopped in %v, ready again in %v", stopped.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))

	got, err := dyn.Resource(httpRoutes).Namespace("kubetest").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get HTTPRoute after restart: %v", err)
	}
	if got.GetUID() != created.GetUID() || got.GetResourceVersion() != created.GetResourceVersion() {
		t.Errorf("HTTPRoute after restart: uid %s resourceVersion %s, want %s %s",
			got.GetUID(), got.GetResourceVersion(), created.GetUID(), created.GetResourceVersion())
	}
	hostnames, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "hostnames")
	if len(hostnames) != 1 || hostnames[0] != "www.example.com" {
		t.Errorf("HTTPRoute hostnames after restart = %q, want [www.example.com]", hostnames)
	}
}

// TestGatewayAPIInstalledLater covers the cluster that gets the CRDs after
// the controller started.
func TestGatewayAPIInstalledLater(t *testing.T) {
	t.Parallel()
	env := Start(t, WithoutGatewayAPI())
	ctx := t.Context()
	_, dyn := clients(t, env)

	_, err := dyn.Resource(httpRoutes).Namespace("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("list HTTPRoutes before the CRDs are installed: err = %v, want NotFound", err)
	}
	if err := env.InstallGatewayAPI(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(httpRoutes).Namespace("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list HTTPRoutes after the CRDs are installed: %v", err)
	}
}

// TestControllerManager checks that kube-controller-manager turns a
// Deployment into Pods, as the conformance suite's setup needs.
func TestControllerManager(t *testing.T) {
	t.Parallel()
	env := Start(t, WithoutGatewayAPI(), WithControllerManager())
	ctx := t.Context()
	typed, _ := clients(t, env)

	labels := map[string]string{"app": "echo"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "echo", Image: "echo"}}},
			},
		},
	}
	if _, err := typed.AppsV1().Deployments("default").Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Deployment: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := typed.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		return err == nil && len(pods.Items) == 1, err
	})
	if err != nil {
		t.Fatalf("wait for the Deployment's Pod: %v", err)
	}
}

// TestShared checks that every test of a package gets the same control
// plane from Shared, with the Gateway API installed.
func TestShared(t *testing.T) {
	env := Shared(t)
	if again := Shared(t); again != env {
		t.Fatal("Shared returned a second control plane")
	}
	_, dyn := clients(t, env)
	if _, err := dyn.Resource(httpRoutes).Namespace("default").List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatalf("list HTTPRoutes on the shared control plane: %v", err)
	}
}
