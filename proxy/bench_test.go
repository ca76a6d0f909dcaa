package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hostgate/hostgate/internal/streamtest"
	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore/tlstest"
)

func benchRoutes(b *testing.B) *router.Table {
	var routes []router.Route
	for _, host := range []string{"a.example.com", "b.example.com", "*.example.com"} {
		routes = append(routes, route(host, []string{host}, router.Rule{Matches: prefix("/api"), Backends: backends("web")}))
	}
	routes = append(routes, route("catchall", nil, router.Rule{Backends: backends("web")}))
	return compile(b, routes...)
}

// BenchmarkProxyHTTP1 is a proxied keep-alive HTTP/1.1 request end to end
// on loopback, for each engine and a small and a 16 KiB response: client,
// proxy and backend all run in this process, so BenchmarkDirectHTTP1 (the
// same without the proxy) is the baseline to subtract. writes/op counts
// the write system calls of all three.
func BenchmarkProxyHTTP1(b *testing.B) {
	for _, size := range benchBodySizes {
		backend := startBackend(b, bodyOfSize(size))
		for _, engine := range []Engine{EngineLoop, EngineNative, EngineStdlib} {
			b.Run(fmt.Sprintf("body=%d/engine=%s", size, engine), func(b *testing.B) {
				benchGet(b, "http://"+benchProxy(b, engine, backend, benchRoutes(b))+"/api/users", "a.example.com", size)
			})
		}
	}
}

// BenchmarkProxyRetry is BenchmarkProxyHTTP1's small response, each
// request of which its rule's retry policy sends twice: the backend
// answers every other request 503, which the policy retries at once.
func BenchmarkProxyRetry(b *testing.B) {
	var served atomic.Int64
	backend := startBackend(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1)%2 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("hello"))
	}))
	routes := compile(b, route("retry", nil, router.Rule{Backends: backends("web"), Retry: &router.Retry{Codes: []int{http.StatusServiceUnavailable}, Attempts: 1}}))
	for _, engine := range []Engine{EngineNative, EngineStdlib} {
		b.Run("engine="+string(engine), func(b *testing.B) {
			benchGet(b, "http://"+benchProxy(b, engine, backend, routes)+"/", "a.example.com", len("hello"))
		})
	}
}

// BenchmarkProxyBackendTLS is BenchmarkProxyHTTP1's small response from a
// backend over TLS (a BackendTLSPolicy's CA and name), kept alive.
func BenchmarkProxyBackendTLS(b *testing.B) {
	ca := tlstest.NewCA(b)
	backend := startTLSBackend(b, ca, []string{"http/1.1"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("hello"))
	}), "backend.example.com")
	routes := compile(b, route("tls", nil, router.Rule{Backends: []router.BackendRef{{Name: "web", Weight: 1, Protocol: "https",
		TLS: &router.BackendTLS{ServerName: "backend.example.com", CAPEM: ca.PEM}}}}))
	for _, engine := range []Engine{EngineNative, EngineStdlib} {
		b.Run("engine="+string(engine), func(b *testing.B) {
			benchGet(b, "http://"+benchProxy(b, engine, backend, routes)+"/", "a.example.com", len("hello"))
		})
	}
}

// benchProxy starts a proxy on engine that serves routes, with backend as
// the endpoint of "web", and returns its address.
func benchProxy(b *testing.B, engine Engine, backend string, routes *router.Table) string {
	opts := testOptions()
	opts.HTTP1Engine = engine
	s := startServer(b, opts)
	s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
	return apply(b, s, Listener{Address: "127.0.0.1:0", Routes: routes})[0]
}

func BenchmarkDirectHTTP1(b *testing.B) {
	for _, size := range benchBodySizes {
		backend := startBackend(b, bodyOfSize(size))
		b.Run(fmt.Sprintf("body=%d", size), func(b *testing.B) {
			benchGet(b, "http://"+backend+"/api/users", "a.example.com", size)
		})
	}
}

// benchBodySizes are the response bodies of bench/run.sh's h1-small and
// h1-16k.
var benchBodySizes = []int{5, 16 << 10}

func bodyOfSize(size int) http.Handler {
	body := bytes.Repeat([]byte("x"), size)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) })
}

func benchGet(b *testing.B, url, host string, size int) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Host = host
	b.ReportAllocs()
	defer reportCosts(b)()
	for b.Loop() {
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n != int64(size) {
			b.Fatalf("%s with %d bytes, want 200 OK with %d", resp.Status, n, size)
		}
	}
}

