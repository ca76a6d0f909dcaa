package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// kubeVersion is the version hack/kube-env.sh builds; it names the default
// cache directory.
const kubeVersion = "v1.36.3"

// errNoBinaries marks a control plane that cannot start because its
// binaries are not built: the only failure a developer's run may skip.
var errNoBinaries = errors.New("control plane binaries not found")

// Env is a running control plane.
//
// Its methods are not safe for concurrent use; a test that stops the API
// server should have its own Env (Start), not the shared one.
type Env struct {
	// Config is an admin (system:masters) client configuration that
	// verifies the API server's certificate. Copy it (rest.CopyConfig)
	// before changing it.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file with the same admin
	// credentials, for processes started by tests.
	Kubeconfig string

	dir   string
	bin   binaries
	opts  options
	pki   *pki
	ports ports

	etcd, apiserver, controllerManager *process
}

// ports are the loopback ports the Env listens on; the API server keeps its
// port across restarts so that clients and watches can reconnect.
type ports struct {
	etcdClient, etcdPeer, apiserver int
}

// Option changes what Start, Shared and Main start.
type Option func(*options)

type options struct {
	noGatewayAPI      bool
	controllerManager bool
	// apiserverFlags are added to kube-apiserver's own.
	apiserverFlags []string
}

// WithoutGatewayAPI starts the cluster without the Gateway API CRDs, for
// tests of a controller that must cope with CRDs installed later
// (Env.InstallGatewayAPI).
func WithoutGatewayAPI() Option { return func(o *options) { o.noGatewayAPI = true } }

// WithControllerManager also runs kube-controller-manager with the
// controllers that work without kubelets or a cloud: Deployments become
// ReplicaSets and Pods, Services get EndpointSlices, namespaces get their
// default ServiceAccount.
func WithControllerManager() Option { return func(o *options) { o.controllerManager = true } }

// WithClusterTrustBundles serves certificates.k8s.io/v1beta1
// ClusterTrustBundles, which kube-apiserver before 1.37 serves only when
// told to (v1 comes with 1.37).
func WithClusterTrustBundles() Option {
	return func(o *options) {
		o.apiserverFlags = append(o.apiserverFlags,
			"--runtime-config=certificates.k8s.io/v1beta1/clustertrustbundles=true",
			"--feature-gates=ClusterTrustBundle=true")
	}
}

// Start starts a control plane for one test and stops it when the test ends.
// The test is skipped when the binaries are missing, unless CI is set.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	env, err := start(t.Logf, opts)
	if err != nil {
		failOrSkip(t, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			env.logTails(t.Logf)
		}
		if err := env.stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return env
}

// shared is the control plane of Main and Shared: started by the first
// test that asks for it, stopped when m.Run returns.
var shared struct {
	sync.Mutex
	inMain  bool
	opts    []Option
	started bool
	env     *Env
	err     error
}

// Main runs the package's tests with a control plane shared by every test
// that calls Shared; call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }
//
// The control plane starts on first use, so tests that do not need it cost
// nothing, and stops (with its temporary files removed) after the last test.
func Main(m *testing.M, opts ...Option) int {
	shared.Lock()
	shared.inMain, shared.opts = true, opts
	shared.Unlock()

	code := m.Run()

	shared.Lock()
	defer shared.Unlock()
	if shared.env == nil {
		return code
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	if code != 0 {
		shared.env.logTails(logf)
	}
	if err := shared.env.stop(); err != nil {
		logf("kubetest: stop shared control plane: %v", err)
		return 1
	}
	return code
}

// Shared returns the control plane shared by the package's tests (see
// Main), starting it on first use. Like Start, it skips the test when the
// binaries are missing, unless CI is set; a failed start fails every test
// that asks for it.
func Shared(t testing.TB) *Env {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if !shared.inMain {
		t.Fatal("kubetest.Shared needs kubetest.Main in the package's TestMain")
	}
	if !shared.started {
		shared.started = true
		shared.env, shared.err = start(t.Logf, shared.opts)
	}
	if shared.err != nil {
		failOrSkip(t, shared.err)
	}
	return shared.env
}

func failOrSkip(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, errNoBinaries) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	t.Fatal(err)
}

