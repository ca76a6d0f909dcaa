package main

import (
	"fmt"
	"log/slog"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hostgate/hostgate/watch"
)

// source is where objects come from: files (--config) or a cluster.
type source struct {
	*watch.Source
	mode string
}

func newSource(c *config, log *slog.Logger, publish watch.Publish) (*source, error) {
	if c.configPath != "" {
		s, err := watch.NewFile(c.configPath, c.watch, publish, log)
		if err != nil {
			return nil, fmt.Errorf("--config %s: %w", c.configPath, err)
		}
		return &source{s, "file"}, nil
	}
	cfg, err := restConfig(c.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "hostgate/" + version
	s, err := watch.NewCluster(cfg, c.watch, publish, log)
	if err != nil {
		return nil, err
	}
	return &source{s, "cluster"}, nil
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
