package main

import (
	"fmt"
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
}

func newSource(c *config, log *slog.Logger, publish func(*watch.Snapshot, []string)) (*source, error) {
	if c.configPath != "" {
		s, err := watch.NewFile(c.configPath, c.watch, func(snap *watch.Snapshot, reports *watch.Reports) {
			publish(snap, reports.Problems())
		}, log)
		if err != nil {
			return nil, fmt.Errorf("--config %s: %w", c.configPath, err)
		}
		return &source{Source: s, mode: "file"}, nil
	}
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
	}, log.With("component", "status"))
	if err != nil {
		return nil, err
	}
	s, err := watch.NewCluster(cfg, c.watch, func(snap *watch.Snapshot, reports *watch.Reports) {
		publish(snap, reports.Problems())
		writer.Update(reports)
	}, log)
	if err != nil {
		return nil, err
	}
	return &source{Source: s, mode: "cluster", status: writer}, nil
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
