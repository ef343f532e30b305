package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/cri"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/nodesettings"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

func init() {
	register("shim", command{summary: "CRI shim in front of containerd: rewrites each pod sandbox's DNS", run: runShim})
}

// shimFlags are the flags of `dnsconfigurer shim`; with --config, each one
// set on the command line replaces the file's field.
type shimFlags struct {
	node                                                agentFlags
	config, listen, runtimeEP, resolvMode, nodeIPs      string
	lookupTimeout, limits, failurePolicy, metricsListen string
	maxConns                                            int
	log                                                 logFlags
}

func (f *shimFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "ShimConfiguration file (YAML or JSON, apiVersion dnsconfigurer.io/v1alpha1); flags override it")
	fs.StringVar(&f.listen, "listen", v1alpha1.DefaultShimListen, "the shim's unix socket `PATH`, kubelet's --container-runtime-endpoint")
	fs.StringVar(&f.runtimeEP, "runtime-endpoint", v1alpha1.DefaultShimRuntimeEndpoint, "containerd's CRI socket (path or unix:// URL)")
	f.node.register(fs)
	fs.StringVar(&f.resolvMode, "resolv-conf-mode", "last-good", "a broken resolver file: last-good (keep the last good copy) or strict (pods fail, as kubelet)")
	fs.StringVar(&f.nodeIPs, "node-ip", "", "node IPs, comma-separated (only used when --resolv-conf is \"\")")
	fs.StringVar(&f.lookupTimeout, "pod-lookup-timeout", v1alpha1.DefaultPodLookupTimeout.String(), "how long a sandbox waits for a pod the informer has not seen")
	fs.StringVar(&f.limits, "limits", v1alpha1.LimitsTrim, "over kubelet's DNS limits: trim (as kubelet, with an Event) or reject (InvalidArgument)")
	fs.StringVar(&f.failurePolicy, "failure-policy", v1alpha1.FailurePolicyOpen, "on an internal error: open (forward kubelet's request unchanged) or closed (fail the sandbox)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "serve /metrics, /healthz and /readyz on this `ADDR` (host:port)")
	fs.IntVar(&f.maxConns, "max-connections", v1alpha1.DefaultShimMaxConnections, "serve at most `N` client connections at once (fewer if the open-file limit is lower); past it a new one replaces the longest idle one (GOAWAY), refused only when all are busy")
	f.log.register(fs, logText)
}

func parseShimFlags(args []string, stderr io.Writer) (*v1alpha1.ShimConfiguration, logFlags, error) {
	var f shimFlags
	fs := flag.NewFlagSet("shim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dnsconfigurer shim --listen PATH --runtime-endpoint unix:///run/containerd/containerd.sock\n"+
			"    [--config FILE] [--cluster-dns IP[,IP]] [--cluster-domain D] [--resolv-conf PATH]\n"+
			"    [--kubeconfig PATH] [--node-name NAME] [--limits trim|reject] [--failure-policy open|closed]\n"+
			"    [--metrics-listen ADDR] [--max-connections N] [--log-format text|json] [--log-level debug|info|warn|error]\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseDaemonFlags(fs, args, &f.log); err != nil {
		return nil, f.log, err
	}
	cfg, err := f.shimConfig(fs)
	return cfg, f.log, err
}

