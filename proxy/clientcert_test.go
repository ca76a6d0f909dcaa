package proxy

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
)

// TestClientCertificateValidation serves three listener hostnames on one
// HTTPS socket: secure.example.com requires a client certificate of one
// authority, fallback.example.com asks for one but lets any client in, and
// the listener without hostname asks for none. The server name of the
// handshake chooses the validation, on HTTP/1.1 (both engines), h2 and
// HTTP/3, and a request cannot reach a listener whose validation its
// connection did not pass by naming it in Host only, with another server
// name or none. Backends learn the identity of a verified certificate
// only, never one a client claims.
func TestClientCertificateValidation(t *testing.T) {
	f := newTLSFixture(t)
	clientCA, otherCA := tlstest.NewCA(t), tlstest.NewCA(t)
	store := f.validatingStore(t, []tlsstore.ClientValidation{
		{Name: "infra/gw/secure", Host: "secure.example.com", CAPEM: clientCA.PEM},
		{Name: "infra/gw/fallback", Host: "fallback.example.com", CAPEM: clientCA.PEM, Optional: true},
	}, "secure.example.com", "fallback.example.com", "*.example.com!")
	onListener := func(name, listener string) router.Route {
		r := route(name, nil, router.Rule{Backends: backends(name)})
		r.Listener = listener
		return r
	}
	good, bad := issueClient(t, clientCA), issueClient(t, otherCA)
	sum := sha256.Sum256(good.Certificate[0])
	verified := "X-Forwarded-Client-Cert=Hash=" + hex.EncodeToString(sum[:]) + `;Subject="CN=client"` + "\n"
	for _, engine := range []Engine{EngineNative, EngineStdlib} {
		opts := testOptions()
		opts.HTTP1Engine = engine
		s := startServer(t, opts)
		s.UpdateEndpoints(map[string][]Endpoint{
			"secure":   {{Address: startBackend(t, echo("secure"))}},
			"fallback": {{Address: startBackend(t, echo("fallback"))}},
			"open":     {{Address: startBackend(t, echo("open"))}},
		})
		addr := apply(t, s, Listener{
			Address: "127.0.0.1:0", Protocol: HTTPS, TLS: store,
			Routes: compile(t, onListener("secure", "secure.example.com"), onListener("fallback", "fallback.example.com"), onListener("open", "")),
		})[0]
		_, port, _ := net.SplitHostPort(addr)
		protocols := []string{"HTTP/1.1", "h2", "HTTP/3"}
		if engine == EngineStdlib {
			protocols = protocols[:1] // the engine serves HTTP/1.1 only
		}
		for _, proto := range protocols {
			for _, tt := range []struct {
				name      string
				sni, host string
				cert      *tls.Certificate
				// status is 0 where the handshake or the request fails.
				status  int
				backend string
				// identity is whether the backend learns the client's.
				identity bool
			}{
				{"required, valid", "secure.example.com", "secure.example.com", good, 200, "secure", true},
				{"required, other authority", "secure.example.com", "secure.example.com", bad, 0, "", false},
				{"required, none", "secure.example.com", "secure.example.com", nil, 0, "", false},
				{"fallback, valid", "fallback.example.com", "fallback.example.com", good, 200, "fallback", false},
				{"fallback, other authority", "fallback.example.com", "fallback.example.com", bad, 200, "fallback", false},
				{"fallback, none", "fallback.example.com", "fallback.example.com", nil, 200, "fallback", false},
				{"none asked", "www.example.com", "www.example.com", nil, 200, "open", false},
				{"none asked, no SNI", "", "www.example.com", nil, 200, "open", false},
				{"required listener named in Host only", "www.example.com", "secure.example.com", nil, 421, "", false},
				{"required listener named in Host, no SNI", "", "secure.example.com", nil, 421, "", false},
				{"fallback listener named in Host, no SNI", "", "fallback.example.com", bad, 421, "", false},
			} {
				t.Run(fmt.Sprintf("%s/%s/%s", engine, proto, tt.name), func(t *testing.T) {
					c := f.clientWithCert(addr, proto, tt.sni, tt.cert)
					target := "https://" + tt.host + ":" + port + "/"
					req, err := http.NewRequest(http.MethodGet, target, nil)
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set("X-Forwarded-Client-Cert", `Hash=forged;Subject="CN=admin"`)
					resp, err := c.Do(req)
					if tt.status == 0 {
						if err == nil {
							resp.Body.Close()
							t.Fatalf("status %d, want the handshake to fail", resp.StatusCode)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					body, err := io.ReadAll(resp.Body)
					if err != nil {
						t.Fatal(err)
					}
					if want := protoMajor[proto]; resp.ProtoMajor != want {
						t.Errorf("client spoke %s, want HTTP/%d", resp.Proto, want)
					}
					if resp.StatusCode != tt.status || (tt.backend != "" && !strings.HasPrefix(string(body), "backend="+tt.backend+" ")) {
						t.Errorf("status %d, body %q; want %d from backend %q", resp.StatusCode, body, tt.status, tt.backend)
					}
					want := "X-Forwarded-Client-Cert=\n"
					if tt.identity {
						want = verified
					}
					if tt.backend != "" && !strings.Contains(string(body), want) {
						t.Errorf("backend got\n%s\nwant %q", body, want)
					}
				})
			}
		}
	}
}

var protoMajor = map[string]int{"HTTP/1.1": 1, "h2": 2, "HTTP/3": 3}

// issueClient issues a client certificate of ca.
func issueClient(t *testing.T, ca *tlstest.CA) *tls.Certificate {
	certPEM, keyPEM := ca.Issue(t, "client")
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &pair
}

// clientWithCert returns a client speaking proto ("HTTP/1.1", "h2" or
// "HTTP/3") to addr whatever the URL says, with server name sni (none
// when empty, as a client that connects to an IP address sends), that
// presents cert when asked for a certificate. It opens a connection per
// request.
func (f *tlsFixture) clientWithCert(addr, proto, sni string, cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{
		RootCAs: f.ca.Pool, ServerName: sni, MinVersion: tls.VersionTLS12,
		// Without SNI the default certificate names none of the hosts.
		InsecureSkipVerify: sni == "",
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cert == nil {
				return &tls.Certificate{}, nil
			}
			return cert, nil
		},
	}
	if proto == "HTTP/3" {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http3.Transport{
			TLSClientConfig: cfg,
			Dial: func(ctx context.Context, _ string, tlsCfg *tls.Config, qcfg *quic.Config) (*quic.Conn, error) {
				tlsCfg.ServerName = sni
				return quic.DialAddr(ctx, addr, tlsCfg, qcfg)
			},
		}}
	}
	tr := &http.Transport{
		DisableKeepAlives: true,
		DialTLSContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			c := cfg.Clone()
			c.NextProtos = []string{"http/1.1"}
			if proto == "h2" {
				c.NextProtos = []string{"h2"}
			}
			d := tls.Dialer{Config: c}
			return d.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2: proto == "h2",
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}
