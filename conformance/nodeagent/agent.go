// Package nodeagent stands in for a kubelet and a container runtime in the
// conformance run, on machines that have neither: it registers one Node,
// binds every unscheduled Pod to it (there is no scheduler either), gives
// each Pod a network namespace and address of its own, runs the Gateway API
// echo server for containers of the echo-basic image inside it with the
// Pod's environment, and reports the Pod Running and Ready with its IP, so
// that kube-controller-manager fills EndpointSlices as in a real cluster.
// It also serves the kubelet's /containerLogs for `kubectl logs`.
//
// Only what the suite's manifests use is emulated: env values and field
// references, Secret, ConfigMap and emptyDir volumes (their files are
// written to a per-Pod directory and env values naming a mount path are
// rewritten to it, instead of a mount namespace per Pod). Containers of any
// other image (coredns in suites before v1.7.0) run nothing and are
// reported ready; the UDP tests of v1.7.0 talk to echo-basic in its UDP
// mode instead.
//
// The agent touches nothing outside its directory, the bridge and the
// namespaces named with its prefix, and the processes it started.
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/hostgate/hostgate/internal/proc"
)

// Config says which cluster the agent serves and what it may create.
type Config struct {
	Client   kubernetes.Interface
	NodeName string
	// EchoServer is the path of the echo-basic binary.
	EchoServer string
	// Servers are more binaries run for containers, by image name
	// (without registry, tag or digest): the ingress-controller-conformance
	// suite's echoserver.
	Servers map[string]string
	// Dir holds the Pods' volumes and logs.
	Dir string
	// NetPrefix starts the names of the bridge, veths and network
	// namespaces (at most 8 characters: link names are limited to 15).
	NetPrefix string
	Log       *slog.Logger
}

// The node's address on the pod bridge; Pods get the others of the /24.
// It is also where the kubelet endpoint listens, so the API server reaches
// it without anything listening beyond the host.
var nodeAddr = netip.MustParsePrefix("10.244.0.1/24")

const (
	kubeletPort = 10250
	workers     = 4
	// readyTimeout is how long a started server has to open its sockets.
	readyTimeout = 20 * time.Second
)

// Agent is a running node agent.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	net      *network
	informer cache.SharedIndexInformer
	queue    workqueue.TypedRateLimitingInterface[string]
	kubelet  *http.Server
	cancel   context.CancelFunc
	done     sync.WaitGroup
	stopOnce sync.Once
	stopErr  error

	mu   sync.Mutex
	pods map[string]*pod // by namespace/name
	used map[int]bool    // address numbers in use
}

// pod is what runs for one Pod.
type pod struct {
	uid     string
	index   int
	addr    netip.Addr
	dir     string
	logs    map[string]string // container name → log file
	servers []*server
}

type server struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start creates the pod network and the Node, serves the kubelet endpoint,
// and handles Pods until Stop.
func Start(cfg Config) (_ *Agent, err error) {
	if len(cfg.NetPrefix) > 8 {
		return nil, fmt.Errorf("node agent: network prefix %q is longer than 8 characters", cfg.NetPrefix)
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Agent{
		cfg:    cfg,
		log:    cfg.Log.With("component", "nodeagent"),
		net:    newNetwork(cfg.NetPrefix, nodeAddr),
		queue:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		cancel: cancel,
		pods:   map[string]*pod{},
		used:   map[int]bool{},
	}
	if err := a.net.up(); err != nil {
		cancel()
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, a.Stop())
		}
	}()
	if err := a.registerNode(ctx); err != nil {
		return nil, err
	}
	if a.kubelet, err = a.serveKubelet(); err != nil {
		return nil, err
	}

	factory := informers.NewSharedInformerFactory(cfg.Client, 0)
	a.informer = factory.Core().V1().Pods().Informer()
	if _, err := a.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    a.enqueue,
		UpdateFunc: func(_, obj any) { a.enqueue(obj) },
		DeleteFunc: a.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("node agent: watch pods: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), a.informer.HasSynced) {
		return nil, errors.New("node agent: pod cache never synced")
	}
	for range workers {
		a.done.Go(func() {
			for a.processNext(ctx) {
			}
		})
	}
	return a, nil
}

