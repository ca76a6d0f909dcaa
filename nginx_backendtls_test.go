package main

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestIngressNginxBackendTLSOffer reaches HTTPS backends, real TLS
// servers that say what was negotiated, through Ingresses with
// proxy-ssl-protocols and proxy-ssl-ciphers: TLSv1.3 alone gets TLS 1.3,
// TLSv1.2 with a suite named the OpenSSL way gets TLS 1.2 with that suite,
// no annotation Go's defaults (TLS 1.3), and a backend that stops at TLS
// 1.2 cannot be reached by an Ingress that offers TLS 1.3 only (502).
func TestIngressNginxBackendTLSOffer(t *testing.T) {
	say := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", tls.VersionName(r.TLS.Version), tls.CipherSuiteName(r.TLS.CipherSuite))
	})
	modern := httptest.NewTLSServer(say)
	defer modern.Close()
	old := httptest.NewUnstartedServer(say)
	old.TLS = &tls.Config{MaxVersion: tls.VersionTLS12}
	old.StartTLS()
	defer old.Close()
	https := []string{"backend-protocol", "HTTPS"}
	dir := t.TempDir()
	writeConfig(t, dir, loopbackService("default", "modern", 80, addr2port(t, modern.Listener.Addr().String()))+
		loopbackService("default", "old", 80, addr2port(t, old.Listener.Addr().String()))+
		trafficIngress("tls13", "tls13.example.com", "modern", append(https, "proxy-ssl-protocols", "TLSv1.3")...)+
		trafficIngress("tls12", "tls12.example.com", "modern", append(https, "proxy-ssl-protocols", "TLSv1.2 ",
			"proxy-ssl-ciphers", "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:!aNULL:!MD5")...)+
		trafficIngress("plain", "plain.example.com", "modern", https...)+
		trafficIngress("mismatch", "mismatch.example.com", "old", append(https, "proxy-ssl-protocols", "TLSv1.3")...)+
		trafficIngress("match", "match.example.com", "old", https...))
	httpPort := freePort(t)
	startHostgate(t, "--config", dir, "--ingress-class", "nginx", "--http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort))
	url := fmt.Sprintf("http://127.0.0.1:%d/", httpPort)
	eventually(t, "served", expect(url, "plain.example.com", 200, "TLS 1.3"))
	for host, want := range map[string]string{
		"tls13.example.com":    "200 TLS 1.3",
		"tls12.example.com":    "200 TLS 1.2 TLS_ECDHE_",
		"plain.example.com":    "200 TLS 1.3",
		"mismatch.example.com": "502",
		"match.example.com":    "200 TLS 1.2",
	} {
		code, body := get(url, host)
		if got := fmt.Sprintf("%d %s", code, body); !strings.HasPrefix(got, want) || host == "tls12.example.com" && !strings.HasSuffix(got, "_WITH_AES_256_GCM_SHA384") {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
}
