package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/dnsconfigurer/dnsconfigurer/internal/flaglayer"
	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/internal/lifecycle"
	"github.com/dnsconfigurer/dnsconfigurer/internal/version"
)

// usageError is a problem with the command line or its input files: exit
// code exitUsage, as is a flaglayer.InvalidError or WrongFileError. Any
// other error of a command is exitFail.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef is a usageError from a format.
func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// exitCode prints err as "<prefix>: <err>" and returns its exit code
// (exitOK for nil).
func exitCode(stderr io.Writer, prefix string, err error) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
	var u usageError
	var invalid flaglayer.InvalidError
	var wrong flaglayer.WrongFileError
	if errors.As(err, &u) || errors.As(err, &invalid) || errors.As(err, &wrong) {
		return exitUsage
	}
	return exitFail
}

// newRegistry is a component's Prometheus registry with the Go runtime and
// process collectors and dnsconfigurer_build_info: every component's
// /metrics starts from it.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo(version.Get()))
	return reg
}

// task is one long-running part of a component (lifecycle.Task).
type task = lifecycle.Task

// runTasks is lifecycle.Run: the tasks run until ctx is done or one fails,
// and stop in the reverse of their order.
func runTasks(ctx context.Context, tasks ...task) error { return lifecycle.Run(ctx, tasks...) }

// opsTasks returns the task serving /metrics, /healthz and /readyz on addr
// ("": none), bound now so that a bad address fails start-up; with reuse,
// bound with SO_REUSEPORT.
func opsTasks(addr string, reuse bool, reg prometheus.Gatherer, log *slog.Logger, checks ...health.Check) ([]task, error) {
	return listenTasks(addr, reuse, health.Handler(reg, checks...), log)
}

// listenTasks returns the task serving h on the metrics listener addr ("":
// none), bound now so that a bad address fails start-up; with reuse, bound
// with SO_REUSEPORT.
func listenTasks(addr string, reuse bool, h http.Handler, log *slog.Logger) ([]task, error) {
	s, err := health.Bind(addr, reuse, h, log)
	switch {
	case err != nil:
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	case s == nil:
		return nil, nil
	}
	return []task{s.Run}, nil
}
