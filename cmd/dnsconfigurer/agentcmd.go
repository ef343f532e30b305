package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/internal/logflags"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/hostresolv"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/podfacts"
)

// agentCommand is what the node agents (shim, nri) share: a config kind
// bound to flags, a usage text, and the parts that run until ctx is done.
type agentCommand[T any] struct {
	name  string // the subcommand
	kind  string // the config file's kind
	usage string // the usage lines before the flags
	flags func(*flag.FlagSet) *flagLayer[T]
	run   func(ctx context.Context, cfg *T, log *slog.Logger, reg *prometheus.Registry) error
}

// parse reads --config, the agent's flags and the log flags, then layers
// the flags over the file.
func (c agentCommand[T]) parse(args []string, stderr io.Writer) (*T, logFlags, error) {
	fs := newFlagSet(c.name, stderr, c.usage+"\n\nflags:")
	config := fs.String("config", "", c.kind+" file (YAML or JSON, apiVersion dnsconfigurer.io/v1alpha1); flags override it")
	l := c.flags(fs)
	var logf logFlags
	logf.register(fs, logText)
	if err := parseDaemonFlags(fs, args, &logf); err != nil {
		return nil, logf, err
	}
	cfg := new(T)
	if err := l.load(*config, c.kind, cfg); err != nil {
		return nil, logf, l.named(err)
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
	return exitCode(stderr, prefix, boundShutdown(ctx, shutdownLimit, log, func() error {
		return c.run(ctx, cfg, log, newRegistry())
	}))
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
	rc, client, err := kubeREST(a.Kubeconfig, name)
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
