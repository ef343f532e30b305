package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/dnsconfigurer/dnsconfigurer/internal/health"
	"github.com/dnsconfigurer/dnsconfigurer/internal/version"
)

// usageError is a problem with the command line or its input files: exit
// code exitUsage. Any other error of a command is exitFail.
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
	if errors.As(err, &u) {
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

// task is one long-running part of a component; it returns when ctx is
// done (nil) or when it fails.
type task func(ctx context.Context) error

// runTasks runs every task until ctx is done or one fails, then stops them
// in the reverse of their order: a task's context is cancelled only once
// every task after it has returned. List what serves first and what feeds
// it last, so that the record feed stops before the DNS server and the DNS
// server before /readyz. It returns the first failure.
func runTasks(ctx context.Context, tasks ...task) error {
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once  sync.Once
		first error
	)
	cancels := make([]context.CancelFunc, len(tasks))
	done := make([]chan struct{}, len(tasks))
	for i, t := range tasks {
		tctx, tcancel := context.WithCancel(context.WithoutCancel(ctx))
		cancels[i], done[i] = tcancel, make(chan struct{})
		go func() {
			defer close(done[i])
			if err := t(tctx); err != nil && tctx.Err() == nil {
				once.Do(func() { first = err })
				cancel()
			}
		}()
	}
	<-stop.Done()
	for i := len(tasks) - 1; i >= 0; i-- {
		cancels[i]()
		<-done[i]
	}
	return first
}

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
	if addr == "" {
		return nil, nil
	}
	listen := health.Listen
	if reuse {
		listen = health.ListenReusePort
	}
	s, err := listen(addr, h, log)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	return []task{s.Run}, nil
}
