package main

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
)

// agentNamespaces are the parts of an agent's namespace labels: the pod
// informer option, the informer's task and readiness check. All zero
// unless namespaceLabels is set; with it and no API server (rc nil) the
// labels are unknown, which is logged, and only the cluster default
// applies. The informer is metadata-only and lists only the labelled
// namespaces; it needs list/watch on namespaces (deploy/*/rbac.yaml).
func agentNamespaces(p v1alpha1.PodPolicy, rc *rest.Config, log *slog.Logger) ([]podfacts.InformerOption, []task, []health.Check, error) {
	if !p.NamespaceLabels {
		return nil, nil, nil, nil
	}
	if rc == nil {
		log.Warn("namespaceLabels is set but there is no API server: namespace labels are unknown, only defaultDNSPolicy applies",
			"defaultDNSPolicy", p.DefaultDNSPolicy)
		return nil, nil, nil, nil
	}
	client, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("namespace labels: metadata client: %w", err)
	}
	ns, err := podfacts.NewNamespaceInformer(client, log)
	if err != nil {
		return nil, nil, nil, err
	}
	run := func(ctx context.Context) error { ns.Run(ctx); return nil }
	return []podfacts.InformerOption{podfacts.WithNamespaces(ns)}, []task{run},
		[]health.Check{health.Condition(ns.HasSynced, "namespace informer not synced")}, nil
}
