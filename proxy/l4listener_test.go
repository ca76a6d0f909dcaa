package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/udptest"
	"github.com/hostgate/hostgate/proxy/l4/relay"
	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
)

func l4Table(t *testing.T, kind router.Kind, backend string, hosts ...string) *router.L4Table {
	t.Helper()
	table, errs := router.CompileL4([]router.Route{{
		ID:        router.RouteID{Kind: kind, Namespace: "ns", Name: "r"},
		Hostnames: hosts,
		Rules:     []router.Rule{{Backends: []router.BackendRef{{Name: backend, Weight: 1}}}},
	}}, "")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return table
}

// TestApplyTLSPassthrough: a TLSPassthrough listener applied to the
// Server passes an HTTPS request to a backend whose own certificate the
// client verifies, through the connection caps' wrapper, and a listener
// that changes to TCP is served as TCP.
func TestApplyTLSPassthrough(t *testing.T) {
	ca := tlstest.NewCA(t)
	backend := startTLSBackend(t, ca, []string{"h2", "http/1.1"}, echo("secure"), "secure.example.com")
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"ns/secure:443": {{Address: backend}}})
	addr := freeAddr(t)
	bound := apply(t, s, Listener{Address: addr, Protocol: TLSPassthrough, L4: l4Table(t, router.KindTLSRoute, "ns/secure:443", "secure.example.com")})[0]
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, bound)
		},
		ForceAttemptHTTP2: true,
	}}
	resp, body := get(t, client, "https://secure.example.com/x")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "backend=secure ") || resp.TLS == nil || resp.TLS.PeerCertificates[0].DNSNames[0] != "secure.example.com" {
		t.Fatalf("answer %d %q, want 200 from the backend with its certificate", resp.StatusCode, body)
	}
	wantMetric(t, s, 1, "hostgate_l4_connections_total", "listener", addr)

	// The same address as TCP: the listener is replaced, and bytes pass
	// as they are (here a TLS handshake nobody routes by name).
	bound = apply(t, s, Listener{Address: addr, Protocol: TCP, L4: l4Table(t, router.KindTCPRoute, "ns/secure:443")})[0]
	c, err := tls.Dial("tcp", bound, &tls.Config{ServerName: "secure.example.com", RootCAs: ca.Pool})
	if err != nil {
		t.Fatalf("TLS through the TCP listener: %v", err)
	}
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: secure.example.com\r\nConnection: close\r\n\r\n")
	got, _ := io.ReadAll(c)
	c.Close()
	if len(got) < 12 || string(got[:12]) != "HTTP/1.1 200" {
		t.Errorf("answer %q, want HTTP/1.1 200", got)
	}
}

