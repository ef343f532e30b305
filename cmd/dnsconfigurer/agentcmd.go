package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/internal/kubeclient"
	"github.com/dnsconfigurer/dnsconfigurer/internal/lifecycle"
	"github.com/dnsconfigurer/dnsconfigurer/internal/logflags"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/policy"
)

// agentCommand is what the node agents (shim, nri) share: a config kind
// bound to flags, a usage text, and the parts that run until ctx is done.
type agentCommand[T any] struct {
	name  string // the subcommand
	kind  string // the config file's kind
	own   string // the agent's own arguments in the usage: required ones, then options
	flags func(*flag.FlagSet) *flaglayer.Layer[T]
	run   func(ctx context.Context, cfg *T, log *slog.Logger, reg *prometheus.Registry) error
}

// usage is the synopsis before the flags: the agent's own arguments, then
// those every agent has (--config, registerAgentFlags, the log flags).
func (c agentCommand[T]) usage() string {
	return "usage: dnsconfigurer " + c.name + " " + c.own + "\n" +
		"    [--config FILE] [--cluster-dns IP[,IP]] [--cluster-domain D] [--resolv-conf PATH|auto] [--node-local-dns IP[,IP]]\n" +
		"    [--kubeconfig PATH] [--node-name NAME] [--limits trim|reject] [--metrics-listen ADDR]\n" +
		"    [--log-format text|json] [--log-level debug|info|warn|error]"
}

// parse reads --config, the agent's flags and the log flags, then layers
// the flags over the file.
func (c agentCommand[T]) parse(args []string, stderr io.Writer) (*T, logFlags, error) {
	fs := newFlagSet(c.name, stderr, c.usage()+"\n\nflags:")
	config := fs.String("config", "", c.kind+" file (YAML or JSON, apiVersion dnsconfigurer.io/v1alpha1); flags override it")
	l := c.flags(fs)
	var logf logFlags
	logf.register(fs, logText)
	if err := parseDaemonFlags(fs, args, &logf); err != nil {
		return nil, logf, err
	}
	cfg := new(T)
	if err := l.Load(*config, c.kind, cfg); err != nil {
		return nil, logf, l.Named(err)
	}
	return cfg, logf, nil
}

// main is the subcommand: parse, log, run with a bounded shutdown.
func (c agentCommand[T]) main(ctx context.Context, args []string, _ io.Reader, _, stderr io.Writer) int {
	prefix := "dnsconfigurer " + c.name
	cfg, logf, err := c.parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitCode(stderr, prefix, usageError{err})
	}
	log, err := logf.logger(stderr)
	if err != nil {
		return exitCode(stderr, prefix, err)
	}
	logflags.Start(log, c.name)
	return exitCode(stderr, prefix, lifecycle.Bounded(ctx, shutdownLimit, log, func() error {
		return c.run(ctx, cfg, log, newRegistry())
	}))
}

// shutdownLimit bounds the shim's shutdown after SIGTERM: the CRI server
// gives calls in flight 5s and then closes every connection itself, so this
// is a backstop against a part that does not return; it stays under 10s,
// well inside the pod's termination grace period (30s).
const shutdownLimit = 8 * time.Second

// agentPart is the component a node agent runs (the shim's CRI server, the
// NRI plugin): its task, its readiness check and, if set, what to close
// once it has stopped.
type agentPart struct {
	run   task
	ready health.Check
	close func()
}

// agentRun is one node agent for runAgent.
type agentRun struct {
	kind      string // nodesettings.KindShim or KindNRI; its User-Agent component too
	component string // the source of its Events
	agent     *v1alpha1.NodeAgent
	nodeIPs   []string
	hostOpts  []hostresolv.Option // of the node resolver watch, beyond logger and registry
	// part builds the component on the policy engine, the node resolver
	// watch and the API server parts.
	part func(eng *policy.Engine, host *hostresolv.Watcher, kube agentAPI) (agentPart, error)
}

// runAgent runs a node agent until ctx is done or one of its parts fails:
// its component, the pod informer (with an API server) and the metrics
// server with /node-settings.
func runAgent(ctx context.Context, r agentRun, log *slog.Logger, reg *prometheus.Registry) error {
	eng, err := nodeEngine(r.agent.NodeDNS, r.agent.PodPolicy, r.nodeIPs, log)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watcher, err := watchHostResolv(ctx, *r.agent.ResolvConf, append(r.hostOpts, hostresolv.WithLogger(log), hostresolv.WithRegistry(reg))...)
	if watcher == nil {
		return err
	}
	kube, err := agentAPIServer(r.agent, r.kind, r.component, log, reg)
	if err != nil {
		return err
	}
	defer kube.stop()
	part, err := r.part(eng, watcher, kube)
	if err != nil {
		return err
	}
	if part.close != nil {
		defer part.close()
	}
	settings := agentSettings(r.kind, r.agent, r.nodeIPs, watcher)
	ops, err := agentOpsTasks(r.agent.MetricsListen, reg, log, settings, append([]health.Check{part.ready}, kube.checks...)...)
	if err != nil {
		return err
	}
	return runTasks(ctx, append(append(kube.tasks, ops...), part.run)...)
}

// watchHostResolv watches the node's resolver file at path; nil and no
// error when ctx ended (SIGTERM) before the first read finished.
func watchHostResolv(ctx context.Context, path string, opts ...hostresolv.Option) (*hostresolv.Watcher, error) {
	w, err := hostresolv.Watch(ctx, path, opts...)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("--resolv-conf: %w", err)
	}
	return w, nil
}

// agentAPI is what a node agent takes from the API server, when there is
// one: the tasks and readiness checks of the pod informer (and of the
// namespace labels), the informer, and the Event sink with its stop
// function. Without an API server only stop is set.
type agentAPI struct {
	tasks  []task
	checks []health.Check
	pods   *podfacts.PodInformer
	events podfacts.EventSink
	stop   func()
}

// agentAPIServer builds an agent's API server parts: name is the agent's
// User-Agent component, component its Events' source.
func agentAPIServer(a *v1alpha1.NodeAgent, name, component string, log *slog.Logger, reg prometheus.Registerer) (agentAPI, error) {
	none := agentAPI{stop: func() {}}
	rc, client, err := kubeclient.NewREST(a.Kubeconfig, name)
	if err != nil {
		return none, usageError{err}
	}
	if client != nil && a.NodeName == "" {
		return none, usagef("--node-name (or $NODE_NAME) is required with an API server")
	}
	nsOpts, nsTasks, nsChecks, err := agentNamespaces(a.PodPolicy, rc, log)
	if err != nil || client == nil {
		return none, err
	}
	klog.SetSlogLogger(log.With("component", "client-go"))
	informer, err := podfacts.NewPodInformer(client, a.NodeName, log, append(nsOpts, podfacts.InformerRegistry(reg))...)
	if err != nil {
		return none, err
	}
	rec, stop, err := podfacts.NewAgentEvents(client, component, a.NodeName, reg)
	if err != nil {
		return none, err
	}
	run := func(ctx context.Context) error { informer.Run(ctx); return nil }
	return agentAPI{tasks: append(nsTasks, run), checks: append(nsChecks, health.Condition(informer.HasSynced, "pod informer not synced")),
		pods: informer, events: rec, stop: stop}, nil
}
