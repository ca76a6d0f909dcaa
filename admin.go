package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hostgate/hostgate/proxy"
)

// admin is the node's own HTTP server: health for kubelet probes and load
// balancers, metrics, and the routing table as this node serves it.
type admin struct {
	addr    string
	ready   func() bool
	current *atomic.Pointer[generation]
	// endpoints reports the proxy's live view of each endpoint set: the
	// addresses it balances over and their passive health.
	endpoints func() map[string][]proxy.EndpointState
	gatherer  prometheus.Gatherer
	// profiling serves Go's profiles under /debug/pprof/. Off by default:
	// the admin port has no authentication, and a CPU profile costs the
	// node's traffic while it runs.
	profiling bool
	// listening is closed once the socket is bound, for tests and for
	// start-up ordering.
	listening chan net.Addr
}

func (a *admin) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /debug/routes", a.routes)
	if a.profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// routes prints the current generation: text for curl, JSON with
// ?format=json or Accept: application/json.
func (a *admin) routes(w http.ResponseWriter, r *http.Request) {
	gen := a.current.Load()
	if gen == nil {
		http.Error(w, "no configuration loaded yet", http.StatusServiceUnavailable)
		return
	}
	if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(struct {
			*generation
			Endpoints map[string][]proxy.EndpointState `json:"endpoints"`
		}{gen.described(), a.endpoints()})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var b strings.Builder
	fmt.Fprintf(&b, "generation %d, built %s\n", gen.Number, gen.Built.UTC().Format(time.RFC3339Nano))
	for _, l := range gen.Listeners {
		fmt.Fprintf(&b, "\nlistener %s %s\n", l.Protocol, l.Address)
		var t strings.Builder
		if l.l4 != nil {
			// Alone, or the passthrough hostnames of an HTTPS socket,
			// which are decided first.
			l.l4.WriteText(&t)
		}
		if l.served != nil {
			l.served.WriteText(&t)
		}
		for line := range strings.Lines(t.String()) {
			b.WriteString("  " + line)
		}
	}
	if sets := a.endpoints(); len(sets) > 0 {
		b.WriteString("\nendpoints\n")
		for _, name := range slices.Sorted(maps.Keys(sets)) {
			fmt.Fprintf(&b, "  %s\n", name)
			if len(sets[name]) == 0 {
				b.WriteString("    (none ready: requests get 503)\n")
			}
			for _, ep := range sets[name] {
				health := "healthy"
				if !ep.Healthy {
					health = "ejected until " + ep.EjectedUntil.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(&b, "    %s weight=%d %s in_flight=%d consecutive_failures=%d\n",
					ep.Address, ep.Weight, health, ep.InFlight, ep.ConsecutiveFailures)
			}
		}
	}
	if len(gen.Annotations) > 0 {
		b.WriteString("\ningress-nginx annotations\n")
		for _, ing := range gen.Annotations {
			fmt.Fprintf(&b, "  Ingress %s\n", ing.Ingress)
			for _, o := range ing.Annotations {
				fmt.Fprintf(&b, "    %s\n", o)
			}
		}
	}
	if len(gen.LeftOut)+len(gen.Problems) > 0 {
		b.WriteString("\nleft out or not served as written\n")
		for _, msg := range slices.Concat(gen.Problems, gen.LeftOut) {
			fmt.Fprintf(&b, "  %s\n", msg)
		}
	}
	io.WriteString(w, b.String())
}

// Start serves until ctx is done. The admin server stops last, after the
// proxy drained, so probes see /readyz fail throughout the drain.
func (a *admin) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		return fmt.Errorf("admin server: %w", err)
	}
	if a.listening != nil {
		a.listening <- ln.Addr()
	}
	srv := &http.Server{
		Handler:           a.handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("admin server: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("admin server shutdown: %w", err)
	}
	return nil
}