// TestSharedTLSPort: an HTTPS listener that shares its socket with a TLS
// passthrough listener passes secure.example.com through (the client
// verifies the backend's own certificate, of a CA hostgate has no
// certificate of) and terminates app.example.com, whose ClientHello
// proxy/l4 read first, over HTTP/1.1 and h2; HTTP/3 on the port's UDP
// socket still answers; a server name that is neither's is the HTTPS
// listener's to refuse. A TLS listener in mode Terminate on the socket
// gets its TLS ended with the socket's certificates and its plaintext
// passed to its backend as it is. Both with hostgate's engines and
// net/http's.
func TestSharedTLSPort(t *testing.T) {
	for _, engine := range []Engine{EngineNative, EngineStdlib} {
		t.Run(string(engine), func(t *testing.T) {
			f := newTLSFixture(t)
			backendCA := tlstest.NewCA(t)
			opts := testOptions()
			opts.HTTP1Engine, opts.HTTP2Engine = engine, engine
			s := startServer(t, opts)
			s.UpdateEndpoints(map[string][]Endpoint{
				"ns/secure:443": {{Address: startTLSBackend(t, backendCA, []string{"h2", "http/1.1"}, echo("secure"), "secure.example.com")}},
				"web":           {{Address: startBackend(t, echo("web"))}},
				"ns/mq:80":      {{Address: startBackend(t, echo("mq"))}},
			})
			passthrough, errs := router.CompileL4Socket([]*router.Route{{
				ID:        router.RouteID{Kind: router.KindTLSRoute, Namespace: "ns", Name: "secure"},
				Listener:  "secure.example.com",
				Hostnames: []string{"secure.example.com"},
				Rules:     []router.Rule{{Backends: []router.BackendRef{{Name: "ns/secure:443", Weight: 1}}}},
			}, {
				ID:       router.RouteID{Kind: router.KindTLSRoute, Namespace: "ns", Name: "mq"},
				Listener: "mq.example.com",
				Rules:    []router.Rule{{Backends: []router.BackendRef{{Name: "ns/mq:80", Weight: 1}}}},
			}}, router.L4Listeners{
				Hostnames: []string{"secure.example.com", "mq.example.com"},
				Terminate: []string{"mq.example.com"},
				HTTPS:     []string{"app.example.com"},
			})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			addr := apply(t, s, Listener{
				Address: "127.0.0.1:0", Protocol: HTTPS, TLS: f.store(t, "app.example.com", "mq.example.com"), L4: passthrough,
				Routes: compile(t, route("web", []string{"app.example.com"}, router.Rule{Backends: backends("web")})),
			})[0]

			passed := &http.Client{Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: backendCA.Pool},
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, network, addr)
				},
			}}
			resp, body := get(t, passed, "https://secure.example.com/x")
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "backend=secure ") {
				t.Fatalf("passthrough: %d %q, want 200 from the backend", resp.StatusCode, body)
			}
			wantMetric(t, s, 1, "hostgate_l4_connections_total", "listener", "127.0.0.1:0", "route", "TLSRoute ns/secure")

			for _, h2 := range []bool{false, true} {
				resp, body := get(t, f.client(addr, h2), "https://app.example.com/x")
				if resp.StatusCode != http.StatusOK || !strings.Contains(body, "backend=web") || resp.ProtoMajor != map[bool]int{false: 1, true: 2}[h2] {
					t.Errorf("terminated, h2 %t: %s %d %q, want 200 from web", h2, resp.Proto, resp.StatusCode, body)
				}
			}
			resp, body = get(t, &http.Client{Transport: f.h3Transport(t, addr), Timeout: 10 * time.Second}, "https://app.example.com/x")
			if resp.ProtoMajor != 3 || !strings.Contains(body, "backend=web") {
				t.Errorf("HTTP/3: %s %d %q, want 200 from web", resp.Proto, resp.StatusCode, body)
			}

			_, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "other.example.com", RootCAs: f.ca.Pool})
			if err == nil || !strings.Contains(err.Error(), "unrecognized name") {
				t.Errorf("other.example.com: %v, want the HTTPS listener's unrecognized_name", err)
			}
			wantMetric(t, s, 1, "hostgate_l4_connections_total", "listener", "127.0.0.1:0", "route", "TLSRoute ns/secure")

			// The HTTPS listener has no route for mq.example.com: an
			// answer from mq's backend came through the TLS listener.
			c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "mq.example.com", RootCAs: f.ca.Pool})
			if err != nil {
				t.Fatalf("mq.example.com: %v", err)
			}
			_, _ = io.WriteString(c, "GET /q HTTP/1.1\r\nHost: mq.example.com\r\nConnection: close\r\n\r\n")
			got, _ := io.ReadAll(c)
			c.Close()
			if !strings.HasPrefix(string(got), "HTTP/1.1 200") || !strings.Contains(string(got), "backend=mq") {
				t.Errorf("terminated TLS listener: answer %q, want 200 from mq's backend", got)
			}
			wantMetric(t, s, 1, "hostgate_l4_connections_total", "listener", "127.0.0.1:0", "route", "TLSRoute ns/mq")
		})
	}
}

