//go:build conformance

package conformance

// The Kubernetes Ingress conformance suite
// (kubernetes-sigs/ingress-controller-conformance) against hostgate, on
// the same cluster of processes as the Gateway API suite. That suite is
// not a module the module proxy serves, so hack/ingress-conformance.sh
// builds it from a checkout and passes its binaries here; CI does not run
// it.

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostgate/hostgate/conformance/nodeagent"
)

var (
	ingressSuite = flag.String("ingress-suite", "", "ingress-controller-conformance test binary (hack/ingress-conformance.sh builds it)")
	ingressEcho  = flag.String("ingress-echo", "", "that suite's echoserver binary, run for its echoserver image")
	ingressArgs  = flag.String("ingress-suite-args", "", "more arguments for the suite, e.g. -tags=@sig-network")
)

// ingressClass is the class the suite's Ingresses name, served by
// hostgate through an IngressClass of its controller.
const ingressClass = "conformance"

// nodeAddress is the node agent's Node address: hostgate serves Ingresses
// there and publishes it in their status, where the suite sends requests.
const nodeAddress = "10.244.0.1"

func TestIngressConformance(t *testing.T) {
	if *ingressSuite == "" || *ingressEcho == "" {
		t.Skip("-ingress-suite and -ingress-echo are required: run hack/ingress-conformance.sh")
	}
	env, kube := startCluster(t, nodeagent.Config{Servers: map[string]string{"echoserver": *ingressEcho}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	class := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: ingressClass},
		Spec:       networkingv1.IngressClassSpec{Controller: "hostgate.dev/ingress-controller"},
	}
	if _, err := kube.NetworkingV1().IngressClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create IngressClass: %v", err)
	}
	startHostgate(t, env.Kubeconfig,
		"--http-addr="+nodeAddress+":80",
		"--https-addr="+nodeAddress+":443",
		"--status-addresses="+nodeAddress,
	)

	dir := *logDir
	if dir == "" {
		dir = t.TempDir()
	}
	args := []string{"-test.v", "-ingress-class=" + ingressClass, "-no-colors", "-format=pretty",
		"-output-directory=" + dir, "-wait-time-for-ingress-status=2m", "-wait-time-for-ready=2m"}
	if *ingressArgs != "" {
		args = append(args, *ingressArgs)
	}
	suite := exec.Command(*ingressSuite, args...)
	// It reads its features relative to its directory.
	suite.Dir = filepath.Dir(*ingressSuite)
	suite.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig)
	suite.Stdout, suite.Stderr = os.Stdout, os.Stderr
	if err := suite.Run(); err != nil {
		t.Errorf("ingress-controller-conformance: %v", err)
	}
}