// Stop kills every server the agent started, deletes the pods' namespaces
// and the bridge, and stops the kubelet endpoint. The Pods stay in the API
// as they are: the cluster goes away with the run.
func (a *Agent) Stop() error {
	a.stopOnce.Do(func() {
		a.cancel()
		a.queue.ShutDown()
		a.done.Wait()
		var errs []error
		if a.kubelet != nil {
			errs = append(errs, a.kubelet.Close())
		}
		a.mu.Lock()
		keys := make([]string, 0, len(a.pods))
		for key := range a.pods {
			keys = append(keys, key)
		}
		a.mu.Unlock()
		for _, key := range keys {
			errs = append(errs, a.stopPod(key))
		}
		errs = append(errs, a.net.down())
		a.stopErr = errors.Join(errs...)
	})
	return a.stopErr
}

func (a *Agent) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		a.log.Error("pod without a key", "error", err)
		return
	}
	a.queue.Add(key)
}

func (a *Agent) processNext(ctx context.Context) bool {
	key, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(key)
	if err := a.sync(ctx, key); err != nil {
		if ctx.Err() != nil {
			return false
		}
		// Early retries are normal (a Secret the suite creates after the
		// Deployment that mounts it); only persistent failures are news.
		level := slog.LevelInfo
		if a.queue.NumRequeues(key) >= 5 {
			level = slog.LevelWarn
		}
		a.log.Log(ctx, level, "sync pod, retrying", "pod", key, "error", err)
		a.queue.AddRateLimited(key)
		return true
	}
	a.queue.Forget(key)
	return true
}

// sync brings what runs for one Pod in line with the Pod, as a kubelet
// would: bind it when unscheduled, start it when new, stop and remove it
// when it is being deleted.
func (a *Agent) sync(ctx context.Context, key string) error {
	obj, exists, err := a.informer.GetIndexer().GetByKey(key)
	if err != nil {
		return fmt.Errorf("get pod %s from cache: %w", key, err)
	}
	if !exists {
		return a.stopPod(key)
	}
	p := obj.(*corev1.Pod)
	switch {
	case p.DeletionTimestamp != nil:
		if p.Spec.NodeName != "" && p.Spec.NodeName != a.cfg.NodeName {
			return nil
		}
		if err := a.stopPod(key); err != nil {
			return err
		}
		// What a kubelet does once the containers are gone: the final
		// delete, which frees the name for a replacement.
		err := a.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64),
			Preconditions:      metav1.NewUIDPreconditions(string(p.UID)),
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete pod %s: %w", key, err)
		}
		return nil
	case p.Spec.NodeName == "":
		err := a.cfg.Client.CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: a.cfg.NodeName},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("bind pod %s: %w", key, err)
		}
		return nil
	case p.Spec.NodeName != a.cfg.NodeName, p.Status.Phase == corev1.PodSucceeded, p.Status.Phase == corev1.PodFailed:
		return nil
	}

	a.mu.Lock()
	running := a.pods[key]
	a.mu.Unlock()
	if running != nil && running.uid == string(p.UID) {
		return nil
	}
	if running != nil { // a new Pod of the same name
		if err := a.stopPod(key); err != nil {
			return err
		}
	}
	return a.startPod(ctx, p)
}

// startPod runs a Pod and reports it Ready once its servers listen.
func (a *Agent) startPod(ctx context.Context, p *corev1.Pod) (err error) {
	key := p.Namespace + "/" + p.Name
	index, addr, err := a.allocate()
	if err != nil {
		return fmt.Errorf("start pod %s: %w", key, err)
	}
	run := &pod{
		uid:   string(p.UID),
		index: index,
		addr:  addr,
		dir:   filepath.Join(a.cfg.Dir, fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID)),
		logs:  map[string]string{},
	}
	a.mu.Lock()
	a.pods[key] = run
	a.mu.Unlock()
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("start pod %s: %w", key, err), a.stopPod(key))
		}
	}()

	if err := os.MkdirAll(run.dir, 0o700); err != nil {
		return err
	}
	mounts, err := a.writeVolumes(ctx, p, run.dir)
	if err != nil {
		return err
	}
	if err := a.net.addPod(index, addr); err != nil {
		return err
	}
	for _, c := range p.Spec.Containers {
		logPath := filepath.Join(run.dir, c.Name+".log")
		run.logs[c.Name] = logPath
		if a.binary(c.Image) == "" {
			a.log.Info("container image not emulated, reported ready without a process", "pod", key, "container", c.Name, "image", c.Image)
			continue
		}
		s, err := a.startServer(p, c, run, mounts, logPath)
		if err != nil {
			return err
		}
		a.mu.Lock()
		run.servers = append(run.servers, s)
		a.mu.Unlock()
	}
	for _, s := range run.servers {
		if err := waitListening(ctx, s); err != nil {
			return err
		}
	}
	if err := a.reportRunning(ctx, p, addr); err != nil {
		return err
	}
	a.log.Info("pod running", "pod", key, "ip", addr)
	return nil
}