// TestTerminatedTLSToBackend: a TLS listener in mode Terminate ends the
// client's TLS with its certificate and, for a backend whose
// BackendTLSPolicy says so, makes TLS of its own to it, checking the
// backend's certificate for the policy's hostname against the policy's
// CA; a backend whose certificate the CA did not sign is refused.
func TestTerminatedTLSToBackend(t *testing.T) {
	f := newTLSFixture(t)
	backendCA, otherCA := tlstest.NewCA(t), tlstest.NewCA(t)
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{
		"ns/secure:8443": {{Address: startTLSBackend(t, backendCA, nil, echo("secure"), "abc.example.com")}},
		"ns/forged:8443": {{Address: startTLSBackend(t, otherCA, nil, echo("forged"), "abc.example.com")}},
	})
	identity := &router.BackendTLS{ServerName: "abc.example.com", CAPEM: backendCA.PEM}
	var routes []*router.Route
	for _, name := range []string{"secure", "forged"} {
		routes = append(routes, &router.Route{
			ID:       router.RouteID{Kind: router.KindTLSRoute, Namespace: "ns", Name: name},
			Listener: name + ".example.com",
			Rules:    []router.Rule{{Backends: []router.BackendRef{{Name: "ns/" + name + ":8443", Weight: 1, TLS: identity}}}},
		})
	}
	listeners := []string{"secure.example.com", "forged.example.com"}
	table, errs := router.CompileL4Socket(routes, router.L4Listeners{Hostnames: listeners, Terminate: listeners})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	addr := apply(t, s, Listener{Address: "127.0.0.1:0", Protocol: TLSPassthrough, L4: table, TLS: f.store(t, listeners...)})[0]

	ask := func(serverName string) string {
		c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: serverName, RootCAs: f.ca.Pool})
		if err != nil {
			t.Fatalf("%s: handshake with hostgate: %v", serverName, err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+serverName+"\r\nConnection: close\r\n\r\n")
		got, _ := io.ReadAll(c)
		return string(got)
	}
	if got := ask("secure.example.com"); !strings.HasPrefix(got, "HTTP/1.1 200") || !strings.Contains(got, "backend=secure") {
		t.Errorf("secure: answer %q, want 200 from the backend over TLS", got)
	}
	if got := ask("forged.example.com"); got != "" {
		t.Errorf("forged: answer %q, want the connection closed", got)
	}
}

// TestApplyUDPBesideTCP: a UDP listener and a TCP listener of the same
// address and port are two listeners, each served with its own route;
// removing the UDP one closes its socket and leaves the TCP one.
func TestApplyUDPBesideTCP(t *testing.T) {
	udpBackend := udptest.Serve(t, udptest.Prefixed("udp "))
	tcpBackend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcpBackend.Close()
	go func() {
		for {
			c, err := tcpBackend.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 100)
				n, _ := c.Read(buf)
				_, _ = c.Write(append([]byte("tcp "), buf[:n]...))
			}()
		}
	}()
	s := startServer(t, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{
		"ns/dns:53/udp": {{Address: udpBackend.String()}},
		"ns/dns:53":     {{Address: tcpBackend.Addr().String()}},
	})
	addr := freeAddr(t)
	udp := Listener{Address: addr, Protocol: UDP, L4: l4Table(t, router.KindUDPRoute, "ns/dns:53/udp")}
	tcp := Listener{Address: addr, Protocol: TCP, L4: l4Table(t, router.KindTCPRoute, "ns/dns:53")}
	if err := s.Apply(Config{Listeners: []Listener{udp, tcp}}); err != nil {
		t.Fatal(err)
	}
	ask := func(network string) (string, error) {
		c, err := net.Dial(network, addr)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := io.WriteString(c, "q"); err != nil {
			return "", err
		}
		buf := make([]byte, 100)
		n, err := c.Read(buf)
		return string(buf[:n]), err
	}
	for _, network := range []string{"udp", "tcp"} {
		if got, err := ask(network); err != nil || got != network+" q" {
			t.Errorf("%s: answer %q, %v", network, got, err)
		}
	}
	if err := s.Apply(Config{Listeners: []Listener{tcp}}); err != nil {
		t.Fatal(err)
	}
	// The UDP port is free again, and TCP still served.
	deadline := time.Now().Add(5 * time.Second)
	for {
		pc, err := net.ListenPacket("udp", addr)
		if err == nil {
			pc.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the removed UDP listener's socket stays open: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got, err := ask("tcp"); err != nil || got != "tcp q" {
		t.Errorf("tcp after the UDP listener went: answer %q, %v", got, err)
	}
}