// BenchmarkProxyHTTP2 is proxied HTTP/2 over TLS as bench/run.sh's h2-tls
// sends it: many streams at once on one connection, forwarded by the
// bridge (engine=native) or by ReverseProxy (engine=stdlib). The proxy's
// share of writes/op falls as it sends more frames per write.
func BenchmarkProxyHTTP2(b *testing.B) {
	f := newTLSFixture(b)
	backend := startBackend(b, bodyOfSize(5))
	// native: both of hostgate's engines; h2=stdlib: net/http's HTTP/2
	// server bridging to the HTTP/1.1 engine's pool; stdlib: net/http
	// for all.
	for _, engines := range []struct{ name, h1, h2 Engine }{{"native", EngineNative, EngineNative}, {"h2=stdlib", EngineNative, EngineStdlib}, {"stdlib", EngineStdlib, EngineStdlib}} {
		b.Run("engine="+string(engines.name), func(b *testing.B) {
			opts := testOptions()
			opts.HTTP1Engine, opts.HTTP2Engine = engines.h1, engines.h2
			s, err := New(opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Shutdown(b.Context()) })
			s.UpdateEndpoints(map[string][]Endpoint{"web": {{Address: backend}}})
			if err := s.Apply(Config{Listeners: []Listener{{Address: "127.0.0.1:0", Protocol: HTTPS, TLS: f.store(b, "a.example.com"), Routes: benchRoutes(b)}}}); err != nil {
				b.Fatal(err)
			}
			client := f.client(s.listeners["127.0.0.1:0"].tcp.Addr().String(), true)
			// 32 streams per core, fewer than MaxConcurrentStreams: one
			// connection.
			b.SetParallelism(32)
			b.ReportAllocs()
			defer reportCosts(b)()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get("https://a.example.com/api/users")
					if err != nil {
						b.Error(err)
						return
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 || len(body) != 5 {
						b.Errorf("%s %s with %d bytes (%v), want 200 over HTTP/2 with 5", resp.Proto, resp.Status, len(body), err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkProxyGRPC is unary gRPC calls over h2c to an h2c backend, each
// with a deadline as gRPC clients usually set one: the grpc-timeout field
// differs on every call, which is what the header compression towards the
// backend has to cope with.
func BenchmarkProxyGRPC(b *testing.B) {
	s := startServer(b, testOptions())
	s.UpdateEndpoints(map[string][]Endpoint{"grpc": {{Address: streamtest.StartGRPC(b, "127.0.0.1:0")}}})
	routes := compile(b, router.Route{
		ID:        router.RouteID{Kind: router.KindGRPCRoute, Namespace: "ns", Name: "echo"},
		Hostnames: []string{"grpc.test"},
		Rules:     []router.Rule{{Matches: []router.Match{{GRPC: &router.GRPCMatch{Service: "test.Echo"}}}, Backends: backends("grpc")}},
	})
	addrs := apply(b, s, Listener{Address: "127.0.0.1:0", Protocol: HTTP, Routes: routes})
	conn, err := grpc.NewClient("passthrough:///"+addrs[0],
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("grpc.test"),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(streamtest.RawCodec{})))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	b.SetParallelism(8)
	b.ReportAllocs()
	defer reportCosts(b)()
	b.RunParallel(func(pb *testing.PB) {
		in := []byte("hi")
		for pb.Next() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var out []byte
			err := conn.Invoke(ctx, "/test.Echo/Say", &in, &out)
			cancel()
			if err != nil || string(out) != "said hi" {
				b.Errorf("got %q, %v; want \"said hi\"", out, err)
				return
			}
		}
	})
}

// reportCosts reports, when the function it returns is called, the CPU
// time and the write system calls per op since it was called. CPU time,
// of the client and backend too, varies less than the wall clock on a
// shared machine.
func reportCosts(b *testing.B) func() {
	start, writes := cpuTime(b), writeCalls(b)
	return func() {
		b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(writeCalls(b)-writes)/float64(b.N), "writes/op")
	}
}

// writeCalls is the number of write system calls the process made so far.
func writeCalls(b testing.TB) int {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Skipf("no write count: %v", err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Skip("no syscw in /proc/self/io")
	return 0
}

// cpuTime is the CPU time the process used so far, user and system.
func cpuTime(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
