package nodeagent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// serveKubelet serves the one kubelet API the suite reaches through the API
// server: container logs (`kubectl logs`, read by the mirror tests). The
// API server does not verify a kubelet's certificate unless told to, so a
// self-signed one does.
func (a *Agent) serveKubelet() (*http.Server, error) {
	cert, err := selfSigned(nodeAddr.Addr().AsSlice())
	if err != nil {
		return nil, fmt.Errorf("kubelet endpoint: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", a.containerLogs)
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 10 * time.Second,
	}
	l, err := net.Listen("tcp", net.JoinHostPort(nodeAddr.Addr().String(), strconv.Itoa(kubeletPort)))
	if err != nil {
		return nil, fmt.Errorf("kubelet endpoint: %w", err)
	}
	go func() {
		if err := srv.ServeTLS(l, "", ""); !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("kubelet endpoint stopped", "error", err)
		}
	}()
	return srv, nil
}

// containerLogs sends the whole log; options such as sinceTime or follow
// are not emulated.
func (a *Agent) containerLogs(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	var path string
	if run := a.pods[r.PathValue("namespace")+"/"+r.PathValue("pod")]; run != nil {
		path = run.logs[r.PathValue("container")]
	}
	a.mu.Unlock()
	if path == "" {
		http.Error(w, "container not found", http.StatusNotFound)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.Copy(w, f) // a client that went away needs no answer
}

func selfSigned(ip net.IP) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate key: %w", err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "hostgate-conformance-kubelet"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{ip},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("create certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
