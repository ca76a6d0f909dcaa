//go:build conformance

// Package conformance runs the Gateway API conformance suite against
// hostgate on a cluster made of local processes: etcd, kube-apiserver and
// kube-controller-manager (internal/kubetest), the node agent in place of
// kubelets and containers, and a hostgate process watching the cluster.
// hack/conformance.sh builds the binaries and runs it; the build tag keeps
// `go test ./...` from starting it by accident.
package conformance

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/conformance"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/hostgate/hostgate/conformance/nodeagent"
	"github.com/hostgate/hostgate/internal/kubetest"
	"github.com/hostgate/hostgate/internal/proc"
)

var (
	hostgateBin = flag.String("hostgate", "", "hostgate binary to test (required)")
	echoBin     = flag.String("echo-server", "", "echo-basic binary the node agent runs for the suite's backends (required)")
	netPrefix   = flag.String("net-prefix", "hgc", "prefix of the network namespaces and links of this run (at most 8 characters)")
	logDir      = flag.String("log-dir", "", "where hostgate's log goes (default: the test's temporary directory)")
	reportPath  = flag.String("report", "", "where the ConformanceReport YAML goes (default: none)")
	hgVersion   = flag.String("hostgate-version", "dev", "version written in the report")
)

// gatewayClass is the class the suite tests, created here for hostgate's
// default controller name.
const (
	gatewayClass      = "hostgate"
	gatewayController = "hostgate.dev/gateway-controller"
)

// Addresses hostgate gives to Gateways without spec.addresses: one per
// Gateway, because the suite's Gateways share port 80 and one test
// (HTTPRouteMultipleGateways) tells them apart by address. All on
// loopback: nothing of the run is reachable from elsewhere.
const poolFirst, poolLast = "127.0.0.10", "127.0.0.250"

// usableAddress is a loopback address outside the pool, for
// GatewayStaticAddresses: hostgate can bind it. unusableAddress is one it
// cannot: not an address of this host.
const usableAddress, unusableAddress = "127.0.0.5", "192.0.2.1"

// stops are what has to be undone when the run is interrupted, where the
// testing package's cleanups never run; undone newest first, like
// t.Cleanup.
var stops struct {
	sync.Mutex
	list []func()
}

// cleanup registers stop with t.Cleanup and for an interrupt; it runs once.
func cleanup(t *testing.T, stop func()) {
	stop = sync.OnceFunc(stop)
	stops.Lock()
	stops.list = append(stops.list, stop)
	stops.Unlock()
	t.Cleanup(stop)
}

func TestMain(m *testing.M) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "conformance: %v: stopping everything this run started\n", sig)
		stops.Lock() // held until the exit, so nothing is registered meanwhile
		for i := len(stops.list) - 1; i >= 0; i-- {
			stops.list[i]()
		}
		os.Exit(130)
	}()
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) {
	if *hostgateBin == "" || *echoBin == "" {
		t.Fatal("-hostgate and -echo-server are required: run hack/conformance.sh")
	}
	env, _ := startCluster(t, nodeagent.Config{EchoServer: *echoBin})

	startHostgate(t, env.Kubeconfig,
		"--http-addr=",
		"--https-addr=",
		"--address-pool="+strings.Join(addressRange(poolFirst, poolLast), ","),
		// GatewayInfrastructure is claimed only with it.
		"--gateway-services",
	)
	createGatewayClass(t, env)

	// The suite reads its options from its own flags (-run-test,
	// -skip-tests, -supported-features, ... work as usual); these are
	// the defaults of this run where the command line says nothing.
	t.Setenv("KUBECONFIG", env.Kubeconfig)
	for name, value := range map[string]string{
		"gateway-class":          gatewayClass,
		"conformance-profiles":   "GATEWAY-HTTP,GATEWAY-GRPC,GATEWAY-TLS,GATEWAY-TCP,GATEWAY-UDP",
		"report-output":          *reportPath,
		"organization":           "hostgate",
		"project":                "hostgate",
		"url":                    "https://github.com/hostgate/hostgate",
		"version":                *hgVersion,
		"contact":                "https://github.com/hostgate/hostgate/issues",
		"usable-address":         usableAddress,
		"unusable-address":       unusableAddress,
		"cleanup-base-resources": "false", // the cluster goes away with the run
	} {
		setUnlessGiven(t, name, value)
	}
	conformance.RunConformance(t)
}