// shimConfig is the ShimConfiguration of the file and the flags
// (loadAgentConfig).
func (f *shimFlags) shimConfig(fs *flag.FlagSet) (*v1alpha1.ShimConfiguration, error) {
	cfg := &v1alpha1.ShimConfiguration{}
	err := loadAgentConfig(fs, f.config, v1alpha1.ShimKind, cfg, &cfg.NodeName, func(use func(string) bool) { f.apply(cfg, use) })
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// apply copies into cfg the flags use names.
func (f *shimFlags) apply(cfg *v1alpha1.ShimConfiguration, use func(name string) bool) {
	apply := func(name string, fn func()) {
		if use(name) {
			fn()
		}
	}
	apply("listen", func() { cfg.Listen = f.listen })
	apply("runtime-endpoint", func() { cfg.RuntimeEndpoint = f.runtimeEP })
	f.node.apply(&cfg.NodeDNS, &cfg.PodPolicy, &cfg.Kubeconfig, &cfg.NodeName, use)
	apply("resolv-conf-mode", func() { cfg.ResolvConfMode = f.resolvMode })
	apply("node-ip", func() { cfg.NodeIPs = splitList(f.nodeIPs) })
	apply("pod-lookup-timeout", func() { cfg.PodLookupTimeout = f.lookupTimeout })
	apply("limits", func() { cfg.Limits = f.limits })
	apply("failure-policy", func() { cfg.FailurePolicy = f.failurePolicy })
	apply("metrics-listen", func() { cfg.MetricsListen = f.metricsListen })
	apply("max-connections", func() { cfg.MaxConnections = f.maxConns })
}

// flagError names the flag of a config field in a validation error.
func flagError(err error) error {
	msg := err.Error()
	for field, flagName := range map[string]string{
		"clusterDNS": "cluster-dns", "clusterDomain": "cluster-domain", "nodeLocalDNS": "node-local-dns",
		"nodeIPs": "node-ip", "resolvConfMode": "resolv-conf-mode", "listen": "listen", "runtimeEndpoint": "runtime-endpoint",
		"podLookupTimeout": "pod-lookup-timeout", "limits": "limits", "failurePolicy": "failure-policy",
		"nodeName": "node-name", "metricsListen": "metrics-listen", "maxConnections": "max-connections", "defaultDNSPolicy": "default-dns-policy", "ndots": "ndots",
		"socket": "socket", "pluginName": "plugin-name", "pluginIndex": "plugin-index", "stateDir": "state-dir",
	} {
		if strings.HasPrefix(msg, field+":") || strings.HasPrefix(msg, field+"[") {
			return fmt.Errorf("--%s (%s", flagName, strings.Replace(msg, ":", "):", 1))
		}
	}
	return err
}

func runShim(ctx context.Context, args []string, _ io.Reader, _, stderr io.Writer) int {
	cfg, logf, err := parseShimFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitCode(stderr, "dnsconfigurer shim", usageError{err})
	}
	log, err := logf.logger(stderr)
	if err != nil {
		return exitCode(stderr, "dnsconfigurer shim", err)
	}
	logStart(log, "shim")
	return exitCode(stderr, "dnsconfigurer shim", boundShutdown(ctx, shutdownLimit, log, func() error {
		return runShimParts(ctx, cfg, log, newRegistry())
	}))
}

// shutdownLimit bounds the shim's shutdown after SIGTERM: the CRI server
// gives calls in flight 5s and then closes every connection itself, so this
// is a backstop against a part that does not return; it stays under 10s,
// well inside the pod's termination grace period (30s).
const shutdownLimit = 8 * time.Second

// boundShutdown runs run and returns its error, but once ctx is done waits
// at most limit for it: a component that does not stop in time is left
// behind (the process exits) with an error saying so.
func boundShutdown(ctx context.Context, limit time.Duration, log *slog.Logger, run func() error) error {
	done := make(chan error, 1)
	go func() { done <- run() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		log.Error("shutdown did not complete in time; exiting anyway", "limit", limit.String())
		return fmt.Errorf("shutdown did not complete within %s", limit)
	}
}

// nodeEngine is the policy engine for a node component's settings (the
// shim's, the NRI plugin's), with its warnings logged.
func nodeEngine(node v1alpha1.NodeDNS, pp v1alpha1.PodPolicy, nodeIPs []string, log *slog.Logger) (*policy.Engine, error) {
	n := policy.Node{ClusterDNS: node.ClusterDNS, ClusterDomain: node.Domain(),
		NodeLocalDNS: node.NodeLocalDNS, NodeIPs: nodeIPs, OS: node.NodeOS}
	agentPolicy(pp, &n)
	eng, err := policy.New(n)
	if err != nil {
		return nil, usageError{err}
	}
	for _, w := range eng.Warnings() {
		log.Warn("node DNS settings", "reason", w.Reason, "message", w.Message)
	}
	if !eng.HasClusterDNS() {
		log.Warn("no cluster DNS configured (--cluster-dns): ClusterFirst pods fall back to the node's resolver config, as kubelet does")
	}
	return eng, nil
}

