package nodeagent

import (
	"bufio"
	"bytes"
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
	"strings"
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

// containerLogs sends a container's log as a kubelet does, honouring
// sinceTime and sinceSeconds (the mirror tests read only what was logged
// after their request) and timestamps; follow, tailLines and limitBytes
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
	q := r.URL.Query()
	var since time.Time
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			http.Error(w, "sinceTime: "+err.Error(), http.StatusBadRequest)
			return
		}
		since = t
	}
	if v := q.Get("sinceSeconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			http.Error(w, "sinceSeconds: "+err.Error(), http.StatusBadRequest)
			return
		}
		since = time.Now().Add(-time.Duration(n) * time.Second)
	}
	timestamps := q.Get("timestamps") == "true"

	f, err := os.Open(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain")
	lines := bufio.NewScanner(f)
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		stamp, text, _ := strings.Cut(lines.Text(), " ")
		if t, err := time.Parse(time.RFC3339Nano, stamp); err == nil && t.Before(since) {
			continue
		}
		if timestamps {
			text = lines.Text()
		}
		if _, err := io.WriteString(w, text+"\n"); err != nil {
			return // the client went away
		}
	}
}

// stampedLog stores what a server writes the way container runtimes do:
// each line prefixed with the time it was written, which is what
// sinceTime filters on.
type stampedLog struct {
	w io.Writer
	// midLine is set when the last write did not end a line.
	midLine bool
}

func (s *stampedLog) Write(p []byte) (int, error) {
	var buf []byte
	for rest := p; len(rest) > 0; {
		if !s.midLine {
			buf = time.Now().UTC().AppendFormat(buf, time.RFC3339Nano)
			buf = append(buf, ' ')
		}
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			buf = append(buf, rest...)
			s.midLine = true
			break
		}
		buf = append(buf, rest[:i+1]...)
		s.midLine = false
		rest = rest[i+1:]
	}
	if _, err := s.w.Write(buf); err != nil {
		return 0, err
	}
	return len(p), nil
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
