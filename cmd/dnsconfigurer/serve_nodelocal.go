package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodelocal"
)

// alwaysReady is the node-local stage's readiness: it has no records to sync.
type alwaysReady struct{}

func (alwaysReady) Synced() bool { return true }

// runNodeLocal is `serve --mode node-local`: a caching forwarder to the
// cluster DNS that adds the autopath search-list option.
func runNodeLocal(ctx context.Context, f *serveFlags, log *slog.Logger, reg *prometheus.Registry, stderr io.Writer) int {
	log = log.With("mode", "node-local")
	if len(f.clusterUpstream) == 0 {
		fmt.Fprintln(stderr, "dnsconfigurer serve: --mode node-local needs --cluster-upstream ADDR[,ADDR]")
		return exitUsage
	}
	for _, u := range f.clusterUpstream {
		if _, err := dnsserver.ParseAddrPort(u); err != nil {
			fmt.Fprintf(stderr, "dnsconfigurer serve: --cluster-upstream %q: %v\n", u, err)
			return exitUsage
		}
	}
	fwd, err := dnsserver.NewForwarder(dnsserver.StaticUpstreams(f.clusterUpstream), f.listen, 2*time.Second, nil)
	if err != nil {
		fmt.Fprintf(stderr, "dnsconfigurer serve: --listen: %v\n", err)
		return exitUsage
	}
	if len(fwd.Upstreams()) == 0 {
		fmt.Fprintf(stderr, "dnsconfigurer serve: --cluster-upstream %v: every address is one of the --listen addresses\n", f.clusterUpstream)
		return exitUsage
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	searches := func() []string { return nil }
	if f.resolvConf != "" {
		w, err := hostresolv.Watch(ctx, f.resolvConf, hostresolv.WithLogger(log), hostresolv.WithRegistry(reg))
		if err != nil {
			fmt.Fprintf(stderr, "dnsconfigurer serve: --resolv-conf: %v\n", err)
			return exitUsage
		}
		defer func() { cancel(); <-w.Done() }()
		searches = func() []string { return w.Current().Config.Searches }
	}
	h, err := nodelocal.New(fwd, nodelocal.Config{ClusterDomain: f.clusterDomain, OptionCode: uint16(f.autopathCode),
		MaxTTL: f.maxTTL, MaxNegativeTTL: f.maxNegativeTTL, CacheSize: f.cacheSize,
		HostSearches: searches, Logger: log, Registerer: reg})
	if err != nil {
		fmt.Fprintf(stderr, "dnsconfigurer serve: %v\n", err)
		return exitFail
	}
	srv := &dnsserver.Server{Listen: f.listen, Handler: h, Logger: log}
	if err := srv.Start(ctx); err != nil {
		fmt.Fprintf(stderr, "dnsconfigurer serve: %v\n", err)
		return exitFail
	}
	log.Info("serving DNS", "listen", srv.Addrs(), "cluster-upstream", fwd.Upstreams(), "zone", f.clusterDomain)
	var httpSrv *http.Server
	httpDone := make(chan struct{})
	if f.metricsListen != "" {
		ln, err := net.Listen("tcp", f.metricsListen)
		if err != nil {
			fmt.Fprintf(stderr, "dnsconfigurer serve: --metrics-listen %q: %v\n", f.metricsListen, err)
			_ = srv.Shutdown(context.WithoutCancel(ctx))
			return exitFail
		}
		httpSrv = &http.Server{Handler: dnsserver.NewHTTPHandler(reg, alwaysReady{}), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			defer close(httpDone)
			if err := httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server stopped", "err", err)
			}
		}()
	} else {
		close(httpDone)
	}
	<-ctx.Done()
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("dns shutdown", "err", err)
	}
	if httpSrv != nil {
		_ = httpSrv.Shutdown(sctx)
	}
	<-httpDone
	return exitOK
}
