package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"time"

	"k8s.io/klog/v2"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
	"github.com/dnsconfigurer/dnsconfigurer/internal/gctarget"
	"github.com/dnsconfigurer/dnsconfigurer/internal/kubeclient"
	"github.com/dnsconfigurer/dnsconfigurer/internal/logflags"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/clusterdns"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodelocal"
)

// serveArgs is serve's command line: the --config file and the flags
// layered over it.
type serveArgs struct {
	config string
	layer  *flaglayer.Layer[serverConfig]
}

func parseServeFlags(args []string, stderr io.Writer) (*serveArgs, error) {
	fs := newFlagSet("serve", stderr, "usage: dnsconfigurer serve --listen ADDR [--listen ADDR...] [--cluster-domain cluster.local]\n"+
		"    [--objects PATH | --kubeconfig PATH] [--pods verified|insecure|disabled] [--ttl N]\n"+
		"    [--upstream ADDR[,ADDR...] | --upstream-resolv-conf PATH] [--forward ZONE=ADDR[,ADDR...]]...\n"+
		"    [--metrics-listen ADDR [--coredns-metrics]] [--log-format text|json] [--log-level debug|info|warn|error]\n"+
		"    [--config FILE (ServerConfiguration, reloaded on change)]\n\nflags:")
	a := &serveArgs{layer: serveFlags(fs)}
	if err := parseNoArgs(fs, args); err != nil {
		return nil, err
	}
	if err := checkServeFlags(fs); err != nil {
		return nil, err
	}
	a.config = fs.Lookup("config").Value.String()
	return a, nil
}

// reloadInterval is how often serve --config reads the file (0: the
// component's default); tests shorten it.
var reloadInterval time.Duration

func runServe(ctx context.Context, args []string, _ io.Reader, _, stderr io.Writer) int {
	f, err := parseServeFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitCode(stderr, "dnsconfigurer serve", usageError{err})
	}
	cfg, err := f.serverConfig()
	if err != nil {
		return exitCode(stderr, "dnsconfigurer serve", err)
	}
	level := new(slog.LevelVar) // logLevel is reloaded
	lv, err := parseLevel(cfg.LogLevel)
	if err != nil {
		return exitCode(stderr, "dnsconfigurer serve", err)
	}
	level.Set(lv)
	log, err := newLeveledLogger(stderr, cfg.LogFormat, level)
	if err != nil {
		return exitCode(stderr, "dnsconfigurer serve", err)
	}
	if gctarget.Tuned() {
		debug.SetGCPercent(gctarget.Serve)
	}
	log = log.With("component", "dnsserver")
	logflags.Start(log, "serve")
	err = f.run(ctx, cfg, log, level)
	if errors.Is(err, v1alpha1.ErrConfig) {
		err = usageError{err}
	}
	return exitCode(stderr, "dnsconfigurer serve", err)
}

// run runs the component of cfg's mode: the node-local stage, or the
// cluster DNS with its record source and, with --config, its reload.
func (f *serveArgs) run(ctx context.Context, cfg *v1alpha1.ServerConfiguration, log *slog.Logger, level *slog.LevelVar) error {
	if cfg.Mode == v1alpha1.ModeNodeLocal {
		// The API server gives the node's topology zone and the cluster
		// DNS pods' endpoints; without one the stage asks clusterUpstream,
		// and a bad kubeconfig does not keep the node's DNS down.
		klog.SetSlogLogger(log.With("component", "client-go"))
		client, err := kubeclient.New(cfg.Kubeconfig, "node-local")
		if err != nil {
			log.Warn("no API server: the cluster DNS is asked at nodeLocal.clusterUpstream", "err", err)
		}
		stage, err := nodelocal.NewStage(cfg, nodelocal.Deps{Logger: log, Registry: newRegistry(), LoadConfig: loadServerConfig, Kube: client})
		if err != nil {
			return err
		}
		return stage.Run(ctx)
	}
	deps := clusterdns.Deps{Logger: log, Registry: newRegistry()}
	if gctarget.Tuned() {
		g := gctarget.Start()
		deps.AfterSync, deps.FirstPublish = g.AfterSync, g.FirstPublish
		deps.Relisting = func(on bool) {
			held, limit := g.Relisting(on)
			log.Info("records relisting", "relisting", on, "goMemoryMiB", held>>20, "memoryLimitMiB", limit>>20)
		}
	}
	if cfg.Objects == "" && !cfg.NoClusterZone {
		klog.SetSlogLogger(log.With("component", "client-go"))
		rc, client, err := kubeclient.NewREST(cfg.Kubeconfig, "serve")
		if err != nil {
			return usageError{err}
		}
		if client == nil {
			return usagef("no records to serve: give --kubeconfig or --objects, set $KUBECONFIG, or run in a pod (the in-cluster config)")
		}
		deps.Client = client
		if cfg.ClustersetZone != "" {
			if deps.MCS, err = mcsclient.NewForConfig(rc); err != nil {
				return fmt.Errorf("multi-cluster services client: %w", err)
			}
		}
	}
	if f.config != "" {
		deps.Reload = &clusterdns.Reload{Path: f.config, Load: f.serverConfig, Interval: reloadInterval,
			SetLogLevel: func(l string) error {
				lv, err := parseLevel(l)
				if err == nil {
					level.Set(lv)
				}
				return err
			}}
	}
	srv, err := clusterdns.New(cfg, deps)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}

// loadServerConfig reads a ServerConfiguration file as --config is read:
// node-local's nodeLocal.clusterConfig, the cluster DNS's own file.
func loadServerConfig(path string) (*serverConfig, error) {
	c := &serverConfig{}
	if err := flaglayer.ReadFile(path, v1alpha1.ServerKind, c); err != nil {
		return nil, err
	}
	return c, nil
}
