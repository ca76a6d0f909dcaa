package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// pki holds the files that authenticate the cluster's pieces to each other,
// all generated per Env: a CA and the API server's certificate signed by it
// (so clients verify the server instead of skipping verification), the
// service account signing key, and a static admin token.
type pki struct {
	caCert     []byte // PEM
	caCertFile string
	caKeyFile  string

	servingCertFile, servingKeyFile string
	saKeyFile, saPubFile            string
	tokenFile                       string
	adminToken                      string
}

// ECDSA P-256 keys: generated in microseconds, where RSA takes long enough
// to be felt in every test.
func newPKI(dir string) (*pki, error) {
	p := &pki{
		caCertFile:      filepath.Join(dir, "ca.crt"),
		caKeyFile:       filepath.Join(dir, "ca.key"),
		servingCertFile: filepath.Join(dir, "apiserver.crt"),
		servingKeyFile:  filepath.Join(dir, "apiserver.key"),
		saKeyFile:       filepath.Join(dir, "sa.key"),
		saPubFile:       filepath.Join(dir, "sa.pub"),
		tokenFile:       filepath.Join(dir, "tokens.csv"),
	}
	now := time.Now()

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubetest-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	p.caCert = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})

	servingKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate serving key: %w", err)
	}
	servingTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		// The names a client inside or outside the cluster may use; 10.96.0.1
		// is the kubernetes Service's address in serviceCIDR.
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 96, 0, 1)},
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, servingTemplate, caCert, servingKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("create serving certificate: %w", err)
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service account key: %w", err)
	}
	saPub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("encode service account public key: %w", err)
	}

	token := make([]byte, 32)
	if _, err := rand.Read(token); err != nil {
		return nil, fmt.Errorf("generate admin token: %w", err)
	}
	p.adminToken = hex.EncodeToString(token)

	files := map[string][]byte{
		p.caCertFile:      p.caCert,
		p.servingCertFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: servingDER}),
		p.saPubFile:       pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
		// token,user,uid,"group": system:masters passes every authorization check.
		p.tokenFile: fmt.Appendf(nil, "%s,kubetest-admin,kubetest-admin,\"system:masters\"\n", p.adminToken),
	}
	for path, key := range map[string]*ecdsa.PrivateKey{p.caKeyFile: caKey, p.servingKeyFile: servingKey, p.saKeyFile: saKey} {
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", filepath.Base(path), err)
		}
		files[path] = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", filepath.Base(path), err)
		}
	}
	return p, nil
}

// restConfig is the admin client configuration for the API server on port.
func (p *pki) restConfig(port int) *rest.Config {
	return &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", port),
		BearerToken:     p.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.caCert},
		// client-go's default of 5 requests/s would make tests wait on the
		// client, not on the server they test.
		QPS:   1000,
		Burst: 2000,
	}
}

// writeKubeconfig writes cfg as the kubeconfig file admin.kubeconfig in dir.
func (p *pki) writeKubeconfig(dir string, cfg *rest.Config) (string, error) {
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["kubetest"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: p.caCert,
	}
	kubeconfig.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: p.adminToken}
	kubeconfig.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "admin"}
	kubeconfig.CurrentContext = "kubetest"
	path := filepath.Join(dir, "admin.kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, path); err != nil {
		return "", fmt.Errorf("write admin kubeconfig: %w", err)
	}
	return path, nil
}
