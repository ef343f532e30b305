package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/cri"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// shimConfig is the config of `dnsconfigurer shim`.
type shimConfig = v1alpha1.ShimConfiguration

// shimFlags binds the flags of `dnsconfigurer shim` to its config; with
// --config, each one set on the command line replaces the file's field.
func shimFlags(fs *flag.FlagSet) *flaglayer.Layer[shimConfig] {
	l := flaglayer.New[shimConfig](fs)
	l.String(func(c *shimConfig) *string { return &c.Listen }, "listen", v1alpha1.DefaultShimListen, "the shim's unix socket `PATH`, kubelet's --container-runtime-endpoint")
	l.String(func(c *shimConfig) *string { return &c.RuntimeEndpoint }, "runtime-endpoint", v1alpha1.DefaultShimRuntimeEndpoint, "containerd's CRI socket (path or unix:// URL)")
	registerAgentFlags(l, func(c *shimConfig) *v1alpha1.NodeAgent { return &c.NodeAgent }, "trim (as kubelet, with an Event) or reject (InvalidArgument)")
	l.String(func(c *shimConfig) *string { return &c.ResolvConfMode }, "resolv-conf-mode", v1alpha1.DefaultResolvConfMode, "a broken resolver file: last-good (keep the last good copy) or strict (pods fail, as kubelet)")
	l.List(func(c *shimConfig) *[]string { return &c.NodeIPs }, "node-ip", "", "node IPs, comma-separated (only used when --resolv-conf is \"\")")
	flaglayer.Text(l, func(c *shimConfig) *v1alpha1.Duration { return &c.PodLookupTimeout }, "pod-lookup-timeout", v1alpha1.DefaultPodLookupTimeout.String(),
		"how long a sandbox waits for a pod the informer has not seen")
	l.String(func(c *shimConfig) *string { return &c.FailurePolicy }, "failure-policy", v1alpha1.DefaultFailurePolicy, "on an internal error: open (forward kubelet's request unchanged) or closed (fail the sandbox)")
	l.Int(func(c *shimConfig) *int { return &c.MaxConnections }, "max-connections", v1alpha1.DefaultShimMaxConnections, "serve at most `N` client connections at once (fewer if the open-file limit is lower); past it a new one replaces the longest idle one (GOAWAY), refused only when all are busy")
	return l
}

// shimOwn are the arguments of `dnsconfigurer shim` in its usage, before
// those every agent has.
const shimOwn = "--listen PATH --runtime-endpoint unix:///run/containerd/containerd.sock\n" +
	"    [--failure-policy open|closed] [--max-connections N] [--pod-lookup-timeout 1s]"

// shimCommand is `dnsconfigurer shim`.
var shimCommand = agentCommand[shimConfig]{"shim", v1alpha1.ShimKind, shimOwn, shimFlags, runShimParts}

// runShimParts runs the shim, its pod informer (with an API server) and its
// metrics server until ctx is done or one of them fails.
func runShimParts(ctx context.Context, cfg *v1alpha1.ShimConfiguration, log *slog.Logger, reg *prometheus.Registry) error {
	mode, err := hostresolv.ParseMode(cfg.ResolvConfMode)
	if err != nil {
		return usagef("--resolv-conf-mode: %v", err)
	}
	return runAgent(ctx, agentRun{kind: nodesettings.KindShim, component: podfacts.ComponentShim, agent: &cfg.NodeAgent,
		nodeIPs: cfg.NodeIPs, hostOpts: []hostresolv.Option{hostresolv.WithMode(mode)},
		part: func(eng *policy.Engine, host *hostresolv.Watcher, kube agentAPI) (agentPart, error) {
			return shimPart(cfg, log, reg, eng, host, kube)
		}}, log, reg)
}

// shimPart is the shim's CRI server on its socket.
func shimPart(cfg *shimConfig, log *slog.Logger, reg *prometheus.Registry, eng *policy.Engine, host *hostresolv.Watcher, kube agentAPI) (agentPart, error) {
	if s := host.Current(); s.Err != nil {
		log.Warn("node resolver config unusable: sandboxes fail (or pass unchanged with failure policy open) until it is fixed", "path", s.Path, "err", s.Err)
	}
	opts := []cri.Option{cri.WithLogger(log), cri.WithRegistry(reg), cri.WithLimits(cri.Limits(cfg.Limits)),
		cri.WithFailurePolicy(cri.FailurePolicy(cfg.FailurePolicy)), cri.WithLookupTimeout(cfg.PodLookupTimeout.Duration()), cri.WithMaxConns(cfg.MaxConnections)}
	if kube.pods != nil {
		opts = append(opts, cri.WithPodLookup(kube.pods), cri.WithEvents(kube.events))
	}
	srv, err := cri.New(cfg.RuntimeEndpoint, eng, host, opts...)
	if err != nil {
		return agentPart{}, usageError{err}
	}
	l, err := cri.Listen(cfg.Listen)
	if err != nil {
		srv.Close()
		return agentPart{}, fmt.Errorf("--listen: %w", err)
	}
	// Serve closes both; close is for when it does not run.
	return agentPart{run: func(ctx context.Context) error { return srv.Serve(ctx, l) },
		ready: health.Condition(srv.RuntimeReady, "runtime not connected"),
		close: func() { l.Close(); srv.Close() }}, nil
}
