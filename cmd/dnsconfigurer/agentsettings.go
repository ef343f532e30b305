package main

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/internal/version"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
)

// agentSettings is what an agent publishes at /node-settings: its config
// and, at each call, the watcher's current host snapshot.
func agentSettings(kind string, a *v1alpha1.NodeAgent, nodeIPs []string, w *hostresolv.Watcher) func() nodesettings.Settings {
	return func() nodesettings.Settings {
		return nodesettings.Settings{Kind: kind, Version: version.Get().Version, NodeName: a.NodeName,
			ClusterDNS: a.ClusterDNS, ClusterDomain: a.Domain(), NodeLocalDNS: a.NodeLocalDNS,
			NodeOS: a.NodeOS, NodeIPs: nodeIPs, Limits: a.Limits, PodPolicy: a.PodPolicy, Host: nodesettings.HostOf(w.Current())}
	}
}

// agentHandler is the agents' metrics listener: health.Handler plus
// GET /node-settings.
func agentHandler(reg prometheus.Gatherer, settings func() nodesettings.Settings, checks ...health.Check) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+nodesettings.Path, nodesettings.Handler(settings))
	mux.Handle("/", health.Handler(reg, checks...))
	return mux
}

// agentOpsTasks is opsTasks for an agent: the metrics listener serves
// /node-settings too.
func agentOpsTasks(addr string, reg prometheus.Gatherer, log *slog.Logger, settings func() nodesettings.Settings, checks ...health.Check) ([]task, error) {
	return listenTasks(addr, false, agentHandler(reg, settings, checks...), log)
}