// binaries are the executables of the control plane.
type binaries struct {
	etcd, apiserver, controllerManager string
}

// findBinaries looks in $HOSTGATE_KUBE_BIN, else in hack/kube-env.sh's
// default cache, so that a developer who ran the script once needs no
// variable; etcd may also come from PATH.
func findBinaries(o options) (binaries, error) {
	dir := os.Getenv("HOSTGATE_KUBE_BIN")
	if dir == "" {
		dir = os.Getenv("HOSTGATE_KUBE_CACHE")
	}
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return binaries{}, fmt.Errorf("%w: HOSTGATE_KUBE_BIN is not set and %w", errNoBinaries, err)
		}
		dir = filepath.Join(home, ".cache", "hostgate", "kube", kubeVersion)
	}
	missing := func(name string) error {
		return fmt.Errorf("%w: no %s in %s: run hack/kube-env.sh and set HOSTGATE_KUBE_BIN to the directory it prints", errNoBinaries, name, dir)
	}
	executable := func(name string) (string, error) {
		path := filepath.Join(dir, name)
		if info, err := os.Stat(path); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return "", missing(name)
		}
		return path, nil
	}

	var b binaries
	var err error
	if b.apiserver, err = executable("kube-apiserver"); err != nil {
		return b, err
	}
	if o.controllerManager {
		if b.controllerManager, err = executable("kube-controller-manager"); err != nil {
			return b, err
		}
	}
	if b.etcd, err = executable("etcd"); err != nil {
		if b.etcd, err = exec.LookPath("etcd"); err != nil {
			return b, missing("etcd")
		}
	}
	return b, nil
}

// start brings up etcd, kube-apiserver and what the options ask for. On
// error everything already started is stopped again.
func start(logf func(string, ...any), opts []Option) (_ *Env, err error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	bin, err := findBinaries(o)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		return nil, fmt.Errorf("create control plane directory: %w", err)
	}
	env := &Env{dir: dir, bin: bin, opts: o}
	defer func() {
		if err != nil {
			env.logTails(logf)
			if stopErr := env.stop(); stopErr != nil {
				logf("kubetest: stop after failed start: %v", stopErr)
			}
		}
	}()

	if env.pki, err = newPKI(dir); err != nil {
		return nil, err
	}
	freePorts, err := freeLoopbackPorts(3)
	if err != nil {
		return nil, err
	}
	env.ports = ports{etcdClient: freePorts[0], etcdPeer: freePorts[1], apiserver: freePorts[2]}
	env.Config = env.pki.restConfig(env.ports.apiserver)
	if env.Kubeconfig, err = env.pki.writeKubeconfig(dir, env.Config); err != nil {
		return nil, err
	}

	began := time.Now()
	if err = env.startEtcd(); err != nil {
		return nil, err
	}
	if err = env.StartAPIServer(); err != nil {
		return nil, err
	}
	logf("kubetest: etcd and kube-apiserver ready on 127.0.0.1:%d in %v", env.ports.apiserver, time.Since(began).Round(time.Millisecond))

	if !o.noGatewayAPI {
		installed := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err = env.InstallGatewayAPI(ctx); err != nil {
			return nil, err
		}
		logf("kubetest: Gateway API CRDs established in %v", time.Since(installed).Round(time.Millisecond))
	}
	if o.controllerManager {
		if err = env.startControllerManager(); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// stop kills every process by its PID and removes the temporary directory.
// Killing is enough: nothing of a test cluster is worth a graceful
// shutdown.
func (e *Env) stop() error {
	var errs []error
	for _, p := range []*process{e.controllerManager, e.apiserver, e.etcd} {
		if p != nil {
			errs = append(errs, p.kill())
		}
	}
	e.controllerManager, e.apiserver, e.etcd = nil, nil, nil
	if err := os.RemoveAll(e.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove control plane directory: %w", err))
	}
	return errors.Join(errs...)
}

// logTails prints the end of every process log, which is where the reason
// of a failed start or of a failing test usually is.
func (e *Env) logTails(logf func(string, ...any)) {
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if tail := logTail(filepath.Join(e.dir, name+".log"), 40); tail != "" {
			logf("kubetest: last lines of %s's log:\n%s", name, tail)
		}
	}
}
