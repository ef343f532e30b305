package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodelocal"
)

// runNodeLocal is `serve --mode node-local`: a caching forwarder to the
// cluster DNS that adds the autopath search-list option.
func runNodeLocal(ctx context.Context, f *serveFlags, log *slog.Logger, reg *prometheus.Registry) error {
	log = log.With("mode", "node-local")
	fwd, err := clusterUpstreams(f)
	if err != nil {
		return err
	}
	if err := reg.Register(fwd); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	searches := func() []string { return nil }
	if f.resolvConf != "" {
		w, err := hostresolv.Watch(ctx, f.resolvConf, hostresolv.WithLogger(log), hostresolv.WithRegistry(reg))
		if err != nil {
			return usagef("--resolv-conf: %v", err)
		}
		defer func() { cancel(); <-w.Done() }()
		searches = func() []string { return w.Current().Config.Searches }
	}
	h, err := nodelocal.New(fwd, nodelocal.Config{ClusterDomain: f.clusterDomain, OptionCode: uint16(f.autopathCode),
		MaxTTL: f.maxTTL, MaxNegativeTTL: f.maxNegativeTTL, CacheSize: f.cacheSize, CacheBytes: f.cacheBytes,
		HostSearches: searches, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	srv := &dnsserver.Server{Listen: f.listen, Handler: h,
		Logger: log.With("cluster-upstream", fwd.Upstreams(), "zone", f.clusterDomain)}
	// The node-local stage has no records to sync: ready once it serves.
	ops, err := opsTasks(f.metricsListen, reg, log)
	if err != nil {
		return err
	}
	return runTasks(ctx, append(ops, srv.Run)...)
}

// clusterUpstreams is the forwarder to --cluster-upstream.
func clusterUpstreams(f *serveFlags) (*dnsserver.Forwarder, error) {
	if len(f.clusterUpstream) == 0 {
		return nil, usageError{errors.New("--mode node-local needs --cluster-upstream ADDR[,ADDR]")}
	}
	for _, u := range f.clusterUpstream {
		if _, err := dnsserver.ParseAddrPort(u); err != nil {
			return nil, usagef("--cluster-upstream %q: %v", u, err)
		}
	}
	fwd, err := dnsserver.NewForwarder(dnsserver.StaticUpstreams(f.clusterUpstream), f.listen, 2*time.Second, nil)
	if err != nil {
		return nil, usagef("--listen: %v", err)
	}
	if len(fwd.Upstreams()) == 0 {
		return nil, usagef("--cluster-upstream %v: every address is one of the --listen addresses", f.clusterUpstream)
	}
	return fwd, nil
}
