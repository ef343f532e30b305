package main

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodelocal"
)

// runNodeLocal is `serve --mode node-local`: a caching forwarder to the
// cluster DNS that adds the autopath search-list option.
func runNodeLocal(ctx context.Context, cfg *v1alpha1.ServerConfiguration, log *slog.Logger, reg *prometheus.Registry) error {
	log = log.With("mode", "node-local")
	nl := cfg.NodeLocal
	var ups []string
	for _, a := range nl.ClusterUpstreamAddrs() {
		ups = append(ups, a.String())
	}
	fwd, err := forward.New(forward.Config{Upstreams: forward.StaticUpstreams(ups), Self: cfg.Listen,
		MaxConcurrent: cfg.MaxConcurrent, Zone: "cluster", Logger: log})
	if err != nil {
		return usagef("nodeLocal.clusterUpstream: %v", err)
	}
	if len(fwd.Upstreams()) == 0 {
		return usagef("--cluster-upstream %v: every address is one of the --listen addresses", ups)
	}
	defer fwd.Close()
	if err := reg.Register(fwd); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fwd.Start(ctx)
	searches := func() []string { return nil }
	if path := nl.ResolvConfPath(); path != "" {
		w, err := hostresolv.Watch(ctx, path, hostresolv.WithLogger(log), hostresolv.WithRegistry(reg))
		if err != nil {
			return usagef("--resolv-conf: %v", err)
		}
		defer func() { cancel(); <-w.Done() }()
		searches = func() []string { return w.Current().Config.Searches }
	}
	h, err := nodelocal.New(fwd, nodelocal.Config{ClusterDomain: cfg.ClusterDomain, OptionCode: uint16(cfg.AutopathOptionCode),
		MaxTTL: nl.MaxTTL.Duration(), MaxNegativeTTL: nl.MaxNegativeTTL.Duration(), CacheBytes: nl.CacheBytes.Bytes(),
		HostSearches: searches, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	srv := dnsServer(cfg, h, log.With("cluster-upstream", fwd.Upstreams(), "zone", cfg.ClusterDomain))
	if err := reg.Register(srv); err != nil {
		return err
	}
	// The node-local stage has no records to sync: ready once it serves,
	// until its lameduck.
	ops, err := opsTasks(cfg.MetricsListen, reg, log, health.Condition(srv.Ready, "lameduck"))
	if err != nil {
		return err
	}
	return runTasks(ctx, append(ops, srv.Run)...)
}
