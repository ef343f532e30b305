package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/internal/logflags"
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