// isEchoServer says whether an image is the suite's echo server, which
// the agent runs from the binary built from the suite's own module.
func isEchoServer(image string) bool {
	return imageName(image) == "echo-basic"
}

// imageName is an image's name without registry, tag or digest.
func imageName(image string) string {
	image, _, _ = strings.Cut(image, "@")
	name, _, _ := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
	return name
}

// binary is the program run for containers of image, "" for none.
func (a *Agent) binary(image string) string {
	if isEchoServer(image) {
		return a.cfg.EchoServer
	}
	return a.cfg.Servers[imageName(image)]
}

func (a *Agent) startServer(p *corev1.Pod, c corev1.Container, run *pod, mounts map[string]string, logPath string) (*server, error) {
	env, err := containerEnv(p, c, run.addr, mounts)
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	args := append([]string{"netns", "exec", a.net.namespace(run.index), a.binary(c.Image)}, c.Args...)
	cmd := exec.Command("ip", args...) // ip execs the server: the PID stays the server's
	cmd.Env = env
	cmd.Dir = run.dir
	// One writer for both streams, so that lines from each stay whole.
	stamped := &stampedLog{w: logFile}
	cmd.Stdout, cmd.Stderr = stamped, stamped
	if err := proc.Start(cmd); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	s := &server{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is in cmd.ProcessState
		logFile.Close()
		close(s.exited)
	}()
	return s, nil
}

// containerEnv is the container's environment: literal values and the
// field references the suite uses. Values that name a file under a volume's
// mount path name the file in the Pod's directory instead.
func containerEnv(p *corev1.Pod, c corev1.Container, addr netip.Addr, mounts map[string]string) ([]string, error) {
	var env []string
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil {
				return nil, fmt.Errorf("container %s: env %s: only fieldRef is supported in valueFrom", c.Name, e.Name)
			}
			var err error
			if value, err = fieldValue(p, e.ValueFrom.FieldRef.FieldPath, addr); err != nil {
				return nil, fmt.Errorf("container %s: env %s: %w", c.Name, e.Name, err)
			}
		}
		for _, m := range c.VolumeMounts {
			if dir, ok := mounts[m.Name]; ok && (value == m.MountPath || strings.HasPrefix(value, strings.TrimSuffix(m.MountPath, "/")+"/")) {
				value = dir + strings.TrimPrefix(value, strings.TrimSuffix(m.MountPath, "/"))
				break
			}
		}
		env = append(env, e.Name+"="+value)
	}
	return env, nil
}

func fieldValue(p *corev1.Pod, path string, addr netip.Addr) (string, error) {
	switch path {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.nodeName":
		return p.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.podIP":
		return addr.String(), nil
	case "status.hostIP":
		return nodeAddr.Addr().String(), nil
	}
	return "", fmt.Errorf("field %s is not supported", path)
}

// writeVolumes writes the Pod's Secret and ConfigMap volumes as files and
// creates its emptyDirs; it returns each volume's directory by name.
func (a *Agent) writeVolumes(ctx context.Context, p *corev1.Pod, dir string) (map[string]string, error) {
	mounts := map[string]string{}
	for _, v := range p.Spec.Volumes {
		var data map[string][]byte
		var items []corev1.KeyToPath
		switch {
		case v.Secret != nil:
			s, err := a.cfg.Client.CoreV1().Secrets(p.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			data, items = s.Data, v.Secret.Items
		case v.ConfigMap != nil:
			cm, err := a.cfg.Client.CoreV1().ConfigMaps(p.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			data, items = map[string][]byte{}, v.ConfigMap.Items
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
			for k, b := range cm.BinaryData {
				data[k] = b
			}
		case v.EmptyDir != nil:
		default:
			continue // nothing the emulated images read
		}
		volDir := filepath.Join(dir, "volumes", v.Name)
		if err := os.MkdirAll(volDir, 0o700); err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		files := map[string][]byte{}
		if len(items) == 0 {
			files = data
		}
		for _, it := range items {
			files[it.Path] = data[it.Key]
		}
		for name, content := range files {
			path := filepath.Join(volDir, filepath.Clean("/"+name))
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if err := os.WriteFile(path, content, 0o600); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
		}
		mounts[v.Name] = volDir
	}
	return mounts, nil
}

// waitListening waits until the server has a listening TCP socket or a
// UDP socket. Its network namespace is its own, so any socket in it is
// the server's; /proc/PID/net shows the namespace of that process.
func waitListening(ctx context.Context, s *server) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	pid := s.cmd.Process.Pid
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if listening(pid) {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("server (pid %d) exited before listening: %s", pid, s.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("server (pid %d) not listening after %v: %w", pid, readyTimeout, ctx.Err())
		case <-tick.C:
		}
	}
}

func listening(pid int) bool {
	for _, table := range []string{"tcp", "tcp6", "udp", "udp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		for _, line := range lines[1:] { // the first line is the header
			fields := strings.Fields(line)
			if len(fields) > 3 && (strings.HasPrefix(table, "udp") || fields[3] == "0A") { // 0A: LISTEN
				return true
			}
		}
	}
	return false
}

