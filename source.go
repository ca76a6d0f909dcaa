package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hostgate/hostgate/status"
	"github.com/hostgate/hostgate/watch"
)

// source is where objects come from: files (--config) or a cluster. In a
// cluster it also has a status writer, which files have nowhere to write.
type source struct {
	*watch.Source
	mode   string
	status *status.Writer
	// state keeps the last live translation for a start while the API
	// server is unreachable (--state-file); nil when off.
	state *watch.StateFile
	// restored is set when the state file is served until the first live
	// translation; only the source's goroutine reads it after the start.
	restored bool
}

func newSource(c *config, log *slog.Logger, publish func(*watch.Snapshot, findings)) (*source, error) {
	if c.configPath != "" {
		files := watch.FileConfig{Path: c.configPath, Settle: c.configSettle, Metrics: c.metrics}
		s, err := watch.NewFile(files, c.watch, func(snap *watch.Snapshot, reports *watch.Reports) {
			publish(snap, reports)
		}, log)
		if err != nil {
			return nil, fmt.Errorf("--config %s: %w", c.configPath, err)
		}
		return &source{Source: s, mode: "file"}, nil
	}
	// Before the status writer's client reads client-go's settings.
	watch.ListFirst()
	cfg, err := restConfig(c.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "hostgate/" + version
	writer, err := status.New(cfg, status.Options{
		LeaseNamespace:    c.leaseNamespace,
		LeaseName:         c.leaseName,
		Identity:          c.identity,
		GatewayController: c.watch.GatewayController,
		WriteErrors:       c.statusWriteErrors,
		GatewayClassName:  c.gatewayClassName,
		NoIngressStatus:   !c.ingressStatus,
		GatewayServices:   c.watch.GatewayServices,
	}, log.With("component", "status"))
	if err != nil {
		return nil, err
	}
	src := &source{mode: "cluster", status: writer, state: c.state}
	// Only live translations reach the status writer and the state file:
	// status is never derived from what the file held.
	src.Source, err = watch.NewCluster(cfg, c.watch, func(snap *watch.Snapshot, reports *watch.Reports) {
		// Only a state file sets restored (restore).
		synced := src.restored
		if synced {
			// Set before the live configuration is served, so that
			// whoever sees it served reads 0: set after, a loaded machine
			// let TestColdStartFromStateFile read 1.
			src.restored = false
			src.state.Serving(false)
		}
		publish(snap, reports)
		writer.Update(reports)
		if src.state == nil {
			return
		}
		src.state.Save(snap)
		if synced {
			log.Info("the API server synced: serving its configuration instead of the state file", "path", src.state.Path(), "routes", snap.RouteCount())
		}
	}, log)
	if err != nil {
		return nil, err
	}
	return src, nil
}

// restore serves the state file until the API server syncs, so that a
// node starting while the API server is unreachable serves what it served
// before instead of nothing. A file that cannot be used is skipped with
// the reason: the node then waits for the API server, as without one.
func (s *source) restore(publish func(*watch.Snapshot, findings), log *slog.Logger) {
	snap, written, err := s.state.Load()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		log.Info("no state file yet: serving once the API server syncs", "path", s.state.Path())
	case err != nil:
		log.Warn("ignoring the state file: serving once the API server syncs", "path", s.state.Path(), "reason", err.Error())
	default:
		log.Info("serving the state file until the API server syncs", "path", s.state.Path(), "written", written,
			"listeners", len(snap.Listeners), "routes", snap.RouteCount(), "endpoint_sets", snap.Endpoints.Len())
		publish(snap, nil)
		s.restored = true
		s.state.Serving(true)
	}
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --config or --kubeconfig given, and not running in a cluster: %w", err)
	}
	return cfg, nil
}