// runShimParts runs the shim, its pod informer (with an API server) and its
// metrics server until ctx is done or one of them fails.
func runShimParts(ctx context.Context, cfg *v1alpha1.ShimConfiguration, log *slog.Logger, reg *prometheus.Registry) error {
	eng, err := nodeEngine(cfg.NodeDNS, cfg.PodPolicy, cfg.NodeIPs, log)
	if err != nil {
		return err
	}
	mode, err := hostresolv.ParseMode(cfg.ResolvConfMode)
	if err != nil {
		return usagef("--resolv-conf-mode: %v", err)
	}
	rc, client, err := kubeREST(cfg.Kubeconfig, "shim")
	if err != nil {
		return usageError{err}
	}
	if client != nil && cfg.NodeName == "" {
		return usagef("--node-name (or $NODE_NAME) is required with an API server")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watcher, err := hostresolv.Watch(ctx, *cfg.ResolvConf, hostresolv.WithMode(mode), hostresolv.WithLogger(log), hostresolv.WithRegistry(reg))
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped (SIGTERM) before the first read finished
		}
		return fmt.Errorf("--resolv-conf: %w", err)
	}
	if s := watcher.Current(); s.Err != nil {
		log.Warn("node resolver config unusable: sandboxes fail (or pass unchanged with failure policy open) until it is fixed", "path", s.Path, "err", s.Err)
	}
	lookupTimeout, _ := time.ParseDuration(cfg.PodLookupTimeout) // validated
	opts := []cri.Option{cri.WithLogger(log), cri.WithRegistry(reg), cri.WithLimits(cri.Limits(cfg.Limits)),
		cri.WithFailurePolicy(cri.FailurePolicy(cfg.FailurePolicy)), cri.WithLookupTimeout(lookupTimeout), cri.WithMaxConns(cfg.MaxConnections)}
	var tasks []task
	checks := []health.Check{}
	nsOpts, nsTasks, nsChecks, err := agentNamespaces(cfg.PodPolicy, rc, log)
	if err != nil {
		return err
	}
	if client != nil {
		klog.SetSlogLogger(log.With("component", "client-go"))
		informer, err := cri.NewPodInformer(client, cfg.NodeName, log, append(nsOpts, cri.InformerRegistry(reg))...)
		if err != nil {
			return err
		}
		tasks = append(append(tasks, nsTasks...), func(ctx context.Context) error { informer.Run(ctx); return nil })
		checks = append(append(checks, nsChecks...), health.Condition(informer.HasSynced, "pod informer not synced"))
		rec, stop, err := cri.NewAgentEvents(client, cri.ComponentShim, cfg.NodeName, reg)
		if err != nil {
			return err
		}
		defer stop()
		opts = append(opts, cri.WithPodLookup(informer), cri.WithEvents(rec))
	}
	srv, err := cri.New(cfg.RuntimeEndpoint, eng, watcher, opts...)
	if err != nil {
		return usageError{err}
	}
	defer srv.Close()
	l, err := cri.Listen(cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	checks = append([]health.Check{health.Condition(srv.RuntimeReady, "runtime not connected")}, checks...)
	settings := agentSettings(nodesettings.KindShim, cfg.NodeName, cfg.NodeDNS, cfg.PodPolicy, cfg.NodeIPs, cfg.Limits, watcher)
	ops, err := agentOpsTasks(cfg.MetricsListen, reg, log, settings, checks...)
	if err != nil {
		l.Close()
		return err
	}
	return runTasks(ctx, append(append(tasks, ops...), func(ctx context.Context) error { return srv.Serve(ctx, l) })...)
}
