package clusterdns

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dnsconfigurer/dnsconfigurer/api/v1alpha1"
	"github.com/dnsconfigurer/dnsconfigurer/internal/filewatch"
	"github.com/dnsconfigurer/dnsconfigurer/internal/prom"
	"github.com/dnsconfigurer/dnsconfigurer/internal/safefile"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/dnsserver"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/forward"
	"github.com/dnsconfigurer/dnsconfigurer/pkg/kubefeed"
)

// DefaultReloadInterval is how often the config file is stat'ed besides
// its file events (filewatch's poll).
const DefaultReloadInterval = 2 * time.Second

// maxConfigBytes bounds the config file read for its fingerprint, as the
// command bounds the file it loads.
const maxConfigBytes = 1 << 20

// reloader applies the config file when its content changes: Reload.Load
// reads and validates it; fields that need a restart
// (v1alpha1.RestartFields) keep their running values and are logged; a new
// answer stack replaces the old one, which stops after the forwarding
// timeout, keeping its forwarders and cache when their settings are
// unchanged (forwardingKey). The records are published again with the new
// options (kubefeed.Feed.Apply); the log level and lameduck are set. No
// query is dropped (TestServeReloadUnderLoad). A file that does not load
// keeps the running config and is logged with the reason.
type reloader struct {
	src     Reload
	running *v1alpha1.ServerConfiguration
	st      stores
	records *kubefeed.Feed
	srv     *dnsserver.Server
	gather  *stackGatherer
	coredns *prom.CoreDNSNames
	log     *slog.Logger
	level   func(string) error // nil: the log level is not reloaded
	stack   **answerStack

	last    [32]byte // the fingerprint of the content applied: taken before the listener starts
	applied atomic.Uint64
	failed  atomic.Uint64
}

func (r *reloader) run(ctx context.Context) error {
	interval := r.src.Interval
	if interval <= 0 {
		interval = DefaultReloadInterval
	}
	changes, err := filewatch.Watch(ctx, []string{r.src.Path}, filewatch.WithPoll(interval), filewatch.WithLogger(r.log))
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// A change made after Run took r.last but before the watch began has
	// no event of its own: look once now.
	r.check(ctx)
	for range changes {
		r.check(ctx)
	}
	return nil
}

// check reloads the file when its content is not the one last applied.
func (r *reloader) check(ctx context.Context) {
	if sum, err := r.fingerprint(); err != nil {
		r.log.Warn("config file unreadable; keeping the running config", "path", r.src.Path, "err", err)
	} else if sum != r.last {
		r.last = sum
		_ = r.reload(ctx) // logged and counted
	}
}

func (r *reloader) fingerprint() ([32]byte, error) {
	data, _, err := safefile.Read(r.src.Path, maxConfigBytes)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(data), nil
}

// reload applies the file as it is now.
func (r *reloader) reload(ctx context.Context) error {
	next, err := r.src.Load()
	if err != nil {
		r.failed.Add(1)
		r.log.Error("config reload failed; keeping the running config", "path", r.src.Path, "err", err)
		return err
	}
	if kept := next.KeepRestartFields(r.running); len(kept) > 0 {
		r.log.Warn("config changes that need a restart are not applied", "fields", kept)
	}
	old := *r.stack
	stack, err := buildStack(ctx, next, r.st, r.log, old.fwd)
	if err == nil {
		err = r.records.Apply(next)
	}
	if err != nil {
		if stack != nil {
			stack.stopKeeping(old.fwd)
		}
		r.failed.Add(1)
		r.log.Error("config reload failed; keeping the running config", "path", r.src.Path, "err", err)
		return err
	}
	stack.handler.Warm()
	r.srv.SetHandler(dnsserver.QueryLogged(next, stack.handler, r.log))
	r.srv.SetLameduck(next.Lameduck.Duration())
	r.coredns.SetEnabled(next.CoreDNSMetrics)
	if r.level != nil {
		if err := r.level(next.LogLevel); err != nil { // validated: not reached
			r.log.Error("config reload: log level", "err", err)
		}
	}
	r.gather.cur.Store(stack)
	*r.stack, r.running = stack, next
	kept := stack.fwd != nil && stack.fwd == old.fwd
	retireAfter(old, stack.fwd, forward.DefaultTimeout+time.Second)
	r.applied.Add(1)
	r.log.Info("config reloaded", "path", r.src.Path, "forward", len(next.Forward), "forwardingKept", kept,
		"ttl", next.RecordTTL(), "pods", next.Pods, "namespaces", next.Namespaces)
	return nil
}

var reloadsDesc = prometheus.NewDesc("dnsconfigurer_serve_config_reloads_total",
	"Reloads of the config file, by result (applied, failed: the running config was kept).", []string{"result"}, nil)

// Describe implements prometheus.Collector.
func (r *reloader) Describe(ch chan<- *prometheus.Desc) { ch <- reloadsDesc }

// Collect implements prometheus.Collector.
func (r *reloader) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(reloadsDesc, prometheus.CounterValue, float64(r.applied.Load()), "applied")
	ch <- prometheus.MustNewConstMetric(reloadsDesc, prometheus.CounterValue, float64(r.failed.Load()), "failed")
}
