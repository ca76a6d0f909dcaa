package main

import (
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hostgate/hostgate/proxy"
	"github.com/hostgate/hostgate/router"
	"github.com/hostgate/hostgate/tlsstore"
	"github.com/hostgate/hostgate/watch"
)

// generation is one translated and compiled configuration: what the proxy
// serves and what /debug/routes shows.
type generation struct {
	Number    uint64          `json:"generation"`
	Built     time.Time       `json:"built"`
	Listeners []listenerState `json:"listeners"`
	// LeftOut names routes and certificates that could not be compiled,
	// with the reason; the rest is served.
	LeftOut []string `json:"leftOut,omitempty"`
	// Problems are what translation left out or could not serve as
	// written, one line per object and condition (as in their status).
	Problems []string `json:"problems,omitempty"`

	config proxy.Config
}

type listenerState struct {
	Address  string                   `json:"address"`
	Protocol string                   `json:"protocol"`
	Hosts    []router.HostDescription `json:"hosts"`
	table    *router.Table
}

// compileSnapshot turns a translated Snapshot into the proxy's listener set.
// Routes and certificates that fail to compile are left out and listed; the
// translator already validated them, so this is a second line of defence.
func compileSnapshot(snap *watch.Snapshot, number uint64, log *slog.Logger) *generation {
	gen := &generation{Number: number, Built: time.Now()}
	for _, l := range snap.Listeners {
		address := net.JoinHostPort(l.Address, strconv.Itoa(l.Port))
		table, errs := router.Compile(l.Routes, l.ListenerHostnames...)
		for _, err := range errs {
			gen.LeftOut = append(gen.LeftOut, "listener "+address+": "+err.Error())
		}
		pl := proxy.Listener{Address: address, Routes: table}
		if l.Protocol == watch.ProtocolHTTPS {
			pl.Protocol = proxy.HTTPS
			store, errs := tlsstore.Build(certificates(l.Certs))
			for _, err := range errs {
				gen.LeftOut = append(gen.LeftOut, "listener "+address+": "+err.Error())
			}
			pl.TLS = store
		}
		gen.config.Listeners = append(gen.config.Listeners, pl)
		gen.Listeners = append(gen.Listeners, listenerState{
			Address: address, Protocol: pl.Protocol.String(), Hosts: table.Describe(), table: table,
		})
	}
	for _, msg := range gen.LeftOut {
		log.Warn("left out of the configuration", "problem", msg)
	}
	return gen
}

func certificates(certs []watch.Cert) []tlsstore.Certificate {
	out := make([]tlsstore.Certificate, 0, len(certs))
	for _, c := range certs {
		out = append(out, tlsstore.Certificate{
			Name:    c.Name,
			Hosts:   c.Hostnames,
			Default: len(c.Hostnames) == 0,
			CertPEM: c.CertPEM,
			KeyPEM:  tlsstore.PrivateKey(c.KeyPEM),
		})
	}
	return out
}

// proxyEndpoints converts endpoint sets for the proxy. Endpoints that are
// not ready serve only when a set has no ready endpoint, as a terminating
// pod still finishing its work is better than an error.
func proxyEndpoints(sets map[string][]watch.Endpoint) map[string][]proxy.Endpoint {
	out := make(map[string][]proxy.Endpoint, len(sets))
	for name, eps := range sets {
		var ready, serving []proxy.Endpoint
		for _, ep := range eps {
			pe := proxy.Endpoint{Address: ep.Address, Weight: uint32(max(ep.Weight, 0))}
			if ep.Ready {
				ready = append(ready, pe)
			} else {
				serving = append(serving, pe)
			}
		}
		if len(ready) == 0 {
			ready = serving
		}
		out[name] = ready
	}
	return out
}