// startCluster starts the control plane and the node agent, which runs
// the servers of agent (its other fields are filled in here).
func startCluster(t *testing.T, agent nodeagent.Config) (*kubetest.Env, kubernetes.Interface) {
	env := kubetest.Start(t, kubetest.WithControllerManager())
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	agent.Client, agent.NodeName, agent.Dir, agent.NetPrefix = kube, "conformance-node", t.TempDir(), *netPrefix
	agent.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := nodeagent.Start(agent)
	if err != nil {
		t.Fatal(err)
	}
	cleanup(t, func() {
		if err := a.Stop(); err != nil {
			t.Errorf("stop node agent: %v", err)
		}
	})
	return env, kube
}

// setUnlessGiven sets a flag of the suite to value unless the command line
// set it.
func setUnlessGiven(t *testing.T, name, value string) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	if given || value == "" {
		return
	}
	if err := flag.Set(name, value); err != nil {
		t.Fatalf("set -%s: %v", name, err)
	}
}

// startHostgate runs hostgate on the cluster with args: for the Gateway
// API suite, serving Gateways only, each on its own loopback address from
// the pool and with its own Service.
func startHostgate(t *testing.T, kubeconfig string, args ...string) {
	dir := *logDir
	if dir == "" {
		dir = t.TempDir()
	}
	logPath := filepath.Join(dir, "hostgate.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	adminAddr, err := freeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(*hostgateBin, append([]string{
		"--kubeconfig=" + kubeconfig,
		"--admin-addr=" + adminAddr,
		"--shutdown-delay=0s",
		// The status writer's Lease: a namespace that exists in any cluster.
		"--lease-namespace=default",
		"--log-level=debug",
	}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := proc.Start(cmd); err != nil {
		logFile.Close()
		t.Fatalf("start hostgate: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status is in cmd.ProcessState
		logFile.Close()
		close(exited)
	}()
	t.Logf("hostgate (pid %d) logs to %s; admin on %s", cmd.Process.Pid, logPath, adminAddr)
	cleanup(t, func() {
		select {
		case <-exited:
			t.Errorf("hostgate exited during the run: %s (see %s)", cmd.ProcessState, logPath)
			return
		default:
		}
		// SIGTERM, as a rollout would: a clean stop is part of what is tested.
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("stop hostgate: %v", err)
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Errorf("hostgate still running 30s after SIGTERM; killing it")
			_ = cmd.Process.Kill()
			<-exited
		}
	})
}

// createGatewayClass creates the suite's GatewayClass and waits until
// hostgate accepts it and publishes its supported features, which the
// suite reads before it waits for anything.
func createGatewayClass(t *testing.T, env *kubetest.Env) {
	gw, err := gatewayclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	class := &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: gatewayClass},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: gatewayController},
	}
	if _, err := gw.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create GatewayClass: %v", err)
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		gc, err := gw.GatewayV1().GatewayClasses().Get(ctx, gatewayClass, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(gc.Status.Conditions, string(gatewayv1.GatewayClassConditionStatusAccepted)) &&
			len(gc.Status.SupportedFeatures) > 0, nil
	})
	if err != nil {
		t.Fatalf("GatewayClass %s not accepted with supported features by hostgate: %v", gatewayClass, err)
	}
}

// addressRange lists the IPv4 addresses from first to last.
func addressRange(first, last string) []string {
	var out []string
	end := netip.MustParseAddr(last)
	for a := netip.MustParseAddr(first); a.Compare(end) <= 0; a = a.Next() {
		out = append(out, a.String())
	}
	return out
}

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