// onL4Engines runs test on goroutines and, where this system has them,
// on relay loops.
func onL4Engines(t *testing.T, test func(t *testing.T, engine Engine)) {
	for _, engine := range []Engine{EngineNative, EngineLoop} {
		t.Run(string(engine), func(t *testing.T) {
			if engine == EngineLoop && !relay.Supported {
				t.Skip("no relay loops here")
			}
			test(t, engine)
		})
	}
}

// tcpCapFixture serves, with engine and the options set changes, a TCP
// listener whose TCPRoute leads to an HTTP backend answering "ok"; it
// returns the listener as a capFixture, its server and its address.
func tcpCapFixture(t *testing.T, engine Engine, set func(*Options)) (*capFixture, *Server, string) {
	backend := startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	opts := testOptions()
	opts.HTTP1Engine = engine
	set(&opts)
	s := startServer(t, opts)
	s.UpdateEndpoints(map[string][]Endpoint{"ns/web:80": {{Address: backend}}})
	addr := freeAddr(t)
	return &capFixture{t: t, s: s, addr: apply(t, s, Listener{Address: addr, Protocol: TCP, L4: l4Table(t, router.KindTCPRoute, "ns/web:80")})[0]}, s, addr
}

// TestTCPConnectionCap: a TCP listener's connections count against the
// caps, relayed on loops or on goroutines: past the cap of an address a
// connection is closed unanswered, and there is room again once the
// connection within it closed. The series count them.
func TestTCPConnectionCap(t *testing.T) {
	onL4Engines(t, func(t *testing.T, engine Engine) {
		f, s, addr := tcpCapFixture(t, engine, func(o *Options) { o.MaxConnections, o.MaxConnectionsPerAddress = NoCap, 1 })
		first := f.idle("127.0.0.1")
		second := f.dial("127.0.0.1")
		second.send("/")
		wantClosed(t, second, "a connection past the cap")
		first.send("/")
		if err := first.answered(); err != nil {
			t.Fatalf("the connection within the cap: %v", err)
		}
		first.Close()
		eventuallyMetric(t, s, 0, "hostgate_l4_connections_open", "listener", addr)
		third := f.dial("127.0.0.1")
		third.send("/")
		if err := third.answered(); err != nil {
			t.Errorf("a connection once the first closed: %v", err)
		}
		wantMetric(t, s, 2, "hostgate_l4_connections_total", "listener", addr)
	})
}