// reportRunning writes the status a kubelet writes for a started Pod whose
// containers are ready.
func (a *Agent) reportRunning(ctx context.Context, p *corev1.Pod, addr netip.Addr) error {
	now := metav1.Now()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := a.cfg.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("report pod status: %w", err)
		}
		if current.UID != p.UID {
			return fmt.Errorf("report pod status: pod %s/%s was replaced", p.Namespace, p.Name)
		}
		st := &current.Status
		st.Phase = corev1.PodRunning
		st.HostIP = nodeAddr.Addr().String()
		st.HostIPs = []corev1.HostIP{{IP: st.HostIP}}
		st.PodIP = addr.String()
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
		st.StartTime = &now
		st.Conditions = nil
		for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodScheduled, corev1.ContainersReady, corev1.PodReady} {
			st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		st.ContainerStatuses = nil
		for _, c := range current.Spec.Containers {
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
				Name:    c.Name,
				Image:   c.Image,
				ImageID: c.Image,
				Ready:   true,
				Started: new(true),
				State:   corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
		if _, err := a.cfg.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, current, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("report pod status: %w", err)
		}
		return nil
	})
}

// stopPod kills the Pod's servers, deletes its network namespace and files
// and frees its address. A Pod that is not running is no error.
func (a *Agent) stopPod(key string) error {
	a.mu.Lock()
	run := a.pods[key]
	delete(a.pods, key)
	a.mu.Unlock()
	if run == nil {
		return nil
	}
	var errs []error
	for _, s := range run.servers {
		if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("stop pod %s: kill pid %d: %w", key, s.cmd.Process.Pid, err))
			continue
		}
		<-s.exited
	}
	if err := a.net.removePod(run.index); err != nil {
		errs = append(errs, fmt.Errorf("stop pod %s: %w", key, err))
	}
	if err := os.RemoveAll(run.dir); err != nil {
		errs = append(errs, fmt.Errorf("stop pod %s: %w", key, err))
	}
	a.mu.Lock()
	delete(a.used, run.index)
	a.mu.Unlock()
	return errors.Join(errs...)
}

// allocate picks a free address of the node's /24.
func (a *Agent) allocate() (int, netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	base := nodeAddr.Masked().Addr().As4()
	for i := 2; i < 255; i++ {
		if !a.used[i] {
			a.used[i] = true
			base[3] = byte(i)
			return i, netip.AddrFrom4(base), nil
		}
	}
	return 0, netip.Addr{}, errors.New("no free pod address")
}

// registerNode creates the Node that Pods are bound to, Ready, with the
// kubelet endpoint the API server asks for logs. The EndpointSlice
// controller leaves out Pods whose Node does not exist.
func (a *Agent) registerNode(ctx context.Context) error {
	now := metav1.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   a.cfg.NodeName,
			Labels: map[string]string{"kubernetes.io/hostname": a.cfg.NodeName, "kubernetes.io/os": "linux"},
		},
	}
	if _, err := a.cfg.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("register node %s: %w", a.cfg.NodeName, err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("250"),
	}
	// Retried on conflict: kube-controller-manager annotates a new Node
	// (its TTL controller) right after it appears.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := a.cfg.Client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		current.Status = corev1.NodeStatus{
			Capacity:        capacity,
			Allocatable:     capacity,
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeAddr.Addr().String()}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: kubeletPort}},
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: now, LastTransitionTime: now,
			}},
		}
		_, err = a.cfg.Client.CoreV1().Nodes().UpdateStatus(ctx, current, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("register node %s: status: %w", a.cfg.NodeName, err)
	}
	return nil
}
