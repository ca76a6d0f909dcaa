package kubetest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

// Time limits for the pieces to come up. Generous: on a busy 2-core CI
// machine a start that takes a second alone can take many times that.
const (
	etcdReadyTimeout      = time.Minute
	apiserverReadyTimeout = 2 * time.Minute
	kcmReadyTimeout       = 2 * time.Minute
	apiserverStopGrace    = 15 * time.Second
)

func (e *Env) startEtcd() error {
	client := fmt.Sprintf("http://127.0.0.1:%d", e.ports.etcdClient)
	peer := fmt.Sprintf("http://127.0.0.1:%d", e.ports.etcdPeer)
	p, err := startProcess("etcd", filepath.Join(e.dir, "etcd.log"), e.bin.etcd,
		"--name=kubetest",
		"--data-dir="+filepath.Join(e.dir, "etcd"),
		"--listen-client-urls="+client,
		"--advertise-client-urls="+client,
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=kubetest="+peer,
		"--logger=zap",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	e.etcd = p
	return p.waitReady(etcdReadyTimeout, httpReady(http.DefaultClient, client+"/health", ""))
}

// StartAPIServer starts kube-apiserver on the Env's port and etcd, after
// StopAPIServer or for the first time, and waits until /readyz is OK.
func (e *Env) StartAPIServer() error {
	if e.apiserver != nil {
		return errors.New("start kube-apiserver: already running")
	}
	args := []string{
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", e.ports.apiserver),
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", e.ports.etcdClient),
		"--cert-dir=" + e.dir,
		"--tls-cert-file=" + e.pki.servingCertFile,
		"--tls-private-key-file=" + e.pki.servingKeyFile,
		"--token-auth-file=" + e.pki.tokenFile,
		// RBAC as in a real cluster, so that tests can check what
		// hostgate's own ServiceAccount may do.
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + e.pki.saPubFile,
		"--service-account-signing-key-file=" + e.pki.saKeyFile,
		"--service-cluster-ip-range=10.96.0.0/12",
		// The kubernetes Service's endpoints would be 127.0.0.1, an address
		// EndpointSlices may not carry; nothing in the tests talks to the
		// API server through that Service.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
	}
	p, err := startProcess("kube-apiserver", filepath.Join(e.dir, "kube-apiserver.log"), e.bin.apiserver, append(args, e.opts.apiserverFlags...)...)
	if err != nil {
		return err
	}
	e.apiserver = p
	client := e.apiserverHTTPClient()
	defer client.CloseIdleConnections()
	return p.waitReady(apiserverReadyTimeout, httpReady(client, e.Config.Host+"/readyz", e.pki.adminToken))
}

// StopAPIServer stops kube-apiserver (SIGTERM, as a node shutdown or a
// rolling update does) and waits until it is gone; etcd and the data stay.
// Clients see their connections closed and requests refused until
// StartAPIServer.
func (e *Env) StopAPIServer() error {
	if e.apiserver == nil {
		return errors.New("stop kube-apiserver: not running")
	}
	err := e.apiserver.terminate(apiserverStopGrace)
	e.apiserver = nil
	return err
}

// controllers are the kube-controller-manager controllers that work in a
// cluster without kubelets, node IPAM or a cloud; the others only log
// errors or act on nodes that are not there.
var controllers = []string{
	"*",
	"-node-lifecycle-controller",
	"-taint-eviction-controller",
	"-node-ipam-controller",
	"-node-route-controller",
	"-service-lb-controller",
	"-cloud-node-lifecycle-controller",
	"-persistentvolume-attach-detach-controller",
	"-horizontal-pod-autoscaler-controller",
}

func (e *Env) startControllerManager() error {
	p, err := startProcess("kube-controller-manager", filepath.Join(e.dir, "kube-controller-manager.log"), e.bin.controllerManager,
		"--kubeconfig="+e.Kubeconfig,
		"--controllers="+strings.Join(controllers, ","),
		"--leader-elect=false",
		// No serving: nothing scrapes it, and it would need a port and
		// delegated authentication of its own.
		"--secure-port=0",
		"--service-account-private-key-file="+e.pki.saKeyFile,
		"--root-ca-file="+e.pki.caCertFile,
	)
	if err != nil {
		return err
	}
	e.controllerManager = p
	// The default ServiceAccount of the default namespace appears once the
	// controllers are running.
	client := e.apiserverHTTPClient()
	defer client.CloseIdleConnections()
	return p.waitReady(kcmReadyTimeout, httpReady(client, e.Config.Host+"/api/v1/namespaces/default/serviceaccounts/default", e.pki.adminToken))
}

// apiserverHTTPClient is a plain HTTP client that trusts the API server's
// certificate, for polling before client-go has anything to talk to.
func (e *Env) apiserverHTTPClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.pki.caCert)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}