// TestTCPIdleTimeout: a relayed connection that carries nothing either way
// for the idle timeout is closed, counted and logged as such; one that
// keeps talking is not, however long it lasts.
func TestTCPIdleTimeout(t *testing.T) {
	onL4Engines(t, func(t *testing.T, engine Engine) {
		logged := make(chan L4AccessRecord, 4)
		f, s, addr := tcpCapFixture(t, engine, func(o *Options) {
			o.L4IdleTimeout = 400 * time.Millisecond
			o.L4AccessLog = func(r *L4AccessRecord) { logged <- *r }
		})
		quiet := f.idle("127.0.0.1")
		talking := f.idle("127.0.0.1")
		for range 12 {
			time.Sleep(100 * time.Millisecond)
			talking.send("/")
			if err := talking.answered(); err != nil {
				t.Fatalf("a connection that kept talking past the idle timeout: %v", err)
			}
		}
		wantClosed(t, quiet, "a connection quiet past the idle timeout")
		select {
		case r := <-logged:
			if !r.IdleTimedOut || r.BytesIn == 0 {
				t.Errorf("access log record %+v, want idle_timeout and the bytes it carried", r)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no access log record for the connection closed")
		}
		wantMetric(t, s, 1, "hostgate_l4_idle_closed_total", "listener", addr)
	})
}

// TestHalfOpenTLSFlood: clients that open TLS passthrough connections and
// send a few bytes of a ClientHello, never the rest, hold no more than the
// per-address cap between them, each only until the hello timeout, and
// reach no backend; once they are gone a real client passes through.
func TestHalfOpenTLSFlood(t *testing.T) {
	const perAddress = 8
	onL4Engines(t, func(t *testing.T, engine Engine) {
		ca := tlstest.NewCA(t)
		var reached atomic.Int64
		backend := startTLSBackend(t, ca, []string{"http/1.1"}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			reached.Add(1)
			io.WriteString(w, "ok")
		}), "secure.example.com")
		opts := testOptions()
		opts.HTTP1Engine = engine
		opts.MaxConnections, opts.MaxConnectionsPerAddress = NoCap, perAddress
		opts.ReadHeaderTimeout = 500 * time.Millisecond
		s := startServer(t, opts)
		s.UpdateEndpoints(map[string][]Endpoint{"ns/secure:443": {{Address: backend}}})
		addr := freeAddr(t)
		bound := apply(t, s, Listener{Address: addr, Protocol: TLSPassthrough, L4: l4Table(t, router.KindTLSRoute, "ns/secure:443", "secure.example.com")})[0]
		f := &capFixture{t: t, s: s, addr: bound}
		// A TLS record header, then nothing: the hello never comes.
		var flood []*capConn
		for range 3 * perAddress {
			c := f.dial("127.0.0.1")
			io.WriteString(c, "\x16\x03\x01")
			flood = append(flood, c)
		}
		// Within their first second, before any counts as idle, the
		// cap's worth are held and the rest closed at once.
		closedAtOnce := 0
		for _, c := range flood[perAddress:] {
			c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := c.br.ReadByte(); err != nil {
				if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
					closedAtOnce++
				}
			}
		}
		if closedAtOnce != 2*perAddress {
			t.Errorf("%d of the %d connections past the cap closed at once, want all", closedAtOnce, 2*perAddress)
		}
		wantMetric(t, s, 2*perAddress, "hostgate_connections_refused_total", "reason", "address_limit")
		// The held ones end at the hello timeout, each counted.
		for i, c := range flood[:perAddress] {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.br.ReadByte(); err == nil {
				t.Errorf("connection %d within the cap: read a byte, want it closed at the hello timeout", i)
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Errorf("connection %d within the cap: still open 5s after its hello timeout", i)
			}
		}
		eventuallyMetric(t, s, perAddress, "hostgate_l4_refused_total", "listener", addr, "reason", "hello_timeout")
		if n := reached.Load(); n != 0 {
			t.Errorf("%d requests reached the backend during the flood, want none", n)
		}
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: ca.Pool},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, bound)
			},
		}}
		defer client.CloseIdleConnections()
		if resp, body := get(t, client, "https://secure.example.com/"); resp.StatusCode != http.StatusOK || body != "ok" {
			t.Errorf("after the flood: %d %q, want 200 ok from the backend", resp.StatusCode, body)
		}
	})
}

// TestTCPSessionOutlivesTheCap: a relayed connection the caps have had for
// longer than a keep-alive connection's grace is a session, not an idle
// connection to close for a newcomer: the newcomer is refused.
func TestTCPSessionOutlivesTheCap(t *testing.T) {
	onL4Engines(t, func(t *testing.T, engine Engine) {
		f, _, _ := tcpCapFixture(t, engine, func(o *Options) { o.MaxConnections, o.MaxConnectionsPerAddress = NoCap, 1 })
		session := f.idle("127.0.0.1")
		// Past the grace after which the caps may close an idle
		// HTTP connection.
		settle()
		newcomer := f.dial("127.0.0.1")
		newcomer.send("/")
		wantClosed(t, newcomer, "a connection past the cap")
		session.send("/")
		if err := session.answered(); err != nil {
			t.Fatalf("the session within the cap: %v", err)
		}
	})
}
